#include "head/jobs/array_throttle.h"

namespace ag::head {

void ArrayThrottle::add(const Job& element, bool running) {
  if (element.array_id.empty()) return;
  JobArray& array = arrays_[element.array_id];
  array.elements.push_back(element.id);
  if (element.spec.array) array.max_running = element.spec.array->max_running;
  if (running) array.admitted.insert(element.id);
}

const JobArray* ArrayThrottle::find(const std::string& array_id) const {
  auto it = arrays_.find(array_id);
  return it == arrays_.end() ? nullptr : &it->second;
}

void ArrayThrottle::fill_gates(const Job& element, sched::Gates& gates) const {
  const JobArray* array = find(element.array_id);
  if (!array || array->max_running <= 0) return;
  gates.array_id = element.array_id;
  gates.array_limit = array->max_running;
  gates.array_admitted = static_cast<int>(array->admitted.size());
  gates.holds_array_slot = array->admitted.count(element.id) > 0;
}

void ArrayThrottle::queued(const Job& element) {
  auto it = arrays_.find(element.array_id);
  if (it == arrays_.end() || it->second.max_running <= 0) return;
  it->second.throttled.erase({element.array_index, element.id});
  it->second.admitted.insert(element.id);
}

void ArrayThrottle::waits(const Job& element, bool for_a_place,
                          const std::function<void(const std::string&)>& admit_next) {
  if (element.array_id.empty()) return;
  leave(element, admit_next);
  if (for_a_place) arrays_[element.array_id].throttled.insert({element.array_index, element.id});
}

void ArrayThrottle::leave(const Job& element, const std::function<void(const std::string&)>& admit_next) {
  auto it = arrays_.find(element.array_id);
  if (it == arrays_.end()) return;
  JobArray& array = it->second;
  array.throttled.erase({element.array_index, element.id});
  if (array.admitted.erase(element.id) == 0) return;
  while (array.max_running > 0 && static_cast<int>(array.admitted.size()) < array.max_running &&
         !array.throttled.empty()) {
    const std::string next = array.throttled.begin()->second;
    array.throttled.erase(array.throttled.begin());
    admit_next(next);
  }
}

void ArrayThrottle::forget(const Job& element) {
  auto it = arrays_.find(element.array_id);
  if (it == arrays_.end()) return;
  std::erase(it->second.elements, element.id);
  if (it->second.elements.empty()) arrays_.erase(it);
}

}  // namespace ag::head
