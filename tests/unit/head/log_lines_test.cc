// merge_pages: several tasks' lines in the order the head received them (ties by task
// index, then place in the log), each task's cursor, and the lines held back behind a
// page that stopped at its budget.
#include "head/logs/log_lines.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace ag::head {
namespace {

// A page of lines (time, text) from offset 0, `next` after them.
LogLineReader::Page page(const std::vector<std::pair<int64_t, std::string>>& lines, bool more = false) {
  LogLineReader::Page p;
  std::string bytes;
  for (const auto& [time, text] : lines) bytes += text + "\n";
  p.bytes = std::make_shared<const std::string>(bytes);
  int64_t offset = 0;
  for (const auto& [time, text] : lines) {
    p.lines.push_back({offset, time, std::string_view(*p.bytes).substr(static_cast<size_t>(offset), text.size())});
    offset += static_cast<int64_t>(text.size()) + 1;
  }
  p.next = offset;
  p.more = more;
  return p;
}

TEST(MergePages, OrdersByTimeThenTaskThenPlaceAndKeepsEachCursor) {
  std::vector<TaskLinePage> pages = {
      {0, page({{100, "a0"}, {300, "c0"}, {300, "d0"}})},
      {1, page({{100, "a1"}, {200, "b1"}})},
  };
  nlohmann::json merged = to_json(merge_pages(pages));
  EXPECT_EQ(merged["lines"], nlohmann::json::parse(
                                 R"([[0,100,"a0"],[1,100,"a1"],[1,200,"b1"],[0,300,"c0"],[0,300,"d0"]])"));
  EXPECT_EQ(merged["next"], nlohmann::json::parse("[9, 6]"));
  EXPECT_FALSE(merged["more"].get<bool>());
}

TEST(MergePages, LinesPastAPageCutAtItsBudgetWaitForTheNextRead) {
  // Task 1 stopped at its budget after a line of time 200: task 0's lines after 200
  // may come after task 1's next lines, so they wait; its cursor stays at the first.
  std::vector<TaskLinePage> pages = {
      {0, page({{100, "a0"}, {200, "b0"}, {300, "c0"}, {400, "d0"}})},
      {1, page({{100, "a1"}, {200, "b1"}}, true)},
  };
  MergedPage merged = merge_pages(pages);
  nlohmann::json json = to_json(merged);
  EXPECT_EQ(json["lines"], nlohmann::json::parse(R"([[0,100,"a0"],[1,100,"a1"],[0,200,"b0"],[1,200,"b1"]])"));
  EXPECT_EQ(json["next"], nlohmann::json::parse("[6, 6]"));  // task 0 from "c0"
  EXPECT_TRUE(merged.more);
  // A tie at the horizon's time: a lower task index goes first, a higher one waits.
  pages = {{0, page({{200, "x0"}}, true)}, {1, page({{200, "x1"}})}};
  EXPECT_EQ(to_json(merge_pages(pages))["lines"], nlohmann::json::parse(R"([[0,200,"x0"]])"));
}

TEST(MergePages, NothingToMerge) {
  MergedPage merged = merge_pages({});
  EXPECT_TRUE(merged.lines.empty());
  EXPECT_FALSE(merged.more);
}

}  // namespace
}  // namespace ag::head
