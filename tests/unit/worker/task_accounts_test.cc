// TaskAccounts: each user an account of their own (as root), kept across restarts, a
// private home; --task-user shared; a worker not root runs tasks as itself; a kept
// file that is not ours is refused rather than overwritten.
#include "worker/task_accounts.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ag::worker {
namespace {

namespace fs = std::filesystem;

class TaskAccountsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ag-task-accounts-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST(TaskAccountNameTest, SaysWhoseTasksTheyAreInCharactersEveryToolTakes) {
  EXPECT_EQ(task_account_name("alice"), "ag-alice");
  EXPECT_EQ(task_account_name("bob smith/../x"), "ag-bob_smith_.._x");
  EXPECT_EQ(task_account_name(""), "ag-anonymous");
  EXPECT_EQ(task_account_name(std::string(100, 'a')).size(), 32u);
}

TEST_F(TaskAccountsTest, AsRootEachUserGetsANumberAndAPrivateHomeKeptAcrossRestarts) {
  if (::geteuid() != 0) GTEST_SKIP() << "accounts of their own need a worker running as root";
  std::string note;
  auto accounts = TaskAccounts::open(dir_.string(), "", &note);
  ASSERT_TRUE(accounts.ok()) << accounts.error().message;
  EXPECT_TRUE((*accounts)->per_user());
  EXPECT_NE(note.find("an account of their own"), std::string::npos) << note;
  auto alice = (*accounts)->for_owner("alice");
  auto bob = (*accounts)->for_owner("bob");
  ASSERT_TRUE(alice.ok() && bob.ok());
  ASSERT_TRUE(alice.value() && bob.value());
  EXPECT_NE(alice.value()->uid, bob.value()->uid);
  EXPECT_GE(alice.value()->uid, kFirstTaskUid);
  EXPECT_EQ(alice.value()->gid, alice.value()->uid);  // a group of its own: nothing shared through groups
  EXPECT_EQ(alice.value()->name, "ag-alice");
  EXPECT_EQ(::getpwuid(alice.value()->uid), nullptr) << "a number a local account holds";
  struct stat home {};
  ASSERT_EQ(::stat(alice.value()->home.c_str(), &home), 0);
  EXPECT_EQ(home.st_uid, alice.value()->uid);
  EXPECT_EQ(home.st_mode & 07777, 0700u);
  struct stat homes {};
  ASSERT_EQ(::stat((dir_ / "homes").c_str(), &homes), 0);
  EXPECT_EQ(homes.st_mode & 07777, 0711u);  // crossed, never listed

  auto again = TaskAccounts::open(dir_.string(), "", &note);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->for_owner("bob").value()->uid, bob.value()->uid);
  EXPECT_EQ((*again)->for_owner("alice").value()->uid, alice.value()->uid);
  auto carol = (*again)->for_owner("carol");
  ASSERT_TRUE(carol.ok());
  EXPECT_NE(carol.value()->uid, alice.value()->uid);
  EXPECT_NE(carol.value()->uid, bob.value()->uid);
}

TEST_F(TaskAccountsTest, ATaskUserRunsEveryonesTasks) {
  if (::geteuid() != 0) GTEST_SKIP() << "another account needs a worker running as root";
  std::string note;
  auto accounts = TaskAccounts::open(dir_.string(), "nobody", &note);
  ASSERT_TRUE(accounts.ok()) << accounts.error().message;
  EXPECT_FALSE((*accounts)->per_user());
  EXPECT_NE(note.find("jobs of different users can read each other's files"), std::string::npos) << note;
  EXPECT_EQ((*accounts)->for_owner("alice").value()->name, "nobody");
  EXPECT_EQ((*accounts)->for_owner("bob").value()->name, "nobody");
  EXPECT_FALSE(fs::exists(dir_ / "task-accounts.json"));
}

TEST_F(TaskAccountsTest, ALostOrBrokenListGivesNoUsersNumberToAnother) {
  if (::geteuid() != 0) GTEST_SKIP() << "accounts of their own need a worker running as root";
  std::string note;
  uid_t alice = 0;
  {
    auto accounts = TaskAccounts::open(dir_.string(), "", &note);
    ASSERT_TRUE(accounts.ok());
    alice = (*accounts)->for_owner("alice").value()->uid;
  }
  struct stat list {};
  ASSERT_EQ(::stat((dir_ / "task-accounts.json").c_str(), &list), 0);
  EXPECT_EQ(list.st_mode & 07777, 0600u) << "user names are the worker's to read";
  // A list cut short by a crash: each home's owner, kept beside it, tells.
  std::ofstream(dir_ / "task-accounts.json", std::ios::trunc) << "{\"acc";
  auto accounts = TaskAccounts::open(dir_.string(), "", &note);
  ASSERT_TRUE(accounts.ok()) << accounts.error().message;
  EXPECT_EQ((*accounts)->for_owner("alice").value()->uid, alice);
  EXPECT_NE((*accounts)->for_owner("bob").value()->uid, alice);
  // A list gone with a home left behind: its number is not given out again.
  fs::remove(dir_ / "task-accounts.json");
  fs::remove(dir_ / "homes" / (std::to_string(alice) + ".owner"));
  accounts = TaskAccounts::open(dir_.string(), "", &note);
  ASSERT_TRUE(accounts.ok());
  EXPECT_NE((*accounts)->for_owner("carol").value()->uid, alice);
}

TEST_F(TaskAccountsTest, AListThatDisagreesWithTheHomesIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "accounts of their own need a worker running as root";
  std::ofstream(dir_ / "task-accounts.json") << "{\"accounts\": {\"alice\": 12}}";
  std::string note;
  auto accounts = TaskAccounts::open(dir_.string(), "", &note);
  ASSERT_FALSE(accounts.ok());
  EXPECT_NE(accounts.error().message.find("outside the range"), std::string::npos) << accounts.error().message;
  const uid_t uid = kFirstTaskUid + 7;
  std::ofstream(dir_ / "task-accounts.json", std::ios::trunc)
      << "{\"accounts\": {\"bob\": " << uid << "}}";
  fs::create_directories(dir_ / "homes");
  std::ofstream(dir_ / "homes" / (std::to_string(uid) + ".owner")) << "alice";
  accounts = TaskAccounts::open(dir_.string(), "", &note);
  ASSERT_FALSE(accounts.ok());
  EXPECT_NE(accounts.error().message.find("belongs to user 'alice'"), std::string::npos) << accounts.error().message;
}

TEST_F(TaskAccountsTest, NotRootTasksRunAsTheWorkersOwnUser) {
  if (::geteuid() == 0) GTEST_SKIP() << "as root every task gets an account";
  std::string note;
  auto accounts = TaskAccounts::open(dir_.string(), "", &note);
  ASSERT_TRUE(accounts.ok());
  EXPECT_FALSE((*accounts)->switches());
  EXPECT_FALSE((*accounts)->for_owner("alice").value());
}

}  // namespace
}  // namespace ag::worker
