#include "worker/dir_pool.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "fs_fixtures.h"

namespace fs = std::filesystem;
using ag::testing::TempDir;
using ag::worker::DirPool;

namespace {

ino_t inode_of(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST(DirPoolTest, AFolderGivenBackIsEmptiedAndUsedAgain) {
  TempDir root;
  DirPool pool((root / "spares").string(), 4, 100);
  ASSERT_EQ(pool.take((root / "a").string()), 0);
  EXPECT_TRUE(fs::is_directory(root / "a"));
  write(root / "a" / "output.log", "hello");
  write(root / "a" / "exit", "exit 0\n");
  const ino_t made = inode_of(root / "a");

  pool.give_back((root / "a").string());
  EXPECT_FALSE(fs::exists(root / "a"));
  EXPECT_EQ(pool.spares(), 1u);

  ASSERT_EQ(pool.take((root / "b").string()), 0);
  EXPECT_EQ(inode_of(root / "b"), made) << "the spare, renamed";
  EXPECT_TRUE(fs::is_empty(root / "b")) << "nothing of the last task's is left";
  EXPECT_EQ(pool.spares(), 0u);
}

TEST(DirPoolTest, SparesBeyondTheCapAndFoldersHoldingFoldersAreRemoved) {
  TempDir root;
  DirPool pool((root / "spares").string(), 1, 100);
  for (const char* name : {"a", "b", "c"}) ASSERT_EQ(pool.take((root / name).string()), 0);
  fs::create_directories(root / "c" / "inner");
  pool.give_back((root / "c").string());
  EXPECT_FALSE(fs::exists(root / "c"));
  EXPECT_EQ(pool.spares(), 0u) << "a folder with a folder in it is not a spare";
  pool.give_back((root / "a").string());
  pool.give_back((root / "b").string());
  EXPECT_FALSE(fs::exists(root / "a"));
  EXPECT_FALSE(fs::exists(root / "b"));
  EXPECT_EQ(pool.spares(), 1u);
  EXPECT_EQ(std::distance(fs::directory_iterator(root / "spares"), fs::directory_iterator()), 1);
}

TEST(DirPoolTest, ASpareThatWentIsReplacedByANewFolder) {
  TempDir root;
  DirPool pool((root / "spares").string(), 4, 100);
  ASSERT_EQ(pool.take((root / "a").string()), 0);
  pool.give_back((root / "a").string());
  fs::remove_all(root / "spares");
  fs::create_directories(root / "spares");
  EXPECT_EQ(pool.take((root / "b").string()), 0);
  EXPECT_TRUE(fs::is_directory(root / "b"));
  EXPECT_EQ(pool.spares(), 0u);
}

TEST(DirPoolTest, TakingAFolderThatIsThereFailsAndKeepsTheSpare) {
  TempDir root;
  DirPool pool((root / "spares").string(), 4, 100);
  ASSERT_EQ(pool.take((root / "a").string()), 0);
  pool.give_back((root / "a").string());
  fs::create_directories(root / "busy");
  write(root / "busy" / "file", "x");
  EXPECT_EQ(pool.take((root / "busy").string()), EEXIST);
  EXPECT_EQ(pool.spares(), 1u);
  EXPECT_EQ(pool.take((root / "missing-parent" / "x").string()), ENOENT);
}

TEST(DirPoolTest, WhatAnEarlierAgentLeftAmongTheSparesGoes) {
  TempDir root;
  fs::create_directories(root / "spares" / "7");
  write(root / "spares" / "7" / "output.log", "old");
  DirPool pool((root / "spares").string(), 4, 100);
  EXPECT_TRUE(fs::is_directory(root / "spares"));
  EXPECT_TRUE(fs::is_empty(root / "spares"));
  EXPECT_EQ(pool.spares(), 0u);
}

TEST(DirPoolTest, AFolderServesItsUsesThenGoes) {
  TempDir root;
  DirPool pool((root / "spares").string(), 4, 3);
  ASSERT_EQ(pool.take((root / "t0").string()), 0);
  const ino_t first = inode_of(root / "t0");
  pool.give_back((root / "t0").string());
  for (int i = 1; i < 3; ++i) {
    const std::string path = (root / ("t" + std::to_string(i))).string();
    ASSERT_EQ(pool.take(path), 0);
    EXPECT_EQ(inode_of(path), first) << "use " << i + 1;
    pool.give_back(path);
  }
  EXPECT_EQ(pool.spares(), 0u) << "its third use was its last";
  EXPECT_FALSE(fs::exists(root / "t2"));
  ASSERT_EQ(pool.take((root / "t3").string()), 0) << "a new folder";

  // A folder the pool did not make (a task an earlier agent left) is removed, not kept.
  fs::create_directories(root / "adopted");
  pool.give_back((root / "adopted").string());
  EXPECT_FALSE(fs::exists(root / "adopted"));
  EXPECT_EQ(pool.spares(), 0u);
}
