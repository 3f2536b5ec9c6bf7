// A job array as a whole, under its id (`ag submit --array`): each element is a job
// "ARRAY_INDEX" with routes of its own; these act on every element at once.
//
//   GET    /api/jobs/{array_id}          {"array_id", "size", "max_running", "state",
//                                         "counts": {state: n}, "elements": [summary...]}
//   POST   /api/jobs/{array_id}/stop     stops every element not finished
//   POST   /api/jobs/{array_id}/hold     holds every pending element
//   POST   /api/jobs/{array_id}/release  releases every held element
//   DELETE /api/jobs/{array_id}          deletes every element, once all have finished
//
// JobRoutes hands a route here when its {job} is an array's id. Acting on an array
// needs what acting on its first element needs. Io thread only.
#pragma once

#include <string>

#include "head/rest/rest_deps.h"
#include "head/rest/route_table.h"

namespace ag::head {

class ArrayRoutes {
 public:
  explicit ArrayRoutes(const RestDeps& deps) : deps_(deps) {}

  // `action`: "" for GET or DELETE of the array itself, else stop, hold or release;
  // any other is a 404 that names what an array takes.
  void handle(const Call& call, const JobArray& array, const std::string& action, net::Respond respond);

 private:
  RestDeps deps_;
};

}  // namespace ag::head
