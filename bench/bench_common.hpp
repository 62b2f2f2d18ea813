#pragma once

// Shared pieces of the benches (claim_bench, finalize_bench, swipe_bench):
// options, timing counters around a store, CPU accounting per thread class,
// of a server and of the machine (perf is not available here, so the
// benches measure where the time goes themselves), latency percentiles,
// summaries of labelled runs. Defined in bench_common.cpp. No CAF, libpq or
// CLI11 headers here (bench_caf.hpp, bench_pg.hpp, bench_cli.hpp).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "persistence/queue/queue_store.hpp"

namespace mm::bench {

// -- options ------------------------------------------------------------------

struct redis_target {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
};

/// Options of `claim_bench broker`.
struct broker_options {
  std::string store = "redis";                      ///< redis | embedded
  std::vector<size_t> levels{1, 16, 64, 256, 1024}; ///< claims in flight
  double duration_s = 3.0; ///< measured window per level
  double warmup_s = 0.3;   ///< before the window
  // Chosen by `bench/run claim-tune` on this 2-core machine: 4 connections
  // of up to 64 pipelined calls keep Redis busy while the other workers
  // encode and parse (1 worker: ~10% less; 2..8 workers within noise).
  std::vector<uint32_t> workers{4};    ///< broker_config::workers
  std::vector<uint32_t> max_batch{64}; ///< broker_config::max_batch
  std::string form = "single";         ///< single | batch
  size_t batch_size = 64;              ///< specs per batch message
  size_t drivers = 1;                  ///< driver actors per level
  /// One scheduler thread: the broker and the drivers share it and no idle
  /// thread polls for work on the core Redis needs. 0: CAF's default.
  size_t scheduler_threads = 1;
  std::string policy = "stealing"; ///< CAF scheduler policy
  std::string queue_prefix = "bench";
  /// Queues per level: claim n goes to queue n % queues (so claim n+queues
  /// matches it); many queues spread the claims over a cluster's shards.
  size_t queues = 1;
  /// Redis Cluster: seed "host:port" entries besides --host/--port (set:
  /// the store routes by slot); empty: one Redis.
  std::vector<std::string> cluster_seeds;
  bool cluster = false;
};

/// Options shared by the benches on a private PostgreSQL and Redis
/// (finalize_bench, swipe_bench); bench_cli.hpp adds them to a CLI11 app.
struct service_options {
  std::string conninfo; ///< admin connection; a database per variant
  std::string pg_dir;   ///< directory of postgres_server.sh (DIR/port)
  std::string redis_host = "127.0.0.1";
  uint16_t redis_port = 0;
  std::string redis_dir;
  std::vector<std::string> variants;
  std::vector<std::string> ratio;
  size_t in_flight = 256;
  double duration_s = 5.0;
  double warmup_s = 0.5;
  size_t scheduler_threads = 1;
  bool keep_databases = false;
};

/// Throws std::invalid_argument unless a variant's label is letters,
/// digits and _ only (it becomes part of a database name).
void check_label(const std::string& label);

/// Reads the port a private server wrote to DIR/port; false (and a message
/// on stderr) when there is none.
bool read_port(const std::string& dir, uint16_t& port);

/// Fills `o.conninfo` from `o.pg_dir` when no conninfo was given; false
/// (and a message on stderr) when neither is there.
bool resolve_conninfo(service_options& o);

/// Fills `o.redis_port` from `o.redis_dir` when no port was given; false
/// (and `missing` on stderr) when neither is there.
bool resolve_redis_port(service_options& o, const char* missing);

/// Options of `claim_bench naive`.
struct naive_options {
  std::vector<size_t> threads{4};
  std::vector<size_t> depth{64};
  double duration_s = 3.0;
  std::string queue = "naive";
};

/// Calls and time inside one command, from Redis INFO commandstats
/// ("cmdstat_fcall:calls=N,usec=U,...").
struct command_stat {
  uint64_t calls = 0, usec = 0;
};

/// Every command's line of an INFO commandstats reply, by command name
/// (lower case, as Redis writes it).
std::map<std::string, command_stat> parse_commandstats(const std::string& info);

/// Options of `claim_bench script` (bench/script_cost.cpp).
struct script_cost_options {
  uint64_t calls = 200000; ///< calls per variant and round
  size_t pipeline = 64;    ///< calls per round trip
  size_t rounds = 3;       ///< every variant once per round, in turns
  std::string minimal_sha; ///< SCRIPT LOAD of bench/lua/minimal_claim.lua
  std::string minimal_fn;  ///< the same as a function ('' = not run)
  /// Other libraries' claims to set beside the built one: label, text.
  std::vector<std::pair<std::string, std::string>> variants;
};

// -- time ---------------------------------------------------------------------

/// Nanoseconds since some fixed point.
inline uint64_t steady_ns() {
  using namespace std::chrono;
  return static_cast<uint64_t>(
    duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count());
}

/// Seconds since some fixed point.
inline double now_s() {
  return static_cast<double>(steady_ns()) / 1e9;
}

/// Sleeps for `s` seconds.
inline void sleep_s(double s) {
  std::this_thread::sleep_for(
    std::chrono::microseconds(static_cast<int64_t>(s * 1e6)));
}

// -- counters around a store --------------------------------------------------

/// Kernel thread id of the caller.
int current_tid();

/// Threads seen doing some kind of work (a store call).
struct thread_set {
  std::mutex mtx;
  std::set<int> tids;
  /// Unique per set (an address may be reused by a later set).
  const uint64_t id = next_id();

  /// Adds the calling thread (cheap when it was the last one noted here).
  void note() {
    thread_local uint64_t last = 0;
    if (last == id)
      return;
    last = id;
    std::lock_guard<std::mutex> guard{mtx};
    tids.insert(current_tid());
  }

  std::set<int> get() {
    std::lock_guard<std::mutex> guard{mtx};
    return tids;
  }

 private:
  static uint64_t next_id() {
    static std::atomic<uint64_t> n{0};
    return ++n;
  }
};

/// Raises `max` to `n` if `n` is larger.
inline void raise_max(std::atomic<uint64_t>& max, uint64_t n) {
  auto prev = max.load(std::memory_order_relaxed);
  while (n > prev
         && !max.compare_exchange_weak(prev, n, std::memory_order_relaxed))
    ;
}

/// A store factory whose connections are `Wrapper(inner connection, c)`.
template <class Factory, class Wrapper, class Counters>
class counting_factory_of final : public Factory {
 public:
  counting_factory_of(std::shared_ptr<Factory> inner,
                      std::shared_ptr<Counters> c)
    : inner_(std::move(inner)), c_(std::move(c)) {}

  auto connect() -> decltype(std::declval<Factory&>().connect()) override {
    return std::make_unique<Wrapper>(inner_->connect(), c_);
  }

  std::string describe() const override {
    return inner_->describe() + " (counted)";
  }

 private:
  std::shared_ptr<Factory> inner_;
  std::shared_ptr<Counters> c_;
};

/// Filled by `counting_store`: how many store round trips, how many calls in
/// them, and how long the calling threads spent inside `run`/`execute`.
struct store_counters {
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> busy_ns{0};
  std::atomic<uint64_t> max_batch{0};
  thread_set threads; ///< threads that ran store calls

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

/// Parent pid and CPU time (utime + stime, ns) of process `pid`, from
/// /proc/PID/stat.
bool proc_stat(int pid, int& ppid, uint64_t& cpu_ns);

/// CPU of a server process and all its children (PostgreSQL: the
/// postmaster, the backends, the WAL writer, ...); 0 for pid <= 0.
uint64_t server_cpu_ns(int pid);

/// Busy CPU time of the whole machine (all cores, everything but idle and
/// iowait), from /proc/stat, in ns.
uint64_t machine_busy_ns();

/// Numeric fields of a Redis INFO section ("name:value" lines).
std::map<std::string, double> redis_info(queue_store& conn,
                                         const std::string& section);

/// CPU time of the Redis server (used_cpu_user + used_cpu_sys from INFO, ns),
/// read through `conn`; 0 when unknown.
uint64_t redis_cpu_ns(queue_store& conn);

/// Deletes the keys of a queue (Redis only; UNLINK frees them in the
/// background so the next measurement starts on an empty queue).
void drop_queue(queue_store& conn, const std::string& queue);

// -- figures ------------------------------------------------------------------

/// The q-quantile of `xs` (ns) in ms; 0 when empty. Reorders `xs`.
/// (core/stats.hpp, rank_rule::lower.)
double percentile_ms(std::vector<uint64_t>& xs, double q);

/// "a 60%, b 30%, other 10%": the shares of the counts, largest first, those
/// under `min_pct` summed up as "other"; "" when there are none.
std::string describe_shares(const std::map<std::string, uint64_t>& counts,
                            double min_pct);

/// Per unit of work and per second of a measured window of `dt` seconds.
struct window_rates {
  double dt = 0;    ///< seconds
  double units = 0; ///< work done in the window

  /// (b - a) ns per unit, in us.
  double per_unit_us(uint64_t a, uint64_t b) const {
    return units > 0 ? static_cast<double>(b - a) / units / 1e3 : 0.0;
  }

  /// (b - a) ns of CPU as % of one core.
  double busy_pct(uint64_t a, uint64_t b) const {
    return 100.0 * static_cast<double>(b - a) / (dt * 1e9);
  }
};

/// What the verification of a run found wrong.
struct problem_list {
  std::vector<std::string> items;

  void expect(const std::string& what, uint64_t got, uint64_t want) {
    if (got != want)
      items.push_back(what + ": " + std::to_string(got) + ", expected "
                      + std::to_string(want));
  }

  size_t size() const {
    return items.size();
  }

  bool empty() const {
    return items.empty();
  }

  /// "[tag]   VIOLATION ..." lines.
  void print(const std::string& tag) const;
};

// -- labelled runs (R: a result with `v.label`) --------------------------------

/// The labels of `rs`, in the order of their first run.
template <class R>
std::vector<std::string> labels_of(const std::vector<R>& rs) {
  std::vector<std::string> out;
  for (auto& r : rs)
    if (std::find(out.begin(), out.end(), r.v.label) == out.end())
      out.push_back(r.v.label);
  return out;
}

/// The run of `label` with the highest `rate`; null when none ran.
template <class R>
const R*
best_run(const std::vector<R>& rs, const std::string& label, double R::*rate) {
  const R* out = nullptr;
  for (auto& r : rs)
    if (r.v.label == label && (out == nullptr || r.*rate > out->*rate))
      out = &r;
  return out;
}

/// "1234/1180": the rounded `rate` of every run of `label`.
template <class R>
std::string
runs_of(const std::vector<R>& rs, const std::string& label, double R::*rate) {
  std::string out;
  for (auto& r : rs)
    if (r.v.label == label)
      out += (out.empty() ? "" : "/") + std::to_string(std::llround(r.*rate));
  return out;
}

/// The end of a bench's output: "summary (best run per label):" with
/// `item(label, best run, runs_of(...))` printing each label's part and
/// " violations=N"; "# ratio: A X UNIT / B Y UNIT (best run of each)";
/// "KEY=A/B". Returns the exit code: 1 without the ratio's two labels or
/// with violations (R: a result with `v.label` and `violations`).
template <class R, class Item>
int print_summary(const std::vector<R>& rs, double R::*rate,
                  const std::vector<std::string>& ratio, const char* unit,
                  const char* key, Item item) {
  uint64_t violations = 0;
  for (auto& r : rs)
    violations += r.violations;
  std::printf("summary (best run per label):");
  for (auto& label : labels_of(rs))
    item(label, *best_run(rs, label, rate), runs_of(rs, label, rate));
  std::printf(" violations=%" PRIu64 "\n", violations);
  auto* a = ratio.size() == 2 ? best_run(rs, ratio[0], rate) : nullptr;
  auto* b = ratio.size() == 2 ? best_run(rs, ratio[1], rate) : nullptr;
  if (a == nullptr || b == nullptr || b->*rate <= 0) {
    std::fprintf(stderr, "no ratio: --ratio must name two variants run\n");
    return 1;
  }
  std::printf("# ratio: %s %.0f %s / %s %.0f %s (best run of each)\n",
              a->v.label.c_str(), a->*rate, unit, b->v.label.c_str(), b->*rate,
              unit);
  std::printf("%s=%.2f\n", key, a->*rate / b->*rate);
  std::fflush(stdout);
  return violations == 0 ? 0 : 1;
}

/// Runs `claim_bench broker`; returns the process exit code.
int run_broker(const redis_target& redis, const broker_options& opts);

/// Runs `claim_bench naive`; returns the process exit code.
int run_naive(const redis_target& redis, const naive_options& opts);

/// Runs `claim_bench script`: the claim's Redis CPU per call in a queue
/// released as the engine releases it, beside the minimal claim's.
int run_script_cost(const redis_target& redis, const script_cost_options& o);

/// The claim function of the generated library (lua/), mm_claim_<hash>.
const char* claim_function_name();

} // namespace mm::bench
