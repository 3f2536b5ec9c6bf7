// PackageStore: the head's content-addressed store of working_dir packages, on a real
// temporary folder.
#include "head/packages/package_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>
#include <vector>
#include <thread>
#include <string>

#include "common/sha256.h"
#include "worker/fs_fixtures.h"

namespace ag::head {
namespace {

namespace fs = std::filesystem;
using ::ag::testing::list_tree;
using ::ag::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kMiB = int64_t{1} << 20;

class PackageStoreTest : public ::testing::Test {
 protected:
  std::string store_dir() const { return (work_ / "packages").string(); }

  TempDir work_;
  PackageStore store_{store_dir(), 4 * kMiB};
};

// Sets the package's last use `age_s` seconds back.
void age(const std::string& dir, const std::string& hash, int64_t age_s) {
  auto path = fs::path(dir) / (hash + ".tar.gz");
  fs::last_write_time(path, fs::last_write_time(path) - std::chrono::seconds(age_s));
}

TEST(PackageStoreQuotaTest, RoomIsMadeFromUnusedPackagesLeastRecentlyUsedFirst) {
  TempDir work;
  const std::string dir = (work / "packages").string();
  PackageStore store(dir, 2 * kMiB, 3 * kMiB);
  std::set<std::string> in_use;
  store.set_in_use([&](const std::string& h) { return in_use.count(h) > 0; });
  std::vector<std::string> hashes;
  for (char c : {'a', 'b', 'c'}) {
    std::string bytes(kMiB, c);
    hashes.push_back(sha256_hex(bytes));
    ASSERT_TRUE(store.put(hashes.back(), bytes).ok());
  }
  age(dir, hashes[0], 300);  // a: oldest, but a job needs it
  age(dir, hashes[1], 200);  // b: the oldest no job needs
  age(dir, hashes[2], 100);
  in_use.insert(hashes[0]);
  EXPECT_EQ(store.stored_bytes(), 3 * kMiB);

  std::string d(kMiB, 'd');
  ASSERT_TRUE(store.put(sha256_hex(d), d).ok());

  EXPECT_TRUE(store.contains(hashes[0]));
  EXPECT_FALSE(store.contains(hashes[1]));
  EXPECT_TRUE(store.contains(hashes[2]));
  EXPECT_EQ(store.stored_bytes(), 3 * kMiB);
}

TEST(PackageStoreQuotaTest, AStoreFullOfPackagesInUseRefusesTheUploadAndKeepsThemAll) {
  TempDir work;
  const std::string dir = (work / "packages").string();
  PackageStore store(dir, 2 * kMiB, 2 * kMiB);
  store.set_in_use([](const std::string&) { return true; });
  std::string a(kMiB, 'a'), b(kMiB, 'b'), c(kMiB, 'c');
  ASSERT_TRUE(store.put(sha256_hex(a), a).ok());
  ASSERT_TRUE(store.put(sha256_hex(b), b).ok());

  Result<bool> stored = store.put(sha256_hex(c), c);

  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.error().code, ErrorCode::kResourceExhausted);
  EXPECT_THAT(stored.error().message, HasSubstr("package store is full"));
  EXPECT_THAT(stored.error().message, HasSubstr("--package-store-gb"));
  EXPECT_TRUE(store.contains(sha256_hex(a)));
  EXPECT_TRUE(store.contains(sha256_hex(b)));
  EXPECT_FALSE(store.contains(sha256_hex(c)));
  EXPECT_EQ(store.count(), 2);  // and no temporary file left behind
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);
}

TEST(PackageStoreQuotaTest, PackagesUnusedForLongerThanTheRetentionAreRemovedUnlessInUse) {
  TempDir work;
  const std::string dir = (work / "packages").string();
  PackageStore store(dir, kMiB);
  std::string old_bytes = "old", kept_bytes = "kept", new_bytes = "new";
  for (const auto* b : {&old_bytes, &kept_bytes, &new_bytes}) ASSERT_TRUE(store.put(sha256_hex(*b), *b).ok());
  age(dir, sha256_hex(old_bytes), 8 * 24 * 3600);
  age(dir, sha256_hex(kept_bytes), 8 * 24 * 3600);
  store.set_in_use([&](const std::string& h) { return h == sha256_hex(kept_bytes); });

  EXPECT_EQ(store.remove_unused(7 * 24 * 3600), 1);

  EXPECT_FALSE(store.contains(sha256_hex(old_bytes)));
  EXPECT_TRUE(store.contains(sha256_hex(kept_bytes)));
  EXPECT_TRUE(store.contains(sha256_hex(new_bytes)));
  // A use makes a package young again.
  age(dir, sha256_hex(new_bytes), 8 * 24 * 3600);
  store.touch(sha256_hex(new_bytes));
  EXPECT_EQ(store.remove_unused(7 * 24 * 3600), 0);
}

// The names in the store's folder that are not whole packages (temporary uploads).
std::vector<std::string> leftovers(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".gz") out.push_back(entry.path().filename().string());
  }
  return out;
}

TEST_F(PackageStoreTest, ARefusedUploadLeavesNoFileEvenWhileItsRequestLives) {
  const std::string bytes = "some package";
  // A wrong hash.
  auto wrong = store_.begin_upload(sha256_hex("other bytes"));
  ASSERT_TRUE(wrong.ok());
  ASSERT_TRUE(wrong.value()->write(bytes.data(), bytes.size()).ok());
  EXPECT_FALSE(store_.finish_upload(*wrong.value()).ok());
  EXPECT_TRUE(leftovers(store_dir()).empty()) << "gone before the answer, the upload object still held";
  // Past the size limit: gone as the write is refused.
  auto big = store_.begin_upload(sha256_hex("x"));
  ASSERT_TRUE(big.ok());
  const std::string chunk(3 * kMiB, 'x');
  ASSERT_TRUE(big.value()->write(chunk.data(), chunk.size()).ok());
  EXPECT_EQ(big.value()->write(chunk.data(), chunk.size()).error().code, ErrorCode::kTooLarge);
  EXPECT_TRUE(leftovers(store_dir()).empty());
  EXPECT_FALSE(store_.finish_upload(*big.value()).ok());
  // A package the store already has.
  ASSERT_TRUE(store_.put(sha256_hex(bytes), bytes).ok());
  auto again = store_.begin_upload(sha256_hex(bytes));
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(again.value()->write(bytes.data(), bytes.size()).ok());
  EXPECT_FALSE(store_.finish_upload(*again.value()).value()) << "nothing new stored";
  EXPECT_TRUE(leftovers(store_dir()).empty());
}

TEST_F(PackageStoreTest, CreatesItsFolder) {
  EXPECT_TRUE(fs::is_directory(store_dir()));
  EXPECT_EQ(store_.count(), 0);
  EXPECT_EQ(store_.max_package_bytes(), 4 * kMiB);
}

TEST_F(PackageStoreTest, PutWithMatchingHashStoresAndReadsBack) {
  const std::string bytes = "package bytes";
  const std::string hash = sha256_hex(bytes);

  Result<bool> stored = store_.put(hash, bytes);

  ASSERT_TRUE(stored.ok()) << stored.error().message;
  EXPECT_TRUE(*stored);
  EXPECT_TRUE(store_.contains(hash));
  EXPECT_EQ(store_.count(), 1);
  Result<std::string> read = store_.read(hash);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(*read, bytes);
}

TEST_F(PackageStoreTest, BinaryBytesRoundTrip) {
  std::string bytes;
  for (int i = 0; i < 200000; ++i) bytes.push_back(static_cast<char>(i * 31));
  bytes += std::string(3, '\0');
  const std::string hash = sha256_hex(bytes);

  ASSERT_TRUE(store_.put(hash, bytes).ok());

  Result<std::string> read = store_.read(hash);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(*read, bytes);
}

TEST_F(PackageStoreTest, EmptyPackageIsStored) {
  const std::string hash = sha256_hex("");

  Result<bool> stored = store_.put(hash, "");

  ASSERT_TRUE(stored.ok()) << stored.error().message;
  EXPECT_TRUE(*stored);
  Result<std::string> read = store_.read(hash);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(*read, "");
}

TEST_F(PackageStoreTest, SecondPutOfTheSamePackageReturnsFalse) {
  const std::string bytes = "same";
  const std::string hash = sha256_hex(bytes);
  ASSERT_TRUE(store_.put(hash, bytes).ok());

  Result<bool> again = store_.put(hash, bytes);

  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_FALSE(*again);
  EXPECT_EQ(store_.count(), 1);
}

TEST_F(PackageStoreTest, CountersGrowWithEveryUpload) {
  const std::string a = "aaaa";
  const std::string b = "bbbbbbbb";
  EXPECT_EQ(store_.uploads(), 0);
  EXPECT_EQ(store_.bytes_uploaded(), 0);

  ASSERT_TRUE(store_.put(sha256_hex(a), a).ok());
  EXPECT_EQ(store_.uploads(), 1);
  EXPECT_EQ(store_.bytes_uploaded(), 4);

  ASSERT_TRUE(store_.put(sha256_hex(a), a).ok());
  EXPECT_EQ(store_.uploads(), 2);
  EXPECT_EQ(store_.bytes_uploaded(), 8);

  ASSERT_TRUE(store_.put(sha256_hex(b), b).ok());
  EXPECT_EQ(store_.uploads(), 3);
  EXPECT_EQ(store_.bytes_uploaded(), 16);
  EXPECT_EQ(store_.count(), 2);
}

TEST_F(PackageStoreTest, HashMismatchIsRefusedNamingBothHashes) {
  const std::string claimed = sha256_hex("what the client packed");
  const std::string actual = sha256_hex("what arrived");

  Result<bool> stored = store_.put(claimed, "what arrived");

  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(stored.error().message, HasSubstr(claimed));
  EXPECT_THAT(stored.error().message, HasSubstr(actual));
  EXPECT_FALSE(store_.contains(claimed));
  EXPECT_FALSE(store_.contains(actual));
  EXPECT_EQ(store_.count(), 0);
  EXPECT_THAT(list_tree(store_dir()), IsEmpty()) << "no file, temporary or not, is left behind";
}

TEST_F(PackageStoreTest, MalformedHashesAreRefused) {
  const std::string bytes = "x";
  const std::string good = sha256_hex(bytes);
  std::string upper = good;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const std::string& hash : {std::string(""), good.substr(0, 63), good + "0", upper, std::string(64, 'g'),
                                  std::string("../../../../etc/passwd"), "sha256:" + good}) {
    Result<bool> stored = store_.put(hash, bytes);

    ASSERT_FALSE(stored.ok()) << hash;
    EXPECT_EQ(stored.error().code, ErrorCode::kInvalidArgument) << hash;
    EXPECT_THAT(stored.error().message, HasSubstr("64 lowercase hex")) << hash;
  }
  EXPECT_EQ(store_.count(), 0);
  EXPECT_EQ(store_.uploads(), 0);
}

TEST_F(PackageStoreTest, OverTheLimitIsTooLargeWithSizesInMiB) {
  const std::string bytes(6 * kMiB, 'x');

  Result<bool> stored = store_.put(sha256_hex(bytes), bytes);

  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.error().code, ErrorCode::kTooLarge);
  EXPECT_THAT(stored.error().message, HasSubstr("6.0 MiB"));
  EXPECT_THAT(stored.error().message, HasSubstr("4.0 MiB"));
  EXPECT_EQ(store_.count(), 0);
  EXPECT_EQ(store_.uploads(), 0);
}

TEST_F(PackageStoreTest, ExactlyAtTheLimitIsStored) {
  const std::string bytes(4 * kMiB, 'x');

  Result<bool> stored = store_.put(sha256_hex(bytes), bytes);

  ASSERT_TRUE(stored.ok()) << stored.error().message;
  EXPECT_TRUE(*stored);
}

TEST_F(PackageStoreTest, ReadOfAnUnknownHashIsNotFound) {
  Result<std::string> read = store_.read(sha256_hex("never stored"));

  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(read.error().message, HasSubstr(sha256_hex("never stored")));
}

TEST_F(PackageStoreTest, ReadAndContainsRejectPathsDisguisedAsHashes) {
  ::ag::testing::write_file(work_ / "secret.tar.gz", "secret");

  EXPECT_FALSE(store_.contains("../secret"));
  Result<std::string> read = store_.read("../secret");
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().code, ErrorCode::kNotFound);
}

TEST_F(PackageStoreTest, PackagesSurviveARestart) {
  const std::string bytes = "kept on disk";
  const std::string hash = sha256_hex(bytes);
  ASSERT_TRUE(store_.put(hash, bytes).ok());

  PackageStore reopened(store_dir(), 4 * kMiB);

  EXPECT_TRUE(reopened.contains(hash));
  EXPECT_EQ(reopened.count(), 1);
  Result<std::string> read = reopened.read(hash);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(*read, bytes);
  Result<bool> again = reopened.put(hash, bytes);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}

TEST_F(PackageStoreTest, StoresOneFilePerPackageNamedByHash) {
  const std::string bytes = "one";
  const std::string hash = sha256_hex(bytes);

  ASSERT_TRUE(store_.put(hash, bytes).ok());

  EXPECT_THAT(list_tree(store_dir()), ElementsAre(hash + ".tar.gz"));
}

// Regression: the size in the kTooLarge message is rounded down to whole MiB, so a package
// just over the limit reads "package is 4 MiB; the head's limit is 4 MiB", and with
// a limit under 1 MiB both read "0 MiB": the message a user must act on contradicts
// itself. It should show enough precision (or bytes) to tell the two apart.
TEST_F(PackageStoreTest, TooLargeMessageTellsTheSizesApartJustOverTheLimit) {
  const std::string bytes(4 * kMiB + 1, 'x');

  Result<bool> stored = store_.put(sha256_hex(bytes), bytes);

  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.error().code, ErrorCode::kTooLarge);
  EXPECT_THAT(stored.error().message, ::testing::Not(HasSubstr("package is 4 MiB; the head's limit is 4 MiB")));
}

TEST_F(PackageStoreTest, UploadInPiecesStoresTheWhole) {
  std::string bytes;
  for (int i = 0; i < 300000; ++i) bytes.push_back(static_cast<char>(i * 13));
  const std::string hash = sha256_hex(bytes);

  auto upload = store_.begin_upload(hash);
  ASSERT_TRUE(upload.ok()) << upload.error().message;
  for (size_t at = 0; at < bytes.size(); at += 70000) {
    ASSERT_TRUE((*upload)->write(bytes.data() + at, std::min<size_t>(70000, bytes.size() - at)).ok());
  }
  EXPECT_FALSE(store_.contains(hash)) << "not visible before it is finished";
  Result<bool> stored = store_.finish_upload(**upload);

  ASSERT_TRUE(stored.ok()) << stored.error().message;
  EXPECT_TRUE(*stored);
  EXPECT_EQ((*upload)->size(), static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(*store_.read(hash), bytes);
  EXPECT_EQ(*store_.file(hash), store_dir() + "/" + hash + ".tar.gz");
  EXPECT_EQ(store_.bytes_uploaded(), static_cast<int64_t>(bytes.size()));
}

TEST_F(PackageStoreTest, UploadDroppedUnfinishedLeavesNothing) {
  const std::string hash = sha256_hex("never finished");
  {
    auto upload = store_.begin_upload(hash);
    ASSERT_TRUE(upload.ok());
    ASSERT_TRUE((*upload)->write("never", 5).ok());
    EXPECT_THAT(list_tree(store_dir()), ::testing::SizeIs(1)) << "the temporary file";
  }
  EXPECT_THAT(list_tree(store_dir()), IsEmpty());
  EXPECT_FALSE(store_.contains(hash));
  EXPECT_EQ(store_.uploads(), 0);
}

TEST_F(PackageStoreTest, UploadPastTheLimitFailsAtTheWriteThatCrossesIt) {
  const std::string piece(3 * kMiB, 'y');
  auto upload = store_.begin_upload(sha256_hex(piece + piece));
  ASSERT_TRUE(upload.ok());

  ASSERT_TRUE((*upload)->write(piece.data(), piece.size()).ok());
  Status second = (*upload)->write(piece.data(), piece.size());

  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, ErrorCode::kTooLarge);
  EXPECT_THAT(second.error().message, HasSubstr("4.0 MiB"));
  Result<bool> stored = store_.finish_upload(**upload);
  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.error().code, ErrorCode::kTooLarge);
  upload->reset();
  EXPECT_THAT(list_tree(store_dir()), IsEmpty());
}

TEST_F(PackageStoreTest, UploadWithMismatchedBytesIsRefusedAndRemoved) {
  const std::string claimed = sha256_hex("claimed");
  auto upload = store_.begin_upload(claimed);
  ASSERT_TRUE(upload.ok());
  ASSERT_TRUE((*upload)->write("other", 5).ok());

  Result<bool> stored = store_.finish_upload(**upload);

  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(stored.error().message, HasSubstr(sha256_hex("other")));
  upload->reset();
  EXPECT_THAT(list_tree(store_dir()), IsEmpty());
}

TEST_F(PackageStoreTest, TwoUploadsOfTheSamePackageAtOnceStoreItOnce) {
  const std::string bytes = "same bytes from two clients";
  const std::string hash = sha256_hex(bytes);
  auto first = store_.begin_upload(hash);
  auto second = store_.begin_upload(hash);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE((*first)->write(bytes.data(), bytes.size()).ok());
  ASSERT_TRUE((*second)->write(bytes.data(), bytes.size()).ok());

  EXPECT_TRUE(*store_.finish_upload(**second));
  EXPECT_FALSE(*store_.finish_upload(**first));
  first->reset();
  second->reset();

  EXPECT_THAT(list_tree(store_dir()), ElementsAre(hash + ".tar.gz"));
  EXPECT_EQ(*store_.read(hash), bytes);
}

TEST_F(PackageStoreTest, UploadsLeftByAStoppedHeadAreRemovedAtStart) {
  const std::string hash = sha256_hex("interrupted");
  auto upload = store_.begin_upload(hash);
  ASSERT_TRUE(upload.ok());
  ASSERT_TRUE((*upload)->write("inter", 5).ok());
  ASSERT_THAT(list_tree(store_dir()), ::testing::SizeIs(1));

  PackageStore restarted(store_dir(), 4 * kMiB);  // as a head started on the same dir

  EXPECT_THAT(list_tree(store_dir()), IsEmpty());
  EXPECT_FALSE(restarted.contains(hash));
}

TEST_F(PackageStoreTest, FinishInTheBackgroundAnswersOnTheIoContext) {
  boost::asio::io_context io;
  const std::string bytes(3 * kMiB, 'q');
  const std::string hash = sha256_hex(bytes);
  auto upload = store_.begin_upload(hash);
  ASSERT_TRUE(upload.ok());
  ASSERT_TRUE((*upload)->write(bytes.data(), bytes.size()).ok());
  std::optional<Result<bool>> answer;
  auto answered_on = std::this_thread::get_id();

  store_.finish_upload_async(io, *upload, [&](Result<bool> stored) {
    answer = stored;
    answered_on = std::this_thread::get_id();
  });
  EXPECT_FALSE(answer.has_value()) << "the sync runs on the store's thread";
  auto busy = boost::asio::make_work_guard(io);  // the answer is posted from that thread later
  io.run_one_for(std::chrono::seconds(10));

  ASSERT_TRUE(answer.has_value());
  ASSERT_TRUE(answer->ok()) << answer->error().message;
  EXPECT_TRUE(answer->value());
  EXPECT_EQ(answered_on, std::this_thread::get_id());
  EXPECT_EQ(*store_.read(hash), bytes);
  upload->reset();
  EXPECT_THAT(list_tree(store_dir()), ElementsAre(hash + ".tar.gz"));
}

TEST_F(PackageStoreTest, FinishInTheBackgroundOfAMismatchAnswersAtOnce) {
  boost::asio::io_context io;
  auto upload = store_.begin_upload(sha256_hex("claimed"));
  ASSERT_TRUE(upload.ok());
  ASSERT_TRUE((*upload)->write("other", 5).ok());
  std::optional<Result<bool>> answer;

  store_.finish_upload_async(io, *upload, [&](Result<bool> stored) { answer = stored; });

  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace ag::head
