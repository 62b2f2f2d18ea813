// claim_bench: measures the claim path. Subcommands (run `claim_bench -h`):
//   broker   the queue broker's claim path at increasing concurrency, on the
//            Redis or the embedded store (bench/broker_bench.cpp)
//   naive    the two-step ZRANGE + ZREM baseline that double-books
//   script   the claim's Redis CPU per call in a released queue, beside the
//            minimal claim's (bench/script_cost.cpp)
// and helpers for the redis-benchmark ceiling: --print-library prints the
// generated function library (lua/), --load-library loads it into Redis
// (FUNCTION LOAD; already loaded is fine) and prints the claim function's
// name, for `FCALL name 5 keys... args...`.
// bench/run claim drives all of it against one private redis-server.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "bench/bench_common.hpp"
#include "persistence/queue/queue_codec.hpp"

namespace mm::bench {

// -- Redis queues ------------------------------------------------------------

void drop_queue(queue_store& conn, const std::string& queue) {
  store_command cmd{"UNLINK"};
  for (auto& k : codec::queue_keys(queue))
    cmd.push_back(k);
  conn.execute({cmd});
}

// -- the naive baseline -------------------------------------------------------------

namespace {

/// Waiter ids are "w<thread>x<n>": thread in the high bits.
uint64_t waiter_id(const std::string& s) {
  auto x = s.find('x');
  if (s.size() < 2 || s[0] != 'w' || x == std::string::npos)
    return UINT64_MAX;
  return (std::strtoull(s.c_str() + 1, nullptr, 10) << 40)
         | std::strtoull(s.c_str() + x + 1, nullptr, 10);
}

struct naive_thread {
  std::atomic<uint64_t> ops{0};       // claim-or-enqueue steps completed
  std::atomic<uint64_t> claims{0};    // of which "claimed" a waiter
  std::atomic<uint64_t> zrem_zero{0}; // ZREM said somebody else removed it
  std::atomic<uint64_t> errors{0};
  std::vector<uint64_t> claimed; // waiter ids this thread "claimed"
  std::string first_error;
};

/// K threads, each with its own connection and `depth` pipelined clients:
/// every client reads the head (ZRANGE key 0 0); a client that saw a waiter
/// removes it (ZREM) and counts it as its partner WITHOUT looking at ZREM's
/// answer (the bug); a client that saw nothing enqueues itself (ZADD).
void naive_level(queue_store_factory& factory, queue_store& admin,
                 const naive_options& o, size_t threads, size_t depth) {
  auto queue = o.queue + "-" + std::to_string(getpid()) + "-"
               + std::to_string(threads) + "x" + std::to_string(depth);
  const auto key = codec::queue_keys(queue)[0];
  drop_queue(admin, queue);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> seq{0};
  std::vector<std::unique_ptr<naive_thread>> st;
  for (size_t i = 0; i < threads; ++i)
    st.emplace_back(std::make_unique<naive_thread>());
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      auto& me = *st[t];
      auto conn = factory.connect();
      uint64_t n = 0;
      std::vector<store_command> reads(depth, {"ZRANGE", key, "0", "0"});
      std::vector<store_command> writes;
      std::vector<std::string> cands;
      while (!stop.load(std::memory_order_relaxed)) {
        auto heads = conn->execute(reads);
        writes.clear();
        cands.clear();
        for (auto& r : heads) {
          if (r.code != errc::none
              || r.value.type == store_value::kind::error) {
            me.errors.fetch_add(1, std::memory_order_relaxed);
            if (me.first_error.empty())
              me.first_error = r.code != errc::none ? r.detail : r.value.str;
            continue;
          }
          if (!r.value.elements.empty()) {
            cands.push_back(r.value.elements[0].str);
            writes.push_back({"ZREM", key, r.value.elements[0].str});
          } else {
            auto score = std::to_string(seq.fetch_add(1));
            writes.push_back(
              {"ZADD", key, score,
               "w" + std::to_string(t) + "x" + std::to_string(n++)});
          }
        }
        auto done = conn->execute(writes);
        size_t c = 0;
        for (size_t i = 0; i < writes.size(); ++i) {
          if (writes[i][0] != "ZREM")
            continue;
          // Counted as claimed no matter what ZREM answered: the bug.
          me.claimed.push_back(waiter_id(cands[c++]));
          if (done[i].value.type == store_value::kind::integer
              && done[i].value.integer == 0)
            me.zrem_zero.fetch_add(1, std::memory_order_relaxed);
        }
        me.claims.fetch_add(c, std::memory_order_relaxed);
        me.ops.fetch_add(writes.size(), std::memory_order_relaxed);
      }
    });
  }
  auto sum = [&](auto field) {
    uint64_t s = 0;
    for (auto& x : st)
      s += ((*x).*field).load();
    return s;
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto t0 = now_s();
  auto ops0 = sum(&naive_thread::ops);
  auto claims0 = sum(&naive_thread::claims);
  auto zero0 = sum(&naive_thread::zrem_zero);
  auto cpu0 = process_cpu_ns();
  auto rcpu0 = redis_cpu_ns(admin);
  std::this_thread::sleep_for(
    std::chrono::milliseconds(static_cast<int64_t>(o.duration_s * 1000)));
  auto t1 = now_s();
  auto ops1 = sum(&naive_thread::ops);
  auto claims1 = sum(&naive_thread::claims);
  auto zero1 = sum(&naive_thread::zrem_zero);
  auto cpu1 = process_cpu_ns();
  auto rcpu1 = redis_cpu_ns(admin);
  stop = true;
  for (auto& th : pool)
    th.join();
  // Double bookings over the whole run (warm-up and drain included).
  std::vector<uint64_t> all;
  for (auto& x : st)
    all.insert(all.end(), x->claimed.begin(), x->claimed.end());
  std::sort(all.begin(), all.end());
  uint64_t doubled_waiters = 0, extra_claims = 0;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j] == all[i])
      ++j;
    if (j - i > 1) {
      ++doubled_waiters;
      extra_claims += j - i - 1;
    }
    i = j;
  }
  auto dt = t1 - t0;
  auto ops = static_cast<double>(ops1 - ops0);
  uint64_t errors = sum(&naive_thread::errors);
  auto claimed = static_cast<double>(claims1 - claims0);
  std::printf("[c] naive ZRANGE+ZREM (redis) %zu threads x %zu pipelined "
              "clients = %zu in flight: %.0f claims/s (claim-or-enqueue "
              "steps, 2 round trips each)\n",
              threads, depth, threads * depth, ops / dt);
  std::printf("[c]   claimed %.0f/s as the client counts them, of which only "
              "%.0f/s exclusive (its ZREM removed the waiter) | cpu per "
              "claim: bench %.1f us, redis %.1f us | errors %llu\n",
              claimed / dt, (claimed - static_cast<double>(zero1 - zero0)) / dt,
              ops > 0 ? (cpu1 - cpu0) / ops / 1e3 : 0.0,
              ops > 0 ? (rcpu1 - rcpu0) / ops / 1e3 : 0.0,
              static_cast<unsigned long long>(errors));
  std::printf("[c]   double bookings: %llu waiters claimed by more than one "
              "claimer, %llu extra claims out of %zu claims (%.1f%%); ZREM "
              "answered 0 for %llu of them (ignored by the client)\n",
              static_cast<unsigned long long>(doubled_waiters),
              static_cast<unsigned long long>(extra_claims), all.size(),
              all.empty() ? 0.0 : 100.0 * extra_claims / all.size(),
              static_cast<unsigned long long>(sum(&naive_thread::zrem_zero)));
  if (errors > 0)
    for (auto& x : st)
      if (!x->first_error.empty()) {
        std::printf("[c]   first error: %s\n", x->first_error.c_str());
        break;
      }
  std::fflush(stdout);
  drop_queue(admin, queue);
}

} // namespace

int run_naive(const redis_target& redis, const naive_options& o) {
  redis_options ro;
  ro.host = redis.host;
  ro.port = redis.port;
  auto factory = make_redis_store(ro);
  auto admin = factory->connect();
  for (auto k : o.threads)
    for (auto d : o.depth)
      naive_level(*factory, *admin, o, std::max<size_t>(1, k),
                  std::max<size_t>(1, d));
  return 0;
}

const char* claim_function_name() {
  return script_sources[static_cast<size_t>(script_id::claim)].function;
}

} // namespace mm::bench

namespace {

template <class T>
std::string join(const std::vector<T>& xs) {
  std::string out;
  for (auto& x : xs)
    out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

} // namespace

int main(int argc, char** argv) {
  using namespace mm::bench;
  CLI::App app{"claim_bench: the claim path of the matchmaker (see bench/run "
               "claim)"};
  app.require_subcommand(0, 1);
  redis_target redis;
  std::string redis_dir;
  bool print_script = false;
  bool load_script = false;
  app.add_option("--host", redis.host, "Redis host")->capture_default_str();
  app.add_option("--port", redis.port, "Redis port");
  app.add_option("--redis-dir", redis_dir,
                 "directory of a private redis-server (reads DIR/port)");
  app.add_flag("--print-library", print_script,
               "print the generated function library (lua/) and exit");
  app.add_flag("--load-library", load_script,
               "FUNCTION LOAD the library into Redis, print the claim "
               "function's name and exit");

  broker_options bo;
  auto* broker = app.add_subcommand(
    "broker", "the broker's claim path at increasing claims in flight");
  broker->add_option("--store", bo.store, "redis | embedded")
    ->check(CLI::IsMember({"redis", "embedded"}))
    ->capture_default_str();
  broker->add_option("--levels", bo.levels, "claims in flight per level")
    ->delimiter(',')
    ->default_str(join(bo.levels));
  broker->add_option("--duration", bo.duration_s, "seconds measured per level")
    ->capture_default_str();
  broker->add_option("--warmup", bo.warmup_s, "seconds before measuring")
    ->capture_default_str();
  broker
    ->add_option("--workers", bo.workers,
                 "broker_config::workers (a list runs every combination)")
    ->delimiter(',')
    ->default_str(join(bo.workers));
  broker
    ->add_option("--max-batch", bo.max_batch,
                 "broker_config::max_batch (a list runs every combination)")
    ->delimiter(',')
    ->default_str(join(bo.max_batch));
  broker
    ->add_option("--form", bo.form,
                 "single: one claim per message; batch: --batch-size "
                 "claims per message")
    ->check(CLI::IsMember({"single", "batch"}))
    ->capture_default_str();
  broker->add_option("--batch-size", bo.batch_size, "claims per batch message")
    ->capture_default_str();
  broker
    ->add_option("--drivers", bo.drivers,
                 "driver actors sharing the claims in flight")
    ->capture_default_str();
  broker
    ->add_option("--scheduler-threads", bo.scheduler_threads,
                 "CAF scheduler threads (0: CAF default)")
    ->capture_default_str();
  broker->add_option("--policy", bo.policy, "CAF scheduler policy")
    ->check(CLI::IsMember({"stealing", "sharing"}))
    ->capture_default_str();
  broker
    ->add_option("--queues", bo.queues,
                 "queues per level (claim n in queue n % N)")
    ->capture_default_str();
  broker->add_flag("--cluster", bo.cluster,
                   "--host/--port is a Redis Cluster node (slot routing)");
  broker->add_option("--seeds", bo.cluster_seeds,
                     "more Redis Cluster nodes host:port (implies --cluster)");
  broker->add_option("--queue", bo.queue_prefix, "queue name prefix")
    ->capture_default_str();

  naive_options no;
  auto* naive = app.add_subcommand(
    "naive", "the two-step ZRANGE+ZREM baseline (double-books)");
  naive->add_option("--threads", no.threads, "client threads (a list: each)")
    ->delimiter(',')
    ->default_str(join(no.threads));
  naive
    ->add_option("--depth", no.depth,
                 "pipelined clients per thread (a list: each)")
    ->delimiter(',')
    ->default_str(join(no.depth));
  naive->add_option("--duration", no.duration_s, "seconds measured")
    ->capture_default_str();

  script_cost_options so;
  auto* script = app.add_subcommand(
    "script", "the claim's Redis CPU per call in a released queue, beside "
              "the minimal claim's (INFO commandstats)");
  script->add_option("--calls", so.calls, "calls per variant and round")
    ->capture_default_str();
  script
    ->add_option("--pipeline", so.pipeline,
                 "calls per round trip (its matched tickets go in one "
                 "release call: at most 1,000)")
    ->check(CLI::Range(1, 500))
    ->capture_default_str();
  script->add_option("--rounds", so.rounds, "rounds (variants in turns)")
    ->capture_default_str();
  script
    ->add_option("--minimal-sha", so.minimal_sha,
                 "SHA of the loaded minimal claim script")
    ->required();
  script->add_option("--minimal-fn", so.minimal_fn,
                     "the minimal claim loaded as a function");

  std::vector<std::string> variant_files;
  script->add_option("--variant", variant_files,
                     "LABEL=FILE: another library's claim beside the built "
                     "one (its '#!lua name=mm_<suffix>' names its functions)");

  CLI11_PARSE(app, argc, argv);
  for (auto& v : variant_files) {
    auto eq = v.find('=');
    std::ifstream in(eq == std::string::npos ? "" : v.substr(eq + 1));
    if (!in) {
      std::fprintf(stderr, "--variant %s: LABEL=FILE, a readable file\n",
                   v.c_str());
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    so.variants.emplace_back(v.substr(0, eq), text.str());
  }
  if (!bo.cluster_seeds.empty())
    bo.cluster = true;

  if (print_script) {
    std::fputs(mm::script_library, stdout);
    return 0;
  }
  if (!redis_dir.empty() && redis.port == 0
      && !read_port(redis_dir, redis.port))
    return 1;
  bool need_redis = load_script || naive->parsed() || script->parsed()
                    || (broker->parsed() && bo.store == "redis");
  if (need_redis && redis.port == 0) {
    std::fprintf(stderr, "a Redis port is needed: --port P or --redis-dir "
                         "DIR\n");
    return 2;
  }
  if (load_script) {
    mm::redis_options ro;
    ro.host = redis.host;
    ro.port = redis.port;
    auto conn = mm::make_redis_store(ro)->connect();
    auto r = conn->execute({{"FUNCTION", "LOAD", mm::script_library}});
    bool ok
      = !r.empty() && r[0].code == mm::errc::none
        && (r[0].value.type == mm::store_value::kind::string
            || r[0].value.str.find("already exists") != std::string::npos);
    if (!ok) {
      std::fprintf(stderr, "FUNCTION LOAD failed: %s\n",
                   r.empty() ? "no reply"
                             : (r[0].detail + r[0].value.str).c_str());
      return 1;
    }
    std::printf("%s\n", claim_function_name());
    return 0;
  }
  if (broker->parsed())
    return run_broker(redis, bo);
  if (naive->parsed())
    return run_naive(redis, no);
  if (script->parsed())
    return run_script_cost(redis, so);
  std::cout << app.help();
  return 2;
}
