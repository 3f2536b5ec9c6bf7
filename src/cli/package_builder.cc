#include "cli/package_builder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
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
// `rules` gathers the .gitignore files on the way down; `excludes` are the user's
// patterns. Either one leaving a path out is enough: a "!" in a .gitignore does not
// bring back what the excludes leave out (as in the SDK).
[[noreturn]] void throw_link_outside(const std::string& rel, const std::string& target) {
  throw std::invalid_argument("working_dir holds the link '" + rel + "' -> '" + target +
                              "', which points outside its folder; workers would refuse it. Exclude it "
                              "(--exclude '" + rel + "' or .gitignore) or replace it with what it points to");
}

// Adds what `path` holds (a file, or every file below a folder) to the package's skipped
// counts.
void count_skipped(const fs::directory_entry& entry, Package& package) {
  std::error_code ec;
  if (entry.is_regular_file(ec)) {
    ++package.skipped_files;
    package.skipped_bytes += static_cast<int64_t>(entry.file_size(ec));
    return;
  }
  if (!entry.is_directory(ec) || entry.is_symlink(ec)) return;
  for (auto it = fs::recursive_directory_iterator(entry.path(), fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) {
      ++package.skipped_files;
      package.skipped_bytes += static_cast<int64_t>(it->file_size(ec));
    }
  }
}

void walk(const fs::path& root, const std::string& rel_dir, IgnoreRules& rules, const IgnoreRules& excludes,
          std::vector<Item>& out, Package& package) {
  fs::path dir = rel_dir.empty() ? root : root / rel_dir;
  if (fs::exists(dir / ".gitignore")) rules.add(rel_dir, read_lines(dir / ".gitignore"));
  std::vector<fs::directory_entry> entries;
  for (const auto& entry : fs::directory_iterator(dir)) entries.push_back(entry);
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.path().filename().string() < b.path().filename().string(); });
  for (const auto& entry : entries) {
    std::string name = entry.path().filename().string();
    std::string rel = rel_dir;
    if (!rel.empty()) rel += '/';
    rel += name;
    fs::file_type type = entry.symlink_status().type();
    bool is_dir = type == fs::file_type::directory;
    if (name == ".git" || name == "__pycache__") continue;
    if (rules.ignored(rel, is_dir) || excludes.ignored(rel, is_dir)) {
      count_skipped(entry, package);
      continue;
    }
    if (type != fs::file_type::regular && type != fs::file_type::directory && type != fs::file_type::symlink) continue;
    if (type == fs::file_type::symlink) {
      // Workers unpack links only when they point downwards inside the folder; say so
      // now rather than fail every task later.
      fs::path target = fs::read_symlink(entry.path());
      bool goes_up = false;
      for (const auto& part : target) goes_up |= part == "..";
      if (target.is_absolute() || goes_up) {
        throw_link_outside(rel, target.string());
      }
    }
    out.push_back({rel, entry.path(), type});
    if (is_dir) walk(root, rel, rules, excludes, out, package);
  }
}


// The tar format of working_dir packages, byte for byte the SDK's
// (python/aethergrid/_tar.py): POSIX ustar headers with fixed fields (mode normalised,
// owners and mtime 0), a PAX header ("x", named "././@PaxHeader") only for a path or
// link target over 100 bytes or not ASCII ("hdrcharset=BINARY" first when not ASCII)
// or a size of 8 GiB or more, and the end padded to a 10 KiB record.
constexpr size_t kTarBlock = 512;
constexpr size_t kTarRecord = 20 * kTarBlock;
constexpr int64_t kUstarMaxSize = int64_t{1} << 33;  // 8 ** 11

class TarWriter {
 public:
  explicit TarWriter(std::string* out) : out_(out) {}

  void add_directory(const std::string& name) { entry_header(name + "/", '5', 0755, 0, ""); }
  void add_symlink(const std::string& name, const std::string& target) { entry_header(name, '2', 0777, 0, target); }

  // Appends `size` bytes read from `fd`. Errors when the file holds fewer.
  Status add_file(const std::string& name, int fd, int64_t size, bool executable) {
    entry_header(name, '0', executable ? 0755 : 0644, size, "");
    size_t at = out_->size();
    out_->resize(at + static_cast<size_t>(size));
    int64_t left = size;
    while (left > 0) {
      ssize_t got = ::read(fd, out_->data() + at, static_cast<size_t>(std::min<int64_t>(left, 1 << 20)));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return internal_error("changed while it was being packed");
      at += static_cast<size_t>(got);
      left -= got;
    }
    pad(static_cast<size_t>(size));
    return {};
  }

  void close() {
    out_->append(2 * kTarBlock, '\0');
    if (out_->size() % kTarRecord) out_->append(kTarRecord - out_->size() % kTarRecord, '\0');
  }

 private:
  static bool is_ascii(const std::string& s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  }
  static bool fits_ustar(const std::string& s) { return s.size() <= 100 && is_ascii(s); }

  // What the ustar field holds when a PAX record carries the value: its last 100
  // bytes, each non-ASCII byte as '?'.
  static std::string ustar_fallback(const std::string& s) {
    if (fits_ustar(s)) return s;
    std::string ascii = s;
    for (auto& c : ascii) {
      if (static_cast<unsigned char>(c) >= 0x80) c = '?';
    }
    return ascii.size() > 100 ? ascii.substr(ascii.size() - 100) : ascii;
  }

  static std::string pax_record(const std::string& key, const std::string& value) {
    std::string body = " " + key + "=" + value + "\n";
    size_t length = body.size() + 1;
    while (std::to_string(length).size() + body.size() != length) ++length;
    return std::to_string(length) + body;
  }

  static void octal(char* field, size_t width, int64_t value) {
    std::snprintf(field, width, "%0*llo", static_cast<int>(width - 1), static_cast<unsigned long long>(value));
  }

  void header(const std::string& name, char type, int mode, int64_t size, const std::string& link) {
    char h[kTarBlock] = {};
    // Tar fields are fixed-width and NUL-padded by the zeroed block, not terminated.
    std::memcpy(h, name.data(), std::min<size_t>(name.size(), 100));  // NOLINT(bugprone-not-null-terminated-result)
    octal(h + 100, 8, mode);
    octal(h + 108, 8, 0);
    octal(h + 116, 8, 0);
    octal(h + 124, 12, size);
    octal(h + 136, 12, 0);
    std::memset(h + 148, ' ', 8);
    h[156] = type;
    std::memcpy(h + 157, link.data(), std::min<size_t>(link.size(), 100));  // NOLINT(bugprone-not-null-terminated-result)
    std::memcpy(h + 257, "ustar\0" "00", 8);  // NOLINT(bugprone-not-null-terminated-result): magic and version
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);  // six digits, NUL, and the space stays
    out_->append(h, kTarBlock);
  }

  void entry_header(const std::string& name, char type, int mode, int64_t size, const std::string& link) {
    std::string records;
    bool binary = false;
    for (const auto& [key, value] : {std::pair<const char*, const std::string&>{"path", name}, {"linkpath", link}}) {
      if (!value.empty() && !fits_ustar(value)) {
        binary = binary || !is_ascii(value);
        records += pax_record(key, value);
      }
    }
    if (size >= kUstarMaxSize) records += pax_record("size", std::to_string(size));
    if (!records.empty()) {
      if (binary) records = pax_record("hdrcharset", "BINARY") + records;
      header("././@PaxHeader", 'x', 0644, static_cast<int64_t>(records.size()), "");
      out_->append(records);
      pad(records.size());
    }
    header(ustar_fallback(name), type, mode, size < kUstarMaxSize ? size : 0, ustar_fallback(link));
  }

  void pad(size_t size) {
    if (size % kTarBlock) out_->append(kTarBlock - size % kTarBlock, '\0');
  }

  std::string* out_;
};

}  // namespace

Result<Package> pack_directory(const std::string& dir, const std::vector<std::string>& excludes) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return invalid_argument("working_dir '" + dir + "' does not exist");
  if (!fs::is_directory(dir, ec)) return invalid_argument("working_dir '" + dir + "' is not a folder");
  IgnoreRules rules, excluded;
  excluded.add("", excludes);
  std::vector<Item> items;
  Package package;
  try {
    walk(fs::path(dir), "", rules, excluded, items, package);
  } catch (const fs::filesystem_error& e) {
    return internal_error(std::string("cannot read working_dir: ") + e.what());
  } catch (const std::invalid_argument& e) {
    return invalid_argument(e.what());
  }

  // Sorted by the whole path's bytes, as the SDK sorts: both pack a folder to the same
  // bytes, so it uploads once whichever of them submits it.
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.rel < b.rel; });

  // Room for the whole tar up front (file bytes plus an allowance per entry for
  // headers and padding): growing a large string copies it again and again.
  size_t estimate = 2 * kTarRecord;
  for (const auto& item : items) {
    estimate += 4 * kTarBlock;
    if (item.type == fs::file_type::regular) estimate += static_cast<size_t>(fs::file_size(item.path, ec));
  }
  package.bytes.reserve(estimate);
  TarWriter tar(&package.bytes);
  std::vector<std::pair<std::string, int64_t>> sizes;
  for (const auto& item : items) {
    if (item.type == fs::file_type::directory) {
      tar.add_directory(item.rel);
      continue;
    }
    if (item.type == fs::file_type::symlink) {
      fs::path target = fs::read_symlink(item.path, ec);
      if (ec) return internal_error("cannot read the link " + item.path.string() + ": " + ec.message());
      tar.add_symlink(item.rel, target.string());
      continue;
    }
    int fd = ::open(item.path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0) {
      std::string why = std::strerror(errno);
      if (fd >= 0) ::close(fd);
      return internal_error("cannot read " + item.path.string() + ": " + why);
    }
    Status added = tar.add_file(item.rel, fd, st.st_size, (st.st_mode & 0111) != 0);
    ::close(fd);
    if (!added) return internal_error(item.path.string() + " " + added.error().message);
    sizes.emplace_back(item.rel, st.st_size);
    ++package.files;
  }
  tar.close();
  std::sort(sizes.begin(), sizes.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
  if (sizes.size() > 5) sizes.resize(5);
  package.biggest = std::move(sizes);
  package.sha256 = sha256_hex(package.bytes);
  return package;
}

}  // namespace ag::cli
