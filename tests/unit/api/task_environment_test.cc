// The whole task-environment contract (DESIGN.md, "What a task sees"): the head's half
// composed with the worker's half, checked variable by variable in one table.
#include "api/task_environment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace ag::api {
namespace {

TaskPlacement rank_three_of_four() {
  TaskPlacement p;
  p.job_id = "job_0123456789ab";
  p.attempt = 1;
  p.task_index = 3;
  p.num_tasks = 4;
  p.master_addr = "127.0.0.2";
  p.master_port = 29517;
  p.node_id = "node_bbbbbbbbbbbb";
  p.node_address = "127.0.0.3";
  p.local_rank = 1;
  p.local_world_size = 2;
  p.gpu_ids = {2, 3};
  p.visible_gpu_ids = {0, 1, 2, 3};  // local rank 0 holds GPUs 0 and 1
  return p;
}

TEST(TaskEnvironment, EveryVariableOfTheContract) {
  Environment inherited = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/root"}, {"AG_TOKEN", "secret"},
                           {"AG_SESSION_DIR", "/tmp/s"}, {"RANK", "stale"}, {"PYTHONPATH", "/site"}};
  Environment env_vars = {{"PYTHONPATH", "/code:$PYTHONPATH"}, {"WHO", "rank ${RANK} of $WORLD_SIZE"},
                          {"PYTHONUNBUFFERED", "0"}};
  Environment env = worker_task_environment(inherited, head_task_environment(rank_three_of_four()), env_vars,
                                            "/data/python-shims/abc", "eth1").value();
  const std::map<std::string, std::string> expected = {
      {"AG_JOB_ID", "job_0123456789ab"},
      {"AG_ATTEMPT", "1"},
      {"AG_TASK_INDEX", "3"},
      {"AG_WORKER_NUM", "4"},
      {"AG_MASTER_ADDR", "127.0.0.2"},
      {"AG_MASTER_PORT", "29517"},
      {"AG_NODE_ID", "node_bbbbbbbbbbbb"},
      {"AG_NODE_IP", "127.0.0.3"},
      {"RANK", "3"},  // the head's value wins over an inherited one
      {"WORLD_SIZE", "4"},
      {"LOCAL_RANK", "1"},
      {"LOCAL_WORLD_SIZE", "2"},
      {"MASTER_ADDR", "127.0.0.2"},
      {"MASTER_PORT", "29517"},
      {"CUDA_VISIBLE_DEVICES", "0,1,2,3"},  // its own from index LOCAL_RANK x num_gpus
      {"AG_GPU_IDS", "2,3"},
      {"PATH", "/data/python-shims/abc:/usr/bin:/bin"},  // the python shim first
      {"HOME", "/root"},                                 // the rest of the agent's environment
      {"PYTHONPATH", "/code:/site"},                     // env_vars expand against it
      {"WHO", "rank 3 of 4"},
      {"PYTHONUNBUFFERED", "0"},  // env_vars win over the runtime defaults
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"GLOO_SOCKET_IFNAME", "eth1"},  // the interface holding the node's address
      {"NCCL_SOCKET_IFNAME", "eth1"},
      {"TP_SOCKET_IFNAME", "eth1"},
  };
  EXPECT_EQ(env, expected);
  // The agent's own settings, its token above all, never reach a task.
  EXPECT_EQ(env.count("AG_TOKEN"), 0u);
  EXPECT_EQ(env.count("AG_SESSION_DIR"), 0u);
}

TEST(TaskEnvironment, TheJobAndTheWorkersEnvironmentKeepTheirOwnInterfaceNames) {
  // The worker's environment names NCCL's interface, the job gloo's: both kept; the
  // one neither names gets the node's interface.
  Environment env = worker_task_environment({{"NCCL_SOCKET_IFNAME", "ib0"}}, {}, {{"GLOO_SOCKET_IFNAME", "lo"}}, "",
                                            "eth1")
                        .value();
  EXPECT_EQ(env.at("NCCL_SOCKET_IFNAME"), "ib0");
  EXPECT_EQ(env.at("GLOO_SOCKET_IFNAME"), "lo");
  EXPECT_EQ(env.at("TP_SOCKET_IFNAME"), "eth1");
  // No interface known: none is named.
  Environment none = worker_task_environment({}, {}, {}, "").value();
  EXPECT_EQ(none.count("GLOO_SOCKET_IFNAME"), 0u);
}

TEST(TaskEnvironment, NoGpusIsAnEmptyStringAndNoShimLeavesPathAlone) {
  TaskPlacement p = rank_three_of_four();
  p.gpu_ids.clear();
  p.visible_gpu_ids.clear();
  Environment env = worker_task_environment({{"PATH", "/bin"}}, head_task_environment(p), {}, "").value();
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "");
  EXPECT_EQ(env.at("AG_GPU_IDS"), "");
  EXPECT_EQ(env.at("PATH"), "/bin");
  EXPECT_EQ(env.at("PYTHONUNBUFFERED"), "1");
}

// Every inventory of 1-8 GPUs on a node, numbered in a scrambled order, and every way
// 1-8 tasks of a gang with the same num_gpus fit on it: each task's own GPUs are at
// index LOCAL_RANK x num_gpus of what it sees (torch.cuda.set_device(LOCAL_RANK) with
// one GPU per task picks its own), it sees the gang's GPUs on the node and no GPU
// twice; isolated, it sees its own only.
TEST(VisibleGpus, OwnGpusStartAtLocalRankTimesNumGpusOnEveryInventory) {
  std::mt19937 rng(7);
  int cases = 0;
  for (int node_gpus = 1; node_gpus <= 8; ++node_gpus) {
    std::vector<int> inventory(static_cast<size_t>(node_gpus));
    std::iota(inventory.begin(), inventory.end(), 0);
    std::shuffle(inventory.begin(), inventory.end(), rng);
    for (int tasks = 1; tasks <= 8; ++tasks) {
      for (int per_task = 1; per_task * tasks <= node_gpus; ++per_task) {
        std::vector<std::vector<int>> by_local_rank;
        for (int r = 0; r < tasks; ++r) {
          auto first = inventory.begin() + r * per_task;
          by_local_rank.emplace_back(first, first + per_task);
        }
        for (int r = 0; r < tasks; ++r) {
          SCOPED_TRACE(std::to_string(node_gpus) + " GPUs, " + std::to_string(tasks) + " tasks of " +
                       std::to_string(per_task) + ", local rank " + std::to_string(r));
          std::vector<int> seen = visible_gpus(by_local_rank, r, false);
          ASSERT_EQ(seen.size(), static_cast<size_t>(tasks * per_task));
          std::vector<int> own(seen.begin() + r * per_task, seen.begin() + (r + 1) * per_task);
          EXPECT_EQ(own, by_local_rank[static_cast<size_t>(r)]);
          EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), seen.size());
          // The same view for every task of the gang on the node.
          EXPECT_EQ(seen, visible_gpus(by_local_rank, 0, false));
          EXPECT_EQ(visible_gpus(by_local_rank, r, true), by_local_rank[static_cast<size_t>(r)]);
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 179);  // every (GPUs, tasks, GPUs per task, local rank) above
}

TEST(VisibleGpus, NoGpusOrARankOutsideTheGangSeesNone) {
  EXPECT_TRUE(visible_gpus({{}, {}}, 1, false).empty());
  EXPECT_TRUE(visible_gpus({{0}, {1}}, 2, false).empty());
  EXPECT_TRUE(visible_gpus({}, 0, true).empty());
}

TEST(TaskEnvironment, ShimWithoutAnInheritedPath) {
  Environment env = worker_task_environment({}, {}, {}, "/shim").value();
  EXPECT_EQ(env.at("PATH"), "/shim");
}

TEST(TaskEnvironment, EnvVarsExpandAgainstTheEnvironmentBeforeThemNotEachOther) {
  Environment env = worker_task_environment({{"A", "a"}}, {}, {{"A", "x$A"}, {"B", "$A"}}, "").value();
  EXPECT_EQ(env.at("A"), "xa");
  EXPECT_EQ(env.at("B"), "a");
}

TEST(TaskEnvironment, EntriesFromEnviron) {
  Environment env = environment_from_entries({"A=1", "B==2", "NOEQUALS", "C="});
  EXPECT_EQ(env, (Environment{{"A", "1"}, {"B", "=2"}, {"C", ""}}));
}

}  // namespace
}  // namespace ag::api

namespace ag::api {
namespace {

TEST(WorkerTaskEnvironmentTest, AnExpansionPastTheLimitIsRefusedNamingTheVariable) {
  const std::string big(4096, 'p');
  std::string many;
  for (int i = 0; i < 300; ++i) many += "${BIG}";  // 1.8 KiB asking for 1.2 MiB
  auto env = worker_task_environment({{"BIG", big}}, {}, {{"BOMB", many}}, "");
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(env.error().message.find("runtime_env.env_vars.BOMB expands to more than 1 MiB"), std::string::npos);
  // Under the limit it expands in full.
  auto fine = worker_task_environment({{"BIG", big}}, {}, {{"OK", "${BIG}${BIG}"}}, "");
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(fine.value().at("OK").size(), 2 * big.size());
}

}  // namespace
}  // namespace ag::api
