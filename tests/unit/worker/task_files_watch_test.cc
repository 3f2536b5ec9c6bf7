// TaskFilesWatch against real folders, with inotify and by polling: output growth is
// reported, an exit record once it is whole (closed, or parsed by a poll) and only
// once, one written before the folder was followed too, none after stop().
#include "worker/task_files_watch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <vector>

#include "worker/fs_fixtures.h"

namespace ag::worker {
namespace {

using ::ag::testing::TempDir;

class TaskFilesWatchTest : public ::testing::TestWithParam<bool> {
 protected:
  TaskFilesWatchTest()
      : inotify_fd_(GetParam() ? TaskFilesWatch::open_inotify() : -1),
        watch_uses_inotify_(inotify_fd_ >= 0),
        watch_(io_, inotify_fd_,
               {[this](const api::TaskKey& id) { grew_.push_back(id); },
                [this](const api::TaskKey& id, const api::TaskExit& exit) {
                  ended_.push_back({id, exit});
                }}) {}

  std::string folder(const std::string& name) {
    const std::string dir = (tmp_ / name).string();
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/output.log");
    return dir;
  }
  void SetUp() override {
    if (GetParam() && !watch_uses_inotify_) GTEST_SKIP() << "no inotify instance could be had";
  }
  // Runs the io_context until `done` or 10 s have passed.
  bool run_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.run_for(std::chrono::milliseconds(10));
      io_.restart();
    }
    return done();
  }
  void settle(int ms) {
    io_.run_for(std::chrono::milliseconds(ms));
    io_.restart();
  }

  TempDir tmp_;
  boost::asio::io_context io_;
  int inotify_fd_;
  bool watch_uses_inotify_;
  std::vector<api::TaskKey> grew_;
  std::vector<std::pair<api::TaskKey, api::TaskExit>> ended_;
  TaskFilesWatch watch_;
};

api::TaskKey key(const std::string& job) { return api::TaskKey{job, 0, 0}; }

TEST_P(TaskFilesWatchTest, OutputIsReportedAndTheWholeExitRecordOnce) {
  const std::string dir = folder("a");
  watch_.follow(key("job_a"), dir);
  settle(20);
  EXPECT_TRUE(ended_.empty());

  std::ofstream(dir + "/output.log", std::ios::app) << "hello\n";
  ASSERT_TRUE(run_until([&] { return !grew_.empty(); }));
  EXPECT_EQ(grew_.front(), key("job_a"));

  {
    std::ofstream record(dir + "/exit");
    record << "sig" << std::flush;  // still being written: not an end
    settle(250);
    EXPECT_TRUE(ended_.empty());
    record << "nal 9 oom\n";
  }  // closed: whole
  ASSERT_TRUE(run_until([&] { return !ended_.empty(); }));
  EXPECT_EQ(ended_[0].first, key("job_a"));
  EXPECT_EQ(ended_[0].second.signal, 9);
  EXPECT_TRUE(ended_[0].second.out_of_memory);

  std::ofstream(dir + "/exit") << "exit 3\n";  // no longer followed
  settle(250);
  EXPECT_EQ(ended_.size(), 1u);
}

// The supervisor writes its record whole beside `exit`, then renames it into place:
// the half-written one is no end, the renamed one is.
TEST_P(TaskFilesWatchTest, ARecordRenamedIntoPlaceIsTheEnd) {
  const std::string dir = folder("r");
  watch_.follow(key("job_r"), dir);
  std::ofstream(dir + "/exit.tmp") << "exit 4\n";
  settle(250);
  EXPECT_TRUE(ended_.empty()) << "exit.tmp is not the record";

  ASSERT_EQ(std::rename((dir + "/exit.tmp").c_str(), (dir + "/exit").c_str()), 0);
  ASSERT_TRUE(run_until([&] { return !ended_.empty(); }));
  EXPECT_EQ(ended_[0].first, key("job_r"));
  EXPECT_EQ(ended_[0].second.exit_code, 4);
  settle(250);
  EXPECT_EQ(ended_.size(), 1u);
}

TEST_P(TaskFilesWatchTest, AnEndRecordedBeforeTheFollowIsReportedAfterIt) {
  const std::string dir = folder("b");
  std::ofstream(dir + "/exit") << "exit 0\n";

  watch_.follow(key("job_b"), dir);
  EXPECT_TRUE(ended_.empty());  // not from inside follow()

  ASSERT_TRUE(run_until([&] { return !ended_.empty(); }));
  EXPECT_EQ(ended_[0].second.exit_code, 0);
  settle(250);
  EXPECT_EQ(ended_.size(), 1u);
}

TEST_P(TaskFilesWatchTest, ALaterFollowOfTheSameTaskIsNotEndedByAnEarliersRecord) {
  const std::string old_dir = folder("old"), new_dir = folder("new");
  std::ofstream(old_dir + "/exit") << "exit 7\n";
  watch_.follow(key("job_e"), old_dir);  // its end is posted
  watch_.stop(key("job_e"));             // ...but it is stopped first
  watch_.follow(key("job_e"), new_dir);  // and the key followed again, elsewhere

  settle(300);
  EXPECT_TRUE(ended_.empty());

  std::ofstream(new_dir + "/exit") << "exit 0\n";
  ASSERT_TRUE(run_until([&] { return !ended_.empty(); }));
  EXPECT_EQ(ended_[0].second.exit_code, 0);
}

TEST_P(TaskFilesWatchTest, NothingIsReportedAfterStop) {
  const std::string dir = folder("c");
  watch_.follow(key("job_c"), dir);
  watch_.stop(key("job_c"));
  watch_.stop(key("job_c"));  // twice is harmless

  std::ofstream(dir + "/output.log", std::ios::app) << "more\n";
  std::ofstream(dir + "/exit") << "exit 1\n";
  settle(300);

  EXPECT_TRUE(grew_.empty());
  EXPECT_TRUE(ended_.empty());
}

TEST_P(TaskFilesWatchTest, AnExitRecordThatNeverParsesEndsTheTaskAsUnreadable) {
  const std::string dir = folder("d");
  watch_.follow(key("job_d"), dir);

  std::ofstream(dir + "/exit") << "garbage\n";

  ASSERT_TRUE(run_until([&] { return !ended_.empty(); }));
  EXPECT_EQ(ended_[0].second.start_error, "its end could not be read");
  EXPECT_FALSE(ended_[0].second.exit_code.has_value());
}

INSTANTIATE_TEST_SUITE_P(InotifyAndPolling, TaskFilesWatchTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "inotify" : "polling"; });

}  // namespace
}  // namespace ag::worker
