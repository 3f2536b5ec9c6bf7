// `ag submit`'s flags to api::JobSpec (cli/submit_options.h). The CLI used to build the
// request body by hand; these tests keep what the head receives the same: every field
// the hand-built body set is sent with the same value, the head reads the same spec
// from both, and a value the head refuses is refused here with the head's message.
#include "cli/submit_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ag::cli {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// 2026-12-01 19:30:00 UTC: what --begin counts from here.
constexpr int64_t kNow = 1796153400000;

const std::string kPackageRef = "sha256:" + std::string(64, 'a');

// The options of `ag submit -- python train.py` with nothing else given.
SubmitOptions minimal_options() {
  SubmitOptions options;
  options.command = {"python train.py"};
  return options;
}

// The body `ag submit` built by hand before it used api::JobSpec, kept as the
// reference for what the head must keep receiving. `working_dir_ref` stands for the
// uploaded package; submission_id, random per run, is left out.
json hand_built_body(const SubmitOptions& submit, const std::string& working_dir_ref = "") {
  json spec = {{"entrypoint", entrypoint_from_command(submit.command)},
               {"num_workers", submit.num_workers},
               {"placement", submit.placement},
               {"max_retries", submit.max_retries}};
  json task_options = json::object();
  if (submit.num_cpus) task_options["num_cpus"] = *submit.num_cpus;
  if (submit.num_gpus) task_options["num_gpus"] = *submit.num_gpus;
  if (submit.memory_gb) task_options["memory"] = static_cast<int64_t>(*submit.memory_gb * (1ll << 30));
  spec["task_options"] = task_options;
  if (!submit.name.empty()) spec["job_name"] = submit.name;
  if (submit.timeout_s) spec["timeout"] = *submit.timeout_s;
  if (submit.timeout_per_attempt) spec["timeout_per_attempt"] = true;
  json env_vars = json::object();
  for (const auto& kv : submit.env) {
    size_t eq = kv.find('=');
    env_vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  json runtime_env = json::object();
  if (!env_vars.empty()) runtime_env["env_vars"] = env_vars;
  if (!submit.python.empty()) runtime_env["python"] = {{"executable", submit.python}};
  if (!working_dir_ref.empty()) runtime_env["working_dir"] = working_dir_ref;
  if (!runtime_env.empty()) spec["runtime_env"] = runtime_env;
  return spec;
}

// What `ag submit` sends now: the spec as the caller completes it, through to_json.
json sent_body(const SubmitOptions& options, const std::string& working_dir_ref = "") {
  Result<api::JobSpec> spec = spec_from_submit_options(options, kNow);
  if (!spec.ok()) {
    ADD_FAILURE() << "spec_from_submit_options failed: " << spec.error().message;
    return json::object();
  }
  spec->runtime_env.working_dir = working_dir_ref;
  return api::to_json(spec.value());
}

// Every value `expected` holds is in `actual` at the same place and equal; `actual`
// may hold more (to_json also writes the fields left at their defaults).
void expect_contains(const json& actual, const json& expected, const std::string& where = "") {
  ASSERT_TRUE(actual.is_object()) << where << " is " << actual.dump();
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    const std::string path = where + "/" + it.key();
    ASSERT_TRUE(actual.contains(it.key())) << path << " is not sent any more";
    if (it.value().is_object()) {
      expect_contains(actual[it.key()], it.value(), path);
    } else {
      EXPECT_EQ(actual[it.key()], it.value()) << path;
    }
  }
}

void expect_same_spec(const api::JobSpec& actual, const api::JobSpec& expected) {
  EXPECT_EQ(actual.entrypoint, expected.entrypoint);
  EXPECT_EQ(actual.num_workers, expected.num_workers);
  EXPECT_EQ(actual.num_cpus, expected.num_cpus);
  EXPECT_EQ(actual.num_gpus, expected.num_gpus);
  EXPECT_EQ(actual.memory_bytes, expected.memory_bytes);
  EXPECT_EQ(actual.runtime_env.env_vars, expected.runtime_env.env_vars);
  EXPECT_EQ(actual.runtime_env.working_dir, expected.runtime_env.working_dir);
  EXPECT_EQ(actual.runtime_env.python_executable, expected.runtime_env.python_executable);
  EXPECT_EQ(actual.runtime_env.image, expected.runtime_env.image);
  EXPECT_EQ(actual.runtime_env.excludes, expected.runtime_env.excludes);
  EXPECT_EQ(actual.name, expected.name);
  EXPECT_EQ(actual.labels, expected.labels);
  EXPECT_EQ(actual.max_retries, expected.max_retries);
  EXPECT_EQ(actual.timeout_s, expected.timeout_s);
  EXPECT_EQ(actual.timeout_per_attempt, expected.timeout_per_attempt);
  EXPECT_EQ(actual.placement, expected.placement);
  EXPECT_EQ(actual.submission_id, expected.submission_id);
}

// The head receives the same thing as from the hand-built body: each field that body
// set, with the same JSON value, and the same spec once parsed.
void expect_same_on_the_wire(const SubmitOptions& options, const std::string& working_dir_ref = "") {
  const json before = hand_built_body(options, working_dir_ref);
  const json after = sent_body(options, working_dir_ref);

  expect_contains(after, before);
  Result<api::JobSpec> head_read_before = api::parse_job_spec(before);
  Result<api::JobSpec> head_read_after = api::parse_job_spec(after);
  ASSERT_TRUE(head_read_before.ok()) << head_read_before.error().message;
  ASSERT_TRUE(head_read_after.ok()) << head_read_after.error().message;
  expect_same_spec(*head_read_after, *head_read_before);
}

// The message the head gave for the hand-built body: what the CLI must now say itself.
std::string head_message(const SubmitOptions& options) {
  Result<api::JobSpec> spec = api::parse_job_spec(hand_built_body(options));
  if (spec.ok()) {
    ADD_FAILURE() << "the head accepts " << hand_built_body(options).dump();
    return "";
  }
  return spec.error().message;
}

void expect_refused_like_the_head(const SubmitOptions& options) {
  Result<api::JobSpec> spec = spec_from_submit_options(options, kNow);
  ASSERT_FALSE(spec.ok()) << hand_built_body(options).dump();
  EXPECT_EQ(spec.error().code, ErrorCode::kInvalidArgument);
  // The head's words, with the flag the user typed named first.
  EXPECT_EQ(spec.error().message, in_flag_terms(head_message(options)));
}

TEST(InFlagTermsTest, ARestFieldIsNamedByItsFlagFirst) {
  EXPECT_EQ(in_flag_terms("field 'task_options.num_cpus': must be between 0.001 and 1024, got 0"),
            "--num-cpus (task_options.num_cpus): must be between 0.001 and 1024, got 0");
  EXPECT_EQ(in_flag_terms("field 'retry_on[0]': must be between 1 and 255, got 0"),
            "--retry-on (retry_on[0]): must be between 1 and 255, got 0");
  EXPECT_EQ(in_flag_terms("field 'constraints.gpu': the value must be up to 63 letters"),
            "--constraint (constraints.gpu): the value must be up to 63 letters");
  // Not a field, or one without a flag: as it was.
  EXPECT_EQ(in_flag_terms("something else"), "something else");
  EXPECT_EQ(in_flag_terms("field 'labels': too many"), "field 'labels': too many");
  EXPECT_EQ(in_flag_terms("field 'timeout_per_attempt': must be true or false"),
            "field 'timeout_per_attempt': must be true or false");
}

// --- Same request as before --------------------------------------------------------

TEST(SpecFromSubmitOptionsTest, NoFlagsSendTheSameAsBefore) { expect_same_on_the_wire(minimal_options()); }

TEST(SpecFromSubmitOptionsTest, ResourceFlagsSendTheSameAsBefore) {
  SubmitOptions options = minimal_options();
  options.num_workers = 4;
  options.num_cpus = 2.5;
  options.num_gpus = 2;
  options.memory_gb = 1.5;
  options.placement = "spread";

  expect_same_on_the_wire(options);
}

TEST(SpecFromSubmitOptionsTest, WholeNumberCpusAndZeroResourcesSendTheSameAsBefore) {
  SubmitOptions options = minimal_options();
  options.num_cpus = 3;
  options.num_gpus = 0;
  options.memory_gb = 0;

  expect_same_on_the_wire(options);
}

TEST(SpecFromSubmitOptionsTest, ZeroCpusIsRefusedBeforeAnythingIsSent) {
  SubmitOptions options = minimal_options();
  options.num_cpus = 0;

  Result<api::JobSpec> spec = spec_from_submit_options(options, kNow);

  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, ::testing::HasSubstr("task_options.num_cpus"));
}

TEST(SpecFromSubmitOptionsTest, EnvPythonAndWorkingDirSendTheSameAsBefore) {
  SubmitOptions options = minimal_options();
  options.env = {"MYPATH=/x:$HOME", "EQ=a=b", "EMPTY=", "MYPATH=/later/wins"};
  options.python = "/usr/bin/python3";
  options.working_dir = "/home/me/code";
  options.excludes = {"*.ckpt", "data/"};

  expect_same_on_the_wire(options, kPackageRef);
}

TEST(SpecFromSubmitOptionsTest, NameRetriesAndTimeoutSendTheSameAsBefore) {
  SubmitOptions options = minimal_options();
  options.name = "resnet";
  options.max_retries = 3;
  options.timeout_s = 90.5;
  options.timeout_per_attempt = true;

  expect_same_on_the_wire(options);
}

TEST(SpecFromSubmitOptionsTest, CommandOfSeveralArgumentsSendsTheSameAsBefore) {
  SubmitOptions options = minimal_options();
  options.command = {"python", "-c", "print('hi')", ""};

  expect_same_on_the_wire(options);
}

TEST(SpecFromSubmitOptionsTest, FlagsBecomeTypedFields) {
  SubmitOptions options = minimal_options();
  options.num_workers = 2;
  options.num_gpus = 1;
  options.memory_gb = 2;
  options.placement = "spread";
  options.env = {"A=1", "B=x=y"};

  Result<api::JobSpec> spec = spec_from_submit_options(options, kNow);

  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->entrypoint, "python train.py");
  EXPECT_EQ(spec->num_workers, 2);
  EXPECT_EQ(spec->num_cpus, 1.0);  // the head's default: --num-cpus was not given
  EXPECT_EQ(spec->num_gpus, 1);
  EXPECT_EQ(spec->memory_bytes, int64_t{2} << 30);
  EXPECT_EQ(spec->placement, api::Placement::kSpread);
  EXPECT_EQ(spec->runtime_env.env_vars, (std::map<std::string, std::string>{{"A", "1"}, {"B", "x=y"}}));
}

// Both are the caller's: the package exists only after packing, and the idempotency
// key must be fresh for every invocation.
TEST(SpecFromSubmitOptionsTest, WorkingDirAndSubmissionIdAreLeftForTheCaller) {
  SubmitOptions options = minimal_options();
  options.working_dir = "/home/me/code";
  options.excludes = {"*.ckpt"};

  Result<api::JobSpec> spec = spec_from_submit_options(options, kNow);

  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->runtime_env.working_dir, "");
  EXPECT_TRUE(spec->runtime_env.excludes.empty());
  EXPECT_EQ(spec->submission_id, "");
}

// --- Refused like the head refuses --------------------------------------------------

TEST(SpecFromSubmitOptionsTest, TimeoutOutsideTheHeadsRangeIsRefusedWithItsMessage) {
  for (double timeout_s : {0.0001, 1e9}) {
    SubmitOptions options = minimal_options();
    options.timeout_s = timeout_s;
    expect_refused_like_the_head(options);
  }
}

TEST(SpecFromSubmitOptionsTest, BlankCommandIsRefusedWithTheHeadsMessage) {
  SubmitOptions options = minimal_options();
  options.command = {"  "};

  expect_refused_like_the_head(options);
  EXPECT_THAT(spec_from_submit_options(options, kNow).error().message,
              HasSubstr("the command after -- (entrypoint) must not be empty"));
}

TEST(SpecFromSubmitOptionsTest, UnknownPlacementIsRefusedWithTheHeadsMessage) {
  SubmitOptions options = minimal_options();
  options.placement = "diagonal";

  expect_refused_like_the_head(options);
}

TEST(SpecFromSubmitOptionsTest, TooManyEnvVarsAreRefusedWithTheHeadsMessage) {
  SubmitOptions options = minimal_options();
  for (size_t i = 0; i <= api::kMaxEnvVars; ++i) options.env.push_back("V" + std::to_string(i) + "=x");

  expect_refused_like_the_head(options);
}

TEST(SpecFromSubmitOptionsTest, OverlongNameIsRefusedWithTheHeadsMessage) {
  SubmitOptions options = minimal_options();
  options.name = std::string(api::kMaxNameBytes + 1, 'n');

  expect_refused_like_the_head(options);
}

TEST(SpecFromSubmitOptionsTest, PythonPathWithNewlineIsRefusedWithTheHeadsMessage) {
  SubmitOptions options = minimal_options();
  options.python = "/usr/bin/python3\n--evil";

  expect_refused_like_the_head(options);
}

// --- Usage mistakes --------------------------------------------------------------------

// `ag submit` prints these after "error: " and exits 2, as it always has.
TEST(CheckSubmitUsageTest, MissingCommandIsNamed) {
  SubmitOptions options;

  std::optional<Error> error = check_submit_usage(options);

  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(error->message,
            "no command given: put the command after --, e.g. ag submit --num-workers 2 -- python train.py");
}

TEST(CheckSubmitUsageTest, EnvWithoutNameOrEqualsSignIsNamed) {
  for (const std::string bad : {"FOO", "=x"}) {
    SubmitOptions options = minimal_options();
    options.env = {"OK=1", bad};

    std::optional<Error> error = check_submit_usage(options);

    ASSERT_TRUE(error.has_value()) << bad;
    EXPECT_EQ(error->message, "--env takes NAME=VALUE, got '" + bad + "'");
  }
}

TEST(CheckSubmitUsageTest, ExcludeWithoutWorkingDirIsNamed) {
  SubmitOptions options = minimal_options();
  options.excludes = {"*.ckpt"};

  std::optional<Error> error = check_submit_usage(options);

  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->message, "--exclude only applies with --working-dir");
  options.working_dir = "/home/me/code";
  EXPECT_EQ(check_submit_usage(options), std::nullopt);
}

TEST(CheckSubmitUsageTest, SpecFromSubmitOptionsReportsUsageMistakesToo) {
  SubmitOptions options = minimal_options();
  options.env = {"FOO"};

  Result<api::JobSpec> spec = spec_from_submit_options(options, kNow);

  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.error().message, "--env takes NAME=VALUE, got 'FOO'");
}

// --- Entrypoint ------------------------------------------------------------------------

TEST(EntrypointFromCommandTest, OneArgumentIsAShellCommandLineAsItIs) {
  EXPECT_EQ(entrypoint_from_command({"echo $HOME | wc -c"}), "echo $HOME | wc -c");
}

TEST(EntrypointFromCommandTest, SeveralArgumentsAreQuotedWhereNeededAndJoined) {
  EXPECT_EQ(entrypoint_from_command({"python", "-c", "print('hi')", "a=b,c:d", ""}),
            "python -c 'print('\\''hi'\\'')' a=b,c:d ''");
}

TEST(WorkingDirHintTest, AFileThatIsHereButWasNotSentIsNamedWithTheFlagToSendIt) {
  const auto here = [](const std::string& path) { return path == "train.py" || path == "data/cfg.yaml"; };
  SubmitOptions options;
  options.command = {"python", "./train.py", "--config", "data/cfg.yaml"};
  const std::string python_error = "python: can't open file '/srv/work/train.py': [Errno 2] No such file or directory";
  EXPECT_EQ(working_dir_hint(options, python_error, here),
            "train.py is in this folder but not on the workers: add `--working-dir .` to send this folder with the job");
  // Not when the folder was sent, when the failure is something else, or when the
  // file the error names is not here.
  SubmitOptions sent = options;
  sent.working_dir = ".";
  EXPECT_EQ(working_dir_hint(sent, python_error, here), std::nullopt);
  EXPECT_EQ(working_dir_hint(options, "Traceback: ZeroDivisionError", here), std::nullopt);
  options.command = {"python other.py"};
  EXPECT_EQ(working_dir_hint(options, "can't open file 'other.py': No such file", here), std::nullopt);
}

}  // namespace
}  // namespace ag::cli
