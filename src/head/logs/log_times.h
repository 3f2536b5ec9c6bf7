// When the bytes of a task's log arrived: its receive-time notes, (offset, ms)
// ascending in both. TimeNoteWriter takes them as bytes arrive and appends them to the
// log's .times file in batches; TimeNotes reads them back, from that file (which grows
// with the log, so it is searched, never read whole) and then those not written yet. A
// page of lines reads only the notes that time its bytes.
#pragma once

#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ag::head {

// The notes of one log not yet in its .times file: one at most every kGranularityMs,
// written out kBatch at a time and when the log closes. Io thread only.
class TimeNoteWriter {
 public:
  using Note = std::pair<int64_t, int64_t>;
  // A line's time is the time of the bytes that begin it, to within this.
  static constexpr int64_t kGranularityMs = 100;
  static constexpr size_t kBatch = 32;

  // The bytes from `offset` on arrived at `now_ms`. True when a batch is due (save()).
  bool note(int64_t offset, int64_t now_ms);
  // Appends the notes not yet written to the file at `path` (kept to try again when the
  // write fails; lost only in a crash, and then the lines concerned show the time noted
  // before them).
  void save(const std::string& path);
  const std::vector<Note>& unsaved() const { return unsaved_; }

 private:
  std::vector<Note> unsaved_;
  int64_t last_ms_ = INT64_MIN;
};

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
