// LogStore over a real temporary folder: appends at offsets (resends skipped, gaps
// refused), reads by range, completion, and the long-poll waiters woken by new bytes
// or the log's end.
#include "head/logs/log_store.h"

#include "head/logs/log_line_reader.h"

#include <chrono>
#include <thread>

#include "fakes/fake_clock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace ag::head {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class LogStoreTest : public ::testing::Test {
 public:
  ~LogStoreTest() override { fs::remove_all(dir_); }

 protected:
  LogStoreTest()
      : dir_(fs::temp_directory_path() / ("ag-log-store-test-" + std::to_string(::getpid()) + "-" +
                                          ::testing::UnitTest::GetInstance()->current_test_info()->name())),
        logs_((dir_ / "logs").string()) {}

  // What read() returns, or the error's message prefixed so a comparison fails loudly.
  std::string read(const api::TaskKey& key, int64_t offset, int64_t max_bytes) {
    auto data = logs_.read(key, offset, max_bytes);
    return data.ok() ? data.value() : "<error: " + data.error().message + ">";
  }

  // Every file under the log folder's parent, relative to it.
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& entry : fs::recursive_directory_iterator(dir_)) {
      if (entry.is_regular_file()) out.push_back(fs::relative(entry.path(), dir_).string());
    }
    return out;
  }

  fs::path dir_;
  LogStore logs_;
  const api::TaskKey key_{"job_a", 0, 1};
};

TEST_F(LogStoreTest, AppendsAtTheEndAndReadsBackInOrder) {
  ASSERT_TRUE(logs_.append(key_, 0, "hello "));
  ASSERT_TRUE(logs_.append(key_, 6, "world\n"));
  EXPECT_EQ(logs_.size(key_), 12);
  EXPECT_EQ(read(key_, 0, 1000), "hello world\n");
  EXPECT_EQ(logs_.bytes_ingested(), 12);
}

TEST_F(LogStoreTest, WritesOneFilePerAttemptAndTaskUnderTheJobsFolder) {
  ASSERT_TRUE(logs_.append({"job_a", 0, 1}, 0, "a01"));
  ASSERT_TRUE(logs_.append({"job_a", 1, 0}, 0, "a10"));
  ASSERT_TRUE(logs_.append({"job_b", 0, 1}, 0, "b01"));
  logs_.close({"job_a", 0, 1});
  logs_.close({"job_a", 1, 0});
  logs_.close({"job_b", 0, 1});

  std::vector<std::string> found = files();
  std::sort(found.begin(), found.end());
  // Each log, and beside it the times its bytes arrived (LogStore::lines).
  EXPECT_EQ(found, (std::vector<std::string>{"logs/job_a/0.1.log", "logs/job_a/0.1.times", "logs/job_a/1.0.log",
                                             "logs/job_a/1.0.times", "logs/job_b/0.1.log", "logs/job_b/0.1.times"}));
  std::ifstream in(dir_ / "logs/job_a/1.0.log");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "a10");
  // Logs of different tasks do not mix.
  EXPECT_EQ(read({"job_a", 0, 1}, 0, 100), "a01");
  EXPECT_EQ(read({"job_b", 0, 1}, 0, 100), "b01");
}

TEST_F(LogStoreTest, AResendOfBytesAlreadyStoredIsSkipped) {
  ASSERT_TRUE(logs_.append(key_, 0, "abcdef"));
  // The whole chunk again, and a piece from its middle: nothing changes.
  EXPECT_TRUE(logs_.append(key_, 0, "abcdef"));
  EXPECT_TRUE(logs_.append(key_, 2, "cd"));
  EXPECT_EQ(logs_.size(key_), 6);
  EXPECT_EQ(read(key_, 0, 100), "abcdef");
  EXPECT_EQ(logs_.bytes_ingested(), 6);
}

TEST_F(LogStoreTest, AResendThatOverlapsTheEndAddsOnlyTheNewBytes) {
  ASSERT_TRUE(logs_.append(key_, 0, "abcdef"));
  ASSERT_TRUE(logs_.append(key_, 4, "efGHI"));
  EXPECT_EQ(logs_.size(key_), 9);
  EXPECT_EQ(read(key_, 0, 100), "abcdefGHI");
  EXPECT_EQ(logs_.bytes_ingested(), 9);
}

TEST_F(LogStoreTest, AGapIsRefusedWithConflictAndNothingIsWritten) {
  ASSERT_TRUE(logs_.append(key_, 0, "abc"));
  Status s = logs_.append(key_, 5, "xyz");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kConflict);
  EXPECT_THAT(s.error().message, HasSubstr("job_a"));
  EXPECT_EQ(logs_.size(key_), 3);
  EXPECT_EQ(read(key_, 0, 100), "abc");
  EXPECT_EQ(logs_.bytes_ingested(), 3);
  // The missing bytes arrive: the log continues where it was.
  ASSERT_TRUE(logs_.append(key_, 3, "de"));
  ASSERT_TRUE(logs_.append(key_, 5, "xyz"));
  EXPECT_EQ(read(key_, 0, 100), "abcdexyz");
}

// A pipe holding `bytes`, as the log stream's splice leaves it.
class Piped {
 public:
  explicit Piped(const std::string& bytes) {
    EXPECT_EQ(::pipe(fds_), 0);
    EXPECT_EQ(::write(fds_[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  ~Piped() {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  int fd() const { return fds_[0]; }
  // What is still in the pipe.
  std::string left() const {
    int n = 0;
    ::ioctl(fds_[0], FIONREAD, &n);
    std::string out(static_cast<size_t>(n), '\0');
    if (n > 0) {
      EXPECT_EQ(::read(fds_[0], out.data(), out.size()), n);
    }
    return out;
  }

 private:
  int fds_[2] = {-1, -1};
};

TEST_F(LogStoreTest, BytesFromAPipeAreMovedIntoTheLogLikeAppendedOnes) {
  ASSERT_TRUE(logs_.append(key_, 0, "abcdef"));
  {
    Piped piped("efGHI");  // a resend overlapping the end: only the new bytes are taken
    ASSERT_TRUE(logs_.append_from(key_, 4, piped.fd(), 5));
    EXPECT_EQ(piped.left(), "");
  }
  {
    Piped piped("JKL");
    ASSERT_TRUE(logs_.append_from(key_, 9, piped.fd(), 3));
  }
  EXPECT_EQ(read(key_, 0, 100), "abcdefGHIJKL");
  EXPECT_EQ(logs_.size(key_), 12);
  EXPECT_EQ(logs_.bytes_ingested(), 12);
  {
    Piped piped("abc");  // all stored already: nothing taken, the caller drops them
    ASSERT_TRUE(logs_.append_from(key_, 0, piped.fd(), 3));
    EXPECT_EQ(read(key_, 0, 100), "abcdefGHIJKL");
  }
  // A gap is refused as with append, and the bytes stay in the pipe for the caller.
  Piped piped("xyz");
  Status s = logs_.append_from(key_, 20, piped.fd(), 3);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kConflict);
  EXPECT_EQ(piped.left(), "xyz");
  EXPECT_EQ(logs_.size(key_), 12);
}

TEST_F(LogStoreTest, AGapOnAnEmptyLogCreatesNoFile) {
  Status s = logs_.append(key_, 10, "late");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kConflict);
  EXPECT_EQ(logs_.size(key_), 0);
  EXPECT_TRUE(files().empty());
}

TEST_F(LogStoreTest, ReadReturnsTheRangeAskedForBoundedByTheEnd) {
  ASSERT_TRUE(logs_.append(key_, 0, "0123456789"));
  EXPECT_EQ(read(key_, 0, 4), "0123");
  EXPECT_EQ(read(key_, 3, 4), "3456");
  EXPECT_EQ(read(key_, 8, 100), "89");
  EXPECT_EQ(read(key_, 10, 100), "");  // at the end
  EXPECT_EQ(read(key_, 50, 100), "");  // past the end
}

TEST_F(LogStoreTest, AnUnknownLogIsEmptyOpenAndReadsAsNothing) {
  const api::TaskKey unknown{"job_never", 3, 7};
  EXPECT_EQ(logs_.size(unknown), 0);
  EXPECT_FALSE(logs_.closed(unknown));
  auto data = logs_.read(unknown, 0, 100);
  ASSERT_TRUE(data.ok()) << data.error().message;
  EXPECT_EQ(data.value(), "");
  EXPECT_TRUE(files().empty());  // reading makes no file
}

TEST_F(LogStoreTest, CloseMarksTheLogCompleteAndKeepsItsBytes) {
  ASSERT_TRUE(logs_.append(key_, 0, "done\n"));
  EXPECT_FALSE(logs_.closed(key_));
  logs_.close(key_);
  EXPECT_TRUE(logs_.closed(key_));
  EXPECT_EQ(logs_.size(key_), 5);
  EXPECT_EQ(read(key_, 0, 100), "done\n");
  // Other tasks' logs stay open.
  EXPECT_FALSE(logs_.closed({"job_a", 0, 0}));
}

TEST_F(LogStoreTest, WithoutAnIoThreadACloseIsSyncedBeforeItReturns) {
  ASSERT_TRUE(logs_.append(key_, 0, "done\n"));
  logs_.close(key_);
  int acked = 0;
  logs_.after_synced(key_, [&] { acked++; });
  EXPECT_EQ(acked, 1);
}

TEST_F(LogStoreTest, ALogWhoseBytesCouldNotBeMadeDurableIsEmptiedAndTakenAgain) {
  // fsync fails as it does when the disk filled while the kernel wrote the bytes back.
  LogStore logs((dir_ / "full").string(), 128, nullptr, nullptr, [](int) {
    errno = ENOSPC;
    return -1;
  });
  ASSERT_TRUE(logs.append(key_, 0, "eighteen megabytes\n"));
  logs.close(key_);
  int64_t seen_size = -1;
  logs.after_synced(key_, [&] { seen_size = logs.size(key_); });
  // Whoever waits for it sees the log short (and asks its worker again), never whole.
  EXPECT_EQ(seen_size, 0);
  EXPECT_EQ(std::filesystem::file_size(logs.path(key_)), 0u);
  // The resend from the start is taken as a new log.
  ASSERT_TRUE(logs.append(key_, 0, "eighteen megabytes\n"));
  EXPECT_EQ(logs.read(key_, 0, 100).value(), "eighteen megabytes\n");
  EXPECT_EQ(logs.size(key_), 19);
}

TEST_F(LogStoreTest, WithAnIoThreadTheSyncRunsAsideAndItsEndComesThroughTheIoThread) {
  testing::FakeClock io;
  LogStore logs((dir_ / "async").string(), 128, &io);
  ASSERT_TRUE(logs.append(key_, 0, "first\n"));
  logs.close(key_);
  // Readers see the end at once; what waits for the disk runs only on the io thread.
  EXPECT_TRUE(logs.closed(key_));
  EXPECT_EQ(logs.read(key_, 0, 100).value(), "first\n");
  std::vector<std::string> acked;
  logs.after_synced(key_, [&] { acked.push_back("first close"); });
  EXPECT_TRUE(acked.empty());
  // Bytes resent after the end and a second close: a later callback waits for both.
  ASSERT_TRUE(logs.append(key_, 6, "second\n"));
  logs.close(key_);
  logs.after_synced(key_, [&] { acked.push_back("second close"); });
  // A log with no sync under way answers at once.
  logs.after_synced({"job_a", 0, 0}, [&] { acked.push_back("other log"); });
  EXPECT_EQ(acked, std::vector<std::string>{"other log"});
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (acked.size() < 3 && std::chrono::steady_clock::now() < deadline) {
    io.run_ready();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(acked, (std::vector<std::string>{"other log", "first close", "second close"}));
  EXPECT_EQ(logs.read(key_, 0, 100).value(), "first\nsecond\n");
  EXPECT_EQ(logs.open_files(), 0u);
}

TEST_F(LogStoreTest, TailIsTheLastLinesFromTheStartOfALine) {
  std::string text;
  for (int i = 1; i <= 80; ++i) text += "line " + std::to_string(i) + "\n";
  ASSERT_TRUE(logs_.append(key_, 0, text));
  std::string fifty;
  for (int i = 31; i <= 80; ++i) fifty += "line " + std::to_string(i) + "\n";
  EXPECT_EQ(logs_.tail(key_, 8192, 50), fifty);
  // Fewer bytes than the lines: from the first whole line within them.
  EXPECT_EQ(logs_.tail(key_, 20, 50), "line 79\nline 80\n");
  // A last line without its newline counts as a line.
  ASSERT_TRUE(logs_.append(key_, static_cast<int64_t>(text.size()), "no newline"));
  EXPECT_EQ(logs_.tail(key_, 8192, 2), "line 80\nno newline");
}

TEST_F(LogStoreTest, TailOfAnEmptyOrUnknownLogOrOneLongLineIsWhatThereIs) {
  EXPECT_EQ(logs_.tail(key_, 8192, 50), "");
  ASSERT_TRUE(logs_.append(key_, 0, std::string(100, 'x')));
  // No line starts within the last 10 bytes: they are all there is to show.
  EXPECT_EQ(logs_.tail(key_, 10, 50), std::string(10, 'x'));
}

TEST_F(LogStoreTest, ALogPastItsCapDropsItsOldestPartAndSaysSo) {
  logs_.set_max_log_bytes(64 << 10);
  std::string text;
  for (int i = 0; i < 20000; ++i) text += std::to_string(i) + "\n";
  // In frames, as workers send them.
  for (size_t at = 0; at < text.size(); at += 4096) {
    ASSERT_TRUE(logs_.append(key_, static_cast<int64_t>(at), std::string_view(text).substr(at, 4096)));
  }
  EXPECT_EQ(logs_.size(key_), static_cast<int64_t>(text.size()));  // offsets are kept
  const int64_t dropped = logs_.dropped(key_);
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(dropped % 4096, 0);
  EXPECT_LE(logs_.size(key_) - dropped, 64 << 10);
  struct stat st{};
  ASSERT_EQ(::stat((dir_ / "logs/job_a/0.1.log").c_str(), &st), 0);
  EXPECT_LE(st.st_blocks * 512, (64 << 10) + 8192);  // the dropped blocks are freed
  auto page = LogLineReader(logs_).page(key_, 0, 4 << 20, false).value();
  EXPECT_THAT(std::string(page.lines.front().text), HasSubstr("bytes of this task's output were dropped"));
  EXPECT_EQ(page.lines.back().text, "19999");
  // The first line after the marker is whole, and the newest lines are all there.
  const LogLineReader::Line& first = page.lines.at(1);
  EXPECT_GE(first.offset, dropped);
  EXPECT_EQ(text[static_cast<size_t>(first.offset) - 1], '\n');
  EXPECT_EQ(text.substr(static_cast<size_t>(first.offset), first.text.size() + 1), std::string(first.text) + "\n");
  EXPECT_EQ(logs_.tail(key_, 8192, 2), "19998\n19999\n");
  // The cap's place is kept across a restart.
  LogStore reopened((dir_ / "logs").string());
  EXPECT_EQ(reopened.dropped(key_), dropped);
}

TEST_F(LogStoreTest, ALogWrittenBeforeARestartIsReadWithItsSize) {
  ASSERT_TRUE(logs_.append(key_, 0, "before restart\n"));
  logs_.close(key_);
  LogStore reopened((dir_ / "logs").string());
  EXPECT_EQ(reopened.size(key_), 15);
  auto data = reopened.read(key_, 7, 100);
  ASSERT_TRUE(data.ok()) << data.error().message;
  EXPECT_EQ(data.value(), "restart\n");
  // A resend of what the file already holds is skipped; the rest continues it.
  EXPECT_TRUE(reopened.append(key_, 0, "before restart\nafter\n"));
  EXPECT_EQ(reopened.size(key_), 21);
  EXPECT_EQ(reopened.bytes_ingested(), 6);
}

TEST_F(LogStoreTest, WaitFiresAtOnceWhenBytesPastTheOffsetExist) {
  ASSERT_TRUE(logs_.append(key_, 0, "abc"));
  int calls = 0;
  logs_.wait(key_, 2, [&] { ++calls; });
  EXPECT_EQ(calls, 1);
}

TEST_F(LogStoreTest, WaitFiresAtOnceWhenTheLogIsClosed) {
  ASSERT_TRUE(logs_.append(key_, 0, "abc"));
  logs_.close(key_);
  int calls = 0;
  logs_.wait(key_, 3, [&] { ++calls; });
  EXPECT_EQ(calls, 1);
}

TEST_F(LogStoreTest, WaitAtTheEndFiresOnceTheNextBytesArrive) {
  ASSERT_TRUE(logs_.append(key_, 0, "abc"));
  int calls = 0;
  logs_.wait(key_, 3, [&] { ++calls; });
  EXPECT_EQ(calls, 0);
  ASSERT_TRUE(logs_.append({"job_a", 0, 0}, 0, "other task"));  // another log: no wake
  EXPECT_EQ(calls, 0);
  ASSERT_TRUE(logs_.append(key_, 0, "abc"));  // a resend adds nothing: no wake
  EXPECT_EQ(calls, 0);
  ASSERT_TRUE(logs_.append(key_, 3, "d"));
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(logs_.append(key_, 4, "e"));
  EXPECT_EQ(calls, 1);  // a waiter fires once
}

TEST_F(LogStoreTest, WaitFiresWhenTheLogIsClosedWithoutNewBytes) {
  int calls = 0;
  logs_.wait(key_, 0, [&] { ++calls; });
  EXPECT_EQ(calls, 0);
  logs_.close(key_);
  EXPECT_EQ(calls, 1);
}

TEST_F(LogStoreTest, EveryWaiterOfTheLogIsWoken) {
  int first = 0, second = 0;
  logs_.wait(key_, 0, [&] { ++first; });
  logs_.wait(key_, 0, [&] { ++second; });
  ASSERT_TRUE(logs_.append(key_, 0, "x"));
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 1);
}

TEST_F(LogStoreTest, WaitPastTheEndIsNotWokenByBytesThatStopShortOfItsOffset) {
  ASSERT_TRUE(logs_.append(key_, 0, "abc"));
  int calls = 0;
  logs_.wait(key_, 10, [&] { ++calls; });
  ASSERT_TRUE(logs_.append(key_, 3, "de"));  // size 5: still nothing past offset 10
  EXPECT_EQ(calls, 0);
  ASSERT_TRUE(logs_.append(key_, 5, "fghijkl"));  // size 12
  EXPECT_EQ(calls, 1);
}

TEST_F(LogStoreTest, ACancelledWaitIsNeverCalled) {
  int cancelled = 0, kept = 0;
  uint64_t id = logs_.wait(key_, 0, [&] { ++cancelled; });
  logs_.wait(key_, 0, [&] { ++kept; });
  logs_.cancel_wait(id);
  ASSERT_TRUE(logs_.append(key_, 0, "x"));
  logs_.close(key_);
  EXPECT_EQ(cancelled, 0);
  EXPECT_EQ(kept, 1);
}

TEST_F(LogStoreTest, AWaiterMayWaitAgainFromItsCallback) {
  // A long poll answered with no new bytes waits again from inside its callback.
  int calls = 0;
  logs_.wait(key_, 0, [&] {
    ++calls;
    logs_.wait(key_, logs_.size(key_), [&] { ++calls; });
  });
  ASSERT_TRUE(logs_.append(key_, 0, "a"));
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(logs_.append(key_, 1, "b"));
  EXPECT_EQ(calls, 2);
}

TEST_F(LogStoreTest, BytesIngestedCountsNewBytesOfEveryLog) {
  EXPECT_EQ(logs_.bytes_ingested(), 0);
  ASSERT_TRUE(logs_.append({"job_a", 0, 0}, 0, "1234"));
  ASSERT_TRUE(logs_.append({"job_b", 0, 0}, 0, "56"));
  ASSERT_TRUE(logs_.append({"job_a", 0, 0}, 2, "34"));    // resend: not counted
  EXPECT_FALSE(logs_.append({"job_b", 0, 0}, 9, "gap"));  // refused: not counted
  EXPECT_EQ(logs_.bytes_ingested(), 6);
}

TEST(LogStoreFilesTest, KeepsAtMostItsLimitOfFilesOpenAndEveryLogWhole) {
  fs::path dir = fs::temp_directory_path() / ("ag-log-store-files-" + std::to_string(::getpid()));
  {
    LogStore logs((dir / "logs").string(), 8);
    // 100 tasks writing in turn, as a wide gang does.
    for (int round = 0; round < 3; ++round) {
      for (int task = 0; task < 100; ++task) {
        api::TaskKey key{"job_w", 0, task};
        std::string line = "task " + std::to_string(task) + " line " + std::to_string(round) + "\n";
        ASSERT_TRUE(logs.append(key, logs.size(key), line));
        EXPECT_LE(logs.open_files(), 8u);
      }
    }
    for (int task = 0; task < 100; ++task) {
      api::TaskKey key{"job_w", 0, task};
      std::string want;
      for (int round = 0; round < 3; ++round) want += "task " + std::to_string(task) + " line " + std::to_string(round) + "\n";
      auto got = logs.read(key, 0, 1 << 20);
      ASSERT_TRUE(got.ok());
      EXPECT_EQ(got.value(), want);
      logs.close(key);
    }
    EXPECT_EQ(logs.open_files(), 0u);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ag::head
