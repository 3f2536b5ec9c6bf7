// merge_lines: several tasks' lines in the order the head received them (ties by task
// index, then place in the log), the tail of the merge, and each task's cursor.
#include "head/log_lines.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace ag::head {
namespace {

LogStore::LinePage page(std::vector<std::pair<int64_t, std::string>> lines, int64_t next, bool truncated = false) {
  LogStore::LinePage p;
  int64_t offset = 0;
  for (auto& [time, text] : lines) {
    p.lines.push_back({offset, time, text});
    offset += static_cast<int64_t>(text.size()) + 1;
  }
  p.next = next;
  p.truncated = truncated;
  return p;
}

TEST(MergeLines, OrdersByTimeThenTaskThenPlaceAndKeepsEachCursor) {
  std::vector<TaskLinePage> pages = {
      {0, page({{100, "a0"}, {300, "c0"}, {300, "d0"}}, 9)},
      {1, page({{100, "a1"}, {200, "b1"}}, 6, true)},
  };
  nlohmann::json merged = merge_lines(pages, 0);
  EXPECT_EQ(merged["lines"], nlohmann::json::parse(
                                 R"([[0,100,"a0"],[1,100,"a1"],[1,200,"b1"],[0,300,"c0"],[0,300,"d0"]])"));
  EXPECT_EQ(merged["next"], nlohmann::json::parse("[9, 6]"));
  EXPECT_TRUE(merged["truncated"].get<bool>());
}

TEST(MergeLines, TailIsTheLastLinesOfTheMerge) {
  std::vector<TaskLinePage> pages = {
      {3, page({{100, "x"}, {400, "z"}}, 4)},
      {5, page({{200, "y"}}, 2)},
  };
  nlohmann::json merged = merge_lines(pages, 2);
  EXPECT_EQ(merged["lines"], nlohmann::json::parse(R"([[5,200,"y"],[3,400,"z"]])"));
  EXPECT_FALSE(merged["truncated"].get<bool>());
  EXPECT_TRUE(merge_lines({}, 5)["lines"].empty());
}

}  // namespace
}  // namespace ag::head
