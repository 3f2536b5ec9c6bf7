// WebhookSender: a few threads that make webhook deliveries' HTTP requests, off the
// head's io thread (a receiver that is slow or hangs costs a thread for at most the
// request's timeout, never the io thread). Results wait in a queue that the owner
// drains on its own thread (take_results). The threads share only that state with the
// sender, so a sender destroyed while requests are in flight does not wait for them:
// they finish, find nobody, and end. Any thread may send; take_results on one only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "net/http_client.h"

namespace ag::head {

class WebhookSender {
 public:
  struct Request {
    uint64_t id = 0;  // the caller's, given back with the result
    net::Endpoint to;
    std::string target;
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
    int timeout_ms = 10000;
  };
  struct Result {
    uint64_t id = 0;
    int status = 0;     // the HTTP status; 0 when none came
    std::string error;  // why none came, or the start of a non-2xx answer
    int64_t duration_ms = 0;
  };
  explicit WebhookSender(size_t threads);
  ~WebhookSender();
  WebhookSender(const WebhookSender&) = delete;
  WebhookSender& operator=(const WebhookSender&) = delete;

  void send(Request request);
  std::vector<Result> take_results();
  size_t in_flight() const;

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

}  // namespace ag::head
