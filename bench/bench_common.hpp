#pragma once

// Shared pieces of claim_bench: options, timing counters around a queue
// store, CPU accounting per thread class (perf is not available here, so
// the bench measures where the time goes itself). No CAF headers here.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "persistence/queue_store.hpp"

namespace mm::bench {

// -- options ------------------------------------------------------------------

struct redis_target {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
};

/// Options of `claim_bench broker`.
struct broker_options {
  std::string store = "redis";                 ///< redis | embedded
  std::vector<size_t> levels{1, 16, 64, 256, 1024}; ///< claims in flight
  double duration_s = 3.0;                     ///< measured window per level
  double warmup_s = 0.3;                       ///< before the window
  // Chosen by `bench/run claim-tune` on this 2-core machine: 4 connections
  // of up to 64 pipelined calls keep Redis busy while the other workers
  // encode and parse (1 worker: ~10% less; 2..8 workers within noise).
  std::vector<uint32_t> workers{4};            ///< broker_config::workers
  std::vector<uint32_t> max_batch{64};         ///< broker_config::max_batch
  std::string form = "single";                 ///< single | batch
  size_t batch_size = 64;                      ///< specs per batch message
  size_t drivers = 1;                          ///< driver actors per level
  /// One scheduler thread: the broker and the drivers share it and no idle
  /// thread polls for work on the core Redis needs. 0: CAF's default.
  size_t scheduler_threads = 1;
  std::string policy = "stealing";             ///< CAF scheduler policy
  std::string queue_prefix = "bench";
};

/// Options of `claim_bench naive`.
struct naive_options {
  std::vector<size_t> threads{4};
  std::vector<size_t> depth{64};
  double duration_s = 3.0;
  std::string queue = "naive";
};

// -- counters around a store --------------------------------------------------

/// Filled by `counting_store`: how many store round trips, how many calls in
/// them, and how long the calling threads spent inside `run`/`execute`.
struct store_counters {
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> busy_ns{0};
  std::atomic<uint64_t> max_batch{0};
  std::mutex tids_mtx;
  std::set<int> tids; ///< threads that ran store calls

  struct snapshot {
    uint64_t batches = 0, calls = 0, busy_ns = 0;
  };

  snapshot take() const {
    return {batches.load(), calls.load(), busy_ns.load()};
  }
};

/// Wraps a store factory so that every connection counts its round trips.
std::shared_ptr<queue_store_factory>
counting_factory(std::shared_ptr<queue_store_factory> inner,
                 std::shared_ptr<store_counters> counters);

// -- CPU accounting -----------------------------------------------------------

/// CPU time (user+sys, ns) per thread of this process, from /proc.
std::map<int, uint64_t> thread_cpu_ns();

/// CPU time of the whole process (ns).
uint64_t process_cpu_ns();

/// Kernel thread id of the caller.
int current_tid();

/// CPU time of the Redis server (used_cpu_user + used_cpu_sys from INFO, ns),
/// read through `conn`; 0 when unknown.
uint64_t redis_cpu_ns(queue_store& conn);

/// Deletes the keys of a queue (Redis only; UNLINK frees them in the
/// background so the next measurement starts on an empty queue).
void drop_queue(queue_store& conn, const std::string& queue);

/// Seconds since some fixed point.
inline double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// Runs `claim_bench broker`; returns the process exit code.
int run_broker(const redis_target& redis, const broker_options& opts);

/// Runs `claim_bench naive`; returns the process exit code.
int run_naive(const redis_target& redis, const naive_options& opts);

/// The generated claim script: lua/lib/common.lua + lua/claim.lua.
const char* claim_script_text();

} // namespace mm::bench
