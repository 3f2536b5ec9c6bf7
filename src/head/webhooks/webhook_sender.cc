#include "head/webhooks/webhook_sender.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace ag::head {

constexpr size_t kMaxAnswerBytes = 4096;

struct WebhookSender::Shared {
  std::mutex mu;
  std::condition_variable wake;
  std::condition_variable idle;  // busy went to 0
  std::deque<Request> queue;
  std::vector<Result> results;
  size_t busy = 0;
  bool stopping = false;
};

namespace {

WebhookSender::Result deliver(const WebhookSender::Request& r) {
  const auto start = std::chrono::steady_clock::now();
  WebhookSender::Result out;
  out.id = r.id;
  auto answer = net::http_post(r.to, r.target, r.body, r.headers, r.timeout_ms, kMaxAnswerBytes);
  out.duration_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  if (!answer.ok()) {
    out.error = answer.error().message;
    return out;
  }
  out.status = answer->status;
  if (out.status < 200 || out.status > 299) out.error = answer->body.substr(0, 300);
  return out;
}

}  // namespace

WebhookSender::WebhookSender(size_t threads) : shared_(std::make_shared<Shared>()) {
  for (size_t i = 0; i < threads; ++i) {
    std::thread([shared = shared_] {
      std::unique_lock lock(shared->mu);
      for (;;) {
        shared->wake.wait(lock, [&] { return shared->stopping || !shared->queue.empty(); });
        if (shared->stopping) return;
        Request request = std::move(shared->queue.front());
        shared->queue.pop_front();
        ++shared->busy;
        lock.unlock();
        Result result = deliver(request);
        lock.lock();
        --shared->busy;
        shared->results.push_back(std::move(result));
        if (shared->busy == 0) shared->idle.notify_all();
      }
    }).detach();
  }
}

WebhookSender::~WebhookSender() {
  std::unique_lock lock(shared_->mu);
  shared_->stopping = true;
  shared_->queue.clear();
  shared_->wake.notify_all();
  // Requests under way are given a moment to end before the process goes on to exit
  // (a thread still in one when it does would use what exit tears down).
  shared_->idle.wait_for(lock, std::chrono::seconds(2), [this] { return shared_->busy == 0; });
}

void WebhookSender::send(Request request) {
  std::lock_guard lock(shared_->mu);
  shared_->queue.push_back(std::move(request));
  shared_->wake.notify_one();
}

std::vector<WebhookSender::Result> WebhookSender::take_results() {
  std::lock_guard lock(shared_->mu);
  return std::exchange(shared_->results, {});
}

size_t WebhookSender::in_flight() const {
  std::lock_guard lock(shared_->mu);
  // Results not taken yet count: a request that ends between take_results() and this
  // call still gets read.
  return shared_->queue.size() + shared_->busy + shared_->results.size();
}

}  // namespace ag::head
