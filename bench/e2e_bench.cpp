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
// bench/run e2e runs it.

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/engine.hpp"
#include "bench/bench_caf.hpp"
#include "bench/bench_cli.hpp"
#include "bench/bench_common.hpp"
#include "bench/bench_pg.hpp"

namespace mm::e2e_bench {

using namespace mm::bench;

namespace {

// -- options ------------------------------------------------------------------

struct options {
  std::string store = "embedded"; ///< embedded | redis
  std::string db = "memory";      ///< memory | postgres
  std::string redis_host = "127.0.0.1";
  uint16_t redis_port = 0;
  std::string redis_dir;
  std::string pg;     ///< admin conninfo (a fresh database is made there)
  std::string pg_dir; ///< or the directory of postgres_server.sh
  size_t users = 0;   ///< 0: 100000 embedded+memory, else 40000
  size_t queues = 8;
  size_t in_flight = 2000;
  double rate = 0; ///< joins/s; 0: as fast as --in-flight allows
  size_t sched_threads = 2;
  std::string sched_policy = "stealing"; ///< CAF scheduler policy
  size_t drivers = 2;
  double duration_s = 60;   ///< bound on the joining phase
  double drain_s = 10;      ///< bound on the wait for matches after it
  uint32_t relay_batch = 0; ///< relay_config::batch; 0: the engine's
  std::string label;        ///< tag of the output lines
  bool keep_database = false;
  bool progress = true;
};

// -- what main and the drivers share ------------------------------------------

/// Counters the main thread polls while the drivers run. Per queue: users
/// joined and users settled (matched, or failed: no match will come).
struct shared_counts {
  explicit shared_counts(size_t queues)
    : joined_q(new std::atomic<uint64_t>[queues]),
      settled_q(new std::atomic<uint64_t>[queues]) {
    for (size_t q = 0; q < queues; ++q) {
      joined_q[q] = 0;
      settled_q[q] = 0;
    }
  }

  std::atomic<bool> stop{false}; ///< set by main: no more joins
  std::atomic<uint64_t> joined{0};
  std::atomic<uint64_t> matched{0};
  std::unique_ptr<std::atomic<uint64_t>[]> joined_q;
  std::unique_ptr<std::atomic<uint64_t>[]> settled_q;
};

/// One user as its driver saw it.
struct user_rec {
  uint64_t join_ns = 0;  ///< join sent; 0: never joined
  uint64_t event_ns = 0; ///< its first match_event reached the driver
  uint64_t state_ns = 0; ///< its session reported `matched`
  uint32_t events = 0;   ///< match events from its session (deduped there)
  bool settled = false;  ///< matched, or failed
  session_phase phase = session_phase::idle; ///< last state reported
  std::string event_id, session_id, queue, user_a, user_b; ///< first event
  std::string state_session; ///< session id of the `matched` state
  std::string detail;        ///< failed: why
};

/// What a driver hands over at the end (after its report message).
struct driver_report {
  std::vector<user_rec> users; ///< local index k: user first + k * step
  uint64_t join_errors = 0, unknown_senders = 0, failed = 0;
  std::string first_error;
};

struct driver_state {
  std::shared_ptr<engine> eng;
  std::shared_ptr<shared_counts> sh;
  subscriber_actor me;
  std::string prefix;
  std::vector<std::string> queue_names;
  size_t first = 0, step = 1; ///< users first, first + step, ...
  size_t limit = 1;           ///< users in flight
  double rate = 0;            ///< joins/s of this driver; 0: no pacing
  uint64_t start_ns = 0;
  bool tick_armed = false;
  size_t next = 0, outstanding = 0;
  std::unordered_map<caf::actor_id, uint32_t> by_actor; ///< session -> k
  driver_report rep;
  static inline const char* name = "e2e_driver";
};

using driver_ptr = caf::stateful_actor<driver_state>*;

std::string user_name(const std::string& prefix, size_t i) {
  return prefix + "u" + std::to_string(i);
}

/// The record of the user whose session sent the current message; null
/// (counted) when no session of ours sent it.
user_rec* sender_rec(driver_ptr self) {
  auto& st = self->state;
  auto& from = self->current_sender();
  if (from) {
    auto i = st.by_actor.find(from->id());
    if (i != st.by_actor.end())
      return &st.rep.users[i->second];
  }
  ++st.rep.unknown_senders;
  return nullptr;
}

size_t queue_of(const driver_state& st, const user_rec& r) {
  auto k = static_cast<size_t>(&r - st.rep.users.data());
  return (st.first + k * st.step) % st.queue_names.size();
}

void pump(driver_ptr self);

/// The user will not be matched any more (matched or failed): frees its
/// in-flight slot.
void settle(driver_ptr self, user_rec& r) {
  auto& st = self->state;
  if (r.settled)
    return;
  r.settled = true;
  --st.outstanding;
  st.sh->settled_q[queue_of(st, r)].fetch_add(1, std::memory_order_relaxed);
  pump(self);
}

void join(driver_ptr self, size_t k) {
  auto& st = self->state;
  auto i = st.first + k * st.step;
  auto q = i % st.queue_names.size();
  auto session = st.eng->session(user_name(st.prefix, i), st.me);
  st.by_actor.emplace(session.id(), static_cast<uint32_t>(k));
  ++st.outstanding;
  st.sh->joined.fetch_add(1, std::memory_order_relaxed);
  st.sh->joined_q[q].fetch_add(1, std::memory_order_relaxed);
  st.rep.users[k].join_ns = steady_ns();
  self
    ->request(session, caf::infinite, join_atom_v,
              join_request{st.queue_names[q], "t" + std::to_string(i), "{}"})
    .then(
      [](session_state&) {
        // The state after the first step; the subscriber hears it too.
      },
      [self, k](caf::error& err) {
        auto& st = self->state;
        if (st.rep.join_errors++ == 0)
          st.rep.first_error = "join: " + self->system().render(err);
        settle(self, st.rep.users[k]);
      });
}

/// Joins users while the in-flight bound and the pacing allow.
void pump(driver_ptr self) {
  auto& st = self->state;
  if (st.sh->stop.load(std::memory_order_relaxed))
    return;
  auto n = st.rep.users.size();
  auto due = n;
  if (st.rate > 0) {
    auto elapsed = static_cast<double>(steady_ns() - st.start_ns) / 1e9;
    due = std::min(n, static_cast<size_t>(st.rate * elapsed) + 1);
  }
  while (st.next < due && st.outstanding < st.limit)
    join(self, st.next++);
  if (st.next < n && st.next >= due && !st.tick_armed) {
    // Paced: come back when the next join is due (the timer's resolution
    // is about a millisecond; a late tick joins what fell due meanwhile).
    st.tick_armed = true;
    self->delayed_send(self, std::chrono::milliseconds(1), tick_atom_v);
  }
}

caf::behavior driver(driver_ptr self, std::shared_ptr<engine> eng,
                     std::shared_ptr<shared_counts> sh, std::string prefix,
                     std::vector<std::string> queue_names, size_t first,
                     size_t step, size_t count, size_t limit, double rate,
                     driver_report* out) {
  auto& st = self->state;
  st.eng = std::move(eng);
  st.sh = std::move(sh);
  st.me = caf::actor_cast<subscriber_actor>(self);
  st.prefix = std::move(prefix);
  st.queue_names = std::move(queue_names);
  st.first = first;
  st.step = step;
  st.limit = std::max<size_t>(1, limit);
  st.rate = rate;
  st.rep.users.resize(count);
  st.by_actor.reserve(count);
  st.start_ns = steady_ns();
  pump(self);
  return {
    [self](session_state& s) {
      auto* r = sender_rec(self);
      if (r == nullptr)
        return;
      r->phase = s.phase;
      if (s.phase == session_phase::matched && r->state_ns == 0) {
        r->state_ns = steady_ns();
        r->state_session = s.session_id;
      } else if (s.phase == session_phase::failed) {
        auto& rep = self->state.rep;
        if (rep.failed++ == 0 && rep.first_error.empty())
          rep.first_error = "failed: " + s.detail;
        r->detail = s.detail;
        if (r->events == 0)
          settle(self, *r);
      }
    },
    [self](match_event& ev) {
      auto* r = sender_rec(self);
      if (r == nullptr)
        return;
      if (r->events++ > 0)
        return; // a second event (a violation, counted at the end)
      r->event_ns = steady_ns();
      r->event_id = std::move(ev.event_id);
      r->session_id = std::move(ev.session_id);
      r->queue = std::move(ev.queue);
      r->user_a = std::move(ev.user_a);
      r->user_b = std::move(ev.user_b);
      self->state.sh->matched.fetch_add(1, std::memory_order_relaxed);
      settle(self, *r);
    },
    [self](tick_atom) {
      self->state.tick_armed = false;
      pump(self);
    },
    [self, out](flush_atom) {
      // The report: everything this driver saw, handed over by move; the
      // answer orders it before the main thread reads it.
      *out = std::move(self->state.rep);
      self->quit();
      return uint32_t{1};
    },
  };
}

// -- where the time goes ------------------------------------------------------

/// What a thread of this process is, by its name. CAF 0.17.6 names its
/// scheduler workers after the multiplexer and every detached actor
/// "caf.actor" (here: the store workers with their blocking connections).
std::string thread_label(const std::string& comm) {
  if (comm == "caf.multiplexer")
    return "scheduler workers";
  if (comm == "caf.actor")
    return "detached store workers";
  if (comm == "caf.clock")
    return "timers (caf.clock)";
  return comm.empty() ? "?" : comm;
}

/// CPU (ns) of this process's threads, summed by `thread_label`.
std::map<std::string, uint64_t> cpu_by_thread_label() {
  std::map<std::string, uint64_t> out;
  for (auto& [tid, ns] : thread_cpu_ns()) {
    std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
    std::string comm;
    std::getline(in, comm);
    out[thread_label(comm)] += ns;
  }
  return out;
}

/// "scheduler workers 1.20 s (60% of a core), ...": the CPU of each label
/// between two samples (threads that ended meanwhile are missing from `b`).
std::string describe_cpu(const std::map<std::string, uint64_t>& a,
                         const std::map<std::string, uint64_t>& b,
                         double dt) {
  std::vector<std::pair<uint64_t, std::string>> d;
  for (auto& [label, ns] : b) {
    auto i = a.find(label);
    auto was = i != a.end() ? std::min(i->second, ns) : 0;
    if (ns > was)
      d.emplace_back(ns - was, label);
  }
  std::sort(d.rbegin(), d.rend());
  std::string out;
  for (auto& [ns, label] : d) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s%s %.2f s (%.0f%% of a core)",
                  out.empty() ? "" : ", ", label.c_str(),
                  static_cast<double>(ns) / 1e9,
                  100.0 * static_cast<double>(ns) / (dt * 1e9));
    out += buf;
  }
  return out;
}

/// Calls and time inside each command, from Redis INFO commandstats
/// ("cmdstat_evalsha:calls=N,usec=U,...").
struct command_stat {
  uint64_t calls = 0, usec = 0;
};

std::map<std::string, command_stat> redis_commandstats(queue_store& conn) {
  std::map<std::string, command_stat> out;
  auto r = conn.execute({{"INFO", "commandstats"}});
  if (r.empty() || r[0].code != errc::none)
    return out;
  std::istringstream in(r[0].value.str);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cmdstat_", 0) != 0)
      continue;
    auto colon = line.find(':');
    if (colon == std::string::npos)
      continue;
    command_stat st;
    std::istringstream fields(line.substr(colon + 1));
    for (std::string kv; std::getline(fields, kv, ',');) {
      auto eq = kv.find('=');
      if (eq == std::string::npos)
        continue;
      auto key = kv.substr(0, eq);
      if (key == "calls")
        st.calls = std::stoull(kv.substr(eq + 1));
      else if (key == "usec")
        st.usec = std::stoull(kv.substr(eq + 1));
    }
    out[line.substr(8, colon - 8)] = st;
  }
  return out;
}

/// Everything sampled at the start and at the end of the measured span.
struct sample {
  double t = 0;
  uint64_t self_ns = 0, redis_ns = 0, pg_ns = 0, machine_ns = 0;
  std::map<std::string, uint64_t> threads;
  uint64_t redis_reads = 0; ///< socket reads Redis served (round trips)
  std::map<std::string, command_stat> redis_cmds;
};

struct run_env {
  const options& o;
  std::unique_ptr<queue_store> redis_admin; ///< INFO; null: embedded store
  int postmaster = 0;

  sample take() const {
    sample s;
    s.t = now_s();
    s.self_ns = process_cpu_ns();
    s.pg_ns = server_cpu_ns(postmaster);
    s.machine_ns = machine_busy_ns();
    s.threads = cpu_by_thread_label();
    if (redis_admin) {
      s.redis_ns = redis_cpu_ns(*redis_admin);
      s.redis_reads = static_cast<uint64_t>(
        redis_info(*redis_admin, "stats")["total_reads_processed"]);
      s.redis_cmds = redis_commandstats(*redis_admin);
    }
    return s;
  }
};

/// Redis commands per match between two samples: the engine's own calls
/// (EVALSHA, XADD) apart from the commands its scripts run (INFO
/// commandstats counts those too); the INFO calls of this bench left out.
struct command_figures {
  double evalsha = 0, evalsha_us = 0; ///< per match; server time per call
  double xadd = 0, other_top = 0;     ///< per match
  double inner = 0;                   ///< per match, inside the scripts
  std::string inner_top;              ///< "hget 7.00, hset 5.00, ..."
};

command_figures count_commands(const sample& a, const sample& b,
                               double matches) {
  command_figures out;
  std::vector<std::pair<uint64_t, std::string>> inner;
  for (auto& [name, st] : b.redis_cmds) {
    auto i = a.redis_cmds.find(name);
    auto was = i != a.redis_cmds.end() ? i->second : command_stat{};
    if (name == "info" || st.calls <= was.calls)
      continue;
    auto n = static_cast<double>(st.calls - was.calls);
    if (name == "evalsha" || name == "eval") {
      out.evalsha += n / matches;
      out.evalsha_us += static_cast<double>(st.usec - was.usec);
    } else if (name == "xadd") {
      out.xadd += n / matches;
    } else if (name == "script" || name == "unlink" || name == "ping") {
      out.other_top += n / matches;
    } else {
      out.inner += n / matches;
      inner.emplace_back(st.calls - was.calls, name);
    }
  }
  if (out.evalsha > 0)
    out.evalsha_us /= out.evalsha * matches;
  std::sort(inner.rbegin(), inner.rend());
  for (size_t k = 0; k < inner.size() && k < 6; ++k) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%s%s %.2f", k == 0 ? "" : ", ",
                  inner[k].second.c_str(),
                  static_cast<double>(inner[k].first) / matches);
    out.inner_top += buf;
  }
  return out;
}

// -- the run ------------------------------------------------------------------

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

/// A session as its users' events told of it.
struct session_seen {
  std::string event_id, queue, user_a, user_b;
  std::vector<size_t> receivers; ///< users whose session forwarded it
  bool two_events = false;       ///< receivers got different event ids
};

/// What the PostgreSQL backends of the run's database were doing, sampled
/// while it ran, by the kind of connection (told by the statements it was
/// seen running).
struct pg_activity {
  std::map<std::string, std::map<std::string, uint64_t>> states; ///< by kind
  std::map<std::string, std::string> kind_of;                     ///< by pid
  uint64_t samples = 0;

  void take(pg_conn& admin, const std::string& db) {
    static const std::string kind_sql
      = "CASE WHEN query LIKE '%jsonb_to_recordset%' OR query LIKE "
        "'%NOTIFY%' THEN 'finalizer' WHEN query LIKE 'LISTEN%' THEN "
        "'relay listen' WHEN query LIKE '%outbox%' THEN 'relay' ELSE '' END";
    auto rows = admin.query(std::string{"SELECT pid, "} + backend_state_sql
                            + ", " + kind_sql
                            + " FROM pg_stat_activity WHERE datname = '" + db
                            + "' AND backend_type = 'client backend'");
    ++samples;
    for (auto& row : rows) {
      auto& kind = kind_of[row[0]];
      if (kind.empty())
        kind = row[2];
      ++states[row[0]][row[1]];
    }
  }

  /// "finalizer (2 conn): ClientRead 50%, ... | relay (1 conn): ...".
  std::string describe() const {
    std::map<std::string, std::map<std::string, uint64_t>> by_kind;
    std::map<std::string, size_t> conns;
    for (auto& [pid, st] : states) {
      auto i = kind_of.find(pid);
      auto kind = i == kind_of.end() || i->second.empty() ? "unclassified"
                                                          : i->second;
      ++conns[kind];
      for (auto& [state, n] : st)
        by_kind[kind][state] += n;
    }
    std::string out;
    for (auto& [kind, st] : by_kind)
      out += (out.empty() ? "" : " | ") + kind + " ("
             + std::to_string(conns[kind])
             + " conn): " + describe_shares(st, 2.0);
    return out.empty() ? "no samples" : out;
  }
};

int run(const options& o, const std::string& tag) {
  // The stores' "applied migration" lines would interleave with the figures.
  spdlog::set_level(spdlog::level::warn);
  run_env e{o, nullptr, 0};
  const bool redis = o.store == "redis";
  const bool pg = o.db == "postgres";
  auto prefix = "e2e" + std::to_string(getpid()) + "-";

  std::unique_ptr<pg_conn> admin;
  std::string db, conninfo;
  if (pg) {
    admin = std::make_unique<pg_conn>(o.pg);
    e.postmaster = postmaster_of(*admin);
    db = "mm_e2e_" + std::to_string(getpid());
    create_database(*admin, db);
    conninfo = with_dbname(o.pg, db);
  }
  redis_options ro;
  ro.host = o.redis_host;
  ro.port = o.redis_port;
  if (redis)
    e.redis_admin = make_redis_store(ro)->connect();

  caf::actor_system_config cfg;
  configure(cfg, o.sched_threads);
  cfg.set("scheduler.policy", o.sched_policy == "sharing"
                                ? caf::atom("sharing")
                                : caf::atom("stealing"));
  // Reset before the database checks: its destructor waits for every actor,
  // the engine's detached database workers (and their connections) too.
  auto sys = std::make_unique<caf::actor_system>(cfg);

  engine_config ec;
  ec.node = "e2e-" + std::to_string(getpid());
  ec.use_redis = redis;
  ec.redis = ro;
  ec.use_postgres = pg;
  ec.postgres.conninfo = conninfo;
  // A stream of this run's own, removed afterwards (runs share a Redis).
  ec.relay.stream = "mm:" + prefix + "events";
  if (o.relay_batch > 0)
    ec.relay.batch = o.relay_batch;
  auto started = engine::start(*sys, ec);
  if (!started) {
    std::fprintf(stderr, "engine::start: %s\n",
                 started.error().detail.c_str());
    return 1;
  }
  auto eng = *started;
  const auto ecfg = eng->config();

  const auto users = o.users;
  const auto queues = o.queues;
  std::vector<std::string> queue_names;
  for (size_t q = 0; q < queues; ++q)
    queue_names.push_back(prefix + "q" + std::to_string(q));
  const auto drivers = std::min(std::max<size_t>(1, o.drivers), users);

  auto pacing = o.rate > 0 ? std::to_string(std::llround(o.rate)) + " joins/s"
                           : std::string{"unpaced"};
  auto where = pg ? " (database " + db + ")" : std::string{};
  std::printf("# e2e_bench [%s]: %u cores, store=%s db=%s%s, %zu users in %zu "
              "queues, %zu in flight, rate %s, %zu driver actors, CAF "
              "scheduler threads=%zu (%s) | broker workers=%u max_batch=%u, "
              "finalizer batch_max=%u delay=%u ms workers=%u, relay batch=%u "
              "poll=%u ms\n",
              tag.c_str(), std::thread::hardware_concurrency(),
              o.store.c_str(), o.db.c_str(), where.c_str(), users, queues,
              o.in_flight, pacing.c_str(), drivers, o.sched_threads,
              o.sched_policy.c_str(), ecfg.broker.workers,
              ecfg.broker.max_batch,
              ecfg.finalizer.batch_max, ecfg.finalizer.batch_delay_ms,
              ecfg.finalizer.workers, ecfg.relay.batch, ecfg.relay.poll_ms);
  std::fflush(stdout);

  // -- drive ------------------------------------------------------------------
  auto sh = std::make_shared<shared_counts>(queues);
  std::vector<driver_report> reports(drivers);
  std::vector<caf::actor> drvs;
  pg_activity activity;
  auto s0 = e.take();
  for (size_t d = 0; d < drivers; ++d) {
    auto count = (users - d + drivers - 1) / drivers;
    auto limit = (o.in_flight + drivers - 1 - d) / drivers;
    drvs.push_back(sys->spawn(driver, eng, sh, prefix, queue_names, d,
                              drivers, count, limit,
                              o.rate / static_cast<double>(drivers),
                              &reports[d]));
  }
  // Until every user joined and every queue settled, or the bounds passed.
  auto t0 = s0.t;
  auto last_report = t0, last_pg = t0;
  uint64_t last_matched = 0;
  bool bounded = false, drained = true;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto now = now_s();
    auto joined = sh->joined.load();
    if ((joined == users || sh->stop) && all_settled(*sh, queues))
      break;
    if (!sh->stop && now - t0 > o.duration_s) {
      sh->stop = true;
      bounded = true;
      std::printf("[%s] --duration %.0f s passed: no more joins (%" PRIu64
                  " of %zu joined), waiting up to %.0f s for their "
                  "matches\n",
                  tag.c_str(), o.duration_s, joined, users, o.drain_s);
    }
    if (sh->stop && now - t0 > o.duration_s + o.drain_s) {
      drained = false;
      break;
    }
    if (pg && now - last_pg >= 0.02) {
      activity.take(*admin, db);
      last_pg = now;
    }
    if (o.progress && now - last_report >= 1.0) {
      auto matched = sh->matched.load();
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
  sh->stop = true;
  auto s1 = e.take();

  auto self = std::make_unique<caf::scoped_actor>(*sys);
  for (auto& d : drvs)
    (*self)
      ->request(d, std::chrono::seconds(30), flush_atom_v)
      .receive([](uint32_t) {},
               [&](caf::error& err) {
                 throw std::runtime_error("driver report: "
                                          + sys->render(err));
               });

  // -- merge ------------------------------------------------------------------
  std::vector<const user_rec*> recs(users, nullptr);
  uint64_t join_errors = 0, unknown = 0, failed = 0;
  std::string first_error;
  for (size_t d = 0; d < drivers; ++d) {
    auto& rep = reports[d];
    for (size_t k = 0; k < rep.users.size(); ++k)
      recs[d + k * drivers] = &rep.users[k];
    join_errors += rep.join_errors;
    unknown += rep.unknown_senders;
    failed += rep.failed;
    if (first_error.empty())
      first_error = rep.first_error;
  }
  // Users by name (events name their users).
  std::unordered_map<std::string, size_t> index_of;
  index_of.reserve(users);
  for (size_t i = 0; i < users; ++i)
    index_of.emplace(user_name(prefix, i), i);

  problem_list problems;
  auto expect = [&](const std::string& what, uint64_t got, uint64_t want) {
    problems.expect(what, got, want);
  };
  uint64_t joined = 0, two_events = 0, not_named = 0, state_mismatch = 0,
           not_matched_state = 0, wrong_queue = 0;
  uint64_t first_join = UINT64_MAX, last_join = 0, last_event = 0;
  // ttm_state: join -> the session's `matched` state; relay: for a
  // claimer (its state comes with the finalizer's answer, before the
  // event), that state -> its match_event: commit to delivery.
  std::vector<uint64_t> ttm, ttm_state, relay;
  ttm.reserve(users);
  ttm_state.reserve(users);
  std::unordered_map<std::string, session_seen> sessions;
  sessions.reserve(users / 2 + 1);
  std::vector<std::vector<size_t>> waiting(queues); ///< joined, no event
  for (size_t i = 0; i < users; ++i) {
    auto& r = *recs[i];
    if (r.join_ns == 0)
      continue;
    ++joined;
    first_join = std::min(first_join, r.join_ns);
    last_join = std::max(last_join, r.join_ns);
    if (r.state_ns != 0)
      ttm_state.push_back(r.state_ns - r.join_ns);
    if (r.events == 0) {
      if (r.phase != session_phase::failed)
        waiting[i % queues].push_back(i);
      continue;
    }
    last_event = std::max(last_event, r.event_ns);
    ttm.push_back(r.event_ns - r.join_ns);
    if (r.state_ns != 0 && r.state_ns < r.event_ns)
      relay.push_back(r.event_ns - r.state_ns);
    if (r.events > 1)
      ++two_events;
    auto me = user_name(prefix, i);
    if (r.user_a != me && r.user_b != me)
      ++not_named;
    if (r.phase != session_phase::matched)
      ++not_matched_state;
    else if (r.state_session != r.session_id)
      ++state_mismatch;
    if (r.queue != queue_names[i % queues])
      ++wrong_queue;
    auto& s = sessions[r.session_id];
    if (s.receivers.empty()) {
      s.event_id = r.event_id;
      s.queue = r.queue;
      s.user_a = r.user_a;
      s.user_b = r.user_b;
    } else if (s.event_id != r.event_id) {
      s.two_events = true;
    }
    s.receivers.push_back(i);
  }
  uint64_t one_sided = 0, other_receivers = 0, split_events = 0,
           cross_queue = 0;
  std::vector<uint32_t> sessions_of(users, 0);
  for (auto& [sid, s] : sessions) {
    if (s.two_events)
      ++split_events;
    if (s.receivers.size() != 2)
      ++one_sided;
    for (auto i : s.receivers) {
      auto me = user_name(prefix, i);
      if (me != s.user_a && me != s.user_b)
        ++other_receivers;
    }
    auto a = index_of.find(s.user_a);
    auto b = index_of.find(s.user_b);
    if (a == index_of.end() || b == index_of.end() || a->second == b->second
        || a->second % queues != b->second % queues) {
      ++cross_queue;
      continue;
    }
    ++sessions_of[a->second];
    ++sessions_of[b->second];
  }
  uint64_t double_booked = 0;
  for (auto n : sessions_of)
    if (n > 1)
      ++double_booked;
  // The users left without a match: at most one per queue, and waiting.
  uint64_t too_many_waiting = 0, waiting_total = 0;
  std::map<std::string, uint64_t> waiting_phases;
  for (auto& ws : waiting) {
    waiting_total += ws.size();
    if (ws.size() > 1)
      too_many_waiting += ws.size() - 1;
    for (auto i : ws) {
      std::string phase = "no answer";
      (*self)
        ->request(eng->session(user_name(prefix, i)), std::chrono::seconds(5),
                  state_atom_v)
        .receive([&](session_state& st) { phase = to_string(st.phase); },
                 [&](caf::error&) {});
      ++waiting_phases[phase];
    }
  }
  uint64_t not_queued = waiting_total - waiting_phases["queued"];
  waiting_phases.erase("queued");
  auto m = eng->metrics();
  uint64_t engine_matches = m->matches.load();
  auto claims = m->claims.load();
  auto conflicts = m->conflicts.load();
  auto relay_retries = m->relay_retries.load();
  auto requeues = m->requeues.load();
  auto delivered = m->events_delivered.load();

  // Stop the engine, then the actor system (it waits for every actor).
  {
    auto relay = eng->relay();
    auto fin = eng->finalizer();
    auto broker = eng->broker();
    auto dir = eng->directory();
    eng->stop();
    (*self)->wait_for(relay, fin, broker, dir);
  }
  self.reset();
  drvs.clear();
  eng.reset();
  sys.reset();
  if (redis)
    e.redis_admin->execute({{"UNLINK", ec.relay.stream}});

  expect("users that never joined (--duration bound)",
         bounded ? 0 : users - joined, 0);
  expect("users with two match events (two sessions)", two_events, 0);
  expect("users whose event does not name them", not_named, 0);
  expect("users with an event whose session did not end matched",
         not_matched_state, 0);
  expect("users whose matched state names another session",
         state_mismatch, 0);
  expect("users matched in another queue than theirs", wrong_queue, 0);
  expect("sessions not heard of by exactly two users", one_sided, 0);
  expect("sessions whose users got different event ids", split_events, 0);
  expect("events reaching a user they do not name", other_receivers, 0);
  expect("sessions pairing unknown users, a user with itself or two queues",
         cross_queue, 0);
  expect("users in two sessions", double_booked, 0);
  expect("unmatched users beyond one per queue", too_many_waiting, 0);
  expect("unmatched users whose session is not queued", not_queued, 0);
  expect("failed joins (session state failed)", failed, 0);
  expect("join requests answered with an error", join_errors, 0);
  expect("messages from sessions not ours", unknown, 0);
  expect("engine match counter vs sessions seen", engine_matches,
         sessions.size());
  uint64_t xacts = 0;
  if (pg) {
    pg_conn check{conninfo};
    auto rows = check.count("SELECT count(*) FROM match_sessions");
    auto outbox = check.count(
      "SELECT count(*) FROM outbox WHERE type = 'match.created'");
    auto booked = check.count(
      "SELECT count(*) FROM (SELECT user_id FROM session_members WHERE "
      "active GROUP BY user_id HAVING count(*) > 1) x");
    expect("database sessions vs sessions seen", rows, sessions.size());
    expect("database match.created events vs sessions seen", outbox,
           sessions.size());
    expect("database: users in two active sessions", booked, 0);
    std::printf("[%s]   database %s: %" PRIu64 " sessions, %" PRIu64
                " match.created events, %" PRIu64 " users in two active "
                "sessions\n",
                tag.c_str(), db.c_str(), rows, outbox, booked);
    // Transactions of the whole run: the engine's connections are closed,
    // so every backend has reported its counts.
    admin->query("SELECT pg_stat_clear_snapshot()");
    xacts = admin->count("SELECT xact_commit + xact_rollback FROM "
                         "pg_stat_database WHERE datname = '" + db + "'");
  }

  // -- figures ----------------------------------------------------------------
  auto n_sessions = static_cast<double>(sessions.size());
  auto span = last_event > first_join
                ? static_cast<double>(last_event - first_join) / 1e9
                : 0.0;
  auto matches_per_s = span > 0 ? n_sessions / span : 0.0;
  auto join_span
    = static_cast<double>(last_join - std::min(first_join, last_join)) / 1e9;
  auto p50 = percentile_ms(ttm, 0.50), p95 = percentile_ms(ttm, 0.95),
       p99 = percentile_ms(ttm, 0.99), max = percentile_ms(ttm, 1.0);
  auto sp50 = percentile_ms(ttm_state, 0.50),
       sp99 = percentile_ms(ttm_state, 0.99);
  auto rp50 = percentile_ms(relay, 0.50), rp99 = percentile_ms(relay, 0.99);
  auto dt = s1.t - s0.t;
  auto per_match = std::max(1.0, n_sessions);
  auto per_match_us = [&](uint64_t a, uint64_t b) {
    return static_cast<double>(b - a) / per_match / 1e3;
  };
  auto busy = [&](uint64_t a, uint64_t b) {
    return 100.0 * static_cast<double>(b - a) / (dt * 1e9);
  };
  auto cores = std::max(1u, std::thread::hardware_concurrency());
  auto ours = (s1.self_ns - s0.self_ns) + (s1.redis_ns - s0.redis_ns)
              + (s1.pg_ns - s0.pg_ns);
  auto all = s1.machine_ns - s0.machine_ns;
  std::printf("[%s] %" PRIu64 " of %zu users joined in %.2f s (%.0f "
              "joins/s), %zu matches, %" PRIu64 " users waiting; first join "
              "to last match event %.2f s: %.0f matches/s%s\n",
              tag.c_str(), joined, users, join_span,
              join_span > 0 ? static_cast<double>(joined) / join_span : 0.0,
              sessions.size(), waiting_total, span, matches_per_s,
              drained ? "" : " (DRAIN BOUND PASSED)");
  std::printf("[%s]   time-to-match (join sent -> match_event at the "
              "subscriber, %zu users): p50 %.2f ms p95 %.2f ms p99 %.2f ms "
              "max %.2f ms | to the session's matched state: p50 %.2f ms "
              "p99 %.2f ms | claimer's commit answer -> its event (the "
              "relay, %zu users): p50 %.2f ms p99 %.2f ms\n",
              tag.c_str(), ttm.size(), p50, p95, p99, max, sp50, sp99,
              relay.size(), rp50, rp99);
  std::printf("[%s]   cpu per match: bench process %.1f us, redis %.1f us, "
              "postgres %.1f us | busy (%% of one core) over %.2f s: bench "
              "%.0f%%, redis %.0f%%, postgres %.0f%%; machine %.0f%% of %u "
              "cores, other processes %.0f%% of one core\n",
              tag.c_str(), per_match_us(s0.self_ns, s1.self_ns),
              per_match_us(s0.redis_ns, s1.redis_ns),
              per_match_us(s0.pg_ns, s1.pg_ns), dt,
              busy(s0.self_ns, s1.self_ns), busy(s0.redis_ns, s1.redis_ns),
              busy(s0.pg_ns, s1.pg_ns), busy(0, all) / cores, cores,
              all > ours ? busy(ours, all) : 0.0);
  {
    // Everything else on the machine shows in "other processes"; the
    // ceiling is what our measured CPU cost per match allows on all cores.
    auto cost = static_cast<double>(ours) / per_match;
    std::printf("[%s]   CPU ceiling at this cost: %u cores / %.1f us = %.0f "
                "matches/s (measured: %.0f%% of it)\n",
                tag.c_str(), cores, cost / 1e3, cores * 1e9 / cost,
                100.0 * matches_per_s * cost / (cores * 1e9));
  }
  std::printf("[%s]   bench threads: %s\n", tag.c_str(),
              describe_cpu(s0.threads, s1.threads, dt).c_str());
  if (redis) {
    auto c = count_commands(s0, s1, per_match);
    auto calls = (c.evalsha + c.xadd + c.other_top) * per_match;
    auto reads = static_cast<double>(s1.redis_reads - s0.redis_reads);
    std::printf("[%s]   redis per match: %.2f EVALSHA (%.1f us each inside "
                "the server, their script's commands included), %.2f XADD, "
                "%.2f other calls; the scripts ran %.1f commands (%s); %.2f "
                "socket reads (%.1f calls per read: the pipelining)\n",
                tag.c_str(), c.evalsha, c.evalsha_us, c.xadd, c.other_top,
                c.inner, c.inner_top.c_str(), reads / per_match,
                reads > 0 ? calls / reads : 0.0);
  }
  if (pg) {
    std::printf("[%s]   postgres: %.3f transactions per match (whole run) | "
                "backends (pg_stat_activity every 20 ms, %" PRIu64
                " samples): %s\n",
                tag.c_str(), static_cast<double>(xacts) / per_match,
                activity.samples, activity.describe().c_str());
  }
  std::printf("[%s]   engine counters: %" PRIu64 " claim scripts (%.2f per "
              "match), %" PRIu64 " matches, %" PRIu64 " events delivered, %"
              PRIu64 " relay retries, %" PRIu64 " conflicts, %" PRIu64
              " requeues\n",
              tag.c_str(), claims, static_cast<double>(claims) / per_match,
              engine_matches, delivered, relay_retries, conflicts, requeues);
  if (!waiting_phases.empty())
    std::printf("[%s]   unmatched users not queued: %s\n", tag.c_str(),
                describe_shares(waiting_phases, 0).c_str());
  problems.print(tag);
  if (!first_error.empty())
    std::printf("[%s]   first error: %s\n", tag.c_str(), first_error.c_str());
  std::printf("e2e_embed store=%s db=%s users=%zu joined=%" PRIu64
              " matches=%zu matches_per_s=%.1f p50_ms=%.2f p95_ms=%.2f "
              "p99_ms=%.2f max_ms=%.2f violations=%zu cpu_s=%.2f "
              "redis_cpu_s=%.2f pg_cpu_s=%.2f rate=%.0f in_flight=%zu\n",
              o.store.c_str(), o.db.c_str(), users, joined, sessions.size(),
              matches_per_s, p50, p95, p99, max, problems.size(),
              static_cast<double>(s1.self_ns - s0.self_ns) / 1e9,
              static_cast<double>(s1.redis_ns - s0.redis_ns) / 1e9,
              static_cast<double>(s1.pg_ns - s0.pg_ns) / 1e9, o.rate,
              o.in_flight);
  std::fflush(stdout);
  if (pg && !o.keep_database)
    drop_database(*admin, db);
  return problems.empty() ? 0 : 1;
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
  app.add_option("--in-flight", o.in_flight,
                 "users joined but not yet matched, at most")
    ->check(CLI::Range(1, 100000000))
    ->capture_default_str();
  app.add_option("--rate", o.rate,
                 "joins per second (0: as fast as --in-flight allows)")
    ->check(CLI::NonNegativeNumber)
    ->capture_default_str();
  app.add_option("--sched-threads", o.sched_threads,
                 "CAF scheduler threads (0: CAF default)")
    ->capture_default_str();
  app.add_option("--sched-policy", o.sched_policy, "CAF scheduler policy")
    ->check(CLI::IsMember({"stealing", "sharing"}))
    ->capture_default_str();
  app.add_option("--drivers", o.drivers, "driver actors (subscribers)")
    ->check(CLI::Range(1, 64))
    ->capture_default_str();
  app.add_option("--duration", o.duration_s,
                 "bound in seconds on the joining phase")
    ->capture_default_str();
  app.add_option("--drain", o.drain_s,
                 "seconds to wait for matches after the --duration bound")
    ->capture_default_str();
  app.add_option("--relay-batch", o.relay_batch,
                 "outbox relay batch (events per cycle; 0: the engine's "
                 "default)")
    ->capture_default_str();
  app.add_option("--label", o.label, "tag of the output lines");
  app.add_flag("--keep-database", o.keep_database,
               "keep the run's database for inspection");
  app.add_flag("!--no-progress", o.progress,
               "no per-second progress lines");
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
