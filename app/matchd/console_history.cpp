// The console's last hour (console_history.hpp).

#include "app/matchd/console_history.hpp"

#include <nlohmann/json.hpp>

namespace mm {

console_history::console_history(std::shared_ptr<console_stats> stats,
                                 std::chrono::milliseconds interval,
                                 size_t slots)
  : stats_(std::move(stats)), interval_(interval), slots_(slots) {
  ring_.push_back(read());
  thread_ = std::thread([this] { loop(); });
}

console_history::~console_history() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

console_history::sample console_history::read() const {
  using namespace std::chrono;
  sample s;
  s.t_ms = duration_cast<milliseconds>(system_clock::now().time_since_epoch())
             .count();
  if (!stats_)
    return s;
  for (auto& [name, q] : stats_->all()) {
    s.joins += q->joins.load(std::memory_order_relaxed);
    s.matched += q->matched.load(std::memory_order_relaxed);
    for (size_t i = 0; i < s.time_to_match.size(); ++i)
      s.time_to_match[i] += q->time_to_match.bucket(i);
  }
  return s;
}

void console_history::loop() {
  std::unique_lock<std::mutex> lock{mtx_};
  auto next = std::chrono::steady_clock::now() + interval_;
  while (!cv_.wait_until(lock, next, [this] { return stop_; })) {
    lock.unlock();
    auto s = read(); // outside the lock: it takes console_stats' own
    lock.lock();
    ring_.push_back(s);
    if (ring_.size() > slots_)
      ring_.pop_front();
    next += interval_;
  }
}

std::string console_history::json() const {
  nlohmann::json samples = nlohmann::json::array();
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& s : ring_)
      samples.push_back({{"t_ms", s.t_ms},
                         {"joins", s.joins},
                         {"matched_users", s.matched},
                         {"time_to_match", s.time_to_match}});
  }
  nlohmann::json out{{"interval_s",
                      static_cast<double>(interval_.count()) / 1000.0},
                     {"samples", std::move(samples)}};
  return out.dump();
}

} // namespace mm
