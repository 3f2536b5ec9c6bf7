#include "net/asio_timers.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

namespace ag::net {

struct AsioTimers::Pending {
  explicit Pending(boost::asio::io_context& io) : timer(io) {}
  boost::asio::steady_timer timer;
};

AsioTimers::AsioTimers(boost::asio::io_context& io) : io_(io) {}

AsioTimers::~AsioTimers() { *alive_ = false; }

Timers::Id AsioTimers::start(int64_t delay_ms, std::function<void()> fn) {
  Id id = next_id_++;
  auto pending = std::make_unique<Pending>(io_);
  pending->timer.expires_after(std::chrono::milliseconds(delay_ms < 0 ? 0 : delay_ms));
  auto alive = alive_;
  pending->timer.async_wait([this, alive, id, fn = std::move(fn)](const boost::system::error_code& ec) {
    if (ec || !*alive) return;
    timers_.erase(id);
    fn();
  });
  timers_[id] = std::move(pending);
  return id;
}

void AsioTimers::cancel(Id id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) return;
  it->second->timer.cancel();
  timers_.erase(it);
}

void AsioTimers::post(std::function<void()> fn) {
  auto alive = alive_;
  boost::asio::post(io_, [alive, fn = std::move(fn)] {
    if (*alive) fn();
  });
}

}  // namespace ag::net
