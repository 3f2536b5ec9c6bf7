#include "head/logs/log_line_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "head/logs/log_times.h"

namespace ag::head {
namespace {

constexpr int64_t kScanChunk = 64 * 1024;

// A log file open for reading, closed with this object.
class LogFile {
 public:
  explicit LogFile(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~LogFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;

  Status opened() const {
    if (fd_ >= 0) return {};
    return internal_error("cannot read log file " + path_ + ": " + std::strerror(errno));
  }
  // [from, to) into `out`.
  Status read(int64_t from, int64_t to, std::string* out) const {
    out->resize(static_cast<size_t>(to - from));
    size_t got = 0;
    while (got < out->size()) {
      const ssize_t n = ::pread(fd_, out->data() + got, out->size() - got, from + static_cast<int64_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return internal_error("cannot read log file " + path_ + ": " + (n < 0 ? std::strerror(errno) : "short read"));
      got += static_cast<size_t>(n);
    }
    return {};
  }
  // The first newline in [from, to), or -1.
  Result<int64_t> next_newline(int64_t from, int64_t to) const {
    std::string chunk;
    for (int64_t at = from; at < to; at += kScanChunk) {
      const int64_t stop = std::min(to, at + kScanChunk);
      if (auto s = read(at, stop, &chunk); !s.ok()) return s.error();
      if (const void* nl = std::memchr(chunk.data(), '\n', chunk.size())) {
        return at + (static_cast<const char*>(nl) - chunk.data());
      }
    }
    return int64_t{-1};
  }
  // The last newline in [from, to), or -1.
  Result<int64_t> last_newline(int64_t from, int64_t to) const {
    std::string chunk;
    for (int64_t stop = to; stop > from; stop -= kScanChunk) {
      const int64_t at = std::max(from, stop - kScanChunk);
      if (auto s = read(at, stop, &chunk); !s.ok()) return s.error();
      if (const void* nl = ::memrchr(chunk.data(), '\n', chunk.size())) {
        return at + (static_cast<const char*>(nl) - chunk.data());
      }
    }
    return int64_t{-1};
  }

 private:
  std::string path_;
  int fd_;
};

}  // namespace

Result<LogLineReader::Page> LogLineReader::page(const api::TaskKey& key, int64_t from, int64_t max_bytes,
                                                bool ended) {
  const int64_t end = logs_.size(key);
  const int64_t dropped = logs_.dropped(key);
  int64_t begin = std::clamp<int64_t>(from, 0, end);
  const bool asked_dropped = begin < dropped;
  begin = std::max(begin, dropped);
  const int64_t length = std::min(end - begin, std::max<int64_t>(max_bytes, 1));
  Page page;
  page.more = begin + length < end;
  auto data = logs_.read(key, begin, length);
  if (!data.ok()) return data.error();
  page.bytes = std::make_shared<const std::string>(std::move(data.value()));
  std::string_view text = *page.bytes;
  // The bytes right after a dropped part end a line whose start is gone: from the next.
  const bool at_drop = dropped > 0 && begin == dropped;
  if (at_drop) {
    const size_t nl = text.find('\n');
    const size_t skip = nl == std::string_view::npos ? text.size() : nl + 1;
    text.remove_prefix(skip);
    begin += static_cast<int64_t>(skip);
  }
  const int64_t stop = begin + static_cast<int64_t>(text.size());
  const bool whole = stop == end && (ended || logs_.closed(key));
  const TimeNotes notes(logs_.times_path(key), logs_.unsaved_times(key));
  const auto noted = notes.covering(asked_dropped && at_drop ? dropped : begin, stop);
  size_t at = 0;
  while (at < text.size()) {
    const size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos && !whole) break;  // the rest of it has not arrived
    const size_t line_end = nl == std::string_view::npos ? text.size() : nl;
    const int64_t offset = begin + static_cast<int64_t>(at);
    page.lines.push_back({offset, TimeNotes::time_at(noted, offset), text.substr(at, line_end - at), false});
    at = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  if (page.lines.empty() && page.more && !text.empty()) {
    // One line longer than the budget: this part of it now, the rest from `next`.
    page.lines.push_back({begin, TimeNotes::time_at(noted, begin), text, true});
    at = text.size();
  }
  page.next = begin + static_cast<int64_t>(at);
  if (asked_dropped && at_drop) {
    page.marker = std::make_shared<const std::string>(logs_.drop_marker(key));
    page.lines.insert(page.lines.begin(), Line{dropped, TimeNotes::time_at(noted, dropped), *page.marker, false});
  }
  return page;
}

Result<LogLineReader::Span> LogLineReader::span(const api::TaskKey& key, bool ended) {
  const int64_t size = logs_.size(key);
  const int64_t dropped = logs_.dropped(key);
  Span span{0, size};
  if (size == 0) return span;
  LogFile file(logs_.path(key));
  if (auto s = file.opened(); !s.ok()) return s.error();
  if (dropped > 0) {
    auto nl = file.next_newline(dropped, size);
    if (!nl.ok()) return nl.error();
    span.first = nl.value() < 0 ? size : nl.value() + 1;
  }
  if (!ended && !logs_.closed(key)) {
    auto nl = file.last_newline(span.first, size);
    if (!nl.ok()) return nl.error();
    span.end = nl.value() < 0 ? span.first : nl.value() + 1;
  }
  return span;
}

Result<int64_t> LogLineReader::first_since(const api::TaskKey& key, int64_t since_ms, const Span& span) {
  const TimeNotes notes(logs_.times_path(key), logs_.unsaved_times(key));
  const int64_t at = notes.first_at_or_after(since_ms).value_or(span.end);
  if (at <= span.first) return span.first;
  if (at >= span.end) return span.end;
  // Bytes before `at` arrived earlier: the line holding them began before `since_ms`.
  LogFile file(logs_.path(key));
  if (auto s = file.opened(); !s.ok()) return s.error();
  auto nl = file.next_newline(at - 1, span.end);
  if (!nl.ok()) return nl.error();
  return nl.value() < 0 ? span.end : nl.value() + 1;
}

Result<std::vector<LogLineReader::LineStart>> LogLineReader::starts_before(const api::TaskKey& key, int64_t floor,
                                                                           int64_t before, int64_t count) {
  std::vector<LineStart> starts;  // newest first while searching
  if (before <= floor || count <= 0) return starts;
  LogFile file(logs_.path(key));
  if (auto s = file.opened(); !s.ok()) return s.error();
  // The byte before `before` ends the line before it (or is the last byte of a closed
  // log): it starts nothing.
  std::string chunk;
  int64_t pos = before - 1;
  while (pos > floor && static_cast<int64_t>(starts.size()) < count) {
    const int64_t from = std::max(floor, pos - kScanChunk);
    if (auto s = file.read(from, pos, &chunk); !s.ok()) return s.error();
    for (size_t i = chunk.size(); i-- > 0 && static_cast<int64_t>(starts.size()) < count;) {
      if (chunk[i] == '\n') starts.push_back({from + static_cast<int64_t>(i) + 1, 0});
    }
    pos = from;
  }
  if (static_cast<int64_t>(starts.size()) < count) starts.push_back({floor, 0});
  std::reverse(starts.begin(), starts.end());
  const TimeNotes notes(logs_.times_path(key), logs_.unsaved_times(key));
  const auto noted = notes.covering(starts.front().offset, before);
  for (auto& start : starts) start.time_ms = TimeNotes::time_at(noted, start.offset);
  return starts;
}

}  // namespace ag::head
