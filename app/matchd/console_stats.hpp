#pragma once

// What the web console shows per queue (docs/console.md), counted where the
// API meets the engine: each client link reports its user's joins, matches
// and session ends, and how long the user waited from its join to its
// match.created event (time to match, as the user lives it). No CAF, no
// JSON: the console's routes render it.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace mm {

/// A fixed-bucket histogram of waits (time to match), thread-safe.
class console_wait_histogram {
 public:
  /// Upper bounds of the buckets in seconds; the last bucket is +Inf.
  static constexpr std::array<double, 15> bounds_s = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};

  /// Records one wait. Not idempotent.
  void observe(std::chrono::nanoseconds wait) noexcept;

  /// Count in bucket `i` (not cumulative); `i == bounds_s.size()` is +Inf.
  uint64_t bucket(size_t i) const noexcept {
    return buckets_[i].load(std::memory_order_relaxed);
  }

  /// The sum of all waits in microseconds.
  uint64_t sum_us() const noexcept {
    return sum_us_.load(std::memory_order_relaxed);
  }

 private:
  std::array<std::atomic<uint64_t>, bounds_s.size() + 1> buckets_{};
  std::atomic<uint64_t> sum_us_{0};
};

/// One queue's counters; every field only grows.
struct queue_console_stats {
  std::atomic<uint64_t> joins{0};       ///< joins this node's users made
  std::atomic<uint64_t> matched{0};     ///< this node's users matched
  std::atomic<uint64_t> ended{0};       ///< their sessions ended
  console_wait_histogram time_to_match; ///< join -> match.created
};

/// The console's counters of every queue.
class console_stats {
 public:
  /// At most `max_queues` queues are counted (a node in open mode may see
  /// many names over its life); the rest go uncounted.
  explicit console_stats(size_t max_queues = 1000) : max_queues_(max_queues) {
    // nop
  }

  /// The counters of `queue`, made at first use; null past `max_queues`.
  /// Thread-safe; idempotent.
  std::shared_ptr<queue_console_stats> queue(const std::string& name);

  /// A copy of the map (the counters are shared). Thread-safe.
  std::map<std::string, std::shared_ptr<queue_console_stats>> all() const;

 private:
  size_t max_queues_;
  mutable std::mutex mtx_;
  std::map<std::string, std::shared_ptr<queue_console_stats>> queues_;
};

/// The `q` quantile (0..1) of the counts in `buckets` (one per bound plus
/// +Inf), interpolated inside its bucket; 0 when there is nothing. A
/// quantile in the +Inf bucket answers the last bound.
double
quantile_s(const std::array<uint64_t, console_wait_histogram::bounds_s.size()
                                        + 1>& buckets,
           double q);

} // namespace mm
