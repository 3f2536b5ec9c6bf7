// What the CLI prints of names and logs: shown, never obeyed by the terminal.
#include "cli/table.h"

#include <gtest/gtest.h>

#include <sstream>

namespace ag::cli {
namespace {

TEST(TerminalSafe, EscapeSequencesAreShownNotObeyed) {
  // Clear the screen, set the window title, hide text; then a C1 CSI (U+009B).
  std::string hostile = "\x1b[2J\x1b]0;owned\x07\x1b[8mhidden\xc2\x9b" "31m";
  EXPECT_EQ(terminal_safe(hostile, false), "\\x1b[2J\\x1b]0;owned\\x07\\x1b[8mhidden\\xc2\\x9b31m");
}

TEST(TerminalSafe, LogLinesKeepTheirLayoutAndTextItsCharacters) {
  EXPECT_EQ(terminal_safe("epoch 1\tloss 0.5\r\nnext\n", true), "epoch 1\tloss 0.5\r\nnext\n");
  EXPECT_EQ(terminal_safe("a\nb", false), "a\\x0ab");
  EXPECT_EQ(terminal_safe("naïve — ✓ 日本", false), "naïve — ✓ 日本");
  EXPECT_EQ(terminal_safe(std::string("nul\0del\x7f", 8), true), "nul\\x00del\\x7f");
}

TEST(TerminalSafe, EveryEscapedByteIsFoundWhereverItStands) {
  // The scan reads eight bytes at a time: each byte that must be escaped, at each place
  // within a word and in the tail, among text that needs none (newlines and UTF-8 too).
  const std::string plain = "epoch 12 loss 0.25\tnaïve ✓\r\n";
  for (unsigned char bad : {0x00, 0x01, 0x1b, 0x1f, 0x7f, 0xc2}) {
    for (size_t at = 0; at <= plain.size(); ++at) {
      std::string text = plain;
      text.insert(at, 1, static_cast<char>(bad));
      EXPECT_FALSE(terminal_safe_as_is(text, true)) << static_cast<int>(bad) << " at " << at;
    }
  }
  EXPECT_TRUE(terminal_safe_as_is(plain + plain + "x", true));
  EXPECT_FALSE(terminal_safe_as_is(plain, false));  // line breaks, in a table cell
  EXPECT_TRUE(terminal_safe_as_is("", true));
}

TEST(TerminalSafe, TableCellsAreEscapedAndStillAligned) {
  Table table({"NAME", "STATE"});
  table.add({"\x1b[31mred", "RUNNING"});
  table.add({"plain", "PENDING"});
  std::ostringstream out;
  table.print(out);
  EXPECT_EQ(out.str(),
            "NAME         STATE\n"
            "\\x1b[31mred  RUNNING\n"
            "plain        PENDING\n");
}

}  // namespace
}  // namespace ag::cli
