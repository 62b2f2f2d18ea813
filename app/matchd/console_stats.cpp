#include "app/matchd/console_stats.hpp"

namespace mm {

void console_wait_histogram::observe(std::chrono::nanoseconds wait) noexcept {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(wait).count();
  if (us < 0)
    us = 0;
  auto s = static_cast<double>(us) / 1e6;
  size_t i = 0;
  while (i < bounds_s.size() && s > bounds_s[i])
    ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(static_cast<uint64_t>(us), std::memory_order_relaxed);
}

std::shared_ptr<queue_console_stats>
console_stats::queue(const std::string& name) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = queues_.find(name);
  if (i != queues_.end())
    return i->second;
  if (queues_.size() >= max_queues_)
    return nullptr;
  auto q = std::make_shared<queue_console_stats>();
  queues_.emplace(name, q);
  return q;
}

std::map<std::string, std::shared_ptr<queue_console_stats>>
console_stats::all() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return queues_;
}

double
quantile_s(const std::array<uint64_t, console_wait_histogram::bounds_s.size()
                                        + 1>& buckets,
           double q) {
  uint64_t total = 0;
  for (auto n : buckets)
    total += n;
  if (total == 0)
    return 0;
  auto rank = q * static_cast<double>(total);
  uint64_t below = 0;
  const auto& b = console_wait_histogram::bounds_s;
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (buckets[i] == 0)
      continue;
    if (static_cast<double>(below + buckets[i]) >= rank) {
      if (i == b.size())
        return b.back();
      double lo = i == 0 ? 0 : b[i - 1];
      double frac = (rank - static_cast<double>(below))
                    / static_cast<double>(buckets[i]);
      return lo + (b[i] - lo) * frac;
    }
    below += buckets[i];
  }
  return b.back();
}

} // namespace mm
