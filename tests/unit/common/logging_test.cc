// Tests for the daemons' logging set-up: a file and stderr together, and the journal's
// priority prefixes when stderr is the stream systemd named in JOURNAL_STREAM.
#include "common/logging.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ag {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using ::testing::Not;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string stream_id(int fd) {
  struct stat st {};
  EXPECT_EQ(::fstat(fd, &st), 0);
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ag-logging-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    saved_stderr_ = ::dup(STDERR_FILENO);
  }
  void TearDown() override {
    spdlog::default_logger()->flush();
    ::dup2(saved_stderr_, STDERR_FILENO);
    ::close(saved_stderr_);
    ::unsetenv("JOURNAL_STREAM");
    init_logging({"", true, false});
    std::filesystem::remove_all(dir_);
  }
  // Points fd 2 at a file of the test's; returns its path.
  std::string capture_stderr() {
    std::string path = (dir_ / "stderr").string();
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, STDERR_FILENO);
    ::close(fd);
    return path;
  }
  std::filesystem::path dir_;
  int saved_stderr_ = -1;
};

TEST_F(LoggingTest, JournalStreamIsTheDescriptorJournalStreamNames) {
  int named = ::open((dir_ / "a").c_str(), O_WRONLY | O_CREAT, 0600);
  int other = ::open((dir_ / "b").c_str(), O_WRONLY | O_CREAT, 0600);
  EXPECT_FALSE(is_journal_stream(named));  // no JOURNAL_STREAM
  ::setenv("JOURNAL_STREAM", stream_id(named).c_str(), 1);
  EXPECT_TRUE(is_journal_stream(named));
  EXPECT_FALSE(is_journal_stream(other));  // inherited by a process whose output went elsewhere
  ::setenv("JOURNAL_STREAM", "not numbers", 1);
  EXPECT_FALSE(is_journal_stream(named));
  ::close(named);
  ::close(other);
}

TEST_F(LoggingTest, UnderTheJournalStderrLinesCarryTheirPriorityAndTheFileKeepsTimestamps) {
  const std::string err = capture_stderr();
  ::setenv("JOURNAL_STREAM", stream_id(STDERR_FILENO).c_str(), 1);
  const std::string file = (dir_ / "head.log").string();
  EXPECT_THAT(init_logging({file, true, false}), IsEmpty());
  spdlog::info("started");
  spdlog::warn("careful");
  spdlog::error("broken");
  spdlog::debug("not at info level");
  spdlog::default_logger()->flush();

  EXPECT_EQ(read_file(err), "<6>info started\n<4>warning careful\n<3>error broken\n");
  const std::string logged = read_file(file);
  EXPECT_THAT(logged, MatchesRegex("([0-9-]+ [0-9:.]+ (info started|warning careful|error broken)\n){3}"));
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640);
}

TEST_F(LoggingTest, ElsewhereStderrLinesLookLikeTheFilesAndVerboseShowsDebug) {
  const std::string err = capture_stderr();
  EXPECT_THAT(init_logging({"", true, true}), IsEmpty());
  spdlog::debug("details");
  spdlog::default_logger()->flush();
  EXPECT_THAT(read_file(err), MatchesRegex("[0-9-]+ [0-9:.]+ debug details\n"));
}

TEST_F(LoggingTest, AFileThatCannotBeWrittenIsReportedAndStderrStillLogs) {
  const std::string err = capture_stderr();
  std::ofstream(dir_ / "a-file") << "not a folder";  // (as root, a mode would not stop the write)
  std::string problem = init_logging({(dir_ / "a-file" / "head.log").string(), false, false});
  EXPECT_THAT(problem, HasSubstr("cannot write the log file"));
  EXPECT_THAT(problem, HasSubstr("a-file/head.log"));
  spdlog::info("still here");
  spdlog::default_logger()->flush();
  EXPECT_THAT(read_file(err), HasSubstr("info still here"));
  EXPECT_THAT(read_file(err), Not(HasSubstr("<6>")));
}

}  // namespace
}  // namespace ag
