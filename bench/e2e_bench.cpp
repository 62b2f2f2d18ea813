// e2e_bench: matches per second and time-to-match end to end through the
// embedding API (actors/engine.hpp): what a host program sees.
//
// N virtual users, user i in queue q{i % queues}. A few driver actors own
// the users (user i belongs to driver i % drivers) and are their
// subscribers: a driver gets each user's session from `engine::session`,
// sends it `join_atom, join_request`, and hears the user's `session_state`
// changes and `match_event` back. A message's sender is the user's session
// actor, which tells the driver whose event it is (one subscriber for many
// users, measured per user). A driver keeps at most its share of
// --in-flight users joined but not yet matched, and with --rate paces its
// joins to its share of that many joins per second.
//
// Figures: matches/s = distinct sessions / (last match event - first join);
// time-to-match per user = join sent -> its subscriber got its match_event
// (p50/p95/p99/max); also the time to the session's `matched` state, and
// for claimers (they reach `matched` with the finalizer's answer, before
// the relay's event) that state -> the event: the outbox relay's share.
//
// The run ends once every user joined (or the --duration bound passed) and
// every queue holds at most its one odd user unmatched, or --drain seconds
// after the bound. Then the answers are checked (any failed check is a
// VIOLATION, exit 1): every user matched exactly once or still waiting
// (at most one per queue, its session `queued`), both users of a session
// got the same event and it names them, nobody is in two sessions, no
// session pairs two queues, each user's `matched` state names its event's
// session, the engine's match counter agrees; on PostgreSQL also the
// database (sessions, outbox rows, nobody in two active sessions).
//
// Where the time goes: CPU of this process (by thread kind), of Redis (INFO
// cpu) and PostgreSQL (/proc: the postmaster and its children) and of the
// machine, per match and as a share of a core, and the ceiling that cost
// allows; Redis calls per match, their server time and the pipelining
// (INFO commandstats, stats); PostgreSQL transactions per match and what
// the backends were doing (pg_stat_activity every 20 ms); the engine's
// counters. `perf record -g -p PID` on a running bench shows the rest.
// --sched-threads / --sched-policy / --relay-batch try other settings.
// bench/run e2e runs it. This file: the set-up, the run's phases in order
// and the options; e2e_driver (the driver actors), e2e_costs (where the time
// goes), e2e_verify (the checks), e2e_figures (the printed figures).

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/engine.hpp"
#include "actors/lazy_clock.hpp"
#include "bench/bench_caf.hpp"
#include "bench/bench_cli.hpp"
#include "bench/bench_common.hpp"
#include "bench/bench_pg.hpp"
#include "bench/e2e_costs.hpp"
#include "bench/e2e_driver.hpp"
#include "bench/e2e_figures.hpp"
#include "bench/e2e_options.hpp"
#include "bench/e2e_verify.hpp"

#ifdef MM_JEMALLOC
// matchd's allocator options (app/matchd/matchd.cpp): pages go back to the system
// from a background thread, not from the allocating threads.
extern "C" {
const char* malloc_conf
  = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";
}
#endif

namespace mm::e2e_bench {

using namespace mm::bench;

namespace {

// -- set-up -------------------------------------------------------------------

/// What a run stands on, in the order it is set up (and torn down in
/// reverse): the samplers' and checks' admin connections, the run's
/// database, the actor system and the engine in it.
struct rig {
  sampler costs;
  std::unique_ptr<pg_conn> admin; ///< PostgreSQL only
  std::string db, conninfo;       ///< the run's database
  std::unique_ptr<caf::actor_system_config> cfg;
  // Reset before the database checks: its destructor waits for every actor,
  // the engine's detached database workers (and their connections) too.
  std::unique_ptr<caf::actor_system> sys;
  std::string relay_stream; ///< this run's own, removed afterwards
  std::shared_ptr<engine> eng;
};

/// Makes the run's database (PostgreSQL), connects to Redis, starts the
/// actor system and the engine; false (and a message on stderr) when the
/// engine does not start.
bool set_up(const options& o, const std::string& prefix, rig& g) {
  const bool redis = o.store == "redis";
  const bool pg = o.db == "postgres";
  if (pg) {
    g.admin = std::make_unique<pg_conn>(o.pg);
    g.costs.postmaster = postmaster_of(*g.admin);
    g.db = "mm_e2e_" + std::to_string(getpid());
    create_database(*g.admin, g.db);
    g.conninfo = with_dbname(o.pg, g.db);
  }
  redis_options ro;
  ro.host = o.redis_host;
  ro.port = o.redis_port;
  if (redis)
    g.costs.redis_admin = make_redis_store(ro)->connect();

  g.cfg = std::make_unique<caf::actor_system_config>();
  configure(*g.cfg, o.sched_threads);
  g.cfg->set("scheduler.policy", o.sched_policy == "sharing"
                                   ? caf::atom("sharing")
                                   : caf::atom("stealing"));
  if (o.clock == "lazy")
    use_lazy_clock(*g.cfg);
  g.sys = std::make_unique<caf::actor_system>(*g.cfg);

  engine_config ec;
  ec.node = "e2e-" + std::to_string(getpid());
  ec.use_redis = redis;
  ec.redis = ro;
  ec.use_postgres = pg;
  ec.postgres.conninfo = g.conninfo;
  // A stream of this run's own, removed afterwards (runs share a Redis).
  ec.relay.stream = "mm:" + prefix + "events";
  g.relay_stream = ec.relay.stream;
  if (o.relay_batch > 0)
    ec.relay.batch = o.relay_batch;
  if (o.broker_workers > 0)
    ec.broker.workers = o.broker_workers;
  if (o.finalizer_workers > 0)
    ec.finalizer.workers = o.finalizer_workers;
  if (o.finalizer_delay_ms >= 0)
    ec.finalizer.batch_delay_ms = static_cast<uint32_t>(o.finalizer_delay_ms);
  if (o.lookup_delay_ms >= 0)
    ec.lifecycle.lookup_delay_ms = static_cast<uint32_t>(o.lookup_delay_ms);
  auto started = engine::start(*g.sys, ec);
  if (!started) {
    std::fprintf(stderr, "engine::start: %s\n", started.error().detail.c_str());
    return false;
  }
  g.eng = *started;
  return true;
}

/// The "# e2e_bench [tag]: ..." line: the machine, the options and the
/// engine's settings.
void print_header(const options& o, const std::string& tag, const rig& g,
                  size_t drivers) {
  const auto& ecfg = g.eng->config();
  auto pacing = o.rate > 0 ? std::to_string(std::llround(o.rate)) + " joins/s"
                           : std::string{"unpaced"};
  auto where = g.admin ? " (database " + g.db + ")" : std::string{};
  std::printf("# e2e_bench [%s]: %u cores, store=%s db=%s%s, %zu users in %zu "
              "queues, %zu in flight, rate %s, %zu driver actors, CAF "
              "scheduler threads=%zu (%s) | broker workers=%u max_batch=%u, "
              "finalizer batch_max=%u delay=%u ms workers=%u, relay batch=%u "
              "poll=%u ms\n",
              tag.c_str(), std::thread::hardware_concurrency(), o.store.c_str(),
              o.db.c_str(), where.c_str(), o.users, o.queues, o.in_flight,
              pacing.c_str(), drivers, o.sched_threads, o.sched_policy.c_str(),
              ecfg.broker.workers, ecfg.broker.max_batch,
              ecfg.finalizer.batch_max, ecfg.finalizer.batch_delay_ms,
              ecfg.finalizer.workers, ecfg.relay.batch, ecfg.relay.poll_ms);
  std::fflush(stdout);
}

// -- the drive ----------------------------------------------------------------

/// True when every queue holds at most its one odd user unsettled.
bool all_settled(const shared_counts& sh, size_t queues) {
  for (size_t q = 0; q < queues; ++q) {
    auto joined = sh.joined_q[q].load(std::memory_order_relaxed);
    auto settled = sh.settled_q[q].load(std::memory_order_relaxed);
    if (joined - std::min(joined, settled) > joined % 2)
      return false;
  }
  return true;
}

/// Watches the drivers from the main thread until every user joined and
/// every queue settled, or the bounds passed: stops the joins at the
/// --duration bound, samples the PostgreSQL backends into `r.activity`,
/// prints the progress lines, sets `r.drained`. Returns true when the
/// --duration bound stopped the joins.
bool watch(const options& o, const std::string& tag, const rig& g,
           shared_counts& sh, run_record& r) {
  const bool pg = o.db == "postgres";
  const auto users = o.users;
  auto t0 = r.s0.t;
  auto last_report = t0, last_pg = t0;
  uint64_t last_matched = 0;
  bool bounded = false;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto now = now_s();
    auto joined = sh.joined.load();
    if ((joined == users || sh.stop) && all_settled(sh, o.queues))
      break;
    if (!sh.stop && now - t0 > o.duration_s) {
      sh.stop = true;
      bounded = true;
      std::printf("[%s] --duration %.0f s passed: no more joins (%" PRIu64
                  " of %zu joined), waiting up to %.0f s for their "
                  "matches\n",
                  tag.c_str(), o.duration_s, joined, users, o.drain_s);
    }
    if (sh.stop && now - t0 > o.duration_s + o.drain_s) {
      r.drained = false;
      break;
    }
    if (pg && now - last_pg >= 0.02) {
      r.activity.take(*g.admin, g.db);
      last_pg = now;
    }
    if (o.progress && now - last_report >= 1.0) {
      auto matched = sh.matched.load();
      std::printf("[%s]   t=%.1f s: %" PRIu64 " joined, %" PRIu64
                  " matched users, %.0f matches/s since the last line\n",
                  tag.c_str(), now - t0, joined, matched,
                  static_cast<double>(matched - last_matched) / 2.0
                    / (now - last_report));
      std::fflush(stdout);
      last_matched = matched;
      last_report = now;
    }
  }
  return bounded;
}

// -- after the drive ----------------------------------------------------------

/// The phases of the users left without a match, as their sessions answer
/// `state_atom` ("no answer": not within 5 s), counted by phase.
std::map<std::string, uint64_t>
waiting_phases(caf::scoped_actor& self, engine& eng, const std::string& prefix,
               const std::vector<std::vector<size_t>>& waiting) {
  std::map<std::string, uint64_t> out;
  for (auto& ws : waiting) {
    for (auto i : ws) {
      std::string phase = "no answer";
      self
        ->request(eng.session(user_name(prefix, i)), std::chrono::seconds(5),
                  state_atom_v)
        .receive([&](session_state& st) { phase = to_string(st.phase); },
                 [&](caf::error&) {});
      ++out[phase];
    }
  }
  return out;
}

engine_counts read_counts(const engine& eng) {
  auto m = eng.metrics();
  engine_counts n;
  n.matches = m->matches.load();
  n.claims = m->claims.load();
  n.conflicts = m->conflicts.load();
  n.relay_retries = m->relay_retries.load();
  n.requeues = m->requeues.load();
  n.delivered = m->events_delivered.load();
  return n;
}

/// Stops the engine and waits until its actors are gone.
void stop_engine(caf::scoped_actor& self, engine& eng) {
  auto relay = eng.relay();
  auto fin = eng.finalizer();
  auto broker = eng.broker();
  auto dir = eng.directory();
  eng.stop();
  self->wait_for(relay, fin, broker, dir);
}

// -- the run ------------------------------------------------------------------

int run(const options& o, const std::string& tag) {
  // The stores' "applied migration" lines would interleave with the figures.
  spdlog::set_level(spdlog::level::warn);
  const bool redis = o.store == "redis";
  const bool pg = o.db == "postgres";
  auto prefix = "e2e" + std::to_string(getpid()) + "-";
  rig g;
  if (!set_up(o, prefix, g))
    return 1;
  const auto users = o.users;
  std::vector<std::string> queue_names;
  for (size_t q = 0; q < o.queues; ++q)
    queue_names.push_back(prefix + "q" + std::to_string(q));
  const auto drivers = std::min(std::max<size_t>(1, o.drivers), users);
  print_header(o, tag, g, drivers);

  // The drive: the drivers join the users, the main thread watches.
  auto sh = std::make_shared<shared_counts>(o.queues);
  std::vector<driver_report> reports(drivers);
  run_record r;
  r.users = users;
  r.s0 = g.costs.take();
  auto drvs = spawn_drivers(*g.sys, g.eng, sh, prefix, queue_names, users,
                            o.in_flight, o.rate, reports);
  auto bounded = watch(o, tag, g, *sh, r);
  sh->stop = true;
  r.s1 = g.costs.take();

  // Collection: the drivers' records, the waiting users' sessions, the
  // engine's counters; then the engine and the actor system stop.
  auto self = std::make_unique<caf::scoped_actor>(*g.sys);
  collect_reports(*self, drvs);
  r.t = tally_users(reports, users, prefix, queue_names);
  r.waiting_phases = waiting_phases(*self, *g.eng, prefix, r.t.waiting);
  uint64_t not_queued = r.t.waiting_total - r.waiting_phases["queued"];
  r.waiting_phases.erase("queued");
  r.counts = read_counts(*g.eng);
  stop_engine(*self, *g.eng);
  self.reset();
  drvs.clear();
  g.eng.reset();
  g.sys.reset();
  if (redis)
    g.costs.redis_admin->execute({{"UNLINK", g.relay_stream}});

  // Verification, then the figures.
  check_users(r.problems, r.t, users, bounded, not_queued, r.counts.matches);
  if (pg)
    r.xacts = check_database(r.problems, *g.admin, g.conninfo, g.db,
                             r.t.sessions, tag);
  print_figures(o, tag, r);
  if (pg && !o.keep_database)
    drop_database(*g.admin, g.db);
  return r.problems.empty() ? 0 : 1;
}

} // namespace

} // namespace mm::e2e_bench

int main(int argc, char** argv) {
  using namespace mm::e2e_bench;
  CLI::App app{"e2e_bench: matches per second and time-to-match end to end "
               "through the embedding API (see bench/run e2e)"};
  options o;
  app.add_option("--store", o.store, "queue store of the engine")
    ->check(CLI::IsMember({"embedded", "redis"}))
    ->capture_default_str();
  app.add_option("--db", o.db, "persistence of the engine")
    ->check(CLI::IsMember({"memory", "postgres"}))
    ->capture_default_str();
  app.add_option("--redis-host", o.redis_host, "Redis host")
    ->capture_default_str();
  app.add_option("--redis-port", o.redis_port, "Redis port");
  app.add_option("--redis-dir", o.redis_dir,
                 "directory of a private redis-server (reads DIR/port)");
  app.add_option("--pg", o.pg,
                 "libpq conninfo of an admin connection (the run's database "
                 "is created and dropped there)");
  app.add_option("--pg-dir", o.pg_dir,
                 "directory of tests/support/postgres_server.sh (reads "
                 "DIR/port; user postgres on 127.0.0.1)");
  app.add_option("--users", o.users,
                 "virtual users (default 100000 on embedded+memory, else "
                 "40000)");
  app.add_option("--queues", o.queues, "queues; user i joins q{i % queues}")
    ->check(CLI::Range(1, 100000))
    ->capture_default_str();
  app
    .add_option("--in-flight", o.in_flight,
                "users joined but not yet matched, at most")
    ->check(CLI::Range(1, 100000000))
    ->capture_default_str();
  app
    .add_option("--rate", o.rate,
                "joins per second (0: as fast as --in-flight allows)")
    ->check(CLI::NonNegativeNumber)
    ->capture_default_str();
  app
    .add_option("--sched-threads", o.sched_threads,
                "CAF scheduler threads (0: CAF default)")
    ->capture_default_str();
  app.add_option("--sched-policy", o.sched_policy, "CAF scheduler policy")
    ->check(CLI::IsMember({"stealing", "sharing"}))
    ->capture_default_str();
  app.add_option("--clock", o.clock, "timer thread: lazy or caf (matchd's)")
    ->check(CLI::IsMember({"lazy", "caf"}))
    ->capture_default_str();
  app.add_option("--drivers", o.drivers, "driver actors (subscribers)")
    ->check(CLI::Range(1, 64))
    ->capture_default_str();
  app
    .add_option("--duration", o.duration_s,
                "bound in seconds on the joining phase")
    ->capture_default_str();
  app
    .add_option("--drain", o.drain_s,
                "seconds to wait for matches after the --duration bound")
    ->capture_default_str();
  app.add_option("--broker-workers", o.broker_workers,
                 "the queue broker's store connections (0: the engine's)");
  app.add_option("--finalizer-workers", o.finalizer_workers,
                 "the finalizer's database connections (0: the engine's)");
  app.add_option("--finalizer-delay-ms", o.finalizer_delay_ms,
                 "the group commit's wait for more pairs (-1: the engine's)");
  app.add_option("--lookup-delay-ms", o.lookup_delay_ms,
                 "the joins' in-session checks gather for this long (-1: the "
                 "engine's)");
  app
    .add_option("--relay-batch", o.relay_batch,
                "outbox relay batch (events per cycle; 0: the engine's "
                "default)")
    ->capture_default_str();
  app.add_option("--label", o.label, "tag of the output lines");
  app.add_flag("--keep-database", o.keep_database,
               "keep the run's database for inspection");
  app.add_flag("!--no-progress", o.progress, "no per-second progress lines");
  CLI11_PARSE(app, argc, argv);

  if (o.users == 0)
    o.users = o.store == "embedded" && o.db == "memory" ? 100000 : 40000;
  if (o.store == "redis" && o.redis_port == 0) {
    if (o.redis_dir.empty()) {
      std::fprintf(stderr, "--store redis needs --redis-port or "
                           "--redis-dir\n");
      return 2;
    }
    if (!mm::bench::read_port(o.redis_dir, o.redis_port))
      return 2;
  }
  if (o.db == "postgres" && o.pg.empty()) {
    uint16_t port = 0;
    if (o.pg_dir.empty()) {
      std::fprintf(stderr, "--db postgres needs --pg or --pg-dir\n");
      return 2;
    }
    if (!mm::bench::read_port(o.pg_dir, port))
      return 2;
    o.pg = "host=127.0.0.1 port=" + std::to_string(port)
           + " user=postgres dbname=postgres";
  }
  auto tag = o.label.empty() ? o.store + "+" + o.db : o.label;
  try {
    return run(o, tag);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "e2e_bench: %s\n", ex.what());
    return 1;
  }
}
