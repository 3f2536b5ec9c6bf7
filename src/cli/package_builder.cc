#include "cli/package_builder.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "cli/ignore_rules.h"
#include "common/sha256.h"

namespace ag::cli {
namespace fs = std::filesystem;
namespace {

struct Item {
  std::string rel;
  fs::path path;
  fs::file_type type;
};

std::vector<std::string> read_lines(const fs::path& file) {
  std::vector<std::string> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Collects what goes into the package, depth first in sorted order.
void walk(const fs::path& root, const std::string& rel_dir, IgnoreRules& rules, std::vector<Item>& out) {
  fs::path dir = rel_dir.empty() ? root : root / rel_dir;
  if (fs::exists(dir / ".gitignore")) rules.add(rel_dir, read_lines(dir / ".gitignore"));
  std::vector<fs::directory_entry> entries;
  for (const auto& entry : fs::directory_iterator(dir)) entries.push_back(entry);
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.path().filename().string() < b.path().filename().string(); });
  for (const auto& entry : entries) {
    std::string name = entry.path().filename().string();
    std::string rel = rel_dir.empty() ? name : rel_dir + "/" + name;
    fs::file_type type = entry.symlink_status().type();
    bool is_dir = type == fs::file_type::directory;
    if (name == ".git" || (is_dir && name == "__pycache__") || rules.ignored(rel, is_dir)) continue;
    if (type != fs::file_type::regular && type != fs::file_type::directory && type != fs::file_type::symlink) continue;
    if (type == fs::file_type::symlink) {
      // Workers unpack links only when they point downwards inside the folder; say so
      // now rather than fail every task later.
      fs::path target = fs::read_symlink(entry.path());
      bool goes_up = false;
      for (const auto& part : target) goes_up |= part == "..";
      if (target.is_absolute() || goes_up) {
        throw std::invalid_argument("working_dir holds the link '" + rel + "' -> '" + target.string() +
                                    "', which points outside its folder; workers would refuse it. Exclude it "
                                    "(--exclude '" + rel + "' or .gitignore) or replace it with what it points to");
      }
    }
    out.push_back({rel, entry.path(), type});
    if (is_dir) walk(root, rel, rules, out);
  }
}

}  // namespace

Result<Package> pack_directory(const std::string& dir, const std::vector<std::string>& excludes) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return invalid_argument("working_dir '" + dir + "' does not exist");
  if (!fs::is_directory(dir, ec)) return invalid_argument("working_dir '" + dir + "' is not a folder");
  IgnoreRules rules;
  rules.add("", excludes);
  std::vector<Item> items;
  try {
    walk(fs::path(dir), "", rules, items);
  } catch (const fs::filesystem_error& e) {
    return internal_error(std::string("cannot read working_dir: ") + e.what());
  } catch (const std::invalid_argument& e) {
    return invalid_argument(e.what());
  }

  Package package;
  std::unique_ptr<archive, decltype(&archive_write_free)> a(archive_write_new(), archive_write_free);
  archive_write_set_format_pax_restricted(a.get());
  // Names go in as the bytes the file system has, whatever the process locale.
  archive_write_set_format_option(a.get(), "pax", "hdrcharset", "BINARY");
  // Not compressed: on a cluster network, compressing and decompressing a large
  // folder costs more time than the bytes it saves (workers read gzip'd tars too).
  archive_write_set_bytes_in_last_block(a.get(), 1);
  // Unblocked: the tar's bytes reach the writer as libarchive makes them, not copied
  // into 10 KiB blocks first. (Same bytes either way, since the last block is not padded.)
  archive_write_set_bytes_per_block(a.get(), 0);
  // The bytes are hashed as they are made, while they are still in the CPU's cache.
  struct Sink {
    std::string* bytes;
    Sha256 sha;
  } sink{&package.bytes, {}};
  auto writer = [](archive*, void* data, const void* buf, size_t size) -> la_ssize_t {
    auto* out = static_cast<Sink*>(data);
    out->bytes->append(static_cast<const char*>(buf), size);
    out->sha.update(buf, size);
    return static_cast<la_ssize_t>(size);
  };
  // Room for the whole tar up front (file bytes plus a generous allowance per entry
  // for headers and padding): growing a large string copies it again and again.
  size_t estimate = 0;
  for (const auto& item : items) {
    estimate += 2048;
    if (item.type == fs::file_type::regular) estimate += static_cast<size_t>(fs::file_size(item.path, ec));
  }
  package.bytes.reserve(estimate);
  if (archive_write_open(a.get(), &sink, nullptr, writer, nullptr) != ARCHIVE_OK) {
    return internal_error(std::string("cannot start the package: ") + archive_error_string(a.get()));
  }
  std::vector<std::pair<std::string, int64_t>> sizes;
  std::vector<char> buffer(1 << 20);
  for (const auto& item : items) {
    std::unique_ptr<archive_entry, decltype(&archive_entry_free)> e(archive_entry_new(), archive_entry_free);
    archive_entry_set_pathname(e.get(), item.rel.c_str());
    archive_entry_set_mtime(e.get(), 0, 0);
    archive_entry_set_uid(e.get(), 0);
    archive_entry_set_gid(e.get(), 0);
    int64_t size = 0;
    if (item.type == fs::file_type::directory) {
      archive_entry_set_filetype(e.get(), AE_IFDIR);
      archive_entry_set_perm(e.get(), 0755);
    } else if (item.type == fs::file_type::symlink) {
      archive_entry_set_filetype(e.get(), AE_IFLNK);
      archive_entry_set_perm(e.get(), 0777);
      archive_entry_set_symlink(e.get(), fs::read_symlink(item.path, ec).c_str());
    } else {
      size = static_cast<int64_t>(fs::file_size(item.path, ec));
      auto perms = fs::status(item.path, ec).permissions();
      bool exec = (perms & fs::perms::owner_exec) != fs::perms::none;
      archive_entry_set_filetype(e.get(), AE_IFREG);
      archive_entry_set_perm(e.get(), exec ? 0755 : 0644);
      archive_entry_set_size(e.get(), size);
      sizes.emplace_back(item.rel, size);
      ++package.files;
    }
    if (archive_write_header(a.get(), e.get()) != ARCHIVE_OK) {
      return internal_error("cannot pack " + item.rel + ": " + archive_error_string(a.get()));
    }
    if (item.type == fs::file_type::regular) {
      int fd = ::open(item.path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return internal_error("cannot read " + item.path.string() + ": " + std::strerror(errno));
      int64_t left = size;
      while (left > 0) {
        ssize_t got = ::read(fd, buffer.data(), static_cast<size_t>(std::min<int64_t>(left, buffer.size())));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
          ::close(fd);
          return internal_error(item.path.string() + " changed while it was being packed");
        }
        archive_write_data(a.get(), buffer.data(), static_cast<size_t>(got));
        left -= got;
      }
      ::close(fd);
    }
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK) {
    return internal_error(std::string("cannot finish the package: ") + archive_error_string(a.get()));
  }
  std::sort(sizes.begin(), sizes.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
  if (sizes.size() > 5) sizes.resize(5);
  package.biggest = std::move(sizes);
  package.sha256 = sink.sha.finish_hex();
  return package;
}

}  // namespace ag::cli
