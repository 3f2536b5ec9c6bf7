#include "head/nodes/channel_traffic.h"

#include <string_view>

namespace ag::head {
namespace {

// The wire's names of the messages, in the order of the variants' alternatives.
constexpr std::string_view kHeadTypes[] = {"registered", "launch",        "kill",          "exit_ack",
                                           "log_resume", "error",         "heartbeat_ack", "pull",
                                           "exec_open",  "stack_request", "health_cleared"};
constexpr std::string_view kWorkerTypes[] = {"register",    "heartbeat", "task_started", "task_exited",  "task_note",
                                             "pull_update", "error",     "stack_report", "health_report"};
static_assert(std::size(kHeadTypes) == std::variant_size_v<api::HeadMessage>);
static_assert(std::size(kWorkerTypes) == std::variant_size_v<api::WorkerMessage>);
constexpr std::string_view kLogFrame = "log_frame";
constexpr std::string_view kUnreadable = "unreadable";

template <size_t N>
size_t index_of(const std::string_view (&names)[N], const std::string& type) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == type) return i;
  }
  return N;
}

}  // namespace

void ChannelTraffic::sent(const api::HeadMessage& message, size_t bytes) { count(to_worker_[message.index()], bytes); }

void ChannelTraffic::received(const api::WorkerMessage& message, size_t bytes) {
  count(from_worker_[message.index()], bytes);
}

ChannelTraffic::Count ChannelTraffic::to_worker(const std::string& type) const {
  const size_t i = index_of(kHeadTypes, type);
  return i < std::size(kHeadTypes) ? to_worker_[i] : Count{};
}

ChannelTraffic::Count ChannelTraffic::from_worker(const std::string& type) const {
  if (type == kLogFrame) return from_worker_log_;
  if (type == kUnreadable) return from_worker_unreadable_;
  const size_t i = index_of(kWorkerTypes, type);
  return i < std::size(kWorkerTypes) ? from_worker_[i] : Count{};
}

void ChannelTraffic::render(std::string& out) const {
  // Every type, seen or not: a counter that appears only once it is non-zero loses its
  // first increase to rate().
  for (const bool bytes : {false, true}) {
    const std::string name = bytes ? "ag_worker_channel_bytes_total" : "ag_worker_channel_messages_total";
    out += "# HELP " + name +
           (bytes ? " Bytes of the messages on the workers' channels (frame payloads), by direction and type.\n"
                  : " Messages on the workers' channels, by direction and type.\n");
    out += "# TYPE " + name + " counter\n";
    const auto line = [&](std::string_view direction, std::string_view type, const Count& c) {
      out += name + "{direction=\"";
      out += direction;
      out += "\",type=\"";
      out += type;
      out += "\"} " + std::to_string(bytes ? c.bytes : c.messages) + "\n";
    };
    for (size_t i = 0; i < std::size(kHeadTypes); ++i) line("to_worker", kHeadTypes[i], to_worker_[i]);
    for (size_t i = 0; i < std::size(kWorkerTypes); ++i) line("from_worker", kWorkerTypes[i], from_worker_[i]);
    line("from_worker", kLogFrame, from_worker_log_);
    line("from_worker", kUnreadable, from_worker_unreadable_);
  }
}

}  // namespace ag::head
