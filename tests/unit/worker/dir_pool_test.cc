#include "worker/dir_pool.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fs_fixtures.h"
#include "worker/task_folders.h"

namespace fs = std::filesystem;
using ag::testing::TempDir;
using ag::worker::DirPool;

namespace {

ino_t inode_of(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

std::string read_file_or_empty(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

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

TEST(DirPoolTest, OnlyAnEmptyFolderIsKeptByGiveBackIfEmpty) {
  TempDir root;
  DirPool pool((root / "spares").string(), 4, 100);
  fs::create_directories(root / "full");
  write(root / "full" / "model.pt", "weights");
  pool.give_back_if_empty((root / "full").string());
  EXPECT_EQ(read_file_or_empty(root / "full" / "model.pt"), "weights") << "what a task left stays";
  EXPECT_EQ(pool.spares(), 0u);
  fs::create_directories(root / "empty");
  pool.give_back_if_empty((root / "empty").string());
  EXPECT_FALSE(fs::exists(root / "empty"));
  EXPECT_EQ(pool.spares(), 1u);
}

TEST(TaskFoldersTest, AnEmptyWorkingFolderServesALaterTaskAsItsNewOwnersOnly) {
  TempDir root;
  fs::create_directories(root / "work");
  ag::worker::TaskFolders folders(root.path().string());
  const ag::api::TaskKey first{"job_a", 0, 0}, second{"job_b", 1, 2}, kept{"job_c", 0, 0};
  const std::string first_dir = ag::worker::own_working_dir(root.path().string(), first);
  EXPECT_EQ(first_dir, (root / "work" / "job_a.0.0").string());
  const uid_t agent_uid = ::geteuid();
  const gid_t agent_gid = ::getegid();
  ASSERT_EQ(folders.make_working_dir(first_dir, agent_uid, agent_gid, 0755), 0);
  const ino_t made = inode_of(first_dir);
  ::chmod(first_dir.c_str(), 0700);
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(first_dir.c_str(), 65534, 65534), 0);  // as a task user's
  }
  folders.release_working_dir(first);
  EXPECT_FALSE(fs::exists(first_dir));

  const std::string second_dir = ag::worker::own_working_dir(root.path().string(), second);
  // The next task's account (another one where the test may give folders away).
  const uid_t next_uid = ::geteuid() == 0 ? 65533 : agent_uid;
  const gid_t next_gid = ::geteuid() == 0 ? 65533 : agent_gid;
  ASSERT_EQ(folders.make_working_dir(second_dir, next_uid, next_gid, 0700), 0);
  EXPECT_EQ(inode_of(second_dir), made);
  struct stat st {};
  ASSERT_EQ(::stat(second_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, next_uid);
  EXPECT_EQ(st.st_gid, next_gid);
  EXPECT_EQ(folders.make_working_dir(second_dir, agent_uid, agent_gid, 0755), EEXIST);

  // A folder with the user's files in it stays where it is.
  const std::string kept_dir = ag::worker::own_working_dir(root.path().string(), kept);
  ASSERT_EQ(folders.make_working_dir(kept_dir, agent_uid, agent_gid, 0755), 0);
  write(fs::path(kept_dir) / "out.txt", "result");
  folders.release_working_dir(kept);
  EXPECT_EQ(read_file_or_empty(fs::path(kept_dir) / "out.txt"), "result");
}
