#include "worker/simple_command.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace ag::worker {
namespace {

// Characters with no meaning to the shell outside quotes.
bool plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::strchr("_-./,:+@%=", c) != nullptr;
}

// dash's builtins and reserved words: a command named so is not a program on PATH.
constexpr std::array<std::string_view, 47> kShellWords = {
    ".",    ":",     "[",     "alias",  "bg",     "break",  "cd",       "chdir",   "command", "continue",
    "echo", "eval",  "exec",  "exit",   "export", "false",  "fc",       "fg",      "getopts", "hash",
    "jobs", "kill",  "local", "printf", "pwd",    "read",   "readonly", "return",  "set",     "shift",
    "test", "times", "trap",  "true",   "type",   "ulimit", "umask",    "unalias", "unset",   "wait",
    "case", "do",    "done",  "elif",   "else",   "esac",   "fi"};
constexpr std::array<std::string_view, 7> kMoreKeywords = {"for", "if", "in", "then", "until", "while", "function"};

bool shell_word(std::string_view word) {
  return std::find(kShellWords.begin(), kShellWords.end(), word) != kShellWords.end() ||
         std::find(kMoreKeywords.begin(), kMoreKeywords.end(), word) != kMoreKeywords.end();
}

}  // namespace

std::optional<std::vector<std::string>> simple_command(std::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (plain(c)) {
      word.push_back(c);
    } else if (c == '\'') {  // literal up to the next quote
      const size_t close = line.find('\'', i + 1);
      if (close == std::string_view::npos) return std::nullopt;
      word.append(line.substr(i + 1, close - i - 1));
      i = close;
    } else if (c == '"') {  // literal unless it holds what the shell expands or escapes
      const size_t close = line.find('"', i + 1);
      if (close == std::string_view::npos) return std::nullopt;
      const std::string_view inside = line.substr(i + 1, close - i - 1);
      if (inside.find_first_of("$`\\") != std::string_view::npos) return std::nullopt;
      word.append(inside);
      i = close;
    } else if (c == '\\' && i + 1 < line.size() && line[i + 1] != '\n') {
      word.push_back(line[++i]);
    } else {
      return std::nullopt;  // $ ` | & ; < > ( ) { } * ? [ ] ~ # ! newline, ...
    }
  }
  if (in_word) words.push_back(std::move(word));
  // `exec CMD ...` is CMD ... in the shell's own process, which this is too.
  if (!words.empty() && words.front() == "exec" && words.size() > 1 && words[1].rfind('-', 0) != 0) {
    words.erase(words.begin());
  }
  if (words.empty()) return std::nullopt;
  const std::string& program = words.front();
  // An assignment (NAME=value), a builtin or keyword, or an empty name: the shell's.
  if (program.empty() || program.find('=') != std::string::npos || shell_word(program)) return std::nullopt;
  return words;
}

std::vector<std::string> program_candidates(const std::string& program, std::string_view path) {
  if (program.find('/') != std::string::npos) return {program};
  std::vector<std::string> candidates;
  size_t start = 0;
  while (true) {
    const size_t end = path.find(':', start);
    std::string_view dir = path.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    candidates.push_back(dir.empty() ? program : std::string(dir) + "/" + program);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return candidates;
}

}  // namespace ag::worker
