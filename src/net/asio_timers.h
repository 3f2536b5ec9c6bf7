// AsioTimers: Timers (common/timers.h) on an io_context, for the daemons.
#pragma once

#include <map>
#include <memory>

#include "common/timers.h"

namespace boost::asio {
class io_context;
}

namespace ag::net {

class AsioTimers final : public Timers {
 public:
  explicit AsioTimers(boost::asio::io_context& io);
  ~AsioTimers() override;
  AsioTimers(const AsioTimers&) = delete;
  AsioTimers& operator=(const AsioTimers&) = delete;

  Id start(int64_t delay_ms, std::function<void()> fn) override;
  void cancel(Id id) override;
  void post(std::function<void()> fn) override;

 private:
  struct Pending;
  boost::asio::io_context& io_;
  std::map<Id, std::unique_ptr<Pending>> timers_;
  Id next_id_ = 1;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ag::net
