// Builders for hand-made tar archives, gzip'd or plain (including hostile ones a real packer
// would never produce), and a reader that lists an archive's entries, both on libarchive.
// Test-only.
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/sysmacros.h>

#include <memory>
#include <string>
#include <vector>

namespace ag::testing {

// One entry of a crafted archive. Build with the functions below.
struct TarEntry {
  std::string path;
  unsigned type = AE_IFREG;
  unsigned perm = 0644;
  std::string data;      // regular files
  std::string symlink;   // AE_IFLNK target
  std::string hardlink;  // hard link target (type stays AE_IFREG)
  int64_t uid = 0;
};

inline TarEntry tar_file(std::string path, std::string data, unsigned perm = 0644) {
  return {std::move(path), AE_IFREG, perm, std::move(data), "", "", 0};
}
inline TarEntry tar_dir(std::string path, unsigned perm = 0755) {
  return {std::move(path), AE_IFDIR, perm, "", "", "", 0};
}
inline TarEntry tar_symlink(std::string path, std::string target) {
  return {std::move(path), AE_IFLNK, 0777, "", std::move(target), "", 0};
}
inline TarEntry tar_hardlink(std::string path, std::string target) {
  return {std::move(path), AE_IFREG, 0644, "", "", std::move(target), 0};
}
inline TarEntry tar_fifo(std::string path) { return {std::move(path), AE_IFIFO, 0644, "", "", "", 0}; }
inline TarEntry tar_chardev(std::string path) { return {std::move(path), AE_IFCHR, 0666, "", "", "", 0}; }

enum class Compression { kGzip, kNone };

enum class NameCharset { kLocale, kBinary };

// Writes `entries`, in order and with names exactly as given, as a pax tar
// (gzip'd unless told otherwise). kBinary marks names "hdrcharset=BINARY", as the
// Python SDK does: their bytes are stored as is, with no locale conversion.
inline void write_tar(const std::string& file, const std::vector<TarEntry>& entries,
                      Compression compression = Compression::kGzip, NameCharset charset = NameCharset::kLocale) {
  std::unique_ptr<archive, decltype(&archive_write_free)> a(archive_write_new(), archive_write_free);
  if (compression == Compression::kGzip) archive_write_add_filter_gzip(a.get());
  archive_write_set_format_pax_restricted(a.get());
  if (charset == NameCharset::kBinary) {
    ASSERT_EQ(archive_write_set_format_option(a.get(), "pax", "hdrcharset", "BINARY"), ARCHIVE_OK);
  }
  ASSERT_EQ(archive_write_open_filename(a.get(), file.c_str()), ARCHIVE_OK) << archive_error_string(a.get());
  for (const auto& spec : entries) {
    std::unique_ptr<archive_entry, decltype(&archive_entry_free)> e(archive_entry_new(), archive_entry_free);
    archive_entry_set_pathname(e.get(), spec.path.c_str());
    archive_entry_set_filetype(e.get(), spec.type);
    archive_entry_set_perm(e.get(), spec.perm);
    archive_entry_set_mtime(e.get(), 0, 0);
    archive_entry_set_uid(e.get(), spec.uid);
    archive_entry_set_gid(e.get(), spec.uid);
    if (!spec.symlink.empty()) archive_entry_set_symlink(e.get(), spec.symlink.c_str());
    if (!spec.hardlink.empty()) archive_entry_set_hardlink(e.get(), spec.hardlink.c_str());
    if (spec.type == AE_IFCHR) archive_entry_set_rdev(e.get(), makedev(1, 3));  // like /dev/null
    if (spec.type == AE_IFREG && spec.hardlink.empty()) {
      archive_entry_set_size(e.get(), static_cast<la_int64_t>(spec.data.size()));
    }
    ASSERT_EQ(archive_write_header(a.get(), e.get()), ARCHIVE_OK) << spec.path << ": " << archive_error_string(a.get());
    if (!spec.data.empty()) {
      ASSERT_EQ(archive_write_data(a.get(), spec.data.data(), spec.data.size()),
                static_cast<la_ssize_t>(spec.data.size()));
    }
  }
  ASSERT_EQ(archive_write_close(a.get()), ARCHIVE_OK) << archive_error_string(a.get());
}

// Writes `content` gzip'd (no tar inside) to `file`.
inline void write_gzip_file(const std::string& file, const std::string& content) {
  std::unique_ptr<archive, decltype(&archive_write_free)> a(archive_write_new(), archive_write_free);
  archive_write_add_filter_gzip(a.get());
  archive_write_set_format_raw(a.get());
  ASSERT_EQ(archive_write_open_filename(a.get(), file.c_str()), ARCHIVE_OK) << archive_error_string(a.get());
  std::unique_ptr<archive_entry, decltype(&archive_entry_free)> e(archive_entry_new(), archive_entry_free);
  archive_entry_set_filetype(e.get(), AE_IFREG);
  ASSERT_EQ(archive_write_header(a.get(), e.get()), ARCHIVE_OK) << archive_error_string(a.get());
  ASSERT_EQ(archive_write_data(a.get(), content.data(), content.size()), static_cast<la_ssize_t>(content.size()));
  ASSERT_EQ(archive_write_close(a.get()), ARCHIVE_OK) << archive_error_string(a.get());
}

// What an entry of an archive says about itself.
struct ArchiveEntryInfo {
  std::string path;
  unsigned type = 0;
  unsigned perm = 0;
  int64_t size = 0;
  int64_t mtime = 0;
  int64_t uid = 0;
  std::string symlink;
  std::string data;
};

// Reads a tar, plain or gzip'd, held in memory. A read failure is reported as a test failure and
// ends the listing.
inline std::vector<ArchiveEntryInfo> read_archive(const std::string& bytes) {
  std::vector<ArchiveEntryInfo> out;
  std::unique_ptr<archive, decltype(&archive_read_free)> a(archive_read_new(), archive_read_free);
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_none(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_memory(a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK) {
    ADD_FAILURE() << "cannot open archive: " << archive_error_string(a.get());
    return out;
  }
  archive_entry* e = nullptr;
  int rc;
  while ((rc = archive_read_next_header(a.get(), &e)) == ARCHIVE_OK) {
    ArchiveEntryInfo info;
    info.path = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
    info.type = archive_entry_filetype(e);
    info.perm = archive_entry_perm(e);
    info.size = archive_entry_size(e);
    info.mtime = archive_entry_mtime(e);
    info.uid = archive_entry_uid(e);
    info.symlink = archive_entry_symlink(e) ? archive_entry_symlink(e) : "";
    std::vector<char> buf(1 << 16);
    la_ssize_t n;
    while ((n = archive_read_data(a.get(), buf.data(), buf.size())) > 0) info.data.append(buf.data(), n);
    out.push_back(std::move(info));
  }
  if (rc != ARCHIVE_EOF) ADD_FAILURE() << "archive read stopped: " << archive_error_string(a.get());
  return out;
}

// Just the entry names, in archive order.
inline std::vector<std::string> archive_paths(const std::string& bytes) {
  std::vector<std::string> names;
  for (const auto& entry : read_archive(bytes)) names.push_back(entry.path);
  return names;
}

}  // namespace ag::testing
