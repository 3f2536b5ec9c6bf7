// --config FILE (cli/config_file.h), over a small command of each kind of option.
#include "cli/config_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace ag::cli {
namespace {

using ::testing::HasSubstr;

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ag-config-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    command_ = app_.add_subcommand("start-worker");
    command_->add_option("--port", port_)->check(CLI::Range(1, 65535));
    command_->add_option("--name", name_);
    command_->add_option("--label", labels_);
    command_->add_flag("--block", block_);
    command_->add_option("--config", config_);
    app_.add_flag("--insecure", insecure_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Parses `args` after `ag start-worker`, then applies a file holding `text`.
  Result<std::vector<std::string>> run(const std::string& text, std::vector<std::string> args = {}) {
    path_ = (dir_ / "worker.conf").string();
    std::ofstream(path_) << text;
    args.insert(args.begin(), "start-worker");
    std::reverse(args.begin(), args.end());
    app_.parse(args);
    return apply_config_file(*command_, app_, path_);
  }

  std::filesystem::path dir_;
  std::string path_;
  CLI::App app_{"ag"};
  CLI::App* command_ = nullptr;
  int port_ = 6379;
  std::string name_, config_;
  std::vector<std::string> labels_;
  bool block_ = false, insecure_ = false;
};

TEST_F(ConfigFileTest, KeysSetTheirOptionsAndTheCommandLineWins) {
  auto applied = run("port = 7000\nname = \"n 1\"\nlabel = [\"a=1\", \"b=2\"]\nblock = true\ninsecure = yes\n",
                     {"--port", "8000"});
  ASSERT_TRUE(applied.ok()) << applied.error().message;
  EXPECT_EQ(port_, 8000);
  EXPECT_EQ(name_, "n 1");
  EXPECT_EQ(labels_, (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_TRUE(block_);
  EXPECT_TRUE(insecure_);
  EXPECT_EQ(applied.value(), (std::vector<std::string>{"name", "label", "block", "insecure"}));
}

TEST_F(ConfigFileTest, EachBadKeyOrValueNamesTheFileTheKeyAndTheFix) {
  struct Case {
    std::string text;
    std::string words;
  };
  for (const Case& c : std::vector<Case>{
           {"prot = 1\n", "unknown key 'prot' (did you mean 'port'?); keys are the long flags of `ag start-worker`"},
           {"port = \"abc\"\n", "key 'port': 'abc' is not a whole number; give one from 1 to 65535; fix it in"},
           {"port = 70000\n", "key 'port': 70000 is out of range"},
           {"block = perhaps\n", "key 'block': 'perhaps' is not true or false"},
           {"name = [\"a\", \"b\"]\n", "key 'name': it takes one value, not a list"},
           {"token = \"agj_1\"\n", "a token does not belong in a config file"},
           {"config = \"other.conf\"\n", "a config file cannot name another one"},
           {"[worker]\nport = 1\n", "sections ([worker]) are not used"},
       }) {
    SCOPED_TRACE(c.text);
    app_.clear();
    auto applied = run(c.text);
    ASSERT_FALSE(applied.ok());
    EXPECT_THAT(applied.error().message, HasSubstr("config file " + path_ + ": "));
    EXPECT_THAT(applied.error().message, HasSubstr(c.words));
  }
}

TEST_F(ConfigFileTest, AFileThatCannotBeReadIsNamed) {
  app_.parse(std::vector<std::string>{"start-worker"});
  EXPECT_THAT(apply_config_file(*command_, app_, (dir_ / "missing.conf").string()).error().message,
              HasSubstr("missing.conf: cannot read it (No such file or directory)"));
  EXPECT_THAT(apply_config_file(*command_, app_, dir_.string()).error().message,
              HasSubstr("cannot read it (not a regular file)"));
}

}  // namespace
}  // namespace ag::cli
