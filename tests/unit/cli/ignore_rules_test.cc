// IgnoreRules: gitignore semantics for packing a working_dir. Each expectation was
// checked against `git check-ignore --no-index` with the same .gitignore.
#include "cli/ignore_rules.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ag::cli {
namespace {

// Rules from one .gitignore at the packed root.
IgnoreRules root_rules(const std::vector<std::string>& lines) {
  IgnoreRules rules;
  rules.add("", lines);
  return rules;
}

constexpr bool kFile = false;
constexpr bool kDir = true;

TEST(IgnoreRulesTest, NoRulesIgnoreNothing) {
  IgnoreRules rules;

  EXPECT_FALSE(rules.ignored("a.log", kFile));
  EXPECT_FALSE(rules.ignored("dir", kDir));
}

TEST(IgnoreRulesTest, NameWithoutSlashMatchesAtAnyDepth) {
  const IgnoreRules rules = root_rules({"*.log"});

  EXPECT_TRUE(rules.ignored("app.log", kFile));
  EXPECT_TRUE(rules.ignored("a/app.log", kFile));
  EXPECT_TRUE(rules.ignored("a/b/c/app.log", kFile));
  EXPECT_TRUE(rules.ignored("old.log", kDir));
  EXPECT_FALSE(rules.ignored("app.log.txt", kFile));
  EXPECT_FALSE(rules.ignored("applog", kFile));
}

TEST(IgnoreRulesTest, StarAndQuestionMarkDoNotCrossSlashes) {
  const IgnoreRules rules = root_rules({"docs/*.md", "v?.txt"});

  EXPECT_TRUE(rules.ignored("docs/a.md", kFile));
  EXPECT_FALSE(rules.ignored("docs/sub/a.md", kFile));
  EXPECT_TRUE(rules.ignored("v1.txt", kFile));
  EXPECT_TRUE(rules.ignored("x/v2.txt", kFile));
  EXPECT_FALSE(rules.ignored("v10.txt", kFile));
}

TEST(IgnoreRulesTest, LeadingSlashAnchorsToTheRoot) {
  const IgnoreRules rules = root_rules({"/build"});

  EXPECT_TRUE(rules.ignored("build", kDir));
  EXPECT_TRUE(rules.ignored("build", kFile));
  EXPECT_TRUE(rules.ignored("build/out.o", kFile));
  EXPECT_FALSE(rules.ignored("src/build", kDir));
  EXPECT_FALSE(rules.ignored("src/build/out.o", kFile));
}

TEST(IgnoreRulesTest, InnerSlashAnchorsToTheRoot) {
  const IgnoreRules rules = root_rules({"docs/*.md"});

  EXPECT_TRUE(rules.ignored("docs/readme.md", kFile));
  EXPECT_FALSE(rules.ignored("x/docs/readme.md", kFile));
  EXPECT_FALSE(rules.ignored("readme.md", kFile));
}

TEST(IgnoreRulesTest, TrailingSlashMatchesFoldersOnly) {
  const IgnoreRules rules = root_rules({"build/"});

  EXPECT_TRUE(rules.ignored("build", kDir));
  EXPECT_TRUE(rules.ignored("src/build", kDir));
  EXPECT_FALSE(rules.ignored("build", kFile));
  EXPECT_FALSE(rules.ignored("src/build", kFile));
}

TEST(IgnoreRulesTest, TrailingSlashStillCoversWhatIsInsideTheFolder) {
  const IgnoreRules rules = root_rules({"build/"});

  EXPECT_TRUE(rules.ignored("build/out.o", kFile));
  EXPECT_TRUE(rules.ignored("src/build/x/out.o", kFile));
  EXPECT_FALSE(rules.ignored("buildx/out.o", kFile));
}

TEST(IgnoreRulesTest, LeadingDoubleStarMatchesInAnyFolder) {
  const IgnoreRules rules = root_rules({"**/tmp"});

  EXPECT_TRUE(rules.ignored("tmp", kDir));
  EXPECT_TRUE(rules.ignored("a/tmp", kDir));
  EXPECT_TRUE(rules.ignored("a/b/tmp", kFile));
  EXPECT_FALSE(rules.ignored("a/tmpx", kFile));
}

TEST(IgnoreRulesTest, InnerDoubleStarMatchesZeroOrMoreFolders) {
  const IgnoreRules rules = root_rules({"a/**/b"});

  EXPECT_TRUE(rules.ignored("a/b", kFile));
  EXPECT_TRUE(rules.ignored("a/x/b", kFile));
  EXPECT_TRUE(rules.ignored("a/x/y/b", kDir));
  EXPECT_FALSE(rules.ignored("z/a/x/b", kFile));
  EXPECT_FALSE(rules.ignored("a/xb", kFile));
}

TEST(IgnoreRulesTest, TrailingDoubleStarMatchesEverythingInsideButNotTheFolder) {
  const IgnoreRules rules = root_rules({"logs/**"});

  EXPECT_FALSE(rules.ignored("logs", kDir));
  EXPECT_TRUE(rules.ignored("logs/a", kFile));
  EXPECT_TRUE(rules.ignored("logs/x/y.txt", kFile));
  EXPECT_FALSE(rules.ignored("a/logs/b", kFile));
}

TEST(IgnoreRulesTest, NegationReIncludesAfterABroaderRule) {
  const IgnoreRules rules = root_rules({"*.log", "!keep.log"});

  EXPECT_TRUE(rules.ignored("app.log", kFile));
  EXPECT_FALSE(rules.ignored("keep.log", kFile));
  EXPECT_FALSE(rules.ignored("sub/keep.log", kFile));
}

TEST(IgnoreRulesTest, LastMatchingRuleWins) {
  EXPECT_TRUE(root_rules({"!keep.log", "*.log"}).ignored("keep.log", kFile));
  EXPECT_FALSE(root_rules({"*.log", "!keep.log"}).ignored("keep.log", kFile));
  EXPECT_TRUE(root_rules({"*.log", "!keep.log", "keep.*"}).ignored("keep.log", kFile));
}

TEST(IgnoreRulesTest, CommentsAndBlankLinesAreNotRules) {
  const IgnoreRules rules = root_rules({"# a comment", "", "   ", "#*.py", "*.log"});

  EXPECT_FALSE(rules.ignored("# a comment", kFile));
  EXPECT_FALSE(rules.ignored("main.py", kFile));
  EXPECT_TRUE(rules.ignored("app.log", kFile));
}

TEST(IgnoreRulesTest, EscapedHashAndBangAreLiteralNames) {
  const IgnoreRules rules = root_rules({"\\#file", "\\!important"});

  EXPECT_TRUE(rules.ignored("#file", kFile));
  EXPECT_TRUE(rules.ignored("sub/#file", kFile));
  EXPECT_FALSE(rules.ignored("file", kFile));
  EXPECT_TRUE(rules.ignored("!important", kFile));
  EXPECT_FALSE(rules.ignored("important", kFile));
}

TEST(IgnoreRulesTest, TrailingUnescapedSpacesAndCarriageReturnsAreTrimmed) {
  const IgnoreRules rules = root_rules({"*.log  ", "*.tmp\r"});

  EXPECT_TRUE(rules.ignored("a.log", kFile));
  EXPECT_TRUE(rules.ignored("a.tmp", kFile));
}

TEST(IgnoreRulesTest, RegexCharactersInNamesAreLiteral) {
  const IgnoreRules rules = root_rules({"a.b", "f(1)+{2}$^|.txt"});

  EXPECT_TRUE(rules.ignored("a.b", kFile));
  EXPECT_FALSE(rules.ignored("axb", kFile));
  EXPECT_TRUE(rules.ignored("f(1)+{2}$^|.txt", kFile));
}

TEST(IgnoreRulesTest, BracketExpressionsMatchOneCharacter) {
  const IgnoreRules rules = root_rules({"file[0-9].txt", "x[!ab]"});

  EXPECT_TRUE(rules.ignored("file7.txt", kFile));
  EXPECT_FALSE(rules.ignored("fileA.txt", kFile));
  EXPECT_TRUE(rules.ignored("xc", kFile));
  EXPECT_FALSE(rules.ignored("xa", kFile));
}

TEST(IgnoreRulesTest, RulesWithABaseApplyOnlyInsideItsFolder) {
  IgnoreRules rules;
  rules.add("sub", {"*.tmp"});

  EXPECT_TRUE(rules.ignored("sub/a.tmp", kFile));
  EXPECT_TRUE(rules.ignored("sub/deeper/a.tmp", kFile));
  EXPECT_FALSE(rules.ignored("a.tmp", kFile));
  EXPECT_FALSE(rules.ignored("other/a.tmp", kFile));
  EXPECT_FALSE(rules.ignored("subway/a.tmp", kFile));
}

TEST(IgnoreRulesTest, AnchoredRulesWithABaseAreRelativeToItsFolder) {
  IgnoreRules rules;
  rules.add("sub", {"/build", "docs/*.md"});

  EXPECT_TRUE(rules.ignored("sub/build", kDir));
  EXPECT_FALSE(rules.ignored("build", kDir));
  EXPECT_FALSE(rules.ignored("sub/x/build", kDir));
  EXPECT_TRUE(rules.ignored("sub/docs/a.md", kFile));
  EXPECT_FALSE(rules.ignored("docs/a.md", kFile));
}

TEST(IgnoreRulesTest, RuleInAFolderDoesNotMatchTheFolderItself) {
  IgnoreRules rules;
  rules.add("sub", {"sub"});

  EXPECT_FALSE(rules.ignored("sub", kDir));
  EXPECT_TRUE(rules.ignored("sub/sub", kDir));
}

TEST(IgnoreRulesTest, DeeperGitignoreOverridesTheRootOne) {
  IgnoreRules rules;
  rules.add("", {"*.log"});
  rules.add("sub", {"!keep.log"});

  EXPECT_FALSE(rules.ignored("sub/keep.log", kFile));
  EXPECT_TRUE(rules.ignored("keep.log", kFile));
  EXPECT_TRUE(rules.ignored("sub/other.log", kFile));
}

// --- Cases where a naive translation differs from git ------------------------------

// Regression: a negated rule that matches a folder re-includes every path inside it, even
// a path that itself matches an earlier ignore rule. git checks each pattern
// against the path itself only, so with
// "*.log" then "!logs/", `git check-ignore logs/a.log` reports it ignored by "*.log".
// IgnoreRules appends "(?:/.*)?" to every pattern (and, for "dir/" rules, tests the
// parent), so "!logs/" also matches "logs/a.log" and un-ignores it: files the user
// excluded get packed and uploaded.
TEST(IgnoreRulesTest, NegatedFolderRuleDoesNotReIncludeIgnoredFilesInside) {
  EXPECT_TRUE(root_rules({"*.log", "!logs/"}).ignored("logs/a.log", kFile));
  EXPECT_TRUE(root_rules({"*.log", "!important"}).ignored("important/x.log", kFile));
}

// Regression: a bracket expression is copied into the regex as is, so "[!x]" becomes
// "[^x]" and matches '/'. git's bracket expressions never match a slash:
// "a[!x]b" ignores "ayb" but not "a/b".
TEST(IgnoreRulesTest, BracketExpressionDoesNotMatchSlash) {
  const IgnoreRules rules = root_rules({"a[!x]b"});

  EXPECT_TRUE(rules.ignored("ayb", kFile));
  EXPECT_FALSE(rules.ignored("a/b", kFile));
}

// Regression: "**" that is not a whole path segment becomes ".*" and crosses folders.
// git treats it as a plain "*": "foo**bar" ignores "fooxbar" but not "foo/x/bar".
TEST(IgnoreRulesTest, DoubleStarInsideANameDoesNotCrossFolders) {
  const IgnoreRules rules = root_rules({"foo**bar"});

  EXPECT_TRUE(rules.ignored("fooxbar", kFile));
  EXPECT_FALSE(rules.ignored("foo/x/bar", kFile));
}

// Regression: git keeps a trailing space escaped with a backslash ("q\ " ignores "q ").
// add() trims every trailing space first, leaving a dangling backslash that turns
// into an invalid regex, and the rule is silently dropped.
TEST(IgnoreRulesTest, EscapedTrailingSpaceIsKept) { EXPECT_TRUE(root_rules({"q\\ "}).ignored("q ", kFile)); }

}  // namespace
}  // namespace ag::cli
