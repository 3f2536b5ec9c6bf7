// Turns: changes under one key run one at a time in the order asked; other keys do not
// wait; changes that end at once run in a loop.
#include "common/turns.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ag {
namespace {

TEST(TurnsTest, AChangeStartsOnlyOnceTheOneBeforeItUnderItsKeyHasEnded) {
  Turns turns;
  std::vector<std::string> started;
  std::vector<Turns::Ended> ends;
  for (const char* name : {"a1", "a2", "a3"}) {
    turns.take("a", [&, name](Turns::Ended ended) {
      started.push_back(name);
      ends.push_back(std::move(ended));
    });
  }
  EXPECT_EQ(started, (std::vector<std::string>{"a1"}));
  EXPECT_EQ(turns.pending(), 3u);
  ends[0]();
  EXPECT_EQ(started, (std::vector<std::string>{"a1", "a2"}));
  ends[0]();  // a second call of the same `ended` changes nothing
  EXPECT_EQ(started, (std::vector<std::string>{"a1", "a2"}));
  ends[1]();
  ends[2]();
  EXPECT_EQ(started, (std::vector<std::string>{"a1", "a2", "a3"}));
  EXPECT_EQ(turns.pending(), 0u);
}

TEST(TurnsTest, ChangesUnderOtherKeysDoNotWait) {
  Turns turns;
  std::vector<std::string> started;
  Turns::Ended end_a;
  turns.take("a", [&](Turns::Ended ended) {
    started.push_back("a");
    end_a = std::move(ended);
  });
  turns.take("b", [&](Turns::Ended) { started.push_back("b"); });
  turns.take("a", [&](Turns::Ended ended) {
    started.push_back("a again");
    ended();
  });
  EXPECT_EQ(started, (std::vector<std::string>{"a", "b"}));
  end_a();
  EXPECT_EQ(started, (std::vector<std::string>{"a", "b", "a again"}));
  EXPECT_EQ(turns.pending(), 1u);  // "b" never ended
}

TEST(TurnsTest, ManyChangesThatEndAtOnceRunInOrderWithoutDeepeningTheStack) {
  Turns turns;
  Turns::Ended hold;
  turns.take("k", [&](Turns::Ended ended) { hold = std::move(ended); });
  std::vector<int> order;
  for (int i = 0; i < 100000; ++i) {
    turns.take("k", [&, i](Turns::Ended ended) {
      order.push_back(i);
      ended();
    });
  }
  EXPECT_TRUE(order.empty());
  hold();
  ASSERT_EQ(order.size(), 100000u);
  for (int i = 0; i < 100000; ++i) ASSERT_EQ(order[i], i);
  EXPECT_EQ(turns.pending(), 0u);
}

TEST(TurnsTest, AChangeAskedFromInsideAnEndingChangeTakesItsTurnAfterIt) {
  Turns turns;
  std::vector<std::string> log;
  turns.take("k", [&](Turns::Ended ended) {
    log.push_back("first starts");
    turns.take("k", [&](Turns::Ended next_ended) {
      log.push_back("second starts");
      next_ended();
    });
    log.push_back("first ends");
    ended();
  });
  EXPECT_EQ(log, (std::vector<std::string>{"first starts", "first ends", "second starts"}));
  EXPECT_EQ(turns.pending(), 0u);
}

}  // namespace
}  // namespace ag
