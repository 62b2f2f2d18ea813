// The embedded queue store: every connection of one factory shares one
// `embedded::engine` (data set + Lua, persistence/queue/embedded_dataset.hpp),
// guarded by one mutex. A batch holds the mutex from its first call to its
// last, so each script runs atomically, like on Redis.

#include "persistence/queue/queue_store.hpp"

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "persistence/queue/embedded_dataset.hpp"

namespace mm {

namespace {

/// What all connections of one factory share.
struct shared_state {
  explicit shared_state(store_clock clock) : engine(std::move(clock)) {}
  std::mutex mtx;
  embedded::engine engine;
};

class embedded_store final : public queue_store {
 public:
  explicit embedded_store(std::shared_ptr<shared_state> state)
    : state_(std::move(state)) {}

  std::vector<store_reply> run(const std::vector<script_call>& calls) override {
    std::vector<store_reply> replies(calls.size());
    std::lock_guard<std::mutex> guard{state_->mtx};
    for (size_t i = 0; i < calls.size(); ++i)
      replies[i].value = state_->engine.run(calls[i]);
    return replies;
  }

  std::vector<store_reply>
  execute(const std::vector<store_command>& commands) override {
    std::vector<store_reply> replies(commands.size());
    std::lock_guard<std::mutex> guard{state_->mtx};
    for (size_t i = 0; i < commands.size(); ++i)
      replies[i].value = state_->engine.execute(commands[i]);
    return replies;
  }

  bool blocking() const noexcept override {
    return false;
  }

 private:
  std::shared_ptr<shared_state> state_;
};

class embedded_factory final : public queue_store_factory {
 public:
  explicit embedded_factory(store_clock clock)
    : state_(std::make_shared<shared_state>(std::move(clock))) {}

  std::unique_ptr<queue_store> connect() override {
    return std::make_unique<embedded_store>(state_);
  }

  std::string describe() const override {
    return "embedded";
  }

 private:
  std::shared_ptr<shared_state> state_;
};

} // namespace

std::shared_ptr<queue_store_factory>
make_embedded_store(embedded_options opts) {
  if (!opts.clock) {
    opts.clock = wall_clock_ms;
  }
  return std::make_shared<embedded_factory>(std::move(opts.clock));
}

} // namespace mm
