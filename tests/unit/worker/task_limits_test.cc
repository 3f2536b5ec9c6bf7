// Task limits: reading the machine's cgroup layout and writing the caps' values.
#include "worker/task_limits.h"

#include <gtest/gtest.h>

namespace ag::worker {
namespace {

// Hybrid layout: v1 controllers, v2 mounted beside them without controllers.
constexpr const char* kHybridMountinfo =
    "25 31 0:22 / /sys rw,nosuid shared:7 - sysfs sysfs rw\n"
    "32 25 0:27 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755\n"
    "33 32 0:28 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate\n"
    "36 32 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:14 - cgroup cgroup rw,cpu,cpuacct\n"
    "38 32 0:33 / /sys/fs/cgroup/memory rw,nosuid shared:16 - cgroup cgroup rw,memory\n"
    "39 32 0:34 / /sys/fs/cgroup/pids rw,nosuid shared:17 master:3 - cgroup cgroup rw,pids\n";

TEST(CgroupMountsTest, FindsEachHierarchyAndItsControllers) {
  auto mounts = parse_cgroup_mounts(kHybridMountinfo);

  ASSERT_EQ(mounts.size(), 4u);
  EXPECT_EQ(mounts[0].path, "/sys/fs/cgroup/unified");
  EXPECT_EQ(mounts[0].version, 2);
  EXPECT_EQ(mounts[1].path, "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(mounts[1].version, 1);
  EXPECT_TRUE(mounts[1].controllers.count("cpu"));
  EXPECT_TRUE(mounts[1].controllers.count("cpuacct"));
  EXPECT_TRUE(mounts[2].controllers.count("memory"));
  EXPECT_TRUE(mounts[3].controllers.count("pids")) << "optional fields before the separator are skipped";
}

TEST(CgroupMountsTest, MalformedLinesAreSkipped) {
  EXPECT_TRUE(parse_cgroup_mounts("").empty());
  EXPECT_TRUE(parse_cgroup_mounts("garbage\n1 2 3\n").empty());
  EXPECT_TRUE(parse_cgroup_mounts("33 32 0:28 / /sys/fs/cgroup rw -\n").empty()) << "no type after the separator";
}

TEST(OwnCgroupTest, ReadsThePathOfAControllerOrOfV2) {
  const char* text = "9:name=systemd:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/user.slice\n0::/init.scope\n";
  EXPECT_EQ(own_cgroup_path(text, "memory"), "/process_api/abc");
  EXPECT_EQ(own_cgroup_path(text, "cpu"), "/user.slice");
  EXPECT_EQ(own_cgroup_path(text, "cpuacct"), "/user.slice");
  EXPECT_EQ(own_cgroup_path(text, ""), "/init.scope");
  EXPECT_EQ(own_cgroup_path(text, "pids"), "");
  EXPECT_EQ(own_cgroup_path("0::/\n", "memory"), "") << "pure v2 has no v1 lines";
}

TEST(CpuQuotaTest, QuotaIsTheCpusShareOfAHundredMillisecondPeriod) {
  EXPECT_EQ(cfs_quota_text(1000), "100000");
  EXPECT_EQ(cfs_quota_text(500), "50000");
  EXPECT_EQ(cfs_quota_text(2500), "250000");
  EXPECT_EQ(cfs_quota_text(1), "1000") << "the kernel's smallest quota is 1 ms";
  EXPECT_EQ(cpu_max_text(1500), "150000 100000");
}

TEST(OomKillsTest, ReadsTheCountFromV1AndV2Files) {
  EXPECT_EQ(parse_oom_kills("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), 3);
  EXPECT_EQ(parse_oom_kills("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n"), 2);
  EXPECT_EQ(parse_oom_kills("oom_kill_disable 0\nunder_oom 0\n"), 0) << "kernels that do not count";
  EXPECT_EQ(parse_oom_kills(""), 0);
}

TEST(LimitGroupsTest, NothingIsMadeWhereTheNodeCannotCap) {
  LimitRoots none;
  auto groups = create_limit_groups(none, "", "job_1.0.0", TaskLimits{1 << 30, 1000});
  ASSERT_TRUE(groups.ok());
  EXPECT_TRUE(groups.value().extra.empty());
  EXPECT_EQ(groups.value().memory, "");
}

}  // namespace
}  // namespace ag::worker
