// Tests for the head <-> worker protocol (api/protocol.h): every message survives a
// round trip through its wire form, and each kind of bad message is refused with an
// error that names what was wrong.
#include "api/log_frame.h"
#include "api/protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace ag::api {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

const TaskKey kTask{"job_0123456789ab", 2, 5};

// Encodes `m`, decodes it with `decode`, and returns the message of the same type.
template <typename Message, typename Decode>
Message round_trip(const Message& m, Decode decode) {
  auto decoded = decode(encode(m));
  EXPECT_TRUE(decoded.ok()) << decoded.error().message;
  if (!decoded.ok()) return Message{};
  const Message* out = std::get_if<Message>(&decoded.value());
  EXPECT_NE(out, nullptr);
  return out ? *out : Message{};
}

template <typename Message>
Message worker_round_trip(const Message& m) {
  return round_trip(m, decode_worker_message);
}

template <typename Message>
Message head_round_trip(const Message& m) {
  return round_trip(m, decode_head_message);
}

std::string worker_error(const json& j) {
  auto decoded = decode_worker_message(j.dump());
  return decoded.ok() ? "(accepted)" : decoded.error().message;
}

std::string head_error(const json& j) {
  auto decoded = decode_head_message(j.dump());
  return decoded.ok() ? "(accepted)" : decoded.error().message;
}

TEST(ProtocolRoundTrip, Register) {
  Register m;
  m.node_id = "node_abcdef012345";
  m.address = "127.0.0.2";
  m.hostname = "gpu-7";
  m.network_interface = "eth1";
  m.cpu_millis = 64000;
  m.memory_bytes = int64_t{512} << 30;
  m.gpu_ids = {0, 1, 2, 3};
  m.running = {{kTask, 4242}, {{"job_ffffffffffff", 0, 0}, 1}};
  TaskExit ended;
  ended.exit_code = 3;
  TaskExit lost;
  lost.lost = "its supervisor on the node died";
  m.exited = {{{"job_aaaaaaaaaaaa", 1, 7}, ended}, {{"job_bbbbbbbbbbbb", 0, 1}, lost}};
  m.busy_ports = {29500, 29501};
  EXPECT_EQ(worker_round_trip(m), m);
  m.limits = "memory, cpu (cgroup v1)";
  m.container_engine = "podman 4.3.1";
  m.allowed_mounts = {"/data", "/nfs/shared"};
  EXPECT_EQ(worker_round_trip(m), m);
}

TEST(ProtocolRoundTrip, Heartbeat) {
  Heartbeat m;
  m.usage.cpu_percent = 37.5;
  m.usage.memory_used_bytes = 123456789;
  m.usage.gpus = {{0, 99, 1 << 30, int64_t{80} << 30}, {1, 0, 0, int64_t{80} << 30}};
  m.busy_ports = {31499};
  EXPECT_EQ(worker_round_trip(m), m);
  m.usage.tasks = {{kTask, 150.5, int64_t{3} << 30}, {{"job_b", 2, 7}, 0, 4096}};
  EXPECT_EQ(worker_round_trip(m), m);
}

TEST(ProtocolRoundTrip, TaskStartedAndEveryKindOfTaskExit) {
  EXPECT_EQ(worker_round_trip(TaskStarted{kTask, 99}), (TaskStarted{kTask, 99}));
  TaskExit code;
  code.exit_code = 0;
  TaskExit signal;
  signal.signal = 9;
  TaskExit start;
  start.start_error = "working_dir package sha256:ab: hash mismatch";
  TaskExit lost;
  lost.lost = "the worker does not run this task";
  TaskExit oom;
  oom.signal = 9;
  oom.out_of_memory = true;
  oom.memory_limit_bytes = int64_t{4} << 30;
  for (const TaskExit& exit : {code, signal, start, lost, oom}) {
    EXPECT_EQ(worker_round_trip(TaskExited{kTask, exit}), (TaskExited{kTask, exit}));
  }
}

TEST(ProtocolRoundTrip, TaskNote) {
  TaskNote note{kTask, "node n1: pulling train:1.4 with podman 4.3.1"};
  EXPECT_EQ(worker_round_trip(note), note);
}

TEST(ProtocolRoundTrip, PullsAndTheirUpdates) {
  EXPECT_EQ(head_round_trip(Pull{"pull_abc", "registry.example/train:1.4"}), (Pull{"pull_abc", "registry.example/train:1.4"}));
  PullUpdate progress{"pull_abc", "Copying blob sha256:aa", false, ""};
  EXPECT_EQ(worker_round_trip(progress), progress);
  PullUpdate failed{"pull_abc", "", true, "podman could not pull x: manifest unknown"};
  EXPECT_EQ(worker_round_trip(failed), failed);
  EXPECT_NE(worker_error({{"type", "pull_update"}, {"pull_id", "bad id!"}, {"done", true}}), "(accepted)");
}

TEST(ProtocolRoundTrip, HeadMessages) {
  EXPECT_EQ(head_round_trip(Registered{"node_1", 10000}), (Registered{"node_1", 10000}));
  EXPECT_EQ(head_round_trip(Registered{"node_1", 10000, "agn_abc"}), (Registered{"node_1", 10000, "agn_abc"}));
  EXPECT_EQ(head_round_trip(HeartbeatAck{}), HeartbeatAck{});
  Launch launch;
  launch.task = kTask;
  launch.entrypoint = "python train.py --lr 0.1 'quoted \"arg\"'";
  launch.env = {{"RANK", "5"}, {"CUDA_VISIBLE_DEVICES", ""}};
  launch.env_vars = {{"PYTHONPATH", "/code:$PYTHONPATH"}};
  launch.gpu_ids = {2, 3};
  launch.working_dir_hash = std::string(64, 'a');
  launch.python_executable = "/opt/venv/bin/python";
  EXPECT_EQ(head_round_trip(launch), launch);
  launch.memory_limit_bytes = int64_t{8} << 30;
  launch.cpu_limit_millis = 2500;
  EXPECT_EQ(head_round_trip(launch), launch);
  launch.image = "registry.example:5000/team/train:1.4";
  launch.mounts = {{"/data/imagenet", "/data", true}, {"/scratch", "/scratch", false}};
  EXPECT_EQ(head_round_trip(launch), launch);
  launch.owner = "alice";
  EXPECT_EQ(head_round_trip(launch), launch);
  EXPECT_EQ(head_round_trip(Kill{kTask, 10000}), (Kill{kTask, 10000}));
  EXPECT_EQ(head_round_trip(ExitAck{kTask}), ExitAck{kTask});
  EXPECT_EQ(head_round_trip(LogResume{kTask, 1 << 20}), (LogResume{kTask, 1 << 20}));
  EXPECT_EQ(head_round_trip(ErrorMessage{"bad register message"}), ErrorMessage{"bad register message"});
  EXPECT_EQ(worker_round_trip(ErrorMessage{"cannot read"}), ErrorMessage{"cannot read"});
}

// A launch is written straight, not through a JSON tree: the same text the tree's dump
// gives (sorted keys, its escapes), for every field set or left out.
TEST(ProtocolRoundTrip, ALaunchIsTheTextItsTreeWouldDump) {
  Launch launch;
  launch.task = kTask;
  launch.entrypoint = "python train.py \"q\" \\ \t\n\x01 caf\xc3\xa9 \xf0\x9f\x9a\x80";
  const auto canonical = [](const std::string& text) { return json::parse(text).dump(); };
  EXPECT_EQ(encode(launch), canonical(encode(launch)));
  EXPECT_EQ(head_round_trip(launch), launch);
  launch.env = {{"RANK", "5"}, {"B\"", "line\nbreak"}, {"A", ""}};
  launch.env_vars = {{"PYTHONPATH", "/code:$PYTHONPATH"}};
  launch.gpu_ids = {7, 0, 3};
  launch.working_dir_hash = std::string(64, 'a');
  launch.python_executable = "/opt/venv/bin/python";
  launch.memory_limit_bytes = int64_t{8} << 30;
  launch.cpu_limit_millis = 2500;
  launch.image = "registry.example:5000/team/train:1.4";
  launch.mounts = {{"/data/imagenet", "/data", true}, {"/scratch", "/scratch", false}};
  launch.owner = "alice";
  launch.epoch = 42;
  EXPECT_EQ(encode(launch), canonical(encode(launch)));
  EXPECT_EQ(head_round_trip(launch), launch);
  // Not UTF-8: each bad byte is sent as U+FFFD, as before, and the launch still reads.
  launch.env_vars["BAD"] =
      "a\xff\xfe"
      "b";
  const std::string text = encode(launch);
  EXPECT_EQ(json::parse(text)["env_vars"]["BAD"],
            "a\xef\xbf\xbd\xef\xbf\xbd"
            "b");
  ASSERT_TRUE(decode_head_message(text).ok());
}

TEST(ProtocolRoundTrip, VariantEncodingMatchesTheMessagesOwn) {
  EXPECT_EQ(encode(WorkerMessage{TaskStarted{kTask, 1}}), encode(TaskStarted{kTask, 1}));
  EXPECT_EQ(encode(HeadMessage{Kill{kTask, 5}}), encode(Kill{kTask, 5}));
}

TEST(ProtocolRoundTrip, WireFormatKeepsItsFieldNames) {
  // Field names are the contract with workers of the same release: pin them.
  json j = json::parse(encode(TaskExited{kTask, TaskExit{7, std::nullopt, "", ""}}));
  EXPECT_EQ(j, json::parse(R"({"type":"task_exited","job_id":"job_0123456789ab","attempt":2,
                               "task_index":5,"exit_code":7,"signal":null})"));
}

TEST(ProtocolErrors, NotJsonNotAnObjectNoType) {
  EXPECT_THAT(decode_worker_message("{not json").error().message, HasSubstr("not valid JSON"));
  EXPECT_THAT(decode_worker_message("[1,2]").error().message, HasSubstr("not a JSON object"));
  EXPECT_THAT(decode_worker_message(R"({"job_id":"x"})").error().message, HasSubstr("no string \"type\""));
  EXPECT_THAT(decode_head_message(R"({"type":7})").error().message, HasSubstr("no string \"type\""));
}

TEST(ProtocolErrors, UnknownKindIsNamed) {
  EXPECT_EQ(worker_error({{"type", "reboot"}}), "unknown message type 'reboot' from a worker");
  // Each side accepts only the other side's messages.
  EXPECT_EQ(worker_error(json::parse(encode(Kill{kTask, 1}))), "unknown message type 'kill' from a worker");
  EXPECT_EQ(head_error(json::parse(encode(TaskStarted{kTask, 1}))),
            "unknown message type 'task_started' from the head");
}

TEST(ProtocolErrors, MissingFieldIsNamed) {
  json j = json::parse(encode(TaskStarted{kTask, 1}));
  j.erase("pid");
  EXPECT_EQ(worker_error(j), "task_started.pid: missing");
  json reg = json::parse(encode(Register{"node_1", "127.0.0.2", "h", 1000, 1, {}, {}, {}, {}}));
  reg["resources"].erase("cpu_millis");
  EXPECT_EQ(worker_error(reg), "register.resources.cpu_millis: missing");
}

// For each (encoded message, its required fields): the message without the field is
// refused by `error_of` with "<type>.<field>: missing".
template <typename ErrorOf>
void expect_each_missing_field_named(const std::vector<std::pair<std::string, std::vector<std::string>>>& messages,
                                     ErrorOf error_of) {
  for (const auto& [text, fields] : messages) {
    const json full = json::parse(text);
    for (const auto& field : fields) {
      json j = full;
      j.erase(field);
      EXPECT_EQ(error_of(j), full["type"].get<std::string>() + "." + field + ": missing");
    }
  }
}

// Every required field of every message: without it the message is refused, naming it.
TEST(ProtocolErrors, EachRequiredFieldOfEachMessageIsNamedWhenMissing) {
  Register reg{"node_1", "127.0.0.2", "h", 1000, 1, {0}, {{kTask, 1}}, {}, {}};
  Heartbeat beat;
  beat.usage.gpus = {{0, 1, 2, 3}};
  const std::vector<std::pair<std::string, std::vector<std::string>>> worker_messages = {
      {encode(reg), {"node_id", "address", "resources"}},
      {encode(beat), {"usage"}},
      {encode(TaskStarted{kTask, 1}), {"job_id", "attempt", "task_index", "pid"}},
      {encode(TaskExited{kTask, {}}), {"job_id", "attempt", "task_index"}},
      {encode(ErrorMessage{"x"}), {"message"}},
  };
  expect_each_missing_field_named(worker_messages, worker_error);
  const std::vector<std::pair<std::string, std::vector<std::string>>> head_messages = {
      {encode(Registered{"node_1", 1000}), {"node_id", "node_timeout_ms"}},
      {encode(Launch{kTask, "true", {}, {}, {}, "", ""}), {"job_id", "attempt", "task_index", "entrypoint", "env"}},
      {encode(Kill{kTask, 1}), {"job_id", "attempt", "task_index", "grace_ms"}},
      {encode(ExitAck{kTask}), {"job_id", "attempt", "task_index"}},
      {encode(LogResume{kTask, 0}), {"job_id", "attempt", "task_index", "offset"}},
      {encode(ErrorMessage{"x"}), {"message"}},
  };
  expect_each_missing_field_named(head_messages, head_error);
  // Nested ones too.
  json r = json::parse(encode(reg));
  r["running"][0].erase("pid");
  EXPECT_EQ(worker_error(r), "register.running[0].pid: missing");
  json b = json::parse(encode(beat));
  b["usage"]["gpus"][0].erase("memory_total_bytes");
  EXPECT_EQ(worker_error(b), "heartbeat.usage.gpus[0].memory_total_bytes: missing");
}

TEST(ProtocolErrors, WrongTypeIsNamed) {
  json j = json::parse(encode(TaskExited{kTask, {}}));
  j["attempt"] = "2";
  EXPECT_EQ(worker_error(j), "task_exited.attempt: expected an integer");
  j = json::parse(encode(TaskExited{kTask, {}}));
  j["exit_code"] = 1.5;
  EXPECT_EQ(worker_error(j), "task_exited.exit_code: expected an integer");
  json launch = json::parse(encode(Launch{kTask, "true", {{"A", "1"}}, {}, {}, "", ""}));
  launch["env"]["A"] = 1;
  EXPECT_EQ(head_error(launch), "launch.env.A: expected a string");
  json reg = json::parse(encode(Register{"node_1", "127.0.0.2", "h", 1000, 1, {0}, {}, {}, {}}));
  reg["resources"]["gpu_ids"] = json::array({0, "1"});
  EXPECT_EQ(worker_error(reg), "register.resources.gpu_ids[1]: expected an integer");
  reg = json::parse(encode(Register{"node_1", "127.0.0.2", "h", 1000, 1, {}, {{kTask, 1}}, {}, {}}));
  reg["running"][0]["task_index"] = nullptr;
  EXPECT_EQ(worker_error(reg), "register.running[0].task_index: expected an integer");
}

TEST(ProtocolErrors, OutOfRangeValuesAreRefused) {
  json j = json::parse(encode(TaskStarted{kTask, 1}));
  j["attempt"] = -1;
  EXPECT_EQ(worker_error(j), "task_started.attempt: must be between 0 and 1000000, got -1");
  j = json::parse(encode(TaskStarted{kTask, 1}));
  j["pid"] = 18446744073709551615ull;
  EXPECT_EQ(worker_error(j), "task_started.pid: out of range");
  json hb = json::parse(encode(Heartbeat{}));
  hb["busy_ports"] = json::array({70000});
  EXPECT_EQ(worker_error(hb), "heartbeat.busy_ports[0]: must be between 0 and 65535, got 70000");
}

TEST(ProtocolErrors, AbsurdResourceOffersAreRefused) {
  auto offer = [](int64_t cpu_millis, int64_t memory_bytes, std::vector<int> gpus) {
    return worker_error(json::parse(encode(Register{"node_1", "127.0.0.2", "h", cpu_millis, memory_bytes, gpus, {}, {}, {}})));
  };
  EXPECT_EQ(offer(kMaxNodeCpuMillis, kMaxNodeMemoryBytes, {0, 1023}), "(accepted)");
  EXPECT_EQ(offer(9'000'000'000'000'000'000, 1, {}),
            "register.resources.cpu_millis: must be between 0 and 100000000, got 9000000000000000000");
  EXPECT_EQ(offer(1000, kMaxNodeMemoryBytes + 1, {}),
            "register.resources.memory_bytes: must be between 0 and 1125899906842624, got 1125899906842625");
  EXPECT_EQ(offer(1000, 1, {0, 1024}), "register.resources.gpu_ids[1]: must be between 0 and 1023, got 1024");
  EXPECT_EQ(offer(1000, 1, {0, 3, 0}), "register.resources.gpu_ids: holds 0 twice");
  EXPECT_EQ(offer(-1, 1, {}), "register.resources.cpu_millis: must be between 0 and 100000000, got -1");
}

TEST(ProtocolErrors, UnsafeIdsAreRefused) {
  for (const std::string& bad : {std::string("../../x"), std::string("a/b"), std::string(""), std::string(65, 'a'),
                                 std::string("job\0x", 5), std::string("job.1")}) {
    json j = json::parse(encode(TaskStarted{kTask, 1}));
    j["job_id"] = bad;
    EXPECT_THAT(worker_error(j), HasSubstr("task_started.job_id: expected 1-64 characters")) << bad;
    json reg = json::parse(encode(Register{"node_1", "127.0.0.2", "h", 1, 1, {}, {}, {}, {}}));
    reg["node_id"] = bad;
    EXPECT_THAT(worker_error(reg), HasSubstr("register.node_id: expected 1-64 characters")) << bad;
  }
  EXPECT_TRUE(is_safe_id("job_0123456789ab"));
  EXPECT_TRUE(is_safe_id("node_ABC-1"));
}

TEST(ProtocolErrors, OversizedMessageIsRefusedBeforeParsing) {
  std::string big = R"({"type":"heartbeat","pad":")" + std::string(kMaxControlMessageBytes, 'x') + "\"}";
  EXPECT_THAT(decode_worker_message(big).error().message, HasSubstr("over the 16777216-byte limit"));
  EXPECT_THAT(decode_head_message(big).error().message, HasSubstr("over the 16777216-byte limit"));
}

TEST(ProtocolErrors, ErrorsAreInvalidArgument) {
  EXPECT_EQ(decode_worker_message("{}").error().code, ErrorCode::kInvalidArgument);
}

TEST(ProtocolVersion, ARegisterCarriesTheWorkersVersion) {
  Register m{"node_1", "127.0.0.2", "h", 1000, 1, {}, {}, {}, {}};
  EXPECT_EQ(m.protocol_version, kWorkerProtocol);
  EXPECT_EQ(json::parse(encode(m))["protocol_version"], kWorkerProtocol);
  EXPECT_EQ(worker_round_trip(m), m);
}

TEST(ProtocolVersion, ARegisterWithoutAVersionIsFromVersionOne) {
  json reg = json::parse(encode(Register{"node_1", "127.0.0.2", "h", 1000, 1, {}, {}, {}, {}}));
  reg.erase("protocol_version");
  auto decoded = decode_worker_message(reg.dump());
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_EQ(std::get<Register>(decoded.value()).protocol_version, 1);
}

TEST(ProtocolVersion, AnotherVersionIsRefusedNamingBothWhateverElseTheRegisterHolds) {
  for (int64_t version : {int64_t{kOldestWorkerProtocol} - 1, int64_t{kWorkerProtocol} + 1, int64_t{1000},
                          (int64_t{1} << 32) + kWorkerProtocol, int64_t{-1}}) {
    json reg = json::parse(encode(Register{"node_1", "127.0.0.2", "h", 1000, 1, {}, {}, {}, {}}));
    reg["protocol_version"] = version;
    reg.erase("resources");  // a register of another version need not read as this one's
    auto decoded = decode_worker_message(reg.dump());
    ASSERT_FALSE(decoded.ok());
    EXPECT_EQ(decoded.error().code, ErrorCode::kConflict);
    EXPECT_THAT(decoded.error().message,
                HasSubstr("this worker speaks worker protocol version " + std::to_string(version)));
    EXPECT_THAT(decoded.error().message, HasSubstr("speaks version " + std::to_string(kWorkerProtocol)));
    EXPECT_THAT(decoded.error().message, HasSubstr("upgrade the head first"));
  }
  json reg = json::parse(encode(Register{"node_1", "127.0.0.2", "h", 1000, 1, {}, {}, {}, {}}));
  reg["protocol_version"] = "2";
  EXPECT_EQ(worker_error(reg), "register.protocol_version: expected an integer");
}

TEST(ProtocolVersion, AFinalErrorSaysSo) {
  EXPECT_EQ(head_round_trip(ErrorMessage{"another version", true}), (ErrorMessage{"another version", true}));
  EXPECT_EQ(head_round_trip(ErrorMessage{"try again"}), (ErrorMessage{"try again"}));
  EXPECT_FALSE(json::parse(encode(ErrorMessage{"try again"})).contains("final"));
  EXPECT_EQ(worker_round_trip(ErrorMessage{"x", true}), (ErrorMessage{"x", true}));
}

TEST(TaskKeyOf, ReadsTheKeyOfAMessageWhoseOtherFieldsAreBad) {
  json launch = json::parse(encode(Launch{kTask, "true", {}, {}, {}, "", ""}));
  launch["env"] = "not an object";
  ASSERT_FALSE(decode_head_message(launch.dump()).ok());
  EXPECT_EQ(task_key_of(launch.dump(), "launch"), kTask);
  EXPECT_EQ(task_key_of(launch.dump(), "kill"), std::nullopt);  // only for the asked type
  launch["job_id"] = "../x";
  EXPECT_EQ(task_key_of(launch.dump(), "launch"), std::nullopt);
}

TEST(LogFrame, RoundTripKeepsHeaderAndPayload) {
  std::string payload("line 1\n\0binary\xff", 15);
  std::string frame = encode_log_frame({kTask, 12345}, payload);
  std::string_view out;
  auto header = decode_log_frame(frame, &out);
  ASSERT_TRUE(header.ok()) << header.error().message;
  EXPECT_EQ(header.value(), (LogFrameHeader{kTask, 12345}));
  EXPECT_EQ(out, payload);
}

TEST(LogFrame, BadFramesSayWhatIsWrong) {
  std::string_view payload;
  EXPECT_THAT(decode_log_frame("ab", &payload).error().message, HasSubstr("has no header"));
  EXPECT_THAT(decode_log_frame(std::string("\0\0\1\0{}", 6), &payload).error().message,
              HasSubstr("runs past the frame's end"));
  std::string header = R"({"job_id":"../../etc","attempt":0,"task_index":0,"offset":0})";
  std::string frame = std::string("\0\0\0", 3) + static_cast<char>(header.size()) + header + "data";
  EXPECT_THAT(decode_log_frame(frame, &payload).error().message, HasSubstr("log_frame.job_id"));
  header = R"({"job_id":"job_1","attempt":0,"task_index":0})";
  frame = std::string("\0\0\0", 3) + static_cast<char>(header.size()) + header;
  EXPECT_EQ(decode_log_frame(frame, &payload).error().message, "log_frame.offset: missing");
}

}  // namespace
}  // namespace ag::api
