// LogLineReader over a real LogStore in a temporary folder, and the merge of several
// tasks' pages (head/logs/log_lines.h) read the way GET /api/jobs/{id}/lines reads them:
// lines with their receive times, pieces of lines longer than a page, where whole lines
// end, --since and --tail starts, and page after page of a merge equal to one read of
// the whole logs whatever the budget.
#include "head/logs/log_line_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "fakes/fake_clock.h"
#include "head/logs/log_lines.h"

namespace ag::head {
namespace {

namespace fs = std::filesystem;

class LogLineReaderTest : public ::testing::Test {
 public:
  ~LogLineReaderTest() override { fs::remove_all(dir_); }

 protected:
  LogLineReaderTest()
      : dir_(fs::temp_directory_path() / ("ag-line-reader-test-" + std::to_string(::getpid()) + "-" +
                                          ::testing::UnitTest::GetInstance()->current_test_info()->name())),
        clock_(1'000'000),
        logs_((dir_ / "logs").string(), 128, nullptr, &clock_),
        reader_(logs_) {}

  api::TaskKey key(int task) const { return {"job_a", 0, task}; }
  void append(int task, const std::string& bytes) {
    ASSERT_TRUE(logs_.append(key(task), logs_.size(key(task)), bytes));
  }
  std::vector<std::string> texts(const LogLineReader::Page& page) {
    std::vector<std::string> out;
    for (const auto& line : page.lines) out.emplace_back(line.text);
    return out;
  }

  fs::path dir_;
  testing::FakeClock clock_;
  LogStore logs_;
  LogLineReader reader_;
};

TEST_F(LogLineReaderTest, LinesCarryTheTimeTheirBytesArrivedAndSurviveARestart) {
  append(1, "one\ntw");
  clock_.advance(50);  // within one note's granularity: the time of the bytes before
  append(1, "o\n");
  clock_.advance(500);
  append(1, "three\npartial");
  auto page = reader_.page(key(1), 0, 4 << 20, false);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->lines.size(), 3u);  // the partial line waits for its newline
  EXPECT_EQ(page->lines[0].text, "one");
  EXPECT_EQ(page->lines[0].time_ms, 1'000'000);
  EXPECT_EQ(page->lines[1].text, "two");
  EXPECT_EQ(page->lines[1].time_ms, 1'000'000);
  EXPECT_EQ(page->lines[2].text, "three");
  EXPECT_EQ(page->lines[2].time_ms, 1'000'550);
  EXPECT_EQ(page->next, 14);
  EXPECT_FALSE(page->more);
  // From the cursor: nothing new until the line is whole, or the log closed.
  EXPECT_TRUE(reader_.page(key(1), 14, 4 << 20, false).value().lines.empty());
  EXPECT_EQ(reader_.span(key(1), false).value().end, 14);
  logs_.close(key(1));
  EXPECT_EQ(reader_.page(key(1), 14, 4 << 20, false).value().lines.at(0).text, "partial");
  EXPECT_EQ(reader_.span(key(1), false).value().end, 21);

  LogStore reopened((dir_ / "logs").string(), 128, nullptr, &clock_);
  LogLineReader again(reopened);
  // The store forgets that the log was closed; the task is over, so its last line
  // without a newline is still a line.
  EXPECT_TRUE(again.page(key(1), 14, 4 << 20, false).value().lines.empty());
  EXPECT_EQ(again.page(key(1), 14, 4 << 20, true).value().lines.at(0).text, "partial");
  EXPECT_EQ(again.span(key(1), true).value().end, 21);
  const auto span = again.span(key(1), false).value();
  // Lines received since 1'000'500: "three" and "partial" (which came with it).
  EXPECT_EQ(again.first_since(key(1), 1'000'500, span).value(), 8);
  EXPECT_EQ(again.first_since(key(1), 1'000'551, span).value(), span.end);
  EXPECT_EQ(again.first_since(key(1), 0, span).value(), 0);
}

TEST_F(LogLineReaderTest, ASinceTimeInsideALineStartsAtTheNextLine) {
  append(0, "begun before ");
  clock_.advance(1000);
  append(0, "and ended after\nnext\n");
  const auto span = reader_.span(key(0), false).value();
  EXPECT_EQ(reader_.first_since(key(0), 1'000'500, span).value(), 29);
}

TEST_F(LogLineReaderTest, ALineLongerThanAPageComesInPiecesAndEveryReadMovesOn) {
  const std::string long_line(100, 'x');
  append(0, "a\n" + long_line + "\nb\n");
  std::vector<std::string> got;
  std::vector<bool> partial;
  int64_t at = 0;
  for (int reads = 0; reads < 100; ++reads) {
    auto page = reader_.page(key(0), at, 30, false).value();
    for (const auto& line : page.lines) {
      got.emplace_back(line.text);
      partial.push_back(line.partial);
    }
    ASSERT_TRUE(page.next > at || !page.more);
    at = page.next;
    if (!page.more) break;
  }
  std::string joined;
  for (size_t i = 0; i < got.size(); ++i) joined += got[i] + (partial[i] ? "" : "\n");
  EXPECT_EQ(joined, "a\n" + long_line + "\nb\n");
  EXPECT_GT(got.size(), 4u);
}

TEST_F(LogLineReaderTest, StartsBeforeCountsLinesBackToTheFloor) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += "line " + std::to_string(i) + "\n";
  append(0, text);
  const auto span = reader_.span(key(0), false).value();
  auto last = reader_.starts_before(key(0), span.first, span.end, 3).value();
  ASSERT_EQ(last.size(), 3u);
  EXPECT_EQ(text.substr(static_cast<size_t>(last[0].offset), 9), "line 297\n");
  auto all = reader_.starts_before(key(0), span.first, span.end, 1000).value();
  ASSERT_EQ(all.size(), 300u);
  EXPECT_EQ(all.front().offset, 0);
  auto before = reader_.starts_before(key(0), 0, all[10].offset, 4).value();
  ASSERT_EQ(before.size(), 4u);
  EXPECT_EQ(before.back().offset, all[9].offset);
  EXPECT_TRUE(reader_.starts_before(key(0), 5, 5, 4).value().empty());
}

using MergedLines = std::vector<std::tuple<int, int64_t, std::string>>;

// Merged lines as (task, time, text), the pieces of a long line joined in the place of
// its first piece.
struct Collected {
  MergedLines lines;
  std::map<int, size_t> pending;  // task -> the entry of its line still in pieces

  void add(const MergedPage& merged) {
    for (const auto& line : merged.lines) {
      auto it = pending.find(line.task_index);
      if (it == pending.end()) {
        lines.emplace_back(line.task_index, line.time_ms, std::string(line.text));
        if (line.partial) pending[line.task_index] = lines.size() - 1;
        continue;
      }
      std::get<2>(lines[it->second]) += std::string(line.text);
      if (!line.partial) pending.erase(it);
    }
  }
};

// Reads `tasks` page after page with `budget` per task from `from`, as the CLI does.
MergedLines read_whole_merge(LogLineReader& reader, const std::vector<int>& tasks, std::vector<int64_t> from,
                             int64_t budget) {
  Collected collected;
  for (int reads = 0; reads < 100000; ++reads) {
    std::vector<TaskLinePage> pages;
    for (size_t i = 0; i < tasks.size(); ++i) {
      pages.push_back({tasks[i], reader.page({"job_a", 0, tasks[i]}, from[i], budget, false).value()});
    }
    MergedPage merged = merge_pages(pages);
    collected.add(merged);
    from = merged.next;
    if (!merged.more) break;
  }
  return collected.lines;
}

TEST_F(LogLineReaderTest, PageAfterPageTheMergeIsWhatOneReadOfTheWholeLogsGives) {
  std::mt19937 rng(7);
  const std::vector<int> tasks = {0, 1, 2, 3};
  for (int step = 0; step < 2000; ++step) {
    const int task = static_cast<int>(rng() % tasks.size());
    std::string line(rng() % 40, static_cast<char>('a' + task));
    if (rng() % 50 == 0) line.assign(300, 'L');  // longer than the smallest budgets
    append(task, line + "\n");
    clock_.advance(static_cast<int64_t>(rng() % 3) * 100);
  }
  for (int t : tasks) logs_.close(key(t));
  const auto whole = read_whole_merge(reader_, tasks, {0, 0, 0, 0}, 1 << 30);
  size_t total_lines = 0;
  for (int t : tasks) total_lines += reader_.page(key(t), 0, 1 << 30, false).value().lines.size();
  ASSERT_EQ(whole.size(), total_lines);
  for (int64_t budget : {64, 100, 257, 1000, 4096}) {
    SCOPED_TRACE(budget);
    EXPECT_EQ(read_whole_merge(reader_, tasks, {0, 0, 0, 0}, budget), whole);
  }
  // Answers made of several windows each, as the head reads them.
  for (auto [answer, window] : {std::pair<int64_t, int64_t>{2000, 64}, {5000, 300}, {1 << 20, 512}}) {
    SCOPED_TRACE(std::to_string(answer) + " in windows of " + std::to_string(window));
    Collected got;
    std::vector<int64_t> from = {0, 0, 0, 0};
    for (int answers = 0; answers < 10000; ++answers) {
      auto merged = read_merged(tasks, from, answer, window, [&](size_t i, int64_t at, int64_t max_bytes) {
        return reader_.page(key(tasks[i]), at, max_bytes, false);
      });
      ASSERT_TRUE(merged.ok());
      got.add(merged.value());
      from = merged->next;
      if (!merged->more) break;
    }
    EXPECT_EQ(got.lines, whole);
  }
}

TEST_F(LogLineReaderTest, TheMergedTailStartsWhereTheLastLinesOfTheMergeBegin) {
  std::mt19937 rng(11);
  const std::vector<int> tasks = {0, 1, 2};
  for (int step = 0; step < 900; ++step) {
    const int task = static_cast<int>(rng() % tasks.size());
    append(task, std::to_string(task) + "-" + std::to_string(step) + "\n");
    clock_.advance(static_cast<int64_t>(rng() % 2) * 100);
  }
  const auto whole = read_whole_merge(reader_, tasks, {0, 0, 0}, 1 << 30);
  std::vector<int64_t> floors, ends;
  for (int t : tasks) {
    const auto span = reader_.span(key(t), false).value();
    floors.push_back(span.first);
    ends.push_back(span.end);
  }
  for (int64_t count : {1, 2, 50, 450, 899, 900, 5000}) {
    SCOPED_TRACE(count);
    auto starts = merged_tail_starts(tasks, floors, ends, count, [&](size_t i, int64_t before, int64_t n) {
      return reader_.starts_before(key(tasks[i]), floors[i], before, n);
    });
    ASSERT_TRUE(starts.ok());
    const auto tail = read_whole_merge(reader_, tasks, starts.value(), 200);
    const size_t expect = std::min<size_t>(static_cast<size_t>(count), whole.size());
    ASSERT_EQ(tail.size(), expect);
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), whole.end() - static_cast<std::ptrdiff_t>(expect)));
  }
}

TEST_F(LogLineReaderTest, RenderedTextOfOneTaskIsItsBytesAndOfSeveralHasRanks) {
  append(0, "a\n" + std::string(50, 'z') + "\nb\n");
  logs_.close(key(0));
  std::string text;
  for (int64_t at = 0;;) {
    auto page = reader_.page(key(0), at, 16, false).value();
    MergedPage merged = merge_pages({{0, page}});
    text += render_text(merged, false, false);
    at = merged.next[0];
    if (!merged.more) break;
  }
  EXPECT_EQ(text, "a\n" + std::string(50, 'z') + "\nb\n");
  append(1, "c\n");
  auto merged = merge_pages({{0, reader_.page(key(0), 0, 1000, false).value()}, {1, reader_.page(key(1), 0, 1000, false).value()}});
  EXPECT_EQ(render_text(merged, true, false), "[rank 0] a\n[rank 0] " + std::string(50, 'z') + "\n[rank 0] b\n[rank 1] c\n");
  EXPECT_EQ(render_text(merged, true, true).substr(0, 34), "1970-01-01T00:16:40.000Z [rank 0] ");
  const std::string jsonl = render_json_lines(merged);
  EXPECT_EQ(jsonl.substr(0, jsonl.find('\n')), R"({"rank":0,"ts":"1970-01-01T00:16:40.000Z","line":"a"})");
}

TEST_F(LogLineReaderTest, JsonLinesEscapeWhatJsonMustAndReplaceBytesThatAreNotUtf8) {
  append(0, "say \"hi\"\\ \t\n\xff\xfe ok\n");
  logs_.close(key(0));
  const std::string jsonl = render_json_lines(merge_pages({{0, reader_.page(key(0), 0, 1000, false).value()}}));
  EXPECT_EQ(jsonl,
            "{\"rank\":0,\"ts\":\"1970-01-01T00:16:40.000Z\",\"line\":\"say \\\"hi\\\"\\\\ \\t\"}\n"
            "{\"rank\":0,\"ts\":\"1970-01-01T00:16:40.000Z\",\"line\":\"\xef\xbf\xbd\xef\xbf\xbd ok\"}\n");
}

}  // namespace
}  // namespace ag::head
