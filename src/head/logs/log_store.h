// LogStore: every byte each task wrote, one file per (job, attempt, task) under
// <data_dir>/logs/<job_id>/, readable by offset while the job runs and after, and a
// list of readers waiting for bytes past an offset (long polls) that are woken the
// moment bytes arrive or the log is closed (LogWaiters). At most `max_open_files` logs
// are kept open for writing (the least recently written is closed first), so a gang of
// thousands of tasks costs no descriptor per task. A closed log is made durable (fsync)
// by the LogSyncer, on a thread of its own when `io` is given. Receive times go to a
// .times file beside each log (TimeNoteWriter); a log over the cap loses its oldest
// part. Io thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <memory>
#include <optional>

#include "api/protocol.h"
#include "common/clock.h"
#include "common/result.h"
#include "common/timers.h"
#include "head/logs/log_syncer.h"
#include "head/logs/log_times.h"
#include "head/logs/log_waiters.h"

namespace ag::head {

class LogStore {
 public:
  // With `io`, syncs run on a background thread and their ends are posted to `io`;
  // without it, close() syncs before it returns.
  // Receive times come from `clock` (the system's when null). `fsync`: how a closed log
  // is made durable (a test gives one that fails).
  explicit LogStore(std::string root_dir, size_t max_open_files = 128, Timers* io = nullptr,
                    const Clock* clock = nullptr, LogSyncer::Fsync fsync = nullptr);
  ~LogStore();

  // Appends bytes at `offset`. Bytes before the current end (a resend) are skipped.
  // Errors: kConflict when `offset` is past the end (bytes in between are missing: the
  // worker resends them on the head's request); kResourceExhausted / kInternal when
  // the file cannot be written.
  Status append(const api::TaskKey& key, int64_t offset, std::string_view data);
  // As append, with the `bytes` bytes read from `from_fd` (a pipe: moved into the file
  // with splice(2), never through this process's memory). Bytes the call does not take
  // (on an error) stay in the pipe for the caller to drop.
  Status append_from(const api::TaskKey& key, int64_t offset, int from_fd, size_t bytes);

  // Marks the log complete (the task ended), wakes its waiters and makes its bytes
  // durable (see after_synced).
  void close(const api::TaskKey& key);

  // Runs `fn` on the io thread once every close() of the log so far has reached the
  // disk (at once when none is under way): what the head acknowledges to a worker,
  // which then lets go of its copy, must not be lost in a crash. A log whose bytes could
  // not be made durable (a full disk) is emptied first: size() is 0 then, so that
  // whoever waits sees it short and asks for it again.
  void after_synced(const api::TaskKey& key, std::function<void()> fn) { syncer_->after_synced(key, std::move(fn)); }

  int64_t size(const api::TaskKey& key);
  bool closed(const api::TaskKey& key) const;

  // The file that holds the log (its first size() bytes are the log), for serving
  // from disk.
  std::string path(const api::TaskKey& key) const;

  // The last `max_lines` lines within the last `max_bytes` of the log, from the start
  // of a line where the bytes allow; "" when there are none or they cannot be read.
  std::string tail(const api::TaskKey& key, int64_t max_bytes, int max_lines);

  // Receive times: (offset, ms) from which on bytes arrived at that time, ascending. Those
  // not yet written to the file at times_path() (head/logs/log_times.h reads both).
  using TimeNote = TimeNoteWriter::Note;
  const std::vector<TimeNote>& unsaved_times(const api::TaskKey& key) { return open(key).times.unsaved(); }
  std::string times_path(const api::TaskKey& key) const;

  // Up to `max_bytes` from `offset`. Errors: kInternal when the file cannot be read.
  Result<std::string> read(const api::TaskKey& key, int64_t offset, int64_t max_bytes);

  // Calls `ready` once the log has bytes past `offset` or is closed (immediately when
  // it already does). Returns an id usable with cancel_wait.
  uint64_t wait(const api::TaskKey& key, int64_t offset, std::function<void()> ready);
  void cancel_wait(uint64_t id) { waiters_.cancel(id); }

  // At most this many bytes of one task's log are kept on disk (0: no cap): past it the
  // oldest part is dropped (its blocks freed, offsets kept), so the newest always stays.
  // Reads of the dropped part get drop_marker().
  void set_max_log_bytes(int64_t bytes) { max_log_bytes_ = bytes; }
  // Where the kept part of the log begins (0 when nothing was dropped).
  int64_t dropped(const api::TaskKey& key) { return open(key).dropped; }
  // The line shown in place of the dropped part.
  std::string drop_marker(const api::TaskKey& key);

  // Forgets every log of a deleted job and removes its folder (on the store's own
  // thread when it has one); readers waiting on them are answered.
  void remove_job(const std::string& job_id);

  // Bytes ingested since start (for metrics and benchmarks).
  int64_t bytes_ingested() const { return bytes_ingested_; }
  // Log files open for writing now (at most max_open_files).
  size_t open_files() const { return open_order_.size(); }

 private:
  struct OpenLog {
    int fd = -1;
    int64_t size = 0;
    bool closed = false;
    int64_t dropped = 0;       // bytes before this offset were dropped
    bool cap_failed = false;   // the file system cannot drop them
    TimeNoteWriter times;
    std::list<api::TaskKey>::iterator lru;  // its place in open_order_ while fd >= 0
  };
  OpenLog& open(const api::TaskKey& key);
  // The log's file open for writing (opened, and another closed, when it is not).
  Result<int> writable(const api::TaskKey& key, OpenLog& log);
  void close_file(OpenLog& log);
  // `written` bytes went in at the log's end: noted, capped, and its readers woken.
  void wrote(const api::TaskKey& key, OpenLog& log, int64_t written);
  // Its bytes could not be made durable: the log starts again, empty.
  void lost(const api::TaskKey& key);

  std::string root_;
  size_t max_open_files_;
  std::map<api::TaskKey, OpenLog> logs_;
  std::list<api::TaskKey> open_order_;  // logs with an open file, least recently written first
  LogWaiters waiters_;
  int64_t bytes_ingested_ = 0;
  int64_t max_log_bytes_ = 0;
  SystemClock system_clock_;
  const Clock* clock_;
  std::unique_ptr<LogSyncer> syncer_;  // last: its thread joined before the rest goes
};

}  // namespace ag::head
