#include "api/exec_protocol.h"

#include <gtest/gtest.h>

#include "api/protocol.h"

namespace ag::api {
namespace {

TEST(ExecProtocolTest, ExecOpenTravelsWholeOnTheChannel) {
  ExecOpen open{"exec_0123456789abcdef01234567", {"job_ab12", 2, 3}, {"sh", "-c", "echo 'a b'"}, true};
  auto decoded = decode_head_message(encode(open));
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_EQ(std::get<ExecOpen>(decoded.value()), open);
}

TEST(ExecProtocolTest, TerminalAndPortForwardOpensTravelWhole) {
  ExecOpen tty{"exec_0123456789abcdef01234567", {"job_ab12", 0, 1}, {"bash"}, true, true, 40, 120, "xterm-256color"};
  ExecOpen port{"exec_0123456789abcdef01234568", {"job_ab12", 0, 0}, {}, false, false, 0, 0, "", 8888};
  for (const ExecOpen& open : {tty, port}) {
    auto decoded = decode_head_message(encode(open));
    ASSERT_TRUE(decoded.ok()) << decoded.error().message;
    EXPECT_EQ(std::get<ExecOpen>(decoded.value()), open);
  }
}

TEST(ExecProtocolTest, TerminalSizesRoundTripAndBadOnesAreRefused) {
  auto size = decode_terminal_size(encode_terminal_size({40, 120}));
  ASSERT_TRUE(size.ok()) << size.error().message;
  EXPECT_EQ(size.value(), (TerminalSize{40, 120}));
  for (const char* bad : {"", "40", "40 ", " 40 120", "0 80", "40 65536", "40x120", "40 120 1", "-1 80", "9999999 1"}) {
    EXPECT_FALSE(decode_terminal_size(bad).ok()) << bad;
  }
}

TEST(ExecProtocolTest, AnExecOpenWithABadSessionIsRefusedNamingIt) {
  auto decoded = decode_head_message(
      R"({"type":"exec_open","job_id":"job_a","attempt":0,"task_index":0,"session":"../x","command":["true"]})");
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.error().message.find("session"), std::string::npos) << decoded.error().message;
}

TEST(ExecProtocolTest, StatusesRoundTripAndAnEmptyOneIsRefused) {
  for (const ExecStatus& status : {ExecStatus{7, std::nullopt, ""}, ExecStatus{std::nullopt, 9, ""},
                                   ExecStatus{std::nullopt, std::nullopt, "task gone"}}) {
    auto decoded = decode_exec_status(encode_exec_status(status));
    ASSERT_TRUE(decoded.ok()) << decoded.error().message;
    EXPECT_EQ(decoded.value(), status);
  }
  EXPECT_FALSE(decode_exec_status("{}").ok());
  EXPECT_FALSE(decode_exec_status(R"({"exit_code":"7"})").ok());
  EXPECT_FALSE(decode_exec_status("not json").ok());
}

TEST(ExecProtocolTest, FramesStartWithTheirChannel) {
  const std::string frame = exec_frame(ExecChannel::kStderr, "oops");
  ASSERT_EQ(frame.size(), 5u);
  EXPECT_EQ(frame[0], static_cast<char>(ExecChannel::kStderr));
  EXPECT_EQ(frame.substr(1), "oops");
}

TEST(ExecProtocolTest, CommandsAreBounded) {
  EXPECT_TRUE(check_exec_command({"nvidia-smi"}));
  EXPECT_NE(check_exec_command({}).error().message.find("after `--`"), std::string::npos);
  EXPECT_FALSE(check_exec_command({""}));
  EXPECT_FALSE(check_exec_command({"echo", std::string("a\0b", 3)}));
  EXPECT_NE(check_exec_command({"echo", std::string(kMaxExecCommandBytes, 'x')}).error().message.find("bytes long"),
            std::string::npos);
  EXPECT_FALSE(check_exec_command(std::vector<std::string>(kMaxExecArguments + 1, "x")));
}

}  // namespace
}  // namespace ag::api
