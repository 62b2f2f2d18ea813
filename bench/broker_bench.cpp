// claim_bench broker: drives the queue broker's claim path with driver
// actors that keep a fixed number of claims in flight, each claim with a
// unique user and ticket in one queue per level (so every second claim
// matches the previous one). Counts completed claims per second, matches,
// and double bookings (a ticket that takes part in two matches), and shows
// where the time goes: store round trips (calls per trip, time per trip,
// share of time the workers spend inside the store), CPU per claim of this
// process and of Redis, CPU per thread class.

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <thread>
#include <unistd.h>

#include "actors/queue_broker.hpp"
#include "bench/bench_caf.hpp"
#include "bench/bench_common.hpp"
#include "persistence/queue/queue_codec.hpp"

namespace mm::bench {

namespace {

/// Counters of one driver, on a cache line of their own.
struct alignas(64) driver_counters {
  std::atomic<uint64_t> claims{0};
  std::atomic<uint64_t> matched{0};
  std::atomic<uint64_t> queued{0};
  std::atomic<uint64_t> by_other{0};
  std::atomic<uint64_t> errors{0};
};

struct level_stats {
  std::vector<std::unique_ptr<driver_counters>> drivers;
  std::mutex mtx;
  std::vector<uint64_t> participants; ///< ticket ids of both sides of matches
  std::string first_error;
  thread_set threads; ///< threads that ran driver code

  uint64_t sum(std::atomic<uint64_t> driver_counters::*field) const {
    uint64_t s = 0;
    for (auto& d : drivers)
      s += ((*d).*field).load(std::memory_order_relaxed);
    return s;
  }
};

/// Tickets are "t<driver>x<n>": driver in the high bits.
uint64_t ticket_num(const std::string& s) {
  auto x = s.find('x');
  if (s.size() < 2 || s[0] != 't' || x == std::string::npos)
    return UINT64_MAX;
  return (std::strtoull(s.c_str() + 1, nullptr, 10) << 40)
         | std::strtoull(s.c_str() + x + 1, nullptr, 10);
}

struct driver_state {
  queue_broker_actor broker;
  std::shared_ptr<level_stats> stats;
  driver_counters* counters = nullptr;
  std::shared_ptr<std::atomic<bool>> stop;
  caf::actor done_to;
  std::vector<std::string> queues; ///< claim n goes to queues[n % size]
  uint32_t id = 0;
  size_t batch_size = 0; ///< 0: single-claim messages
  std::string user_prefix;
  std::string ticket_prefix;
  uint64_t next = 0;
  size_t outstanding = 0;
  std::vector<uint64_t> participants;
  std::string first_error;
  static inline const char* name = "claim_driver";
};

using driver_ptr = caf::stateful_actor<driver_state>*;

ticket_spec next_spec(driver_state& st) {
  ticket_spec s;
  s.queue = st.queues[st.next % st.queues.size()];
  auto n = std::to_string(st.next++);
  s.user = st.user_prefix + n;
  s.ticket = st.ticket_prefix + n;
  s.node = "n1";
  s.ttl_ms = 30000;
  return s;
}

void note_thread(driver_ptr self) {
  self->state.stats->threads.note();
}

void record(driver_ptr self, const claim_result& r) {
  auto& c = *self->state.counters;
  c.claims.fetch_add(1, std::memory_order_relaxed);
  switch (r.outcome) {
    case claim_outcome::matched:
      c.matched.fetch_add(1, std::memory_order_relaxed);
      self->state.participants.push_back(ticket_num(r.ticket));
      self->state.participants.push_back(ticket_num(r.partner.ticket));
      break;
    case claim_outcome::queued:
      c.queued.fetch_add(1, std::memory_order_relaxed);
      break;
    default:
      c.by_other.fetch_add(1, std::memory_order_relaxed);
  }
}

void record_error(driver_ptr self, const caf::error& err, size_t n) {
  self->state.counters->errors.fetch_add(n, std::memory_order_relaxed);
  if (self->state.first_error.empty())
    self->state.first_error = self->system().render(err);
}

void finish(driver_ptr self) {
  auto& st = self->state;
  {
    std::lock_guard<std::mutex> guard{st.stats->mtx};
    auto& all = st.stats->participants;
    all.insert(all.end(), st.participants.begin(), st.participants.end());
    if (st.stats->first_error.empty())
      st.stats->first_error = st.first_error;
  }
  self->send(st.done_to, st.id);
  self->quit();
}

void send_next(driver_ptr self);

/// One reply arrived: send the next request, or drain after the stop.
void replied(driver_ptr self) {
  auto& st = self->state;
  --st.outstanding;
  if (!st.stop->load(std::memory_order_relaxed))
    send_next(self);
  else if (st.outstanding == 0)
    finish(self);
}

void send_next(driver_ptr self) {
  auto& st = self->state;
  ++st.outstanding;
  if (st.batch_size == 0) {
    self->request(st.broker, caf::infinite, claim_atom_v, next_spec(st))
      .then(
        [self](claim_result& r) {
          note_thread(self);
          record(self, r);
          replied(self);
        },
        [self](caf::error& err) {
          record_error(self, err, 1);
          replied(self);
        });
    return;
  }
  std::vector<ticket_spec> specs;
  specs.reserve(st.batch_size);
  for (size_t i = 0; i < st.batch_size; ++i)
    specs.emplace_back(next_spec(st));
  auto n = st.batch_size;
  self->request(st.broker, caf::infinite, claim_atom_v, std::move(specs))
    .then(
      [self](std::vector<claim_result>& rs) {
        note_thread(self);
        for (auto& r : rs)
          record(self, r);
        replied(self);
      },
      [self, n](caf::error& err) {
        record_error(self, err, n);
        replied(self);
      });
}

/// Keeps `messages` requests outstanding until the stop flag is set.
caf::behavior driver(driver_ptr self, size_t messages) {
  for (size_t i = 0; i < messages; ++i)
    send_next(self);
  return {
    [](uint32_t) {
      // nop: the driver lives on its responses
    },
  };
}

struct sample {
  double t = 0;
  uint64_t claims = 0, matched = 0, queued = 0, by_other = 0, errors = 0;
  store_counters::snapshot store;
  uint64_t cpu = 0, redis_cpu = 0;
  std::map<int, uint64_t> threads;
};

sample take(const level_stats& ls, const store_counters& sc,
            queue_store* admin) {
  sample s;
  s.t = now_s();
  s.claims = ls.sum(&driver_counters::claims);
  s.matched = ls.sum(&driver_counters::matched);
  s.queued = ls.sum(&driver_counters::queued);
  s.by_other = ls.sum(&driver_counters::by_other);
  s.errors = ls.sum(&driver_counters::errors);
  s.store = sc.take();
  s.cpu = process_cpu_ns();
  s.redis_cpu = admin != nullptr ? redis_cpu_ns(*admin) : 0;
  s.threads = thread_cpu_ns();
  return s;
}

struct level_result {
  double claims_per_s = 0;
  size_t in_flight = 0;
  uint32_t workers = 0;
  uint32_t max_batch = 0;
};

uint64_t count_double_bookings(std::vector<uint64_t>& ids) {
  std::sort(ids.begin(), ids.end());
  uint64_t dup = 0;
  for (size_t i = 1; i < ids.size(); ++i)
    if (ids[i] == ids[i - 1] && ids[i] != UINT64_MAX)
      ++dup;
  return dup;
}

level_result run_level(caf::actor_system& sys, queue_broker_actor broker,
                       const broker_options& o, const std::string& tag,
                       const std::string& label, uint32_t workers,
                       uint32_t max_batch, size_t in_flight,
                       store_counters& counters, queue_store* admin) {
  static int level_no = 0;
  auto base = o.queue_prefix + "-" + std::to_string(getpid()) + "-"
              + std::to_string(level_no++);
  std::vector<std::string> queues;
  for (size_t q = 0; q < std::max<size_t>(1, o.queues); ++q)
    queues.push_back(o.queues > 1 ? base + "-q" + std::to_string(q) : base);
  auto stats = std::make_shared<level_stats>();
  auto stop = std::make_shared<std::atomic<bool>>(false);
  caf::scoped_actor waiter{sys};
  auto drivers = std::max<size_t>(1, std::min(o.drivers, in_flight));
  size_t batch_size = o.form == "batch" ? std::max<size_t>(1, o.batch_size) : 0;
  for (size_t d = 0; d < drivers; ++d)
    stats->drivers.emplace_back(std::make_unique<driver_counters>());
  for (size_t d = 0; d < drivers; ++d) {
    // This driver's share of the claims in flight, in messages.
    size_t claims = in_flight / drivers + (d < in_flight % drivers ? 1 : 0);
    size_t messages
      = batch_size == 0 ? claims : std::max<size_t>(1, claims / batch_size);
    auto id = static_cast<uint32_t>(d);
    auto done_to = caf::actor_cast<caf::actor>(waiter);
    auto* dc = stats->drivers[d].get();
    sys.spawn([=](driver_ptr self) {
      auto& st = self->state;
      st.broker = broker;
      st.stats = stats;
      st.counters = dc;
      st.stop = stop;
      st.done_to = done_to;
      st.queues = queues;
      st.id = id;
      st.batch_size = batch_size;
      st.user_prefix = "u" + std::to_string(id) + "x";
      st.ticket_prefix = "t" + std::to_string(id) + "x";
      return driver(self, messages);
    });
  }
  sleep_s(o.warmup_s);
  auto a = take(*stats, counters, admin);
  sleep_s(o.duration_s);
  auto b = take(*stats, counters, admin);
  *stop = true;
  size_t done = 0;
  bool timed_out = false;
  while (done < drivers && !timed_out)
    waiter->receive([&](uint32_t) { ++done; },
                    caf::after(std::chrono::seconds(30)) >>
                      [&] { timed_out = true; });
  if (admin != nullptr)
    for (auto& q : queues)
      drop_queue(*admin, q);

  auto dt = b.t - a.t;
  auto per_s = [dt](uint64_t x0, uint64_t x1) {
    return static_cast<double>(x1 - x0) / dt;
  };
  double claims = static_cast<double>(b.claims - a.claims);
  double rate = claims / dt;
  uint64_t dup = 0;
  size_t ids = 0;
  std::string first_error;
  {
    std::lock_guard<std::mutex> guard{stats->mtx};
    ids = stats->participants.size();
    dup = count_double_bookings(stats->participants);
    first_error = stats->first_error;
  }
  auto trips = b.store.batches - a.store.batches;
  auto calls = b.store.calls - a.store.calls;
  auto busy = b.store.busy_ns - a.store.busy_ns;
  std::string shape = workers > 0
                        ? "workers=" + std::to_string(workers)
                            + " max_batch=" + std::to_string(max_batch)
                        : std::string{"store inline in the broker"};
  std::printf("[%s] %s %s in_flight=%zu: %.0f claims/s\n", tag.c_str(),
              label.c_str(), shape.c_str(), in_flight, rate);
  std::printf("[%s]   matched %.0f/s (each pairs two users), queued %.0f/s, "
              "claimed_by_other %" PRIu64 ", errors %" PRIu64
              ", double bookings %" PRIu64 " (over %zu matched tickets)%s\n",
              tag.c_str(), per_s(a.matched, b.matched),
              per_s(a.queued, b.queued), b.by_other - a.by_other,
              b.errors - a.errors, dup, ids,
              timed_out ? ", DRAIN TIMED OUT" : "");
  if (!first_error.empty())
    std::printf("[%s]   first error: %s\n", tag.c_str(), first_error.c_str());
  // Where the time goes.
  auto store_tids = counters.threads.get();
  auto driver_tids = stats->threads.get();
  std::vector<std::pair<double, std::string>> busy_threads;
  for (auto& [tid, ns1] : b.threads) {
    auto it = a.threads.find(tid);
    auto ns0 = it == a.threads.end() ? 0 : it->second;
    double pct = 100.0 * static_cast<double>(ns1 - ns0) / (dt * 1e9);
    if (pct < 3.0)
      continue;
    bool st = store_tids.count(tid) > 0, dr = driver_tids.count(tid) > 0;
    std::string kind = st && dr ? "store+driver"
                       : st     ? "store"
                       : dr     ? "driver"
                                : "other";
    busy_threads.emplace_back(pct, kind);
  }
  std::sort(busy_threads.rbegin(), busy_threads.rend());
  std::string threads;
  for (auto& [pct, kind] : busy_threads) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%s%s %.0f%%", threads.empty() ? "" : ", ",
                  kind.c_str(), pct);
    threads += buf;
  }
  std::string where = workers > 0 ? std::to_string(workers) + " worker(s)"
                                  : std::string{"the broker (inline)"};
  double bench_us = claims > 0 ? (b.cpu - a.cpu) / claims / 1e3 : 0.0;
  double bench_busy = 100.0 * (b.cpu - a.cpu) / (dt * 1e9);
  char cpu[160];
  if (admin != nullptr)
    std::snprintf(cpu, sizeof(cpu),
                  "cpu per claim: bench %.1f us, redis %.1f us | busy: bench "
                  "%.0f%%, redis %.0f%%",
                  bench_us,
                  claims > 0 ? (b.redis_cpu - a.redis_cpu) / claims / 1e3 : 0.0,
                  bench_busy, 100.0 * (b.redis_cpu - a.redis_cpu) / (dt * 1e9));
  else
    std::snprintf(cpu, sizeof(cpu),
                  "cpu per claim: bench %.1f us | busy: bench %.0f%%", bench_us,
                  bench_busy);
  std::printf("[%s]   store: %.1f calls per round trip, %.1f us per round "
              "trip, inside store %.0f%% of %s | %s | threads: %s\n",
              tag.c_str(), trips > 0 ? static_cast<double>(calls) / trips : 0.0,
              trips > 0 ? static_cast<double>(busy) / trips / 1e3 : 0.0,
              100.0 * static_cast<double>(busy)
                / (dt * 1e9 * std::max<uint32_t>(1, workers)),
              where.c_str(), cpu, threads.c_str());
  std::fflush(stdout);
  return {rate, in_flight, workers, max_batch};
}

} // namespace

int run_broker(const redis_target& redis, const broker_options& o) {
  caf::actor_system_config cfg;
  configure(cfg, o.scheduler_threads);
  cfg.set("scheduler.policy",
          o.policy == "sharing" ? caf::atom("sharing") : caf::atom("stealing"));
  caf::actor_system sys{cfg};

  std::shared_ptr<queue_store_factory> base;
  std::unique_ptr<queue_store> admin;
  if (o.store == "redis") {
    redis_options ro;
    ro.host = redis.host;
    ro.port = redis.port;
    ro.cluster = o.cluster;
    ro.seeds = o.cluster_seeds;
    base = make_redis_store(ro);
    admin = base->connect();
  } else {
    base = make_embedded_store({});
  }
  auto counters = std::make_shared<store_counters>();
  auto factory = counting_factory(base, counters);
  std::string tag = o.store == "redis" ? (o.form == "single" ? "a" : "a/batch")
                                       : (o.form == "single" ? "d" : "d/batch");
  std::string label
    = "broker(" + o.store + ") "
      + (o.form == "single"
           ? std::string{"single-claim messages"}
           : "batch messages of " + std::to_string(o.batch_size) + " claims");
  level_result best;
  for (auto workers : o.workers) {
    for (auto max_batch : o.max_batch) {
      broker_config bc;
      bc.workers = workers;
      bc.max_batch = max_batch;
      bc.sweep_interval_ms = 0;
      auto broker = spawn_queue_broker(sys, factory, bc);
      for (auto level : o.levels) {
        auto r = run_level(sys, broker, o, tag, label,
                           o.store == "redis" ? workers : 0, max_batch,
                           std::max<size_t>(1, level), *counters, admin.get());
        if (r.claims_per_s > best.claims_per_s)
          best = r;
      }
      caf::anon_send_exit(broker, caf::exit_reason::user_shutdown);
    }
  }
  std::string shape = best.workers > 0
                        ? " workers=" + std::to_string(best.workers)
                            + " max_batch=" + std::to_string(best.max_batch)
                        : std::string{" (store inline in the broker)"};
  std::printf("[%s] best %s: %.0f claims/s at in_flight=%zu%s\n", tag.c_str(),
              label.c_str(), best.claims_per_s, best.in_flight, shape.c_str());
  std::printf("summary store=%s form=%s best_claims_per_s=%.0f in_flight=%zu "
              "workers=%u max_batch=%u\n",
              o.store.c_str(), o.form.c_str(), best.claims_per_s,
              best.in_flight, best.workers, best.max_batch);
  std::fflush(stdout);
  return 0;
}

} // namespace mm::bench
