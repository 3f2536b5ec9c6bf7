// The units and config files `ag install-service` writes (cli/install_service.h).
#include "cli/install_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <utility>

#include "cli/packaged_files.h"

namespace ag::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(InstallServiceTest, TheUnitIsThePackagedOneRunningThisBinaryWithItsConfigDir) {
  auto unit = unit_text("worker", "/opt/ag/bin/ag", "/srv/ag-etc", "ignored");
  ASSERT_TRUE(unit.ok()) << unit.error().message;
  EXPECT_THAT(unit.value(), HasSubstr("\nExecStart=/opt/ag/bin/ag start-worker --block --config /srv/ag-etc/worker.conf\n"));
  EXPECT_THAT(unit.value(), HasSubstr("\nKillMode=process\n"));
  EXPECT_THAT(unit.value(), HasSubstr("\nRestartKillSignal=SIGUSR2\n"));
  EXPECT_THAT(unit.value(), Not(HasSubstr("/usr/bin/ag")));
  EXPECT_THAT(unit.value(), Not(HasSubstr("/etc/aethergrid")));
  // Everything else as packaged.
  std::string back = unit.value();
  for (auto [from, to] : {std::pair{"/opt/ag/bin/ag ", "/usr/bin/ag "}, {"/srv/ag-etc", "/etc/aethergrid"}}) {
    for (size_t at = back.find(from); at != std::string::npos; at = back.find(from, at)) back.replace(at, std::strlen(from), to);
  }
  EXPECT_EQ(back, packaged_files().worker_unit);
}

TEST(InstallServiceTest, TheHeadRunsAsTheGivenAccount) {
  auto unit = unit_text("head", "/usr/local/bin/ag", "/etc/aethergrid", "svc-ag");
  ASSERT_TRUE(unit.ok());
  EXPECT_THAT(unit.value(), HasSubstr("\nUser=svc-ag\nGroup=svc-ag\n"));
  EXPECT_THAT(unit_text("head", "/usr/bin/ag", "/etc/aethergrid", "a b").error().message, HasSubstr("--user a b"));
}

TEST(InstallServiceTest, PathsSystemdWouldSplitAreRefused) {
  EXPECT_THAT(unit_text("worker", "/opt/my tools/ag", "/etc/aethergrid", "").error().message,
              HasSubstr("/opt/my tools/ag has characters a systemd command line would split"));
  EXPECT_FALSE(unit_text("worker", "/usr/bin/ag", "/etc/%i", "").ok());
}

TEST(InstallServiceTest, SettingsReplaceTheSampleLinesAndListsStayLists) {
  auto text = config_text("worker", "/srv/etc", {"head-node=10.0.0.1:6379", "num-cpus=4", "label=a=1", "label=b=2",
                                                 "no-task-limits=true", "task-user=say \"hi\""});
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_THAT(text.value(), HasSubstr("\nhead-node = \"10.0.0.1:6379\"\n"));
  EXPECT_THAT(text.value(), Not(HasSubstr("# head-node =")));
  EXPECT_THAT(text.value(), HasSubstr("\nnum-cpus = 4\n"));
  EXPECT_THAT(text.value(), HasSubstr("\nlabel = [\"a=1\", \"b=2\"]\n"));
  EXPECT_THAT(text.value(), HasSubstr("\nno-task-limits = true\n"));
  EXPECT_THAT(text.value(), HasSubstr("\ntask-user = \"say \\\"hi\\\"\"\n"));
  EXPECT_THAT(text.value(), HasSubstr("\ntoken-file = \"/srv/etc/join-token\"\n"));
  // Unset options stay commented out with their defaults.
  EXPECT_THAT(text.value(), HasSubstr("\n# kill-grace = 10\n"));
}

TEST(InstallServiceTest, BadSettingsSayWhatIsWrong) {
  EXPECT_THAT(config_text("worker", "/etc/aethergrid", {"num-cpus"}).error().message, HasSubstr("give KEY=VALUE"));
  EXPECT_THAT(config_text("worker", "/etc/aethergrid", {"=3"}).error().message, HasSubstr("give KEY=VALUE"));
  EXPECT_THAT(config_text("worker", "/etc/aethergrid", {"nmu-cpus=3"}).error().message,
              HasSubstr("ag start-worker has no option --nmu-cpus"));
  EXPECT_THAT(config_text("head", "/etc/aethergrid", {"head-node=x:1"}).error().message,
              HasSubstr("ag start-head has no option --head-node"));
  EXPECT_THAT(config_text("worker", "/etc/aethergrid", {"num-cpus=1", "num-cpus=2"}).error().message,
              HasSubstr("given 2 times, but --num-cpus takes one value"));
  EXPECT_THAT(config_text("worker", "/etc/aethergrid", {"a.*=1"}).error().message, HasSubstr("no such option"));
}

}  // namespace
}  // namespace ag::cli
