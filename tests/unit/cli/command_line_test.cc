// The task command after `--` stays whole (cli/command_line.h), whichever option of
// `ag submit` stands before the `--`: a table over every option that takes several
// values, read from the real `ag submit` definition, each followed by `--` and commands
// with flags of their own.
#include "cli/command_line.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/submit_options.h"

namespace ag::cli {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// `ag` as main.cc builds it, as far as submit goes.
struct Ag {
  CLI::App app{"ag"};
  ConnectionOptions connection;
  SubmitOptions submit;
  Ag() {
    app.name("ag");
    app.require_subcommand(1);
    app.fallthrough();
    add_connection_options(app, connection);
    add_submit_command(app, submit);
    app.add_subcommand("logs")->add_option("job_id");
  }
  void parse(const std::vector<std::string>& args) { parse_command_line(app, args, {{"submit", &submit.command}}); }
};

// A value each repeatable option accepts.
std::string value_for(const std::string& flag) {
  if (flag == "--env") return "PYTHONPATH=/opt/lib:$PYTHONPATH";
  if (flag == "--exclude") return "data/";
  if (flag == "--mount") return "/data:/data:ro";
  if (flag == "--constraint") return "gpu=a100";
  return "job_0123456789abcdef";  // --after, --after-any, --after-failed
}

// Every option of `ag submit` that takes more than one value (its long name).
std::vector<std::string> repeatable_options() {
  Ag ag;
  std::vector<std::string> flags;
  for (const CLI::Option* option : ag.app.get_subcommand("submit")->get_options()) {
    if (option->get_items_expected_max() > 1 && !option->get_lnames().empty()) {
      flags.push_back("--" + option->get_lnames().front());
    }
  }
  return flags;
}

const std::vector<std::vector<std::string>> kCommands = {
    {"python", "train.py", "--epochs", "1"},
    {"bash", "-c", "echo one; echo two"},
    {"python", "-u", "-c", "import sys; print(sys.argv)", "--", "-x"},
    {"env", "--", "ls", "-la"},
    {"--weird-first-word", "-n", "3"},
};

TEST(CommandLineTest, TheRepeatableOptionsAreTheOnesThatSwallowedTheCommand) {
  const std::vector<std::string> flags = repeatable_options();
  // If an option is added, it is in the table below by construction; these must be there.
  for (const char* flag : {"--env", "--exclude", "--mount", "--constraint", "--after", "--after-any", "--after-failed"}) {
    EXPECT_NE(std::find(flags.begin(), flags.end(), flag), flags.end()) << flag;
  }
}

TEST(CommandLineTest, EveryRepeatableOptionBeforeTheSeparatorLeavesTheCommandWhole) {
  for (const std::string& flag : repeatable_options()) {
    for (const auto& command : kCommands) {
      for (bool inline_value : {false, true}) {
        Ag ag;
        std::vector<std::string> args = {"ag", "submit", "-n", "2"};
        if (inline_value) {
          args.push_back(flag + "=" + value_for(flag));
        } else {
          args.push_back(flag);
          args.push_back(value_for(flag));
        }
        args.push_back("--");
        args.insert(args.end(), command.begin(), command.end());
        SCOPED_TRACE(flag + (inline_value ? "=" : " ") + " then " + command[0] + " " + command[1]);
        ASSERT_NO_THROW(ag.parse(args));
        EXPECT_THAT(ag.submit.command, ElementsAreArray(command));
        EXPECT_EQ(ag.submit.num_workers, 2);
      }
    }
  }
}

TEST(CommandLineTest, SeveralValuesOfOneOptionAndGlobalOptionsAroundTheSubcommand) {
  Ag ag;
  ag.parse({"ag", "--address", "10.0.0.1:6379", "-o", "json", "submit", "--env", "A=1", "--env", "B=2", "--token-file",
            "/tmp/t", "--exclude", "data/", "--exclude", "*.ckpt", "--working-dir", ".", "--", "python", "train.py",
            "--epochs", "1"});
  EXPECT_THAT(ag.submit.command, ElementsAreArray({"python", "train.py", "--epochs", "1"}));
  EXPECT_THAT(ag.submit.env, ElementsAreArray({"A=1", "B=2"}));
  EXPECT_THAT(ag.submit.excludes, ElementsAreArray({"data/", "*.ckpt"}));
  EXPECT_EQ(ag.connection.address, "10.0.0.1:6379");
  EXPECT_EQ(ag.connection.output, "json");
  EXPECT_EQ(ag.connection.token_file, "/tmp/t");
}

TEST(CommandLineTest, TheReadmeExampleParses) {
  Ag ag;
  ag.parse({"ag", "submit", "-n", "2", "--working-dir", ".", "--exclude", "data/", "--python", "/usr/bin/python3",
            "--env", "PYTHONPATH=/opt/lib:$PYTHONPATH", "--", "python", "train.py", "--epochs", "1"});
  EXPECT_THAT(ag.submit.command, ElementsAreArray({"python", "train.py", "--epochs", "1"}));
  EXPECT_THAT(ag.submit.env, ElementsAreArray({"PYTHONPATH=/opt/lib:$PYTHONPATH"}));
  EXPECT_EQ(ag.submit.python, "/usr/bin/python3");
}

TEST(CommandLineTest, AnAfterListWithCommasStillSplitsAndTheCommandStaysWhole) {
  Ag ag;
  ag.parse({"ag", "submit", "--after", "job_a,job_b", "--", "bash", "-c", "echo done"});
  EXPECT_THAT(ag.submit.after, ElementsAreArray({"job_a", "job_b"}));
  EXPECT_THAT(ag.submit.command, ElementsAreArray({"bash", "-c", "echo done"}));
}

TEST(CommandLineTest, WithoutTheSeparatorTheWordsAreStillTheCommand) {
  Ag ag;
  ag.parse({"ag", "submit", "-n", "2", "python", "train.py"});
  EXPECT_THAT(ag.submit.command, ElementsAreArray({"python", "train.py"}));
}

TEST(CommandLineTest, AnEmptyCommandAfterTheSeparatorIsLeftForTheUsageCheck) {
  Ag ag;
  ag.parse({"ag", "submit", "--env", "A=1", "--"});
  EXPECT_TRUE(ag.submit.command.empty());
  EXPECT_EQ(check_submit_usage(ag.submit)->message.rfind("no command given", 0), 0u);
}

TEST(CommandLineTest, WordsOnBothSidesOfTheSeparatorAreRefused) {
  Ag ag;
  try {
    ag.parse({"ag", "submit", "python", "--", "train.py"});
    FAIL() << "parsed";
  } catch (const CLI::ValidationError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'python' stands before `--`"));
  }
}

TEST(CommandLineTest, AnOptionOfAgAfterTheSeparatorIsTheCommandsNotAgs) {
  Ag ag;
  ag.parse({"ag", "submit", "--", "ag", "submit", "--address", "x", "--", "true"});
  EXPECT_THAT(ag.submit.command, ElementsAreArray({"ag", "submit", "--address", "x", "--", "true"}));
  EXPECT_EQ(ag.connection.address, "");
}

TEST(CommandLineTest, OtherCommandsAreParsedAsCliElevenDoes) {
  Ag ag;
  const std::vector<std::string> args = {"ag", "logs", "--", "job_1"};
  EXPECT_EQ(trailing_command_start(ag.app, args, {{"submit", &ag.submit.command}}), args.size());
  ag.parse(args);
  EXPECT_TRUE(ag.submit.command.empty());
}

TEST(CommandLineTest, TheSeparatorIsFoundPastGlobalOptionValues) {
  Ag ag;
  // "submit" as the value of --address is not the subcommand.
  const std::vector<std::string> args = {"ag", "--address", "submit", "submit", "--env", "A=1", "--", "x"};
  EXPECT_EQ(trailing_command_start(ag.app, args, {{"submit", &ag.submit.command}}), 6u);
}

// Why the cut exists: CLI11 on its own gives the words after `--` to the options.
TEST(CommandLineTest, CliElevenAloneTakesTheSeparatorAsTheEndOfARepeatableOption) {
  Ag ag;
  std::vector<std::string> args = {"ag", "submit", "--env", "A=1", "--", "python", "train.py", "--epochs", "1"};
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  EXPECT_THROW(ag.app.parse(static_cast<int>(argv.size()), argv.data()), CLI::ParseError);
}

}  // namespace
}  // namespace ag::cli
