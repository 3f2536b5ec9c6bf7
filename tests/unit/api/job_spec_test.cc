// Tests for parsing and validating a job spec from JSON (api::parse_job_spec) and for
// writing it back (api::to_json).
#include "api/job_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace ag::api {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

// The smallest spec the API accepts.
json minimal_spec() { return {{"entrypoint", "python train.py"}}; }

// A minimal spec with one top-level field set (or replaced).
json spec_with(const std::string& field, json value) {
  json body = minimal_spec();
  body[field] = std::move(value);
  return body;
}

json spec_with_task_option(const std::string& option, json value) {
  return spec_with("task_options", {{option, std::move(value)}});
}

// A spec that sets every field to a non-default value.
json full_spec() {
  return {
      {"entrypoint", "torchrun train.py --epochs 3"},
      {"num_workers", 4},
      {"task_options", {{"num_cpus", 2.5}, {"num_gpus", 2}, {"memory", 8589934592}}},
      {"runtime_env", {{"env_vars", {{"PYTHONPATH", "/code"}, {"NCCL_DEBUG", "INFO"}}}}},
      {"job_name", "resnet"},
      {"labels", {{"team", "vision"}, {"priority", "high"}}},
      {"max_retries", 3},
      {"timeout", 3600.5},
      {"placement", "spread"},
      {"submission_id", "sub-42"},
  };
}

// The error of a spec that must be refused; fails the test when it parsed.
Error parse_error(const json& body) {
  Result<JobSpec> result = parse_job_spec(body);
  if (result.ok()) {
    ADD_FAILURE() << "expected " << body.dump() << " to be refused";
    return {};
  }
  return result.error();
}

void expect_invalid(const json& body, const std::string& field) {
  const Error error = parse_error(body);
  EXPECT_EQ(error.code, ErrorCode::kInvalidArgument) << body.dump();
  EXPECT_THAT(error.message, HasSubstr(field)) << body.dump();
}

void expect_same_spec(const JobSpec& actual, const JobSpec& expected) {
  EXPECT_EQ(actual.entrypoint, expected.entrypoint);
  EXPECT_EQ(actual.num_workers, expected.num_workers);
  EXPECT_DOUBLE_EQ(actual.num_cpus, expected.num_cpus);
  EXPECT_EQ(actual.num_gpus, expected.num_gpus);
  EXPECT_EQ(actual.memory_bytes, expected.memory_bytes);
  EXPECT_EQ(actual.runtime_env.env_vars, expected.runtime_env.env_vars);
  EXPECT_EQ(actual.name, expected.name);
  EXPECT_EQ(actual.labels, expected.labels);
  EXPECT_EQ(actual.max_retries, expected.max_retries);
  EXPECT_EQ(actual.timeout_s, expected.timeout_s);
  EXPECT_EQ(actual.placement, expected.placement);
  EXPECT_EQ(actual.submission_id, expected.submission_id);
}

// A NUL cannot reach a task's command line or environment (they are C strings there):
// refused where it arrives.
TEST(ParseJobSpecTest, DebuggingFieldsRoundTripAndBadOnesAreRefused) {
  json body = minimal_spec();
  body["hang_timeout"] = 600;
  body["on_hang"] = "fail";
  body["hold_on_failure"] = 1800;
  body["interactive"] = true;
  auto spec = parse_job_spec(body);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec.value().hang_timeout_s, 600);
  EXPECT_TRUE(spec.value().fail_on_hang);
  EXPECT_EQ(task_entrypoint(spec.value(), 0), kHoldingEntrypoint);
  EXPECT_EQ(task_entrypoint(spec.value(), 1), "python train.py");
  auto again = parse_job_spec(to_json(spec.value()));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(to_json(again.value()), to_json(spec.value()));

  // An allocation: no entrypoint of its own, stored with the holding one, read back.
  auto alloc = parse_job_spec({{"allocation", true}, {"num_workers", 2}});
  ASSERT_TRUE(alloc.ok()) << alloc.error().message;
  EXPECT_EQ(alloc.value().entrypoint, kHoldingEntrypoint);
  EXPECT_TRUE(parse_job_spec(to_json(alloc.value())).ok());

  for (const auto& [bad, said] : std::vector<std::pair<json, std::string>>{
           {spec_with("on_hang", "restart"), "on_hang"},
           {spec_with("hang_timeout", 0), "hang_timeout"},
           {spec_with("hold_on_failure", 30 * 24 * 3600), "hold_on_failure"},
           {spec_with("allocation", "yes"), "allocation"},
           {{{"allocation", true}, {"entrypoint", "python train.py"}}, "an allocation runs no command"},
           {{{"allocation", true}, {"hang_timeout", 60}}, "do not apply to it"},
           {{{"allocation", true}, {"interactive", true}}, "not both"}}) {
    auto refused = parse_job_spec(bad);
    ASSERT_FALSE(refused.ok()) << bad.dump();
    EXPECT_THAT(refused.error().message, HasSubstr(said)) << bad.dump();
  }
}

TEST(ParseJobSpecTest, NulCharactersAreRefused) {
  json entry = minimal_spec();
  entry["entrypoint"] = std::string("echo a\0b", 8);
  expect_invalid(entry, "entrypoint");
  EXPECT_THAT(parse_error(entry).message, HasSubstr("NUL"));

  json value = minimal_spec();
  value["runtime_env"] = {{"env_vars", {{"A", std::string("x\0B=injected", 12)}}}};
  expect_invalid(value, "runtime_env.env_vars");

  json key = minimal_spec();
  key["runtime_env"] = {{"env_vars", {{std::string("A\0B", 3), "x"}}}};
  expect_invalid(key, "runtime_env.env_vars");
}

// Every field is bounded at submit: nothing is accepted that fails or swells later.
TEST(ParseJobSpecTest, OversizedFieldsAreRefusedNamingTheLimit) {
  json value = minimal_spec();
  value["runtime_env"] = {{"env_vars", {{"BIG", std::string(kMaxEnvValueBytes + 1, 'x')}}}};
  expect_invalid(value, "runtime_env.env_vars.BIG");
  EXPECT_THAT(parse_error(value).message, HasSubstr("the limit is 65536"));

  json total = minimal_spec();
  total["runtime_env"] = {{"env_vars", json::object()}};
  for (int i = 0; i < 9; ++i) total["runtime_env"]["env_vars"]["V" + std::to_string(i)] = std::string(kMaxEnvValueBytes, 'x');
  expect_invalid(total, "runtime_env.env_vars");
  EXPECT_THAT(parse_error(total).message, HasSubstr("the limit is 524288"));

  json name = minimal_spec();
  name["runtime_env"] = {{"env_vars", {{std::string(kMaxEnvNameBytes + 1, 'N'), "x"}}}};
  expect_invalid(name, "runtime_env.env_vars");

  json label = minimal_spec();
  label["labels"] = {{"team", std::string(kMaxLabelValueBytes + 1, 'l')}};
  expect_invalid(label, "labels.team");

  json excludes = minimal_spec();
  excludes["runtime_env"] = {{"excludes", json::array()}};
  for (size_t i = 0; i <= kMaxExcludes; ++i) excludes["runtime_env"]["excludes"].push_back("*.tmp");
  expect_invalid(excludes, "runtime_env.excludes");
  json long_pattern = minimal_spec();
  long_pattern["runtime_env"] = {{"excludes", {std::string(kMaxExcludeBytes + 1, '*')}}};
  expect_invalid(long_pattern, "runtime_env.excludes");

  json at_limit = minimal_spec();
  at_limit["runtime_env"] = {{"env_vars", {{"OK", std::string(kMaxEnvValueBytes, 'x')}}}};
  EXPECT_TRUE(parse_job_spec(at_limit).ok());
}

// Every string a spec carries, walked as a table: each has a length bound and a rule for
// the characters it may hold, and a bad one is refused naming the field.
TEST(ParseJobSpecTest, EveryStringFieldIsBoundedAndItsCharactersChecked) {
  // A spec with `value` put at `path` (a JSON pointer).
  auto with = [](const std::string& path, const json& value) {
    json spec = minimal_spec();
    spec[json::json_pointer(path)] = value;
    return spec;
  };
  const std::string nul("a\0b", 3), esc = "a\x1b[31mred", newline = "two\nlines";
  struct Row {
    std::string path;     // where the value goes
    json value;           // what is refused there
    std::string says;     // what the error names
  };
  const std::vector<Row> rows = {
      {"/entrypoint", std::string(kMaxEntrypointBytes + 1, 'x'), "the limit is 65536"},
      {"/entrypoint", nul, "NUL"},
      {"/job_name", std::string(kMaxNameBytes + 1, 'n'), "the limit is 256"},
      {"/job_name", esc, "control characters"},
      {"/job_name", newline, "byte 3 is \\u000a"},
      {"/submission_id", std::string(129, 's'), "the limit is 128"},
      {"/submission_id", esc, "control characters"},
      {"/submission_id", "a/b", "must not contain '/'"},
      {"/runtime_env/python", std::string(6 << 20, 'p'), "the limit is 4096"},
      {"/runtime_env/python", nul, "NUL"},
      {"/runtime_env/python", newline, "control characters"},
      {"/runtime_env/python/executable", std::string(kMaxPathBytes + 1, 'p'), "the limit is 4096"},
      {"/runtime_env/python/executable", esc, "control characters"},
      {"/runtime_env/working_dir", std::string(81, 'w'), "the limit is 80"},
      {"/runtime_env/image", std::string(kMaxImageBytes + 1, 'i'), "runtime_env.image"},
      {"/runtime_env/excludes", json::array({newline}), "control characters"},
      {"/runtime_env/env_vars", {{newline, "x"}}, "control characters"},
      {"/labels", {{"team", esc}}, "labels.team"},
      {"/labels", {{esc, "x"}}, "control characters"},
      {"/constraints", {{"gpu", esc}}, "constraints.gpu"},
      {"/queue", std::string(kMaxQueueNameBytes + 1, 'q'), "queue"},
      {"/array", std::string(kMaxArraySpecBytes + 1, '1'), "the limit is 4096"},
      {"/array", "0-9\n", "control characters"},
      {"/placement", std::string(17, 'p'), "placement"},
  };
  for (const auto& row : rows) {
    const std::string field = row.path.substr(1, row.path.find('/', 1) == std::string::npos ? std::string::npos : row.path.find('/', 1) - 1);
    const Error error = parse_error(with(row.path, row.value));
    EXPECT_EQ(error.code, ErrorCode::kInvalidArgument) << row.path;
    EXPECT_THAT(error.message, HasSubstr(field)) << row.path;
    EXPECT_THAT(error.message, HasSubstr(row.says)) << row.path << ": " << error.message.substr(0, 200);
    EXPECT_LT(error.message.size(), 1024u) << "the error does not echo a huge value: " << row.path;
  }
  // Each field takes what is fine: tabs and newlines only where text may span lines.
  EXPECT_TRUE(parse_job_spec(with("/entrypoint", "for i in 1 2; do\n\techo $i\ndone")).ok());
  EXPECT_TRUE(parse_job_spec(with("/runtime_env/env_vars", {{"MULTI", "line one\nline two"}})).ok());
  EXPECT_TRUE(parse_job_spec(with("/runtime_env/python", "/opt/conda/bin/python3")).ok());
  EXPECT_TRUE(parse_job_spec(with("/job_name", "résumé training ✓")).ok());
}

// --- Valid specs -----------------------------------------------------------------

TEST(ParseJobSpecTest, AnArrayIsIndicesAndRangesWithAnOptionalLimit) {
  auto indices = [](const char* text) { return parse_array_spec(text).value().indices; };
  EXPECT_EQ(indices("0-4"), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(indices("7"), (std::vector<int>{7}));
  EXPECT_EQ(indices("5,1,3,1"), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(indices("0-8:4,20"), (std::vector<int>{0, 4, 8, 20}));
  EXPECT_EQ(parse_array_spec("0-99%8").value().max_running, 8);
  EXPECT_EQ(parse_array_spec("0-99").value().max_running, 0);
  EXPECT_EQ(to_string(parse_array_spec("0-3,5,7-9%2").value()), "0-3,5,7-9%2");
  // The spec keeps it: a stored job reads back the same.
  auto spec = parse_job_spec({{"entrypoint", "x"}, {"array", "0-9%3"}});
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(parse_job_spec(to_json(spec.value())).value().array, spec.value().array);
}

TEST(ParseJobSpecTest, ABadArraySaysWhatIsWrongAndTheForms) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "'' is not an index or a range"},
      {"a-b", "'a-b' is not an index or a range"},
      {"5-1", "the range 5-1 runs backwards"},
      {"0-9%0", "'0' after % is not a positive whole number"},
      {"0-9%x", "'x' after % is not a positive whole number"},
      {"0-10000", "an array has at most 10000 elements"},
      {"0-9:0", "'0-9:0' is not an index or a range"},
      {"1000000", "index 1000000 is over 999999"},
      {"-3", "'-3' is not an index or a range"},
  };
  for (const auto& [text, complaint] : cases) {
    auto parsed = parse_array_spec(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_THAT(parsed.error().message, HasSubstr(complaint)) << text;
    EXPECT_THAT(parsed.error().message, HasSubstr("give indices like 0-99")) << text;
  }
  auto spec = parse_job_spec({{"entrypoint", "x"}, {"array", 5}});
  EXPECT_THAT(spec.error().message, HasSubstr("field 'array': must be a string like \"0-99%8\", got number"));
}

TEST(ParseJobSpecTest, PriorityIsANumberOrANamedLevel) {
  auto with = [](json priority) { return parse_job_spec({{"entrypoint", "x"}, {"priority", priority}}); };
  EXPECT_EQ(with(250).value().priority, 250);
  EXPECT_EQ(with(-1000).value().priority, -1000);
  EXPECT_EQ(with("low").value().priority, -100);
  EXPECT_EQ(with("normal").value().priority, 0);
  EXPECT_EQ(with("high").value().priority, 100);
  EXPECT_EQ(with("urgent").value().priority, 1000);
  EXPECT_EQ(parse_job_spec({{"entrypoint", "x"}}).value().priority, 0);
  EXPECT_EQ(to_json(with("high").value())["priority"], 100);
  EXPECT_THAT(with(1001).error().message, HasSubstr("priority"));
  EXPECT_THAT(with("asap").error().message,
              HasSubstr("'asap' is not a priority; give low, normal, high, urgent or a whole number from -1000 to 1000"));
  EXPECT_THAT(with(1.5).error().message, HasSubstr("priority"));
  EXPECT_THAT(with(json::array()).error().message, HasSubstr("priority"));
}

TEST(ParseJobSpecTest, MinimalSpecGetsDefaults) {
  const Result<JobSpec> spec = parse_job_spec(minimal_spec());

  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->entrypoint, "python train.py");
  EXPECT_EQ(spec->num_workers, 1);
  EXPECT_DOUBLE_EQ(spec->num_cpus, 1.0);
  EXPECT_EQ(spec->num_gpus, 0);
  EXPECT_EQ(spec->memory_bytes, 0);
  EXPECT_TRUE(spec->runtime_env.env_vars.empty());
  EXPECT_EQ(spec->name, "");
  EXPECT_TRUE(spec->labels.empty());
  EXPECT_EQ(spec->max_retries, 0);
  EXPECT_FALSE(spec->timeout_s.has_value());
  EXPECT_EQ(spec->placement, Placement::kPack);
  EXPECT_EQ(spec->submission_id, "");
}

TEST(ParseJobSpecTest, EveryFieldIsParsed) {
  const Result<JobSpec> spec = parse_job_spec(full_spec());

  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->entrypoint, "torchrun train.py --epochs 3");
  EXPECT_EQ(spec->num_workers, 4);
  EXPECT_DOUBLE_EQ(spec->num_cpus, 2.5);
  EXPECT_EQ(spec->num_gpus, 2);
  EXPECT_EQ(spec->memory_bytes, int64_t{8} << 30);
  EXPECT_EQ(spec->runtime_env.env_vars,
            (std::map<std::string, std::string>{{"NCCL_DEBUG", "INFO"}, {"PYTHONPATH", "/code"}}));
  EXPECT_EQ(spec->name, "resnet");
  EXPECT_EQ(spec->labels, (std::map<std::string, std::string>{{"priority", "high"}, {"team", "vision"}}));
  EXPECT_EQ(spec->max_retries, 3);
  EXPECT_EQ(spec->timeout_s, 3600.5);
  EXPECT_EQ(spec->placement, Placement::kSpread);
  EXPECT_EQ(spec->submission_id, "sub-42");
}

TEST(ParseJobSpecTest, PerTaskResourcesComeFromTaskOptions) {
  const Result<JobSpec> spec = parse_job_spec(full_spec());

  ASSERT_TRUE(spec.ok());
  const Resources r = spec->per_task();
  EXPECT_EQ(r.cpu_millis, 2500);
  EXPECT_EQ(r.gpus, 2);
  EXPECT_EQ(r.memory_bytes, int64_t{8} << 30);
}

TEST(ParseJobSpecTest, WholeFloatCountsAreAccepted) {
  const Result<JobSpec> spec = parse_job_spec(spec_with("num_workers", 2.0));

  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->num_workers, 2);
}

TEST(ParseJobSpecTest, NullOptionalFieldsKeepDefaults) {
  json body = minimal_spec();
  body["task_options"] = nullptr;
  body["runtime_env"] = nullptr;
  body["timeout"] = nullptr;
  body["placement"] = nullptr;

  const Result<JobSpec> spec = parse_job_spec(body);

  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_FALSE(spec->timeout_s.has_value());
  EXPECT_EQ(spec->placement, Placement::kPack);
}

TEST(ParseJobSpecTest, LimitsThemselvesAreAccepted) {
  json body = minimal_spec();
  body["entrypoint"] = std::string(kMaxEntrypointBytes, 'x');
  body["num_workers"] = kMaxNumWorkers;
  body["max_retries"] = kMaxRetries;
  body["task_options"] = {{"num_cpus", kMinCpusPerTask}, {"num_gpus", kMaxGpusPerTask}};

  const Result<JobSpec> spec = parse_job_spec(body);

  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->num_workers, kMaxNumWorkers);
  EXPECT_EQ(spec->max_retries, kMaxRetries);
  EXPECT_EQ(spec->num_gpus, kMaxGpusPerTask);
}

// --- Shape errors ----------------------------------------------------------------

TEST(ParseJobSpecErrorTest, NonObjectBodyIsRefused) {
  for (const json& body : {json::array({1, 2}), json("python x.py"), json(3), json(nullptr)}) {
    const Error error = parse_error(body);
    EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
    EXPECT_THAT(error.message, HasSubstr("must be a JSON object")) << body.dump();
  }
}

TEST(ParseJobSpecErrorTest, UnknownTopLevelFieldIsNamedAndKnownFieldsListed) {
  const Error error = parse_error(spec_with("num_worker", 2));

  EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(error.message, AllOf(HasSubstr("unknown field 'num_worker'"), HasSubstr("known fields are"),
                                   HasSubstr("num_workers"), HasSubstr("entrypoint"), HasSubstr("placement")));
}

TEST(ParseJobSpecErrorTest, UnknownTaskOptionIsNamedWithItsPrefix) {
  const Error error = parse_error(spec_with_task_option("num_tpus", 1));

  EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(error.message, AllOf(HasSubstr("task_options.num_tpus"), HasSubstr("num_gpus")));
}

TEST(ParseJobSpecTest, GpuIsolationIsOffByDefaultReadAsABooleanAndWrittenBack) {
  EXPECT_FALSE(parse_job_spec(json{{"entrypoint", "true"}})->gpu_isolation);
  const Result<JobSpec> spec = parse_job_spec(spec_with_task_option("gpu_isolation", true));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_TRUE(spec->gpu_isolation);
  EXPECT_TRUE(parse_job_spec(to_json(spec.value()))->gpu_isolation);
}

TEST(ParseJobSpecErrorTest, GpuIsolationThatIsNotABooleanIsRefusedNamingTheField) {
  for (const json& value : {json("yes"), json(1)}) {
    const Error error = parse_error(spec_with_task_option("gpu_isolation", value));
    EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
    EXPECT_THAT(error.message, AllOf(HasSubstr("task_options.gpu_isolation"), HasSubstr("true or false")));
  }
}

TEST(ParseJobSpecTest, RetryPolicyDefaultsParsesAndRoundTrips) {
  const Result<JobSpec> plain = parse_job_spec(json{{"entrypoint", "true"}});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->retry_delay_s, kDefaultRetryDelaySeconds);
  EXPECT_EQ(plain->retry_on.kind, RetryOn::Kind::kAny);
  const Result<JobSpec> node_lost =
      parse_job_spec(json{{"entrypoint", "true"}, {"retry_on", "node_lost"}, {"retry_delay", 0.5}});
  ASSERT_TRUE(node_lost.ok()) << node_lost.error().message;
  EXPECT_EQ(node_lost->retry_on.kind, RetryOn::Kind::kNodeLost);
  EXPECT_EQ(node_lost->retry_delay_s, 0.5);
  const Result<JobSpec> codes = parse_job_spec(json{{"entrypoint", "true"}, {"retry_on", {137, 3, 3}}});
  ASSERT_TRUE(codes.ok()) << codes.error().message;
  EXPECT_EQ(codes->retry_on, (RetryOn{RetryOn::Kind::kExitCodes, {3, 137}}));
  for (const auto& spec : {plain.value(), node_lost.value(), codes.value()}) {
    const Result<JobSpec> again = parse_job_spec(to_json(spec));
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_EQ(again->retry_on, spec.retry_on);
    EXPECT_EQ(again->retry_delay_s, spec.retry_delay_s);
  }
}

TEST(ParseJobSpecErrorTest, BadRetryPolicyIsRefusedNamingTheFieldAndWhatIsAccepted) {
  const std::vector<std::pair<json, std::string>> cases = {
      {json{{"retry_on", "sometimes"}}, "must be \"any\", \"node_lost\" or a list of exit codes"},
      {json{{"retry_on", 3}}, "must be \"any\", \"node_lost\" or a list of exit codes"},
      {json{{"retry_on", json::array()}}, "must hold 1 to 64"},
      {json{{"retry_on", {0}}}, "retry_on[0]"},
      {json{{"retry_on", {3, 256}}}, "retry_on[1]"},
      {json{{"retry_on", {"3"}}}, "retry_on[0]"},
      {json{{"retry_delay", -1}}, "retry_delay"},
      {json{{"retry_delay", 601}}, "retry_delay"},
      {json{{"retry_delay", "3s"}}, "retry_delay"},
  };
  for (const auto& [fields, expected] : cases) {
    json body = fields;
    body["entrypoint"] = "true";
    const Error error = parse_error(body);
    EXPECT_EQ(error.code, ErrorCode::kInvalidArgument) << body.dump();
    EXPECT_THAT(error.message, HasSubstr(expected)) << body.dump();
  }
}

TEST(ParseJobSpecErrorTest, UnknownRuntimeEnvFieldIsNamedWithItsPrefix) {
  const Error error = parse_error(spec_with("runtime_env", {{"pip", json::array({"torch"})}}));

  EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(error.message, AllOf(HasSubstr("runtime_env.pip"), HasSubstr("env_vars")));
}

TEST(ParseJobSpecErrorTest, NonObjectTaskOptionsAndRuntimeEnvAreRefused) {
  expect_invalid(spec_with("task_options", json::array()), "task_options");
  expect_invalid(spec_with("runtime_env", "FOO=1"), "runtime_env");
}

// --- entrypoint ------------------------------------------------------------------

TEST(ParseJobSpecErrorTest, MissingEntrypointIsRefused) {
  const Error error = parse_error(json::object({{"num_workers", 2}}));

  EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(error.message, HasSubstr("'entrypoint' is required"));
}

TEST(ParseJobSpecErrorTest, EmptyOrBlankEntrypointIsRefused) {
  for (const char* entrypoint : {"", "   ", "\t\n"}) {
    const Error error = parse_error(spec_with("entrypoint", entrypoint));
    EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
    EXPECT_THAT(error.message, HasSubstr("'entrypoint' must not be empty"));
  }
}

TEST(ParseJobSpecErrorTest, NonStringEntrypointIsRefused) {
  expect_invalid(spec_with("entrypoint", json::array({"python", "x.py"})), "entrypoint");
}

TEST(ParseJobSpecErrorTest, OversizedEntrypointNamesTheLimit) {
  const Error error = parse_error(spec_with("entrypoint", std::string(kMaxEntrypointBytes + 1, 'x')));

  EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(error.message, AllOf(HasSubstr("entrypoint"), HasSubstr("65537 bytes"), HasSubstr("65536")));
}

// --- num_workers -----------------------------------------------------------------

TEST(ParseJobSpecErrorTest, NumWorkersOutOfRangeIsRefused) {
  for (const json& n : {json(0), json(-1), json(1e9), json(kMaxNumWorkers + 1)}) {
    const Error error = parse_error(spec_with("num_workers", n));
    EXPECT_EQ(error.code, ErrorCode::kInvalidArgument) << n.dump();
    EXPECT_THAT(error.message, AllOf(HasSubstr("num_workers"), HasSubstr("between 1 and 4096"))) << n.dump();
  }
}

TEST(ParseJobSpecErrorTest, NumWorkersAsStringIsRefused) {
  const Error error = parse_error(spec_with("num_workers", "2"));

  EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(error.message, AllOf(HasSubstr("num_workers"), HasSubstr("whole number"), HasSubstr("\"2\"")));
}

TEST(ParseJobSpecErrorTest, FractionalNumWorkersIsRefused) {
  const Error error = parse_error(spec_with("num_workers", 1.5));

  EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(error.message, AllOf(HasSubstr("num_workers"), HasSubstr("whole number"), HasSubstr("1.5")));
}

// --- task_options ----------------------------------------------------------------

TEST(ParseJobSpecErrorTest, NegativeNumCpusIsRefused) {
  expect_invalid(spec_with_task_option("num_cpus", -1), "task_options.num_cpus");
}

TEST(ParseJobSpecErrorTest, ZeroCpusIsRefusedSoThatCpusBoundHowManyTasksANodeRuns) {
  const Error error = parse_error(spec_with_task_option("num_cpus", 0));

  EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(error.message, AllOf(HasSubstr("task_options.num_cpus"), HasSubstr("between 0.001 and 1024"),
                                   HasSubstr("got 0")));
}

TEST(ParseJobSpecErrorTest, NonNumericNumCpusIsRefused) {
  const Error error = parse_error(spec_with_task_option("num_cpus", "lots"));

  EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(error.message,
              AllOf(HasSubstr("task_options.num_cpus"), HasSubstr("must be a number"), HasSubstr("\"lots\"")));
}

TEST(ParseJobSpecErrorTest, TooManyCpusIsRefused) {
  expect_invalid(spec_with_task_option("num_cpus", kMaxCpusPerTask + 1), "task_options.num_cpus");
}

TEST(ParseJobSpecErrorTest, NegativeNumGpusIsRefused) {
  expect_invalid(spec_with_task_option("num_gpus", -1), "task_options.num_gpus");
}

TEST(ParseJobSpecErrorTest, FractionalNumGpusIsRefused) {
  const Error error = parse_error(spec_with_task_option("num_gpus", 2.5));

  EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(error.message, AllOf(HasSubstr("task_options.num_gpus"), HasSubstr("whole number")));
}

TEST(ParseJobSpecErrorTest, NegativeMemoryIsRefused) {
  expect_invalid(spec_with_task_option("memory", -1), "task_options.memory");
}

// --- other fields ----------------------------------------------------------------

TEST(ParseJobSpecErrorTest, UnknownPlacementIsRefused) {
  const Error error = parse_error(spec_with("placement", "diagonal"));

  EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(error.message, AllOf(HasSubstr("placement"), HasSubstr("\"pack\" or \"spread\""), HasSubstr("diagonal")));
}

// The message is part of the API (clients show it as is): it stays word for word what
// it was while placement was a string.
TEST(ParseJobSpecErrorTest, UnknownPlacementMessageIsExact) {
  EXPECT_EQ(parse_error(spec_with("placement", "diagonal")).message,
            "field 'placement': must be \"pack\" or \"spread\", got \"diagonal\"");
}

// Wire names are exact: no case folding, no trimming.
TEST(ParseJobSpecErrorTest, PlacementInOtherSpellingsIsRefused) {
  for (const char* text : {"Spread", "PACK", " pack", "spread ", ""}) {
    const Error error = parse_error(spec_with("placement", text));
    EXPECT_EQ(error.code, ErrorCode::kInvalidArgument) << text;
    EXPECT_THAT(error.message, HasSubstr("\"pack\" or \"spread\"")) << text;
  }
}

TEST(ParseJobSpecErrorTest, NonStringPlacementIsRefused) {
  EXPECT_EQ(parse_error(spec_with("placement", 1)).message, "field 'placement': must be a string, got number");
}

TEST(ParseJobSpecErrorTest, MaxRetriesOutOfRangeIsRefused) {
  for (const json& n : {json(-1), json(1000)}) {
    const Error error = parse_error(spec_with("max_retries", n));
    EXPECT_EQ(error.code, ErrorCode::kInvalidArgument) << n.dump();
    EXPECT_THAT(error.message, AllOf(HasSubstr("max_retries"), HasSubstr("between 0 and 100"))) << n.dump();
  }
}

TEST(ParseJobSpecErrorTest, NonPositiveTimeoutIsRefused) {
  for (const json& t : {json(0), json(-5)}) {
    const Error error = parse_error(spec_with("timeout", t));
    EXPECT_EQ(error.code, ErrorCode::kInvalidArgument) << t.dump();
    EXPECT_THAT(error.message, HasSubstr("'timeout'")) << t.dump();
  }
}

TEST(ParseJobSpecErrorTest, TimeoutOverNinetyDaysIsRefused) {
  expect_invalid(spec_with("timeout", kMaxTimeoutSeconds + 1), "timeout");
}

TEST(ParseJobSpecErrorTest, LabelWithNonStringValueNamesTheLabel) {
  const Error error = parse_error(spec_with("labels", {{"team", "vision"}, {"priority", 1}}));

  EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(error.message, AllOf(HasSubstr("labels.priority"), HasSubstr("must be a string")));
}

TEST(ParseJobSpecErrorTest, LabelsThatAreNotAnObjectAreRefused) {
  expect_invalid(spec_with("labels", json::array({"a"})), "labels");
}

TEST(ParseJobSpecErrorTest, EnvVarNameWithEqualsSignIsRefused) {
  const Error error = parse_error(spec_with("runtime_env", {{"env_vars", {{"A=B", "x"}}}}));

  EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(error.message, AllOf(HasSubstr("runtime_env.env_vars"), HasSubstr("A=B"), HasSubstr("'='")));
}

TEST(ParseJobSpecErrorTest, EnvVarWithNonStringValueNamesTheVariable) {
  expect_invalid(spec_with("runtime_env", {{"env_vars", {{"OMP_NUM_THREADS", 4}}}}),
                 "runtime_env.env_vars.OMP_NUM_THREADS");
}

TEST(ParseJobSpecErrorTest, OverlongJobNameIsRefused) {
  expect_invalid(spec_with("job_name", std::string(kMaxNameBytes + 1, 'n')), "job_name");
}

// --- Placement -------------------------------------------------------------------

TEST(PlacementTest, WireNamesRoundTrip) {
  for (Placement placement : {Placement::kPack, Placement::kSpread}) {
    EXPECT_EQ(parse_placement(to_string(placement)), placement) << to_string(placement);
  }
  EXPECT_STREQ(to_string(Placement::kPack), "pack");
  EXPECT_STREQ(to_string(Placement::kSpread), "spread");
}

TEST(PlacementTest, OnlyExactWireNamesParse) {
  for (const char* text : {"", "Pack", "SPREAD", "spread ", "diagonal"}) {
    EXPECT_EQ(parse_placement(text), std::nullopt) << text;
  }
}

// Stored job records hold the spec as to_json wrote it; they must keep the string so
// that heads before and after the enum read each other's databases.
TEST(PlacementTest, ToJsonWritesTheWireName) {
  JobSpec spec;
  spec.entrypoint = "true";
  EXPECT_EQ(to_json(spec)["placement"], "pack");

  spec.placement = Placement::kSpread;
  const json written = to_json(spec);

  EXPECT_EQ(written["placement"], "spread");
  const Result<JobSpec> again = parse_job_spec(written);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->placement, Placement::kSpread);
}

// --- Round trip ------------------------------------------------------------------

TEST(JobSpecRoundTripTest, FullSpecSurvivesToJsonAndBack) {
  const Result<JobSpec> original = parse_job_spec(full_spec());
  ASSERT_TRUE(original.ok());

  const Result<JobSpec> again = parse_job_spec(to_json(*original));

  ASSERT_TRUE(again.ok()) << again.error().message;
  expect_same_spec(*again, *original);
}

TEST(JobSpecRoundTripTest, DefaultSpecSurvivesToJsonAndBack) {
  const Result<JobSpec> original = parse_job_spec(minimal_spec());
  ASSERT_TRUE(original.ok());

  const Result<JobSpec> again = parse_job_spec(to_json(*original));

  ASSERT_TRUE(again.ok()) << again.error().message;
  expect_same_spec(*again, *original);
}

TEST(JobSpecRoundTripTest, SurvivesSerialisingToTextAndBack) {
  const Result<JobSpec> original = parse_job_spec(full_spec());
  ASSERT_TRUE(original.ok());

  const Result<JobSpec> again = parse_job_spec(json::parse(to_json(*original).dump()));

  ASSERT_TRUE(again.ok()) << again.error().message;
  expect_same_spec(*again, *original);
}

}  // namespace
}  // namespace ag::api
