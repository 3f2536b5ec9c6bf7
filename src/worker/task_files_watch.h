// TaskFilesWatch: follows what a running task's supervisor writes into the task's
// folder (worker/task_folders.h): `output.log` growing, and the `exit` record that says
// how the task ended (worker/task_supervisor.h). With inotify where it can have it;
// a folder it cannot watch (fs.inotify.max_user_watches), or every folder when no
// inotify instance could be had (fs.inotify.max_user_instances), is looked at every
// kPollMs instead, which the log says. Single-threaded: the agent's io_context.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "api/protocol.h"

namespace ag::worker {

// Parses the supervisor's exit record ("exit 3", "signal 9", "signal 9 oom").
std::optional<api::TaskExit> parse_exit_record(const std::string& text);

// The exit record in task folder `dir`: nullopt while there is none, or while it is
// not yet whole.
std::optional<api::TaskExit> read_exit_record(const std::string& dir);

class TaskFilesWatch {
 public:
  static constexpr int kPollMs = 100;  // how often polling looks at unwatched folders

  struct Events {
    std::function<void(const api::TaskKey&)> output_grew;
    // Once per followed task; it is no longer followed when this runs.
    std::function<void(const api::TaskKey&, const api::TaskExit&)> ended;
  };

  // An inotify instance for the watch (-1 when none can be had: the log says why and
  // how to have one).
  static int open_inotify();
  // `inotify_fd`: from open_inotify (owned from here on), or -1 to poll everything.
  TaskFilesWatch(boost::asio::io_context& io, int inotify_fd, Events events);
  ~TaskFilesWatch();
  TaskFilesWatch(const TaskFilesWatch&) = delete;
  TaskFilesWatch& operator=(const TaskFilesWatch&) = delete;

  // Follows task `id`'s folder `dir` until its exit record is read or stop(id). An exit
  // record already whole is reported from the io_context, after this returns; output
  // written before is not (the caller knows where it reads from).
  void follow(const api::TaskKey& id, const std::string& dir);
  void stop(const api::TaskKey& id);

 private:
  struct Followed {
    std::string dir;
    int watch = -1;            // its inotify watch; -1: polled
    int64_t polled_size = 0;   // what polling last saw of output.log
    int unreadable_polls = 0;  // polls that found an exit record not yet whole
    uint64_t generation = 0;   // which follow of the task key this is
  };
  void read_inotify();
  void poll_unwatched();
  // The exit record was written: read it, stop following, report the end.
  void exit_written(const api::TaskKey& id, std::optional<api::TaskExit> exit);

  boost::asio::io_context& io_;
  Events events_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> inotify_;  // null: polling only
  std::unique_ptr<boost::asio::steady_timer> poll_timer_;           // while folders are polled
  std::array<char, 16384> inotify_buffer_{};
  std::map<api::TaskKey, Followed> followed_;
  std::map<int, api::TaskKey> by_watch_;
  uint64_t generations_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for what is posted
};

}  // namespace ag::worker
