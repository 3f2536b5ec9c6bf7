#include "head/export/log_exporter.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "head/logs/log_line_reader.h"

namespace ag::head {
namespace {

using nlohmann::json;

constexpr int64_t kPageBytes = 1 << 20;
constexpr size_t kPassBytes = 16 << 20;  // what one pass writes at most
constexpr const char* kStateFile = ".export-state.json";

// "2026-12-01T11:48:03.123Z"
std::string iso_time(int64_t ms) {
  const time_t seconds = static_cast<time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[96];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  return text;
}

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

Status write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error{errno == ENOSPC ? ErrorCode::kResourceExhausted : ErrorCode::kInternal, std::strerror(errno)};
    }
    done += static_cast<size_t>(n);
  }
  return {};
}

}  // namespace

LogExporter::LogExporter(LogExportConfig config, Timers& timers, JobLayer& jobs, LogStore& logs, Tell tell)
    : config_(std::move(config)), timers_(timers), jobs_(jobs), logs_(logs), tell_(std::move(tell)) {}

LogExporter::~LogExporter() {
  if (timer_) timers_.cancel(timer_);
  if (fd_ >= 0) ::close(fd_);
}

std::string LogExporter::file_path(int64_t seq) const {
  char name[32];
  std::snprintf(name, sizeof name, "tasks-%06lld.jsonl", static_cast<long long>(seq));
  return config_.dir + "/" + name;
}

Status LogExporter::open() {
  const auto refuse = [this](const std::string& why) {
    return invalid_argument("--log-export " + config_.dir + ": " + why +
                            "; give a directory the head's user can write, or leave --log-export out");
  };
  std::error_code ec;
  std::filesystem::create_directories(config_.dir, ec);
  if (ec) return refuse("cannot be created (" + ec.message() + ")");
  if (::access(config_.dir.c_str(), W_OK | X_OK) != 0) return refuse(errno_text("cannot be written"));
  // The files there: the newest sequence number.
  int64_t newest = 0;
  for (const auto& entry : std::filesystem::directory_iterator(config_.dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("tasks-") && name.ends_with(".jsonl"))
      newest = std::max<int64_t>(newest, std::atoll(name.c_str() + 6));
  }
  std::ifstream in(config_.dir + "/" + kStateFile);
  const json state = in ? json::parse(in, nullptr, false) : json();
  if (state.is_object()) {
    file_seq_ = state.value("file_seq", int64_t{1});
    file_bytes_ = state.value("file_bytes", int64_t{0});
    for (const auto& o : state.value("offsets", json::array())) {
      if (o.is_array() && o.size() == 4)
        offsets_[{o[0].get<std::string>(), o[1].get<int>(), o[2].get<int>()}] = o[3].get<int64_t>();
    }
    // Lines written after the state was saved are written again from its offsets.
    for (int64_t seq = file_seq_ + 1; seq <= newest; ++seq) std::filesystem::remove(file_path(seq), ec);
  } else {
    // The first time: only what tasks write from now on.
    file_seq_ = newest + 1;
    file_bytes_ = 0;
    for (const auto& [id, job] : jobs_.table.all()) {
      if (job.terminal()) continue;
      for (const auto& attempt : job.attempts) {
        for (const auto& task : attempt.tasks) {
          offsets_[{id, attempt.number, task.index}] = logs_.size({id, attempt.number, task.index});
        }
      }
    }
  }
  fd_ = ::open(file_path(file_seq_).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (fd_ < 0) return refuse(errno_text("cannot open " + file_path(file_seq_)));
  ::fchmod(fd_, 0640);  // the head's umask is 077: a shipper in the head's group may read
  if (::ftruncate(fd_, file_bytes_) != 0 || ::lseek(fd_, file_bytes_, SEEK_SET) < 0) {
    return refuse(errno_text("cannot cut " + file_path(file_seq_) + " back"));
  }
  if (Status s = save_state(); !s) return refuse(s.error().message);
  spdlog::info("exporting task output to {} (tasks-{:06}.jsonl)", config_.dir, file_seq_);
  return {};
}

void LogExporter::start() {
  timer_ = timers_.start(config_.pass_ms, [this] {
    timer_ = 0;
    pass();
    start();
  });
}

void LogExporter::on_job_changed(const Job& job) {
  if (job.terminal()) ending_.insert(job.id);
}

void LogExporter::pass() {
  // The jobs to look at: live ones, those that ended since, and those the state holds.
  std::set<std::string> jobs(ending_.begin(), ending_.end());
  for (const auto& [id, _] : jobs_.table.active()) jobs.insert(id);
  for (const auto& [key, _] : offsets_) jobs.insert(std::get<0>(key));
  LogLineReader reader(logs_);
  std::string out;
  std::map<Key, int64_t> moved;
  std::set<std::string> finished;
  uint64_t lines = 0;
  for (const auto& id : jobs) {
    const Job* job = jobs_.table.find(id);
    if (!job) {  // deleted
      finished.insert(id);
      continue;
    }
    bool at_end = job->terminal();
    for (const auto& attempt : job->attempts) {
      for (const auto& task : attempt.tasks) {
        const Key key{id, attempt.number, task.index};
        auto known = offsets_.find(key);
        int64_t offset = known == offsets_.end() ? 0 : known->second;
        const bool ended = job->task_over(attempt.number, task.index);
        const int64_t size = logs_.size({id, attempt.number, task.index});
        while (offset < size && out.size() < kPassBytes) {
          auto page = reader.page({id, attempt.number, task.index}, offset, kPageBytes, ended);
          if (!page.ok() || page->lines.empty()) break;
          for (const auto& line : page->lines) {
            json j = {{"ts", iso_time(line.time_ms)}, {"job", id},
                      {"attempt", attempt.number},    {"task", task.index},
                      {"node", task.node_id},         {"owner", job->owner},
                      {"stream", "output"},           {"line", line.text}};
            if (line.partial) j["partial"] = true;
            out += j.dump(-1, ' ', false, json::error_handler_t::replace);
            out += '\n';
            ++lines;
          }
          offset = page->next;
          if (!page->more) break;
        }
        if (known == offsets_.end() || offset != known->second) moved[key] = offset;
        // Ended, and every byte out (a last line without a newline too).
        if (!ended || offset < size) at_end = false;
      }
    }
    if (at_end) finished.insert(id);
  }
  if (!out.empty()) {
    if (Status s = write_lines(out); !s) return failed(s.error().message);
  }
  for (const auto& [key, offset] : moved) offsets_[key] = offset;
  for (const auto& id : finished) {
    ending_.erase(id);
    std::erase_if(offsets_, [&id](const auto& entry) { return std::get<0>(entry.first) == id; });
  }
  if (out.empty() && moved.empty() && finished.empty()) return;
  if (Status s = save_state(); !s) return failed(s.error().message);
  lines_ += lines;
  if (file_bytes_ >= config_.max_file_bytes) {
    if (Status s = rotate(); !s) return failed(s.error().message);
  }
  if (failing_) {
    failing_ = false;
    spdlog::info("log export to {} works again", config_.dir);
    if (tell_) tell_("log_export.resumed", "log export to " + config_.dir + " works again");
  }
}

Status LogExporter::write_lines(const std::string& text) {
  if (Status s = write_all(fd_, text); !s) {
    // What part of it went is cut off again: the next pass writes it whole.
    if (::ftruncate(fd_, file_bytes_) != 0 || ::lseek(fd_, file_bytes_, SEEK_SET) < 0) {
      spdlog::warn("could not cut {} back: {}", file_path(file_seq_), std::strerror(errno));
    }
    return Error{s.error().code, "writing " + file_path(file_seq_) + ": " + s.error().message};
  }
  if (::fdatasync(fd_) != 0) {
    const std::string why = errno_text("syncing " + file_path(file_seq_));
    // Not counted as written: cut back, and the next pass writes it again.
    if (::ftruncate(fd_, file_bytes_) != 0 || ::lseek(fd_, file_bytes_, SEEK_SET) < 0) {
      spdlog::warn("could not cut {} back: {}", file_path(file_seq_), std::strerror(errno));
    }
    return internal_error(why);
  }
  file_bytes_ += static_cast<int64_t>(text.size());
  return {};
}

Status LogExporter::save_state() {
  json offsets = json::array();
  for (const auto& [key, offset] : offsets_) {
    offsets.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), offset});
  }
  const std::string text = json{{"file_seq", file_seq_}, {"file_bytes", file_bytes_}, {"offsets", offsets}}.dump();
  const std::string path = config_.dir + "/" + kStateFile;
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return internal_error(errno_text("writing " + tmp));
  Status written = write_all(fd, text);
  const bool synced = written && ::fsync(fd) == 0;
  ::close(fd);
  if (!written) return Error{written.error().code, "writing " + tmp + ": " + written.error().message};
  if (!synced || ::rename(tmp.c_str(), path.c_str()) != 0) return internal_error(errno_text("saving " + path));
  return {};
}

Status LogExporter::rotate() {
  const int next = ::open(file_path(file_seq_ + 1).c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (next < 0) return internal_error(errno_text("starting " + file_path(file_seq_ + 1)));
  ::fchmod(next, 0640);
  ::close(fd_);
  fd_ = next;
  ++file_seq_;
  file_bytes_ = 0;
  if (Status s = save_state(); !s) return s;
  std::error_code ec;
  for (int64_t seq = file_seq_ - config_.keep_files; seq > 0; --seq) {
    if (!std::filesystem::remove(file_path(seq), ec)) break;
  }
  return {};
}

void LogExporter::render_metrics(std::string& out) const {
  out +=
      "# HELP ag_log_export_lines_total Task output lines written to --log-export files.\n"
      "# TYPE ag_log_export_lines_total counter\nag_log_export_lines_total " +
      std::to_string(lines_) + "\n";
  out +=
      "# HELP ag_log_export_errors_total Log export passes that could not write (a full or read-only disk).\n"
      "# TYPE ag_log_export_errors_total counter\nag_log_export_errors_total " +
      std::to_string(errors_) + "\n";
  out +=
      "# HELP ag_log_export_failing 1 while log export cannot write and waits to try again.\n"
      "# TYPE ag_log_export_failing gauge\nag_log_export_failing " +
      std::string(failing_ ? "1" : "0") + "\n";
}

void LogExporter::failed(const std::string& why) {
  ++errors_;
  if (failing_) return;
  failing_ = true;
  spdlog::warn("log export to {} paused: {}; the head keeps serving and tries again every second", config_.dir, why);
  if (tell_) {
    tell_("log_export.failed", "log export to " + config_.dir + " paused: " + why +
                                   "; task output is kept on the head and exported once it can be written");
  }
}

}  // namespace ag::head
