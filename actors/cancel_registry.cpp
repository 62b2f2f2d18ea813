#include "actors/cancel_registry.hpp"

#include <chrono>
#include <deque>
#include <mutex>
#include <unordered_map>

namespace mm {

struct cancel_registry::impl {
  int64_t memory_ms;
  mutable std::mutex mtx;
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> keys;
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::string>>
    order;
};

std::string ticket_key(const std::string& queue, const std::string& user,
                       const std::string& ticket) {
  std::string k;
  k.reserve(queue.size() + user.size() + ticket.size() + 2);
  k += queue;
  k += '\n';
  k += user;
  k += '\n';
  k += ticket;
  return k;
}

cancel_registry::cancel_registry(int64_t memory_ms) : impl_(new impl) {
  impl_->memory_ms = memory_ms;
}

cancel_registry::~cancel_registry() = default;

void cancel_registry::add(const std::string& queue, const std::string& user,
                          const std::string& ticket) {
  auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> guard{impl_->mtx};
  // Forget what is older than the memory bound: no pair lives that long.
  auto horizon = now - std::chrono::milliseconds(impl_->memory_ms);
  while (!impl_->order.empty() && impl_->order.front().first < horizon) {
    auto i = impl_->keys.find(impl_->order.front().second);
    if (i != impl_->keys.end() && i->second == impl_->order.front().first)
      impl_->keys.erase(i);
    impl_->order.pop_front();
  }
  auto k = ticket_key(queue, user, ticket);
  impl_->keys[k] = now;
  impl_->order.emplace_back(now, std::move(k));
}

bool cancel_registry::contains(const std::string& queue,
                               const std::string& user,
                               const std::string& ticket) const {
  auto horizon = std::chrono::steady_clock::now()
                 - std::chrono::milliseconds(impl_->memory_ms);
  std::lock_guard<std::mutex> guard{impl_->mtx};
  auto i = impl_->keys.find(ticket_key(queue, user, ticket));
  return i != impl_->keys.end() && i->second >= horizon;
}

size_t cancel_registry::size() const {
  std::lock_guard<std::mutex> guard{impl_->mtx};
  return impl_->keys.size();
}

} // namespace mm
