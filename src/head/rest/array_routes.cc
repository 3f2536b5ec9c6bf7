#include <memory>
#include <nlohmann/json.hpp>

#include "head/rest/array_routes.h"
#include "head/jobs/job_codec.h"
#include "head/rest/route_helpers.h"

namespace ag::head {

using nlohmann::json;

namespace {

// The array's state: RUNNING while any element runs, else PENDING while any waits, else
// how the worst element ended (FAILED, then STOPPED), else SUCCEEDED.
std::string array_state(const std::map<std::string, int>& counts) {
  for (const char* state : {"RUNNING", "PENDING", "FAILED", "STOPPED"}) {
    if (auto it = counts.find(state); it != counts.end() && it->second > 0) return state;
  }
  return "SUCCEEDED";
}

// How an action on every element went, as the elements answer (an element may refuse:
// a deletion the store could not write, say).
struct Tally {
  size_t left = 0;
  size_t acted = 0;
  std::vector<std::string> refused;
};

}  // namespace

void ArrayRoutes::handle(const Call& call, const JobArray& array, const std::string& action, net::Respond respond) {
  const net::HttpRequest& req = call.req;
  const Principal& who = call.who;
  const std::string& array_id = call.param("job");
  std::vector<const Job*> elements;
  for (const auto& id : array.elements) {
    if (const Job* job = deps_.jobs.table.find(id)) elements.push_back(job);
  }
  if (elements.empty()) return respond(error_response(404, "array " + array_id + " has no jobs left"));
  const Job& first = *elements.front();
  if (action.empty() && req.method == "GET") {
    std::map<std::string, int> counts;
    json summaries = json::array();
    for (const Job* job : elements) {
      ++counts[to_string(job->state)];
      summaries.push_back(job_summary_json(*job));
    }
    return respond(json_response(200, {{"array_id", array_id},
                                       {"size", elements.size()},
                                       {"max_running", array.max_running},
                                       {"state", array_state(counts)},
                                       {"counts", counts},
                                       {"elements", summaries}}));
  }
  const bool remove = action.empty() && req.method == "DELETE";
  if (action != "stop" && action != "hold" && action != "release" && !remove) {
    return respond(error_response(404, "no route for " + req.method + " " + req.path +
                                           " (an array takes GET, DELETE, and POST stop, hold or release; "
                                           "give an element, like " + first.id + ", for the rest)"));
  }
  if (!may_act_on(deps_.access, who, first)) {
    return respond(error_response(403, "array " + array_id + " belongs to " + (first.owner.empty() ? "no user" : first.owner) +
                                           "; only its owner, members of the owner's groups and admins can " +
                                           (remove ? "delete" : action) + " it"));
  }
  // Which elements the action is for: stop those not finished, hold the pending ones not
  // held yet, release the held ones; delete needs every one finished.
  std::vector<std::string> targets;
  for (const Job* job : elements) {
    if (remove && !job->terminal()) {
      return respond(error_response(409, "array " + array_id + " still has unfinished jobs (" + job->id + " is " +
                                             to_string(job->state) + "); stop it first (`ag stop-job " + array_id + "`)"));
    }
    const bool wanted = remove || (action == "stop" && !job->terminal()) ||
                        (action == "hold" && job->state == JobState::kPending && job->held_by.empty()) ||
                        (action == "release" && !job->held_by.empty());
    if (wanted) targets.push_back(job->id);
  }
  auto tally = std::make_shared<Tally>();
  tally->left = targets.size();
  auto finish = [respond, tally, array_id, action = remove ? std::string("delete") : action]() {
    json body = {{"array_id", array_id}, {"action", action}, {"jobs", tally->acted}};
    if (tally->refused.empty()) return respond(json_response(200, body));
    body["error"] = std::to_string(tally->refused.size()) + " job(s) refused: " + tally->refused.front();
    respond(json_response(409, body));
  };
  if (targets.empty()) return finish();
  for (const auto& id : targets) {
    auto one = [tally, finish, id](const Status& s) {
      if (s) ++tally->acted;
      else tally->refused.push_back(id + ": " + s.error().message);
      if (--tally->left == 0) finish();
    };
    if (remove) deps_.jobs.retention.delete_job(id, one);
    else if (action == "stop") deps_.jobs.controller.stop(id, who.name, one);
    else deps_.jobs.controller.set_hold(id, action == "hold", who.name, one);
  }
}

}  // namespace ag::head
