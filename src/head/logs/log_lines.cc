#include "head/logs/log_lines.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <tuple>

#include "common/amounts.h"

namespace ag::head {

MergedPage merge_pages(const std::vector<TaskLinePage>& pages) {
  struct Ref {
    int64_t time_ms;
    int task_index;
    int64_t offset;
    size_t page;
    const LogLineReader::Line* line;
  };
  std::vector<Ref> refs;
  MergedPage out;
  // The earliest (time, task) from which on a page that stopped at its budget may have
  // lines still to come: lines of other pages past it wait for the next read.
  std::optional<std::pair<int64_t, int>> horizon;
  for (size_t p = 0; p < pages.size(); ++p) {
    const auto& [task_index, page] = pages[p];
    for (const auto& line : page.lines) refs.push_back({line.time_ms, task_index, line.offset, p, &line});
    out.next.push_back(page.next);
    for (const auto& owned : {page.bytes, page.marker}) {
      if (owned) out.bytes.push_back(owned);
    }
    out.more = out.more || page.more;
    if (!page.more) continue;
    const std::pair<int64_t, int> from =
        page.lines.empty() ? std::pair<int64_t, int>{INT64_MIN, INT32_MIN} : std::pair{page.lines.back().time_ms, task_index};
    if (!horizon || from < *horizon) horizon = from;
  }
  std::stable_sort(refs.begin(), refs.end(), [](const Ref& a, const Ref& b) {
    return std::tie(a.time_ms, a.task_index, a.offset) < std::tie(b.time_ms, b.task_index, b.offset);
  });
  std::vector<bool> holding(pages.size(), false);
  out.lines.reserve(refs.size());
  for (const Ref& ref : refs) {
    if (horizon && std::pair{ref.time_ms, ref.task_index} > *horizon) {
      // Held back: its page's cursor goes back to its first held line.
      if (!holding[ref.page] || ref.offset < out.next[ref.page]) out.next[ref.page] = ref.offset;
      holding[ref.page] = true;
      out.more = true;
      continue;
    }
    out.lines.push_back({ref.task_index, ref.time_ms, ref.line->text, ref.line->partial});
  }
  return out;
}

Result<MergedPage> read_merged(const std::vector<int>& task_indexes, const std::vector<int64_t>& from, int64_t budget,
                               int64_t window, const ReadPage& read) {
  MergedPage out;
  out.next = from;
  std::vector<TaskLinePage> pages;
  for (size_t i = 0; i < task_indexes.size(); ++i) {
    auto page = read(i, from[i], window);
    if (!page.ok()) return page.error();
    pages.push_back({task_indexes[i], std::move(page.value())});
  }
  int64_t emitted = 0;
  for (;;) {
    MergedPage round = merge_pages(pages);
    for (const auto& line : round.lines) emitted += static_cast<int64_t>(line.text.size()) + 1;
    out.lines.insert(out.lines.end(), round.lines.begin(), round.lines.end());
    out.bytes.insert(out.bytes.end(), round.bytes.begin(), round.bytes.end());
    out.next = round.next;
    out.more = round.more;
    if (!round.more || round.lines.empty() || emitted >= budget) return out;
    // Each window keeps the lines that wait; one used up is read again from its cursor.
    for (size_t i = 0; i < pages.size(); ++i) {
      auto& page = pages[i].page;
      std::erase_if(page.lines, [&](const LogLineReader::Line& line) { return line.offset < out.next[i]; });
      if (!page.lines.empty() || !page.more) continue;
      auto next = read(i, out.next[i], window);
      if (!next.ok()) return next.error();
      page = std::move(next.value());
    }
  }
}

Result<std::vector<int64_t>> merged_tail_starts(const std::vector<int>& task_indexes,
                                                const std::vector<int64_t>& floors,
                                                const std::vector<int64_t>& ends, int64_t count,
                                                const EarlierLines& earlier) {
  constexpr int64_t kMaxBatch = 4096;
  const size_t n = task_indexes.size();
  std::vector<int64_t> starts = ends;
  std::vector<std::vector<LogLineReader::LineStart>> buffered(n);
  // Lines asked of each log at its next read: its share of `count` at first, doubling
  // while the merge keeps taking its lines (so many logs cost about `count` lines).
  std::vector<int64_t> batch(n, std::clamp<int64_t>(count / static_cast<int64_t>(std::max<size_t>(n, 1)) + 1, 16,
                                                    kMaxBatch));
  // Newest line not yet taken of each log, newest of all on top.
  using Key = std::tuple<int64_t, int, int64_t, size_t>;  // time, task index, offset, log
  std::priority_queue<Key> newest;
  auto refill = [&](size_t i) -> Status {
    if (starts[i] <= floors[i]) return {};
    auto more = earlier(i, starts[i], std::min(count, batch[i]));
    batch[i] = std::min(batch[i] * 2, kMaxBatch);
    if (!more.ok()) return more.error();
    buffered[i] = std::move(more.value());
    if (!buffered[i].empty()) newest.emplace(buffered[i].back().time_ms, task_indexes[i], buffered[i].back().offset, i);
    return {};
  };
  for (size_t i = 0; i < n; ++i) {
    if (auto s = refill(i); !s.ok()) return s.error();
  }
  for (; count > 0 && !newest.empty(); --count) {
    const size_t i = std::get<3>(newest.top());
    newest.pop();
    starts[i] = buffered[i].back().offset;
    buffered[i].pop_back();
    if (!buffered[i].empty()) {
      newest.emplace(buffered[i].back().time_ms, task_indexes[i], buffered[i].back().offset, i);
    } else if (auto s = refill(i); !s.ok()) {
      return s.error();
    }
  }
  return starts;
}

namespace {

// UTC times of lines, formatted once for each run of lines received in the same ms.
class Stamps {
 public:
  const std::string& of(int64_t ms) {
    if (ms != ms_) {
      text_ = utc_timestamp(ms);
      ms_ = ms;
    }
    return text_;
  }

 private:
  int64_t ms_ = INT64_MIN;
  std::string text_;
};

}  // namespace

std::string render_text(const MergedPage& page, bool ranks, bool timestamps) {
  size_t bytes = 0;
  for (const auto& line : page.lines) bytes += line.text.size() + 40;
  std::string out;
  out.reserve(bytes);
  Stamps stamps;
  for (const auto& line : page.lines) {
    if (timestamps) {
      out += stamps.of(line.time_ms);
      out += ' ';
    }
    if (ranks) {
      out += "[rank ";
      out += std::to_string(line.task_index);
      out += "] ";
    }
    out += line.text;
    if (!line.partial || ranks) out += '\n';
  }
  return out;
}

namespace {

// `text` as a JSON string: printable ASCII as it is, anything else through the JSON
// library (escapes, and U+FFFD for bytes that are not UTF-8).
void append_json_string(std::string& out, std::string_view text) {
  const bool plain = std::all_of(text.begin(), text.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  });
  if (plain) {
    out += '"';
    out += text;
    out += '"';
    return;
  }
  out += nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string render_json_lines(const MergedPage& page) {
  size_t bytes = 0;
  for (const auto& line : page.lines) bytes += line.text.size() + 64;
  std::string out;
  out.reserve(bytes);
  Stamps stamps;
  for (const auto& line : page.lines) {
    out += "{\"rank\":";
    out += std::to_string(line.task_index);
    out += ",\"ts\":\"";
    out += stamps.of(line.time_ms);
    out += "\",\"line\":";
    append_json_string(out, line.text);
    out += line.partial ? ",\"partial\":true}\n" : "}\n";
  }
  return out;
}

nlohmann::json to_json(const MergedPage& page) {
  nlohmann::json lines = nlohmann::json::array();
  for (const auto& line : page.lines) {
    nlohmann::json entry = {line.task_index, line.time_ms, line.text};
    if (line.partial) entry.push_back(true);  // a piece of a longer line: no newline after it
    lines.push_back(std::move(entry));
  }
  return {{"lines", std::move(lines)}, {"next", page.next}, {"more", page.more}, {"truncated", page.more}};
}

}  // namespace ag::head
