#include "worker/simple_command.h"

#include <gtest/gtest.h>

#include "common/shell_quote.h"
#include "worker/task_start.h"

using ag::shell_quote;
using ag::worker::ExecArgs;
using ag::worker::LaunchRequest;
using ag::worker::program_candidates;
using ag::worker::simple_command;
using Words = std::vector<std::string>;

TEST(SimpleCommandTest, AProgramAndItsArgumentsAreItsWords) {
  EXPECT_EQ(simple_command("python train.py --lr=0.1  --epochs 3"),
            (Words{"python", "train.py", "--lr=0.1", "--epochs", "3"}));
  EXPECT_EQ(simple_command("\ttorchrun\t--nproc-per-node 2 x.py "),
            (Words{"torchrun", "--nproc-per-node", "2", "x.py"}));
  EXPECT_EQ(simple_command("/opt/run.sh"), (Words{"/opt/run.sh"}));
  EXPECT_EQ(simple_command("./a\\ b c"), (Words{"./a b", "c"}));
  EXPECT_EQ(simple_command("python \"a b\" '' x"), (Words{"python", "a b", "", "x"}));
}

TEST(SimpleCommandTest, ExecIsTheShellsOwnProcessAndSoIsThis) {
  EXPECT_EQ(simple_command("exec bash -c 'echo $EPOCHREALTIME'"), (Words{"bash", "-c", "echo $EPOCHREALTIME"}));
  EXPECT_FALSE(simple_command("exec"));
  EXPECT_FALSE(simple_command("exec -a name prog"));
  EXPECT_FALSE(simple_command("exec true"));
}

// `ag submit -- ARGS...` quotes each argument with shell_quote.
TEST(SimpleCommandTest, WhatTheCliQuotesComesBackWordForWord) {
  const std::vector<Words> cases = {
      {"python", "-c", "import sys; print(sys.argv)", "it's", "a\"b", "$HOME", "*", "tab\there", "new\nline", ""},
      {"/usr/bin/env", "A=1", "printenv", "A"},
      {"bash", "-c", "echo '$x' \"$y\" `z` \\"},
  };
  for (const auto& argv : cases) {
    std::string line;
    for (const auto& arg : argv) line += (line.empty() ? "" : " ") + shell_quote(arg);
    EXPECT_EQ(simple_command(line), argv) << line;
  }
}

TEST(SimpleCommandTest, AnythingTheShellGivesAMeaningToKeepsTheShell) {
  for (const char* line : {"",
                           "   ",
                           "echo hi",
                           "true",
                           "cd /tmp",
                           "export A=1",
                           "exit 3",
                           ". ./env.sh",
                           "FOO=1 python x.py",
                           "python x.py > out.log",
                           "python < in",
                           "a; b",
                           "a && b",
                           "a || b",
                           "a | b",
                           "a &",
                           "python $HOME/x",
                           "python ${X}",
                           "python $(pwd)",
                           "python `pwd`",
                           "ls *.py",
                           "ls x?",
                           "ls [ab]",
                           "~/bin/run",
                           "# comment",
                           "python x # note",
                           "if true",
                           "while x",
                           "for i",
                           "case x",
                           "{ a; }",
                           "(a)",
                           "! a",
                           "a\nb",
                           "python 'x",
                           "python \"x",
                           "python \"$X\"",
                           "python \"a\\\"b\"",
                           "python \"`x`\"",
                           "python x\\"}) {
    EXPECT_FALSE(simple_command(line)) << line;
  }
}

TEST(SimpleCommandTest, CandidatesFollowPathLikeTheShell) {
  EXPECT_EQ(program_candidates("python", "/usr/bin:/bin"), (Words{"/usr/bin/python", "/bin/python"}));
  EXPECT_EQ(program_candidates("x", "/a::/b"), (Words{"/a/x", "x", "/b/x"}));
  EXPECT_EQ(program_candidates("x", ""), (Words{"x"}));
  EXPECT_EQ(program_candidates("./run.sh", "/usr/bin"), (Words{"./run.sh"}));
  EXPECT_EQ(program_candidates("bin/run", "/usr/bin"), (Words{"bin/run"}));
}

TEST(SimpleCommandTest, ExecArgsCarryTheDirectExecWithPwdAsTheShellSetsIt) {
  LaunchRequest request;
  request.working_dir = "/srv/work";
  request.argv = {"/bin/sh", "-c", "python 'a b'"};
  request.envp = {"PATH=/usr/bin:/bin", "PWD=/elsewhere", "HOME=/root"};
  const ExecArgs args(request);
  EXPECT_EQ(args.words, (Words{"python", "a b"}));
  EXPECT_EQ(args.candidates, (Words{"/usr/bin/python", "/bin/python"}));
  ASSERT_EQ(args.direct_argv.size(), 3u);
  EXPECT_STREQ(args.direct_argv[1], "a b");
  EXPECT_EQ(args.direct_argv[2], nullptr);
  std::vector<std::string> env;
  for (char* var : args.direct_envp) {
    if (var) env.emplace_back(var);
  }
  EXPECT_EQ(env, (Words{"PATH=/usr/bin:/bin", "HOME=/root", "PWD=/srv/work"}));
  EXPECT_STREQ(args.argv[0], "/bin/sh") << "the shell stays the fallback";

  // As dash passes the environment on: names a shell variable can have, each once with
  // its last value (a duplicate AG_TASK_MARKER is the runner's own, set last).
  request.envp = {"PATH=/usr/bin", "A-B=1", "NO_VALUE", "X=1", "1X=2", "X=2", "_ok9=3", "PWD=/a", "PWD=/b"};
  const ExecArgs filtered(request);
  env.clear();
  for (char* var : filtered.direct_envp) {
    if (var) env.emplace_back(var);
  }
  EXPECT_EQ(env, (Words{"PATH=/usr/bin", "X=2", "_ok9=3", "PWD=/srv/work"}));

  request.argv = {"/bin/sh", "-c", "echo hi"};
  EXPECT_TRUE(ExecArgs(request).candidates.empty());
  request.argv = {"/usr/bin/podman", "run", "x"};
  EXPECT_TRUE(ExecArgs(request).candidates.empty()) << "a container's client is run as given";
  request.argv = {"/bin/sh", "-c", "python x"};
  request.envp = {"HOME=/root"};
  EXPECT_TRUE(ExecArgs(request).candidates.empty()) << "no PATH: the shell's own default";
}
