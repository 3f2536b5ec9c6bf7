// What the head's REST routes share: JSON answers (invalid UTF-8 from task output
// replaced, never an exception), error answers in one shape, query parameters read
// with a 400 that names the parameter and its range, and who may act on a job.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "head/auth/access_control.h"
#include "head/jobs/job.h"
#include "net/http_types.h"

namespace ag::head {

net::HttpResponse json_response(int status, const nlohmann::json& body);
net::HttpResponse error_response(int status, const std::string& message);
net::HttpResponse error_response(const Error& error);

// Reads an optional integer query parameter into `out`; returns false after answering
// 400 on bad input.
// Whether `who` may stop the job and read its logs and env vars: its owner, members of
// the owner's groups, admins.
bool may_act_on(const AccessControl& access, const Principal& who, const Job& job);
// The 403 for a caller who may not `what` ("stop it") the job.
net::HttpResponse not_your_job(const Job& job, const std::string& what);
// The 403s for a caller whose role does not allow `what`.
extern const char* const kAdminOnly;
net::HttpResponse admin_only(const std::string& what);
net::HttpResponse viewer_cannot(const Principal& who, const std::string& what);

bool query_int(const net::HttpRequest& req, const std::string& name, int64_t min, int64_t max, int64_t* out,
               net::Respond& respond);

}  // namespace ag::head
