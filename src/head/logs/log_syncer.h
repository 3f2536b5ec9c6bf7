// LogSyncer: the disk work a LogStore leaves its io thread: making a closed log durable
// (fsync) and removing a deleted job's folder. With an io queue it runs them on a
// thread of its own (a 200 MiB log takes the disk a third of a second, which the io
// thread spends serving instead) and posts each sync's end back; without one, inline.
// It knows which logs have a sync under way, so that what waits for their bytes to be
// durable (after_synced) runs once they are. Io thread only (but for its own thread).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "common/timers.h"

namespace boost::asio {
class thread_pool;
}

namespace ag::head {

class LogSyncer {
 public:
  // How a file is made durable (fsync(2); a test gives one that fails).
  using Fsync = std::function<int(int fd)>;
  // `failed`: runs on the io thread when a log's bytes could not be made durable (a disk
  // that filled while the kernel wrote them back), before what waits for its syncs.
  explicit LogSyncer(Timers* io, std::function<void(const api::TaskKey&)> failed = nullptr, Fsync fsync = nullptr);
  // Lets the work under way finish (their ends, posted to an io thread that no longer
  // runs, are dropped with it).
  ~LogSyncer();
  LogSyncer(const LogSyncer&) = delete;
  LogSyncer& operator=(const LogSyncer&) = delete;

  // Makes `fd` (the log of `key`) durable, then closes it.
  void sync(const api::TaskKey& key, int fd);
  // Runs `fn` on the io thread once every sync of `key` so far is done (now when none is).
  void after_synced(const api::TaskKey& key, std::function<void()> fn);
  // Runs `fn` (file work nobody waits for) on the thread, or now.
  void run(std::function<void()> fn);
  // The job's logs are gone: what waited for their syncs, taken out (to be called).
  std::vector<std::function<void()>> take_job(const std::string& job_id);

 private:
  void synced(const api::TaskKey& key, bool ok);

  struct Pending {
    int syncs = 0;
    std::vector<std::function<void()>> callbacks;
  };
  Timers* io_;
  std::function<void(const api::TaskKey&)> failed_;
  Fsync fsync_;
  std::map<api::TaskKey, Pending> pending_;
  std::unique_ptr<boost::asio::thread_pool> pool_;  // last: joined before the rest goes
};

}  // namespace ag::head
