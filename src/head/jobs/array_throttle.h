// ArrayThrottle: job arrays (`ag submit --array 0-99%8`) as the head keeps them: each
// array's elements, and for an array with a limit, the elements holding a place under
// it (queued or running) and those waiting for one, by index. The job controller asks it
// for an element's gate and tells it when an element is queued, waits or leaves its
// place; a place that comes free goes to the waiting element with the lowest index.
// Io thread only.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "head/jobs/job.h"
#include "head/scheduler/gates.h"

namespace ag::head {

// A job array: its elements (jobs "ARRAY_INDEX") and their limit.
struct JobArray {
  std::vector<std::string> elements;  // element job ids, by index
  int max_running = 0;                // queued or running at once; 0 for any number
  std::set<std::string> admitted;     // elements queued or running (they use the limit)
  std::set<std::pair<int, std::string>> throttled;  // (index, id): waiting for a place under it
};

class ArrayThrottle {
 public:
  // A new element, or one loaded at start (`running`: it holds a place already).
  void add(const Job& element, bool running = false);
  const JobArray* find(const std::string& array_id) const;
  // The element's array limit, into its gates (none for an element of no limit).
  void fill_gates(const Job& element, sched::Gates& gates) const;
  // The element was queued: it holds a place.
  void queued(const Job& element);
  // The element waits at a gate; `for_a_place`: the array's limit is that gate.
  // `admit_next` is called as `leave` calls it (a place it held comes free).
  void waits(const Job& element, bool for_a_place, const std::function<void(const std::string&)>& admit_next);
  // The element ended or left the queue: a place it held goes to the next waiting
  // element (`admit_next(id)`, which may queue it), as long as places are free.
  void leave(const Job& element, const std::function<void(const std::string&)>& admit_next);
  // The element was deleted (its array goes with its last element).
  void forget(const Job& element);

 private:
  std::map<std::string, JobArray> arrays_;
};

}  // namespace ag::head
