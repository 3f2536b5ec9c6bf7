// pack_directory: deterministic working_dir packages (tar, possibly compressed: the
// tests read either). Archives are checked by reading
// their entries back with libarchive, and round trips go through the worker's
// extract_package.
#include <clocale>
#include "cli/package_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "worker/fs_fixtures.h"
#include "worker/package_cache.h"
#include "worker/tar_fixtures.h"

namespace ag::cli {
namespace {

namespace fs = std::filesystem;
using ::ag::testing::archive_paths;
using ::ag::testing::list_tree;
using ::ag::testing::read_archive;
using ::ag::testing::read_file;
using ::ag::testing::TempDir;
using ::ag::testing::write_file;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

Package pack_ok(const fs::path& dir, const std::vector<std::string>& excludes = {}) {
  Result<Package> package = pack_directory(dir.string(), excludes);
  EXPECT_TRUE(package.ok()) << package.error().message;
  return package.ok() ? std::move(package).value() : Package{};
}

// A small project: code, a script, and the clutter packing must leave out.
void make_project(const fs::path& root) {
  write_file(root / "main.py", "print('hi')\n");
  write_file(root / "lib/util.py", "X = 1\n");
  write_file(root / "run.sh", "#!/bin/sh\necho run\n", fs::perms(0755));
  write_file(root / ".git/HEAD", "ref: refs/heads/main\n");
  write_file(root / ".git/objects/ab/cdef", "blob");
  write_file(root / "__pycache__/main.cpython-311.pyc", "bytecode");
  write_file(root / "lib/__pycache__/util.cpython-311.pyc", "bytecode");
  write_file(root / ".gitignore", "*.log\n/build\n");
  write_file(root / "app.log", "log line\n");
  write_file(root / "lib/deep.log", "log line\n");
  write_file(root / "build/out.o", "object");
  write_file(root / "lib/build/kept.txt", "not at the root, so kept\n");
}

const testing::ArchiveEntryInfo* find_entry(const std::vector<testing::ArchiveEntryInfo>& entries,
                                            const std::string& path) {
  for (const auto& entry : entries) {
    if (entry.path == path) return &entry;
  }
  return nullptr;
}

// libarchive's tar writer names folders with a trailing '/'.

// --- Determinism ----------------------------------------------------------------

TEST(PackageBuilderTest, SameFolderPackedTwiceGivesIdenticalBytesAndHash) {
  TempDir dir;
  make_project(dir.path());

  const Package first = pack_ok(dir.path());
  const Package second = pack_ok(dir.path());

  EXPECT_FALSE(first.bytes.empty());
  EXPECT_EQ(first.bytes, second.bytes);
  EXPECT_EQ(first.sha256, second.sha256);
}

TEST(PackageBuilderTest, HashIsTheSha256OfTheBytes) {
  TempDir dir;
  make_project(dir.path());

  const Package package = pack_ok(dir.path());

  EXPECT_TRUE(is_sha256_hex(package.sha256)) << package.sha256;
  EXPECT_EQ(package.sha256, sha256_hex(package.bytes));
}

// The bytes must not depend on when the folder was packed or its files last touched
// (the files' times moved an hour on, rather than waiting for the clock).
TEST(PackageBuilderTest, PackingLaterGivesTheSameBytes) {
  TempDir dir;
  write_file(dir / "a.txt", "a");
  const Package first = pack_ok(dir.path());
  for (const auto& path : {dir / "a.txt", dir.path()}) {
    std::filesystem::last_write_time(path, std::filesystem::last_write_time(path) + std::chrono::hours(1));
  }
  const Package second = pack_ok(dir.path());
  EXPECT_EQ(first.bytes, second.bytes);
}

TEST(PackageBuilderTest, EntriesHaveZeroTimesAndOwners) {
  TempDir dir;
  make_project(dir.path());

  for (const auto& entry : read_archive(pack_ok(dir.path()).bytes)) {
    EXPECT_EQ(entry.mtime, 0) << entry.path;
    EXPECT_EQ(entry.uid, 0) << entry.path;
  }
}

TEST(PackageBuilderTest, TouchingModificationTimesDoesNotChangeTheHash) {
  TempDir dir;
  make_project(dir.path());
  const Package before = pack_ok(dir.path());

  const auto an_hour_ago = fs::file_time_type::clock::now() - std::chrono::hours(1);
  fs::last_write_time(dir / "main.py", an_hour_ago);
  fs::last_write_time(dir / "lib", an_hour_ago);
  const Package after = pack_ok(dir.path());

  EXPECT_EQ(before.sha256, after.sha256);
}

TEST(PackageBuilderTest, ChangingOneByteChangesTheHash) {
  TempDir dir;
  make_project(dir.path());
  const Package before = pack_ok(dir.path());

  write_file(dir / "main.py", "print('hI')\n");
  const Package after = pack_ok(dir.path());

  EXPECT_NE(before.sha256, after.sha256);
}

TEST(PackageBuilderTest, RenamingAFileChangesTheHash) {
  TempDir dir;
  write_file(dir / "a.txt", "same");
  const Package before = pack_ok(dir.path());

  fs::rename(dir / "a.txt", dir / "b.txt");
  const Package after = pack_ok(dir.path());

  EXPECT_NE(before.sha256, after.sha256);
}

TEST(PackageBuilderTest, SameContentsInAnotherFolderCreatedInAnotherOrderHashTheSame) {
  TempDir first;
  TempDir second;
  write_file(first / "a.txt", "a");
  write_file(first / "z/b.txt", "b");
  write_file(first / "m.txt", "m");
  write_file(second / "m.txt", "m");
  write_file(second / "z/b.txt", "b");
  write_file(second / "a.txt", "a");

  EXPECT_EQ(pack_ok(first.path()).sha256, pack_ok(second.path()).sha256);
}

TEST(PackageBuilderTest, ReadOnlyAndPrivateFilesPackWithNormalisedModes) {
  TempDir dir;
  write_file(dir / "private.txt", "p", fs::perms(0600));
  write_file(dir / "private.sh", "p", fs::perms(0700));
  const Package restricted = pack_ok(dir.path());

  fs::permissions(dir / "private.txt", fs::perms(0664));
  fs::permissions(dir / "private.sh", fs::perms(0775));
  const Package relaxed = pack_ok(dir.path());

  EXPECT_EQ(restricted.sha256, relaxed.sha256);
}

// Names over 100 bytes need a pax extended header; older libarchive put the process
// id in that header's name, which would make the hash differ from run to run.
TEST(PackageBuilderTest, LongNamesHashTheSameInAnotherProcess) {
  TempDir dir;
  write_file(dir / (std::string(120, 'n') + ".txt"), "long");
  write_file(dir / std::string(60, 'd') / std::string(60, 'e') / "f.txt", "deep");
  const std::string here = pack_ok(dir.path()).sha256;

  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Result<Package> package = pack_directory(dir.path().string(), {});
    const std::string hash = package.ok() ? package->sha256 : "error";
    (void)!::write(fds[1], hash.data(), hash.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string there;
  char buf[128];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) there.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);

  EXPECT_EQ(here, there);
}

// Non-ASCII names round trip. `ag` selects a UTF-8 LC_CTYPE in main() (libarchive
// converts names through the C library's character set), so this test does the same.
TEST(PackageBuilderTest, NonAsciiNamesArePackedAndUnpacked) {
  ASSERT_NE(std::setlocale(LC_CTYPE, "C.UTF-8"), nullptr);
  TempDir src;
  TempDir work;
  write_file(src / "caf\xc3\xa9.py", "x");
  write_file(src / "\xe6\x97\xa5\xe6\x9c\xac/a.txt", "y");
  Result<Package> package = pack_directory(src.path().string(), {});
  ASSERT_TRUE(package.ok()) << package.error().message;
  write_file(work / "pkg.tar", package->bytes);

  const Status status = worker::extract_package((work / "pkg.tar").string(), (work / "job").string());

  ASSERT_TRUE(status.ok()) << status.error().message;
  EXPECT_THAT(list_tree(work / "job"),
              ElementsAre("caf\xc3\xa9.py", "\xe6\x97\xa5\xe6\x9c\xac/", "\xe6\x97\xa5\xe6\x9c\xac/a.txt"));
}

// --- What goes in -----------------------------------------------------------------

TEST(PackageBuilderTest, PacksFilesAndFoldersInSortedOrder) {
  TempDir dir;
  write_file(dir / "b.txt", "b");
  write_file(dir / "a/z.txt", "z");
  write_file(dir / "a/y.txt", "y");
  fs::create_directories(dir / "empty");

  const Package package = pack_ok(dir.path());

  EXPECT_THAT(archive_paths(package.bytes), ElementsAre("a/", "a/y.txt", "a/z.txt", "b.txt", "empty/"));
  EXPECT_EQ(package.files, 3);
}

TEST(PackageBuilderTest, FileContentsAreStoredVerbatim) {
  TempDir dir;
  std::string binary;
  for (int i = 0; i < 300000; ++i) binary.push_back(static_cast<char>(i * 7));
  write_file(dir / "blob.bin", binary);
  write_file(dir / "empty.txt", "");

  const auto entries = read_archive(pack_ok(dir.path()).bytes);

  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].path, "blob.bin");
  EXPECT_EQ(entries[0].data, binary);
  EXPECT_EQ(entries[1].path, "empty.txt");
  EXPECT_EQ(entries[1].size, 0);
}

TEST(PackageBuilderTest, LeavesOutGitPycacheAndGitignoredPaths) {
  TempDir dir;
  make_project(dir.path());

  const Package package = pack_ok(dir.path());

  EXPECT_THAT(archive_paths(package.bytes), ElementsAre(".gitignore", "lib/", "lib/build/", "lib/build/kept.txt",
                                                        "lib/util.py", "main.py", "run.sh"));
  EXPECT_EQ(package.files, 5);
  // What .gitignore left out is counted (app.log, lib/deep.log, build/out.o), not .git
  // or __pycache__.
  EXPECT_EQ(package.skipped_files, 3);
  EXPECT_EQ(package.skipped_bytes, 9 + 9 + 6);
  const Package excluding = pack_ok(dir.path(), {"lib/"});
  // Everything below an excluded folder counts: lib/util.py, lib/deep.log (once),
  // lib/build/kept.txt and lib/__pycache__'s file, with app.log and build/out.o.
  EXPECT_EQ(excluding.skipped_files, 6);
}

TEST(PackageBuilderTest, GitignoreInASubfolderAppliesOnlyThereAndRelativeToIt) {
  TempDir dir;
  write_file(dir / "sub/.gitignore", "/local\n*.tmp\n");
  write_file(dir / "sub/local", "ignored");
  write_file(dir / "sub/x/local", "kept: /local is anchored to sub/");
  write_file(dir / "sub/a.tmp", "ignored");
  write_file(dir / "local", "kept: outside sub/");
  write_file(dir / "b.tmp", "kept: outside sub/");

  EXPECT_THAT(archive_paths(pack_ok(dir.path()).bytes),
              ElementsAre("b.tmp", "local", "sub/", "sub/.gitignore", "sub/x/", "sub/x/local"));
}

TEST(PackageBuilderTest, GitignoreNegationReIncludesAFile) {
  TempDir dir;
  write_file(dir / ".gitignore", "*.log\n!keep.log\n");
  write_file(dir / "drop.log", "x");
  write_file(dir / "keep.log", "x");

  EXPECT_THAT(archive_paths(pack_ok(dir.path()).bytes), ElementsAre(".gitignore", "keep.log"));
}

TEST(PackageBuilderTest, ExcludesUseGitignoreSyntax) {
  TempDir dir;
  write_file(dir / "data/big.bin", "xx");
  write_file(dir / "sub/data/also.bin", "xx");
  write_file(dir / "notes.tmp", "x");
  write_file(dir / "main.py", "x");
  write_file(dir / "sub/keep.py", "x");

  const Package package = pack_ok(dir.path(), {"data/", "*.tmp"});

  EXPECT_THAT(archive_paths(package.bytes), ElementsAre("main.py", "sub/", "sub/keep.py"));
}

TEST(PackageBuilderTest, FolderNamedGitOrPycacheDeeperDownIsAlsoSkipped) {
  TempDir dir;
  write_file(dir / "a/.git/config", "x");
  write_file(dir / "a/b/__pycache__/m.pyc", "x");
  write_file(dir / "a/b/m.py", "x");

  EXPECT_THAT(archive_paths(pack_ok(dir.path()).bytes), ElementsAre("a/", "a/b/", "a/b/m.py"));
}

TEST(PackageBuilderTest, ExecutableBitIsKeptAsWholeModes) {
  TempDir dir;
  write_file(dir / "run.sh", "#!/bin/sh\n", fs::perms(0750));
  write_file(dir / "data.txt", "x", fs::perms(0600));
  fs::create_directories(dir / "sub");
  fs::permissions(dir / "sub", fs::perms(0700));

  const auto entries = read_archive(pack_ok(dir.path()).bytes);

  ASSERT_EQ(entries.size(), 3u);
  const auto* script = find_entry(entries, "run.sh");
  const auto* data = find_entry(entries, "data.txt");
  const auto* sub = find_entry(entries, "sub/");
  ASSERT_TRUE(script && data && sub);
  EXPECT_EQ(script->perm, 0755u);
  EXPECT_EQ(data->perm, 0644u);
  EXPECT_EQ(sub->perm, 0755u);
  EXPECT_EQ(sub->type, static_cast<unsigned>(AE_IFDIR));
}

TEST(PackageBuilderTest, SymlinksAreKeptAsLinksNotFollowed) {
  TempDir dir;
  write_file(dir / "lib/util.py", "X = 1\n");
  fs::create_symlink("lib/util.py", dir / "util_link.py");
  fs::create_directory_symlink("lib", dir / "lib_link");

  const Package package = pack_ok(dir.path());
  const auto entries = read_archive(package.bytes);

  EXPECT_THAT(archive_paths(package.bytes), ElementsAre("lib/", "lib/util.py", "lib_link", "util_link.py"));
  const auto* file_link = find_entry(entries, "util_link.py");
  const auto* dir_link = find_entry(entries, "lib_link");
  ASSERT_TRUE(file_link && dir_link);
  EXPECT_EQ(file_link->type, static_cast<unsigned>(AE_IFLNK));
  EXPECT_EQ(file_link->symlink, "lib/util.py");
  EXPECT_EQ(dir_link->type, static_cast<unsigned>(AE_IFLNK));
  EXPECT_EQ(dir_link->symlink, "lib");
  EXPECT_EQ(package.files, 1) << "links are not counted as files";
}

TEST(PackageBuilderTest, DanglingSymlinkIsPackedAsALink) {
  TempDir dir;
  fs::create_symlink("missing.txt", dir / "dangling");

  const auto entries = read_archive(pack_ok(dir.path()).bytes);

  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].type, static_cast<unsigned>(AE_IFLNK));
  EXPECT_EQ(entries[0].symlink, "missing.txt");
}

TEST(PackageBuilderTest, EmptyFolderPacksToAnEmptyArchive) {
  TempDir dir;

  const Package package = pack_ok(dir.path());

  EXPECT_THAT(archive_paths(package.bytes), IsEmpty());
  EXPECT_EQ(package.files, 0);
  EXPECT_THAT(package.biggest, IsEmpty());
  EXPECT_TRUE(is_sha256_hex(package.sha256));
}

// --- Errors ---------------------------------------------------------------------

TEST(PackageBuilderTest, MissingFolderIsAnInvalidArgument) {
  TempDir dir;
  const std::string missing = (dir / "nope").string();

  Result<Package> package = pack_directory(missing, {});

  ASSERT_FALSE(package.ok());
  EXPECT_EQ(package.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(package.error().message, HasSubstr(missing));
}

TEST(PackageBuilderTest, FilePathIsAnInvalidArgument) {
  TempDir dir;
  write_file(dir / "file.txt", "x");

  Result<Package> package = pack_directory((dir / "file.txt").string(), {});

  ASSERT_FALSE(package.ok());
  EXPECT_EQ(package.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(package.error().message, HasSubstr("not a folder"));
}

// --- Report ---------------------------------------------------------------------

TEST(PackageBuilderTest, BiggestListsUpToFiveLargestFilesLargestFirst) {
  TempDir dir;
  for (int i = 1; i <= 7; ++i) write_file(dir / ("f" + std::to_string(i) + ".bin"), std::string(i * 1000, 'x'));
  write_file(dir / "sub/huge.bin", std::string(50000, 'x'));

  const Package package = pack_ok(dir.path());

  EXPECT_EQ(package.files, 8);
  EXPECT_THAT(package.biggest, ElementsAre(Pair("sub/huge.bin", 50000), Pair("f7.bin", 7000), Pair("f6.bin", 6000),
                                           Pair("f5.bin", 5000), Pair("f4.bin", 4000)));
}

TEST(PackageBuilderTest, BiggestIgnoresLeftOutFiles) {
  TempDir dir;
  write_file(dir / "small.txt", "x");
  write_file(dir / "huge.log", std::string(100000, 'x'));
  write_file(dir / ".git/pack", std::string(100000, 'x'));

  const Package package = pack_ok(dir.path(), {"*.log"});

  EXPECT_THAT(package.biggest, ElementsAre(Pair("small.txt", 1)));
}

// --- Round trip through the worker's extractor ---------------------------------

TEST(PackageBuilderTest, PackageUnpacksToTheSameTree) {
  TempDir src;
  TempDir work;
  make_project(src.path());
  fs::create_symlink("main.py", src / "entry.py");
  const Package package = pack_ok(src.path());
  write_file(work / "pkg.tar.gz", package.bytes);

  const Status status = worker::extract_package((work / "pkg.tar.gz").string(), (work / "job").string());

  ASSERT_TRUE(status.ok()) << status.error().message;
  EXPECT_THAT(list_tree(work / "job"), ElementsAre(".gitignore", "entry.py -> main.py", "lib/", "lib/build/",
                                                   "lib/build/kept.txt", "lib/util.py", "main.py", "run.sh"));
  EXPECT_EQ(read_file(work / "job/main.py"), "print('hi')\n");
  EXPECT_EQ(testing::mode_bits(work / "job/run.sh"), 0755u);
  EXPECT_EQ(testing::mode_bits(work / "job/main.py"), 0644u);
}

// Regression: pack_directory packs any symlink as is, but
// extract_package refuses links that are absolute or contain "..". A working_dir
// holding e.g. a virtualenv (.venv/bin/python -> /usr/bin/python3) or a link to a
// sibling checkout packs and uploads fine, then every worker refuses the package
// ("is a link pointing outside") when the job starts. The packer should refuse or
// skip such links at submit time with a message naming them.
TEST(PackageBuilderTest, EveryPackageThePackerProducesCanBeUnpacked) {
  TempDir src;
  TempDir work;
  write_file(src / "main.py", "x");
  fs::create_directories(src / ".venv/bin");
  fs::create_symlink("/usr/bin/python3", src / ".venv/bin/python");
  fs::create_symlink("../elsewhere", src / "sibling");
  Result<Package> package = pack_directory(src.path().string(), {});
  if (!package.ok()) return;  // refusing at pack time is a fine fix too
  write_file(work / "pkg.tar.gz", package->bytes);

  const Status status = worker::extract_package((work / "pkg.tar.gz").string(), (work / "job").string());

  EXPECT_TRUE(status.ok()) << status.error().message;
}

}  // namespace
}  // namespace ag::cli
