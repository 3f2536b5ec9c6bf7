#include "api/log_frame.h"
#include "api/log_stream.h"

#include <gtest/gtest.h>

namespace ag::api {
namespace {

TEST(LogStreamTest, AnOutputRecordCarriesItsTaskOffsetAndLength) {
  LogFrameHeader at{TaskKey{"job_1", 2, 3}, 4096};
  std::string start = log_bytes_record_start(at, 1 << 20);
  auto header = decode_log_record_header(start);
  ASSERT_TRUE(header.ok()) << header.error().message;
  EXPECT_EQ(header->kind, LogRecordKind::kLogBytes);
  EXPECT_EQ(header->payload_bytes, 1u << 20);
  ASSERT_EQ(start.size(), kLogRecordHeaderBytes + header->meta_bytes);
  auto meta = decode_log_bytes_meta(std::string_view(start).substr(kLogRecordHeaderBytes));
  ASSERT_TRUE(meta.ok()) << meta.error().message;
  EXPECT_EQ(meta.value(), at);
}

TEST(LogStreamTest, AMessageRecordCarriesTheMessageWhole) {
  std::string record = message_record(R"({"type":"heartbeat"})");
  auto header = decode_log_record_header(record);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->kind, LogRecordKind::kMessage);
  EXPECT_EQ(header->meta_bytes, 0u);
  EXPECT_EQ(record.substr(kLogRecordHeaderBytes), R"({"type":"heartbeat"})");
  EXPECT_EQ(header->payload_bytes, record.size() - kLogRecordHeaderBytes);
}

TEST(LogStreamTest, BadHeadersAreRefusedNamingWhatWasWrong) {
  auto error_of = [](const std::string& bytes) { return decode_log_record_header(bytes).error().message; };
  EXPECT_EQ(error_of("L12"), "log stream record header of 3 bytes; it has 13");
  EXPECT_EQ(error_of(encode_log_record_start(static_cast<LogRecordKind>('X'), "", 0)),
            "log stream record of unknown kind 88");
  EXPECT_EQ(error_of(encode_log_record_start(LogRecordKind::kLogBytes, "", 0)),
            "log stream record meta of 0 bytes; it must be 1 to 4096");
  EXPECT_EQ(error_of(encode_log_record_start(LogRecordKind::kLogBytes, std::string(4097, 'm'), 0)),
            "log stream record meta of 4097 bytes; it must be 1 to 4096");
  EXPECT_EQ(error_of(encode_log_record_start(LogRecordKind::kLogBytes, "m", kMaxLogRecordBytes + 1)),
            "log stream record of 67108865 bytes of output; at most 67108864");
  EXPECT_EQ(error_of(encode_log_record_start(LogRecordKind::kMessage, "m", 2)),
            "log stream message record with meta bytes");
  EXPECT_EQ(error_of(encode_log_record_start(LogRecordKind::kMessage, "", kMaxControlMessageBytes + 1)),
            "log stream message of 16777217 bytes; at most 16777216");
  EXPECT_TRUE(decode_log_record_header(encode_log_record_start(LogRecordKind::kLogBytes, "m", kMaxLogRecordBytes)).ok());
}

TEST(LogStreamTest, MetaThatIsNotALogHeaderIsRefused) {
  EXPECT_FALSE(decode_log_bytes_meta("{not json").ok());
  auto bad_id = decode_log_bytes_meta(R"({"job_id":"../x","attempt":0,"task_index":0,"offset":0})");
  ASSERT_FALSE(bad_id.ok());
  EXPECT_NE(bad_id.error().message.find("job_id"), std::string::npos);
  EXPECT_FALSE(decode_log_bytes_meta(R"({"job_id":"j","attempt":0,"task_index":0,"offset":-1})").ok());
}

}  // namespace
}  // namespace ag::api
