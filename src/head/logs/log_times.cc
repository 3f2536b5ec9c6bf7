#include "head/logs/log_times.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>

namespace ag::head {

bool TimeNoteWriter::note(int64_t offset, int64_t now_ms) {
  if (last_ms_ != INT64_MIN && now_ms - last_ms_ < kGranularityMs) return false;
  last_ms_ = now_ms;
  unsaved_.emplace_back(offset, now_ms);
  return unsaved_.size() >= kBatch;
}

void TimeNoteWriter::save(const std::string& path) {
  if (unsaved_.empty()) return;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return;
  std::vector<int64_t> flat;
  for (const auto& [offset, ms] : unsaved_) {
    flat.push_back(offset);
    flat.push_back(ms);
  }
  const auto bytes = static_cast<ssize_t>(flat.size() * sizeof(int64_t));
  if (::write(fd, flat.data(), static_cast<size_t>(bytes)) == bytes) unsaved_.clear();
  ::close(fd);
}

TimeNotes::TimeNotes(const std::string& path, const std::vector<Note>& unsaved) : unsaved_(unsaved) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st{};
  if (fd_ >= 0 && ::fstat(fd_, &st) == 0) stored_ = static_cast<size_t>(st.st_size) / sizeof(Note);
}

TimeNotes::~TimeNotes() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<int64_t> TimeNotes::first_at_or_after(int64_t ms) const {
  const size_t i = first_index([ms](const Note& n) { return n.second >= ms; });
  if (i == size()) return std::nullopt;
  return at(i).first;
}

std::vector<TimeNotes::Note> TimeNotes::covering(int64_t begin, int64_t end) const {
  const size_t after = first_index([begin](const Note& n) { return n.first > begin; });
  const size_t from = after > 0 ? after - 1 : 0;
  const size_t to = first_index([end](const Note& n) { return n.first >= end; });
  std::vector<Note> out;
  if (from < std::min(to, stored_)) {
    out.resize(std::min(to, stored_) - from);
    const auto bytes = static_cast<ssize_t>(out.size() * sizeof(Note));
    if (::pread(fd_, out.data(), static_cast<size_t>(bytes), static_cast<off_t>(from * sizeof(Note))) != bytes) {
      out.clear();
    }
  }
  for (size_t i = std::max(from, stored_); i < to; ++i) out.push_back(unsaved_[i - stored_]);
  return out;
}

int64_t TimeNotes::time_at(const std::vector<Note>& noted, int64_t offset) {
  auto it = std::upper_bound(noted.begin(), noted.end(), offset,
                             [](int64_t off, const Note& t) { return off < t.first; });
  return it == noted.begin() ? int64_t{0} : std::prev(it)->second;
}

TimeNotes::Note TimeNotes::at(size_t i) const {
  if (i >= stored_) return unsaved_[i - stored_];
  Note note{0, 0};
  if (::pread(fd_, &note, sizeof note, static_cast<off_t>(i * sizeof note)) != sizeof note) return {0, 0};
  return note;
}

template <typename Pred>
size_t TimeNotes::first_index(Pred past) const {
  size_t lo = 0, hi = size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (past(at(mid))) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

}  // namespace ag::head
