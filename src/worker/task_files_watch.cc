#include "worker/task_files_watch.h"

#include <spdlog/spdlog.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace ag::worker {

namespace asio = boost::asio;

namespace {

// What a followed task whose exit record never parses ended with.
api::TaskExit unreadable_end() { return api::TaskExit{std::nullopt, std::nullopt, "its end could not be read"}; }

}  // namespace

std::optional<api::TaskExit> parse_exit_record(const std::string& text) {
  std::istringstream in(text);
  std::string kind;
  int value = 0;
  if (!(in >> kind >> value)) return std::nullopt;
  api::TaskExit exit;
  if (kind == "exit")
    exit.exit_code = value;
  else if (kind == "signal")
    exit.signal = value;
  else
    return std::nullopt;
  std::string note;
  exit.out_of_memory = in >> note && note == "oom";
  return exit;
}

std::optional<api::TaskExit> read_exit_record(const std::string& dir) {
  std::ifstream in(dir + "/exit");
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return parse_exit_record(text.str());
}

int TaskFilesWatch::open_inotify() {
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::ifstream limit_file("/proc/sys/fs/inotify/max_user_instances");
    std::string limit;
    limit_file >> limit;
    spdlog::warn(
        "cannot watch task files with inotify ({}{}): following task output and ends by polling every {} ms "
        "instead; to watch them again raise the limit (sysctl fs.inotify.max_user_instances=1024)",
        std::strerror(err), limit.empty() ? "" : "; fs.inotify.max_user_instances is " + limit, kPollMs);
  }
  return fd;
}

TaskFilesWatch::TaskFilesWatch(asio::io_context& io, int inotify_fd, Events events)
    : io_(io), events_(std::move(events)) {
  if (inotify_fd >= 0) {
    inotify_ = std::make_unique<asio::posix::stream_descriptor>(io_, inotify_fd);
    read_inotify();
  }
}

TaskFilesWatch::~TaskFilesWatch() = default;

void TaskFilesWatch::follow(const api::TaskKey& id, const std::string& dir) {
  Followed& followed = followed_[id];
  followed.dir = dir;
  followed.generation = ++generations_;
  if (inotify_) {
    followed.watch =
        inotify_add_watch(inotify_->native_handle(), dir.c_str(), IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO);
    if (followed.watch < 0) {
      spdlog::warn(
          "cannot watch task {} with inotify ({}): following it by polling every {} ms; raise "
          "fs.inotify.max_user_watches to watch it",
          id.to_string(), std::strerror(errno), kPollMs);
    }
  }
  if (followed.watch >= 0) by_watch_[followed.watch] = id;
  if (followed.watch < 0 && !poll_timer_) poll_unwatched();
  // The task may have ended before the watch existed. A record still being written
  // does not parse yet; its close then arrives through the watch (or the next poll).
  if (auto exit = read_exit_record(dir)) {
    // Only for this follow: not a later one of the same task key, nor after this is gone.
    asio::post(io_, [this, alive = std::weak_ptr<bool>(alive_), id, generation = followed.generation, exit] {
      if (alive.expired()) return;
      auto it = followed_.find(id);
      if (it != followed_.end() && it->second.generation == generation) exit_written(id, exit);
    });
  }
}

void TaskFilesWatch::stop(const api::TaskKey& id) {
  auto it = followed_.find(id);
  if (it == followed_.end()) return;
  if (it->second.watch >= 0 && inotify_) {
    inotify_rm_watch(inotify_->native_handle(), it->second.watch);
    by_watch_.erase(it->second.watch);
  }
  followed_.erase(it);
}

void TaskFilesWatch::exit_written(const api::TaskKey& id, std::optional<api::TaskExit> exit) {
  stop(id);
  if (events_.ended) events_.ended(id, exit.value_or(unreadable_end()));
}

void TaskFilesWatch::poll_unwatched() {
  poll_timer_ = std::make_unique<asio::steady_timer>(io_, std::chrono::milliseconds(kPollMs));
  poll_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    std::vector<api::TaskKey> unwatched;
    for (const auto& [id, followed] : followed_) {
      if (followed.watch < 0) unwatched.push_back(id);
    }
    for (const auto& id : unwatched) {
      auto it = followed_.find(id);
      if (it == followed_.end()) continue;  // stopped by an earlier one's event
      Followed& followed = it->second;
      struct stat st {};
      if (::stat((followed.dir + "/output.log").c_str(), &st) == 0 && st.st_size != followed.polled_size) {
        followed.polled_size = st.st_size;
        if (events_.output_grew) events_.output_grew(id);
      }
      it = followed_.find(id);
      if (it == followed_.end()) continue;
      std::ifstream in(it->second.dir + "/exit");
      if (!in) continue;  // none yet (or not readable yet)
      std::stringstream text;
      text << in.rdbuf();
      auto exit = parse_exit_record(text.str());
      // A record not yet whole is read again at the next poll, for a second at most.
      if (!exit && ++it->second.unreadable_polls < 1000 / kPollMs) continue;
      exit_written(id, exit);
    }
    const bool more = std::any_of(followed_.begin(), followed_.end(), [](const auto& f) { return f.second.watch < 0; });
    if (!more) {
      poll_timer_.reset();  // started again by the next unwatched folder
      return;
    }
    poll_unwatched();
  });
}

void TaskFilesWatch::read_inotify() {
  inotify_->async_read_some(asio::buffer(inotify_buffer_), [this](const boost::system::error_code& ec, size_t n) {
    if (ec) return;
    for (size_t i = 0; i + sizeof(inotify_event) <= n;) {
      auto* event = reinterpret_cast<inotify_event*>(inotify_buffer_.data() + i);
      i += sizeof(inotify_event) + event->len;
      auto it = by_watch_.find(event->wd);
      if (it == by_watch_.end()) continue;
      const api::TaskKey id = it->second;
      const std::string name = event->len ? event->name : "";
      if (name == "output.log" && (event->mask & IN_MODIFY) && events_.output_grew) events_.output_grew(id);
      // `exit` renamed into place, or written there (by a supervisor of an earlier version).
      if (name == "exit" && (event->mask & (IN_MOVED_TO | IN_CLOSE_WRITE)) && followed_.count(id)) {
        exit_written(id, read_exit_record(followed_.at(id).dir));
      }
    }
    read_inotify();
  });
}

}  // namespace ag::worker
