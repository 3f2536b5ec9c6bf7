// When the bytes of a task's log arrived: its receive-time notes, (offset, ms)
// ascending in both, from the log's .times file (which grows with the log, so it is
// searched, never read whole) and then those the LogStore has not written yet. A page
// of lines reads only the notes that time its bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ag::head {

class TimeNotes {
 public:
  using Note = std::pair<int64_t, int64_t>;
  // `unsaved` must outlive this object.
  TimeNotes(const std::string& path, const std::vector<Note>& unsaved);
  ~TimeNotes();
  TimeNotes(const TimeNotes&) = delete;
  TimeNotes& operator=(const TimeNotes&) = delete;

  // Where the first bytes that arrived at or after `ms` begin; nullopt when none did.
  std::optional<int64_t> first_at_or_after(int64_t ms) const;

  // The notes that time the bytes [begin, end): the last one at or before `begin`, and
  // those within.
  std::vector<Note> covering(int64_t begin, int64_t end) const;

  // The time of the byte at `offset` among `noted` (what covering() gave for a range
  // holding it); 0 when no note is that early.
  static int64_t time_at(const std::vector<Note>& noted, int64_t offset);

 private:
  size_t size() const { return stored_ + unsaved_.size(); }
  Note at(size_t i) const;
  // The first note for which `past` holds (it holds for every later one too).
  template <typename Pred>
  size_t first_index(Pred past) const;

  int fd_ = -1;
  size_t stored_ = 0;
  const std::vector<Note>& unsaved_;
};

}  // namespace ag::head
