// claim_bench: measures the claim path. Subcommands (run `claim_bench -h`):
//   broker   the queue broker's claim path at increasing concurrency, on the
//            Redis or the embedded store (bench/broker_bench.cpp)
//   naive    the two-step ZRANGE + ZREM baseline that double-books
// and helpers for the redis-benchmark ceiling: --print-claim-script prints
// the generated claim script (common prelude included), --load-claim-script
// loads it into Redis and prints its sha1.
// bench/run claim drives all of it against one private redis-server.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "bench/bench_common.hpp"
#include "persistence/queue_codec.hpp"

namespace mm::bench {

// -- counting store -------------------------------------------------------------

namespace {

uint64_t steady_ns() {
  using namespace std::chrono;
  return static_cast<uint64_t>(
    duration_cast<nanoseconds>(steady_clock::now().time_since_epoch())
      .count());
}

class counting_store final : public queue_store {
public:
  counting_store(std::unique_ptr<queue_store> inner,
                 std::shared_ptr<store_counters> c)
    : inner_(std::move(inner)), c_(std::move(c)) {
  }

  std::vector<store_reply> run(const std::vector<script_call>& calls) override {
    note_thread();
    auto t0 = steady_ns();
    auto out = inner_->run(calls);
    count(calls.size(), steady_ns() - t0);
    return out;
  }

  std::vector<store_reply>
  execute(const std::vector<store_command>& commands) override {
    note_thread();
    auto t0 = steady_ns();
    auto out = inner_->execute(commands);
    count(commands.size(), steady_ns() - t0);
    return out;
  }

  bool blocking() const noexcept override {
    return inner_->blocking();
  }

private:
  void note_thread() {
    auto tid = current_tid();
    if (tid != last_tid_) {
      last_tid_ = tid;
      std::lock_guard<std::mutex> guard{c_->tids_mtx};
      c_->tids.insert(tid);
    }
  }

  void count(size_t n, uint64_t ns) {
    c_->batches.fetch_add(1, std::memory_order_relaxed);
    c_->calls.fetch_add(n, std::memory_order_relaxed);
    c_->busy_ns.fetch_add(ns, std::memory_order_relaxed);
    auto prev = c_->max_batch.load(std::memory_order_relaxed);
    while (n > prev
           && !c_->max_batch.compare_exchange_weak(prev, n,
                                                   std::memory_order_relaxed))
      ;
  }

  std::unique_ptr<queue_store> inner_;
  std::shared_ptr<store_counters> c_;
  int last_tid_ = -1;
};

class counting_store_factory final : public queue_store_factory {
public:
  counting_store_factory(std::shared_ptr<queue_store_factory> inner,
                         std::shared_ptr<store_counters> c)
    : inner_(std::move(inner)), c_(std::move(c)) {
  }

  std::unique_ptr<queue_store> connect() override {
    return std::make_unique<counting_store>(inner_->connect(), c_);
  }

  std::string describe() const override {
    return inner_->describe() + " (counted)";
  }

private:
  std::shared_ptr<queue_store_factory> inner_;
  std::shared_ptr<store_counters> c_;
};

} // namespace

std::shared_ptr<queue_store_factory>
counting_factory(std::shared_ptr<queue_store_factory> inner,
                 std::shared_ptr<store_counters> counters) {
  return std::make_shared<counting_store_factory>(std::move(inner),
                                                  std::move(counters));
}

// -- CPU accounting ---------------------------------------------------------------

namespace {

/// utime + stime of a /proc stat line, in ns.
uint64_t stat_cpu_ns(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line))
    return 0;
  // The command name may hold spaces: fields start after the last ')'.
  auto close = line.rfind(')');
  if (close == std::string::npos)
    return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  // Field 3 is the state; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14)
      utime = std::stoull(field);
    else if (i == 15)
      stime = std::stoull(field);
  }
  static const uint64_t tick_ns = 1000000000ull / sysconf(_SC_CLK_TCK);
  return (utime + stime) * tick_ns;
}

} // namespace

std::map<int, uint64_t> thread_cpu_ns() {
  std::map<int, uint64_t> out;
  if (DIR* d = opendir("/proc/self/task")) {
    while (auto* e = readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9')
        continue;
      int tid = std::atoi(e->d_name);
      out[tid] = stat_cpu_ns(std::string{"/proc/self/task/"} + e->d_name
                             + "/stat");
    }
    closedir(d);
  }
  return out;
}

uint64_t process_cpu_ns() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  auto ns = [](const timeval& tv) {
    return static_cast<uint64_t>(tv.tv_sec) * 1000000000ull
           + static_cast<uint64_t>(tv.tv_usec) * 1000ull;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

int current_tid() {
  thread_local int tid = static_cast<int>(syscall(SYS_gettid));
  return tid;
}

uint64_t redis_cpu_ns(queue_store& conn) {
  auto r = conn.execute({{"INFO", "cpu"}});
  if (r.empty() || r[0].code != errc::none)
    return 0;
  std::istringstream in(r[0].value.str);
  std::string line;
  double user = 0, sys = 0;
  while (std::getline(in, line)) {
    if (line.rfind("used_cpu_user:", 0) == 0)
      user = std::stod(line.substr(14));
    else if (line.rfind("used_cpu_sys:", 0) == 0)
      sys = std::stod(line.substr(13));
  }
  return static_cast<uint64_t>((user + sys) * 1e9);
}

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
  std::vector<uint64_t> claimed;      // waiter ids this thread "claimed"
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
          if (r.code != errc::none || r.value.type == store_value::kind::error) {
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
            writes.push_back({"ZADD", key, score,
                              "w" + std::to_string(t) + "x"
                                + std::to_string(n++)});
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

const char* claim_script_text() {
  return script_sources[static_cast<size_t>(script_id::claim)].text;
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
  app.add_flag("--print-claim-script", print_script,
               "print the generated claim script (with the common prelude) "
               "and exit");
  app.add_flag("--load-claim-script", load_script,
               "SCRIPT LOAD the claim script into Redis, print its sha1 and "
               "exit");

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
  broker->add_option("--workers", bo.workers,
                     "broker_config::workers (a list runs every combination)")
    ->delimiter(',')
    ->default_str(join(bo.workers));
  broker->add_option("--max-batch", bo.max_batch,
                     "broker_config::max_batch (a list runs every combination)")
    ->delimiter(',')
    ->default_str(join(bo.max_batch));
  broker->add_option("--form", bo.form,
                     "single: one claim per message; batch: --batch-size "
                     "claims per message")
    ->check(CLI::IsMember({"single", "batch"}))
    ->capture_default_str();
  broker->add_option("--batch-size", bo.batch_size, "claims per batch message")
    ->capture_default_str();
  broker->add_option("--drivers", bo.drivers,
                     "driver actors sharing the claims in flight")
    ->capture_default_str();
  broker->add_option("--scheduler-threads", bo.scheduler_threads,
                     "CAF scheduler threads (0: CAF default)")
    ->capture_default_str();
  broker->add_option("--policy", bo.policy, "CAF scheduler policy")
    ->check(CLI::IsMember({"stealing", "sharing"}))
    ->capture_default_str();
  broker->add_option("--queue", bo.queue_prefix, "queue name prefix")
    ->capture_default_str();

  naive_options no;
  auto* naive = app.add_subcommand(
    "naive", "the two-step ZRANGE+ZREM baseline (double-books)");
  naive->add_option("--threads", no.threads, "client threads (a list: each)")
    ->delimiter(',')
    ->default_str(join(no.threads));
  naive->add_option("--depth", no.depth,
                    "pipelined clients per thread (a list: each)")
    ->delimiter(',')
    ->default_str(join(no.depth));
  naive->add_option("--duration", no.duration_s, "seconds measured")
    ->capture_default_str();

  CLI11_PARSE(app, argc, argv);

  if (print_script) {
    std::fputs(claim_script_text(), stdout);
    return 0;
  }
  if (!redis_dir.empty() && redis.port == 0) {
    std::ifstream in(redis_dir + "/port");
    int p = 0;
    if (!(in >> p) || p <= 0) {
      std::fprintf(stderr, "no port file in %s\n", redis_dir.c_str());
      return 1;
    }
    redis.port = static_cast<uint16_t>(p);
  }
  bool need_redis = load_script || naive->parsed()
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
    auto r = conn->execute({{"SCRIPT", "LOAD", claim_script_text()}});
    if (r.empty() || r[0].code != mm::errc::none
        || r[0].value.type != mm::store_value::kind::string) {
      std::fprintf(stderr, "SCRIPT LOAD failed: %s\n",
                   r.empty() ? "no reply"
                             : (r[0].detail + r[0].value.str).c_str());
      return 1;
    }
    std::printf("%s\n", r[0].value.str.c_str());
    return 0;
  }
  if (broker->parsed())
    return run_broker(redis, bo);
  if (naive->parsed())
    return run_naive(redis, no);
  std::cout << app.help();
  return 2;
}
