// StackDumps' task folders: named at arm(), made by the task's first Python process,
// removed by forget() whether this agent armed the task or an earlier one did.
#include "worker/stack_dumps.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>

#include "worker/fs_fixtures.h"

namespace ag::worker {
namespace {

namespace fs = std::filesystem;
using ::ag::testing::TempDir;

class StackDumpsTest : public ::testing::Test {
 protected:
  StackDumpsTest() {
    auto made = StackDumps::create(io_, tmp_.path().string());
    EXPECT_TRUE(made.ok()) << made.error().message;
    if (made.ok()) dumps_ = std::move(made.value());
  }
  // What the task's first Python process does: makes the folder it was named, and
  // writes into it.
  static void python_makes(const std::string& dir) {
    fs::create_directories(dir);
    std::ofstream(dir + "/1234.txt") << "Thread 0x1 (most recent call first):\n";
  }

  TempDir tmp_;
  boost::asio::io_context io_;
  std::unique_ptr<StackDumps> dumps_;
};

TEST_F(StackDumpsTest, AnArmedTasksFolderGoesWhenItIsForgotten) {
  ASSERT_NE(dumps_, nullptr);
  const api::TaskKey task{"job_0123456789ab", 0, 1};
  std::map<std::string, std::string> env;
  ASSERT_TRUE(dumps_->arm(task, std::nullopt, env).ok());
  const std::string dir = env.at("AG_STACK_DIR");
  EXPECT_EQ(dir.rfind(tmp_.path().string() + "/stacks/u" + std::to_string(::geteuid()) + "/", 0), 0u) << dir;

  dumps_->forget(task);  // no Python process made it: nothing to remove
  EXPECT_FALSE(fs::exists(dir));

  ASSERT_TRUE(dumps_->arm(task, std::nullopt, env).ok());  // launched again
  python_makes(dir);
  dumps_->forget(task);
  EXPECT_FALSE(fs::exists(dir));
}

TEST_F(StackDumpsTest, AFolderAnEarlierAgentNamedIsFoundInItsUsersFolder) {
  ASSERT_NE(dumps_, nullptr);
  const api::TaskKey task{"job_ba9876543210", 2, 0};
  const std::string dir = (tmp_ / "stacks/u4242" / task.job_id).string() + ".2.0";
  python_makes(dir);

  dumps_->forget(task);  // not armed by this agent: looked for in every user's folder

  EXPECT_FALSE(fs::exists(dir));
  EXPECT_TRUE(fs::exists(tmp_ / "stacks/u4242"));
}

}  // namespace
}  // namespace ag::worker
