#include "head/rest/package_routes.h"

#include <nlohmann/json.hpp>

#include "common/sha256.h"
#include "head/rest/route_helpers.h"

namespace ag::head {
namespace {

using nlohmann::json;

const std::string kPackagesPrefix = "/api/packages/";

// The hash in /api/packages/{hash} (an optional "sha256:" before it), or a 400.
std::optional<net::HttpResponse> bad_hash(std::string* hash) {
  if (hash->rfind("sha256:", 0) == 0) *hash = hash->substr(7);
  if (is_sha256_hex(*hash)) return std::nullopt;
  return error_response(400, "'" + *hash + "' is not a package hash; expected 64 lowercase hex digits");
}

}  // namespace

void PackageRoutes::counters(const Call&, net::Respond respond) {
  const PackageStore& store = deps_.packages;
  respond(json_response(200, {{"packages", store.count()},
                              {"bytes_uploaded", store.bytes_uploaded()},
                              {"uploads", store.uploads()},
                              {"max_package_bytes", store.max_package_bytes()},
                              {"stored_bytes", store.stored_bytes()},
                              {"quota_bytes", store.quota_bytes()}}));
}

void PackageRoutes::exists(const Call& call, net::Respond respond) {
  std::string hash = call.param("hash");
  if (auto bad = bad_hash(&hash)) return respond(std::move(*bad));
  // A client about to submit with this package asks first: it is in use again.
  if (!deps_.packages.contains(hash)) return respond({404, "application/octet-stream", ""});
  deps_.packages.touch(hash);
  respond({200, "application/octet-stream", ""});
}

void PackageRoutes::fetch(const Call& call, net::Respond respond) {
  std::string hash = call.param("hash");
  if (auto bad = bad_hash(&hash)) return respond(std::move(*bad));
  auto file = deps_.packages.file(hash);
  if (!file.ok()) return respond(error_response(file.error()));
  net::HttpResponse res{200, "application/octet-stream", ""};
  res.body_file = file.value();
  respond(std::move(res));
}

void PackageRoutes::upload(const Call& call, net::Respond respond) {
  const net::HttpRequest& req = call.req;
  std::string hash = call.param("hash");
  if (auto bad = bad_hash(&hash)) return respond(std::move(*bad));
  // Uploads normally arrive streamed into the store (plan_upload); a body held in
  // memory is stored the same way.
  auto streamed = std::dynamic_pointer_cast<PackageUpload>(req.body_sink);
  if (req.body_sink && (!streamed || streamed->hash() != hash)) {
    return respond(error_response(500, "upload of sha256:" + hash + " was not streamed into the package store"));
  }
  int64_t size = streamed ? streamed->size() : static_cast<int64_t>(req.body.size());
  auto answer = [respond, hash, size](Result<bool> stored) {
    if (!stored.ok()) return respond(error_response(stored.error()));
    respond(json_response(stored.value() ? 201 : 200, {{"hash", "sha256:" + hash},
                                                       {"size", size},
                                                       {"stored", stored.value()}}));
  };
  if (!streamed) return answer(deps_.packages.put(hash, req.body));
  deps_.packages.finish_upload_async(deps_.io, streamed, answer);
}

net::BodyPlan PackageRoutes::plan_upload(const std::string& path) {
  std::string hash = path.substr(kPackagesPrefix.size());
  if (auto bad = bad_hash(&hash)) return {nullptr, std::move(bad)};
  auto upload = deps_.packages.begin_upload(hash);
  if (!upload.ok()) return {nullptr, error_response(upload.error())};
  return {std::move(upload.value()), std::nullopt};
}

}  // namespace ag::head
