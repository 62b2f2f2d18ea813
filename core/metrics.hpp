#pragma once

// Counters the engine's actors keep for operators (no CAF, no Prometheus:
// matchd turns them into /metrics; a host can read them directly).

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace mm {

/// A fixed-bucket latency histogram, safe to update from any thread.
class latency_histogram {
 public:
  /// Upper bounds of the buckets in milliseconds (the last bucket is +Inf).
  static constexpr std::array<double, 12> bounds_ms
    = {0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000};

  /// Records one observation. Not idempotent.
  void observe_us(uint64_t us) noexcept {
    size_t i = 0;
    while (i < bounds_ms.size()
           && static_cast<double>(us) > bounds_ms[i] * 1000)
      ++i;
    buckets_[i].fetch_add(1, std::memory_order_relaxed);
    sum_us_.fetch_add(us, std::memory_order_relaxed);
  }

  /// Count in bucket `i` (not cumulative); `i == bounds_ms.size()` is +Inf.
  uint64_t bucket(size_t i) const noexcept {
    return buckets_[i].load(std::memory_order_relaxed);
  }

  /// Sum of every observation in microseconds.
  uint64_t sum_us() const noexcept {
    return sum_us_.load(std::memory_order_relaxed);
  }

 private:
  std::array<std::atomic<uint64_t>, bounds_ms.size() + 1> buckets_{};
  std::atomic<uint64_t> sum_us_{0};
};

/// The distances of committed pairs on one attribute of a queue's distance
/// rule (docs/rules.md): a plain snapshot, fixed buckets.
struct distance_histogram {
  static constexpr std::array<double, 8> bounds = {10,  25,  50,  100,
                                                   200, 400, 800, 1600};
  std::array<uint64_t, bounds.size() + 1> buckets{}; ///< the last is +Inf
  double sum = 0;

  /// Records one distance. Not idempotent; not thread-safe (the owner
  /// locks).
  void observe(double d) noexcept {
    size_t i = 0;
    while (i < bounds.size() && d > bounds[i])
      ++i;
    ++buckets[i];
    sum += d;
  }
};

/// How long joins waited for their match, per queue: buckets in seconds
/// from 10 ms to 10 minutes (a voice chat matches in well under a second, a
/// ranked game's widening skill window may take minutes). Guarded by the
/// owner's mutex (engine_metrics), so plain integers.
struct wait_histogram {
  /// Upper bounds of the buckets in seconds (the last bucket is +Inf).
  static constexpr std::array<double, 15> bounds_s
    = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};

  /// Per bucket, not cumulative; `buckets[bounds_s.size()]` is +Inf.
  std::array<uint64_t, bounds_s.size() + 1> buckets{};
  uint64_t sum_us = 0;

  /// Records one wait. Not idempotent.
  void observe_us(uint64_t us) noexcept {
    size_t i = 0;
    while (i < bounds_s.size() && static_cast<double>(us) > bounds_s[i] * 1e6)
      ++i;
    ++buckets[i];
    sum_us += us;
  }
};

/// What the engine counts. Every field only grows, except the gauges
/// (`outbox_lag_ms`, `queues_known`, `sessions_live`, `directory_users`,
/// `parked_events`, `client_links`, queue depths).
struct engine_metrics {
  std::atomic<uint64_t> joins{0};         ///< joins accepted by sessions
  std::atomic<uint64_t> claims{0};        ///< claim scripts run
  std::atomic<uint64_t> stale_removed{0}; ///< stale tickets removed
  std::atomic<uint64_t> matches{0};       ///< matches committed
  std::atomic<uint64_t> cancels{0};       ///< cancels acknowledged
  std::atomic<uint64_t> requeues{0};      ///< waiters put back
  std::atomic<uint64_t> conflicts{0};     ///< refused or lost races
  std::atomic<uint64_t> relay_retries{0}; ///< deliveries tried again
  /// Group commits the database could not take (each is tried again after
  /// an exponential backoff).
  std::atomic<uint64_t> commit_retries{0};
  std::atomic<uint64_t> events_delivered{0}; ///< outbox events delivered
  std::atomic<uint64_t> sessions_ended{0};   ///< by members and by expiry
  std::atomic<uint64_t> rows_pruned{0};      ///< old events and sessions
  /// Old outbox partitions dropped whole (match_store::maintain_partitions).
  std::atomic<uint64_t> partitions_dropped{0};
  /// Queues the broker knows now (swept, with a depth); a gauge, bounded
  /// by `broker_config::max_queues` or its allow-list.
  std::atomic<uint64_t> queues_known{0};
  std::atomic<uint64_t> sessions_released{0}; ///< idle session actors stopped
  // The ready check (docs/groups.md): proposals made and how they ended.
  std::atomic<uint64_t> proposals_made{0};
  std::atomic<uint64_t> proposals_accepted{0};  ///< every member accepted
  std::atomic<uint64_t> proposals_declined{0};  ///< a member declined
  std::atomic<uint64_t> proposals_timed_out{0}; ///< a member stayed silent
  std::atomic<uint64_t> proposals_lapsed{0};    ///< settled by a lease's lapse
  // Backfill (docs/groups.md): requests made, seats they filled, and the
  // time from a request to its fill (each committed fill).
  std::atomic<uint64_t> backfill_requests{0};
  std::atomic<uint64_t> backfill_seats_filled{0};
  latency_histogram backfill_fill_latency;
  /// Age of the oldest event in the relay's last delivered batch (ms;
  /// /metrics exports it in seconds, mm_outbox_lag_seconds).
  std::atomic<int64_t> outbox_lag_ms{0};
  // What the node holds per user right now (I9 of docs/design.md: each goes
  // back to zero when the users are idle, docs/engine.md "Idle users cost
  // nothing").
  std::atomic<int64_t> sessions_live{0};   ///< the engine's session actors
  std::atomic<int64_t> directory_users{0}; ///< users with a session entry
  std::atomic<int64_t> parked_events{0};   ///< kept for users not here
  std::atomic<int64_t> client_links{0};    ///< matchd: users with a link
  latency_histogram finalize_latency;      ///< claim pair in -> commit answered

  /// Sets the depth of `queue`: tickets in its waiting set, as of the
  /// broker's last sweep of it. Thread-safe.
  void set_queue_depth(const std::string& queue, uint64_t depth) {
    std::lock_guard<std::mutex> guard{mtx_};
    depths_[queue] = depth;
  }

  /// Forgets the depth of `queue` (the broker no longer knows it): its
  /// label leaves the metrics. Thread-safe; idempotent.
  void drop_queue_depth(const std::string& queue) {
    std::lock_guard<std::mutex> guard{mtx_};
    depths_.erase(queue);
  }

  /// Records the distance of a committed pair on `attribute` of `queue`'s
  /// rules. Keys are bounded by the declared rules. Thread-safe.
  void observe_pair_distance(const std::string& queue,
                             const std::string& attribute, double d) {
    std::lock_guard<std::mutex> guard{mtx_};
    distances_[{queue, attribute}].observe(d);
  }

  /// A copy of every pair-distance histogram. Thread-safe.
  std::map<std::pair<std::string, std::string>, distance_histogram>
  pair_distances() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return distances_;
  }

  /// Records that a join of `queue` waited `us` microseconds from its
  /// arrival at its session to its match (each matched user once, on the
  /// node of its session). Thread-safe; not idempotent.
  void observe_time_to_match(const std::string& queue, uint64_t us) {
    std::lock_guard<std::mutex> guard{mtx_};
    waits_[queue].observe_us(us);
  }

  /// Forgets the time-to-match histogram of `queue` (open mode: the broker
  /// forgot the queue, and names must not pile up). Thread-safe; idempotent.
  void drop_time_to_match(const std::string& queue) {
    std::lock_guard<std::mutex> guard{mtx_};
    waits_.erase(queue);
  }

  /// A copy of every queue's time-to-match histogram. Thread-safe.
  std::map<std::string, wait_histogram> time_to_match() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return waits_;
  }

  /// A copy of the depth of every queue the broker knows. Thread-safe.
  std::map<std::string, uint64_t> queue_depths() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return depths_;
  }

 private:
  mutable std::mutex mtx_;
  std::map<std::string, uint64_t> depths_;
  std::map<std::pair<std::string, std::string>, distance_histogram> distances_;
  std::map<std::string, wait_histogram> waits_;
};

} // namespace mm
