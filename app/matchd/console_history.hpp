#pragma once

// The console's last hour (docs/console.md "The last hour"): every
// `interval` a sample of the node's counters that only grow (joins and
// matched users of this node's users, and their time-to-match histogram
// summed over the queues), the newest `slots` kept. The page draws rates
// and percentiles per interval from the differences. Fixed memory: a
// sample is 19 numbers; 60 slots of a minute are the default. No CAF.

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "app/matchd/console_stats.hpp"

namespace mm {

class console_history {
 public:
  using buckets
    = std::array<uint64_t, console_wait_histogram::bounds_s.size() + 1>;

  /// One sample: Unix ms and the counters at that moment.
  struct sample {
    int64_t t_ms = 0;
    uint64_t joins = 0;
    uint64_t matched = 0;
    buckets time_to_match{};
  };

  /// Samples `stats` now and then every `interval`, keeping `slots`.
  console_history(std::shared_ptr<console_stats> stats,
                  std::chrono::milliseconds interval, size_t slots = 60);
  /// Stops the sampling thread.
  ~console_history();

  console_history(const console_history&) = delete;
  console_history& operator=(const console_history&) = delete;

  /// {"interval_s", "samples": [{t_ms, joins, matched_users,
  /// time_to_match: [..]}]}, oldest first. Thread-safe; idempotent.
  std::string json() const;

  /// The counters now (what a sample holds). Thread-safe.
  sample read() const;

 private:
  void loop();

  std::shared_ptr<console_stats> stats_;
  std::chrono::milliseconds interval_;
  size_t slots_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::deque<sample> ring_;
  std::thread thread_;
};

} // namespace mm
