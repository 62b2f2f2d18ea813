// swipe_bench: mutual swipes per second through the engine's swipe actor
// (engine::swipes(), problem 6 of docs/design.md), one lock per unordered pair against
// ONE lock shared by every pair (pair_lock_config::global, the baseline).
//
// Every variant gets a fresh database (CREATE DATABASE; engine::start applies
// the migrations) and a fresh engine on the private Redis (the pair lock's
// lease) and PostgreSQL (likes, mutual_matches, the match through the
// finalizer's group commit). One driver actor keeps N swipes in flight
// (`swipe_atom, swipe_request{from, to, true}`) and counts what comes back in
// the measured window:
//
//   pairs  distinct pairs: a pair's first swipe A->B, once answered its
//          B->A (--order cross: both at once), then the next fresh pair.
//          Every completed pair is one mutual like and creates one match.
//   hot    ONE pair hammered by every swipe in flight, directions
//          alternating: it matches once; every later swipe sees it matched.
//
// Per variant: swipes/s, matches/s (swipes that answered created=true),
// mutual pairs/s, swipe latency p50/p99 (request to answer: lock wait, the
// swipe's transaction, the match's group commit, the release), conflicts
// (the lock's wait bound passed: `mm::errc::conflict`, nothing written) and
// other errors apart. Where the time goes (perf is not available here): CPU
// of this process, of the PostgreSQL server (/proc) and of Redis (INFO cpu),
// Redis commands per swipe (INFO stats), PostgreSQL transactions per swipe
// (pg_stat_database) and what the variant's backends are doing
// (pg_stat_activity every 20 ms, split into the swipe actor's connections
// and the finalizer's by the statements they were seen running).
//
// After each variant the database is checked: every pair liked both ways
// has exactly one mutual_matches row, one session (of that pair, members
// inactive) and one match.created outbox event; nothing else exists; the
// answers agree with it (created answers = sessions, every mutual answer
// names the pair's session, one like row per OK swipe of distinct pairs: a
// conflict wrote nothing). Any failed check is a VIOLATION (exit 1).
//
// A label given more than once runs again and counts with its best run. The
// last line is `swipe_ratio_vs_global_lock=X.XX` (--ratio A,B: A's swipes/s
// / B's). bench/run swipe drives it against a private PostgreSQL and Redis.

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/engine.hpp"
#include "bench/bench_caf.hpp"
#include "bench/bench_cli.hpp"
#include "bench/bench_common.hpp"
#include "bench/bench_pg.hpp"

namespace mm::swipe_bench {

using namespace mm::bench;

namespace {

// -- options ------------------------------------------------------------------

/// One configuration to measure: "label:pairs|hot:pair|global".
struct variant {
  std::string label;
  bool hot = false;    ///< one hot pair instead of distinct pairs
  bool global = false; ///< pair_lock_config::global (the baseline)
};

struct options : service_options {
  std::string order = "seq";  ///< distinct pairs: seq | cross
  uint32_t swipe_workers = 0; ///< 0: swipe_config's default
  int fin_delay_ms = -1;      ///< finalizer batch_delay_ms; -1: default

  options() {
    variants = {"pairs:pairs:pair", "pairs_global:pairs:global", "hot:hot:pair",
                "hot_global:hot:global"};
    ratio = {"pairs", "pairs_global"};
    duration_s = 4.0;
  }
};

variant parse_variant(const std::string& s) {
  std::vector<std::string> parts;
  std::istringstream in(s);
  for (std::string p; std::getline(in, p, ':');)
    parts.push_back(p);
  if (parts.size() != 3 || parts[0].empty()
      || (parts[1] != "pairs" && parts[1] != "hot")
      || (parts[2] != "pair" && parts[2] != "global"))
    throw std::invalid_argument("variant '" + s
                                + "': expected label:pairs|hot:pair|global");
  check_label(parts[0]);
  return variant{parts[0], parts[1] == "hot", parts[2] == "global"};
}

// -- where the time goes ------------------------------------------------------

struct redis_sample {
  uint64_t cpu_ns = 0;
  uint64_t commands = 0;
};

redis_sample sample_redis(queue_store& conn) {
  auto stats = redis_info(conn, "stats");
  return {redis_cpu_ns(conn),
          static_cast<uint64_t>(stats["total_commands_processed"])};
}

// -- the driver ---------------------------------------------------------------

/// Written by the driver; read by the main thread after the driver said it
/// is done (a message: happens-before), except the atomics.
struct run_shared {
  std::atomic<int> phase{0}; ///< 0 warm-up, 1 measuring, 2 stop
  std::atomic<uint64_t> window_ok{0};
  std::atomic<uint64_t> window_created{0};
  std::atomic<uint64_t> window_pairs{0}; ///< pairs with both swipes OK
  std::atomic<uint64_t> window_conflicts{0};
  std::atomic<uint64_t> window_errors{0};
  std::atomic<uint64_t> answered{0};
  std::vector<uint64_t> latencies_ns; ///< OK answers inside the window
  /// Every mutual answer: pair index -> the session it named.
  std::vector<std::pair<uint64_t, std::string>> mutual_answers;
  uint64_t sent = 0, ok = 0, mutual = 0, created = 0, conflicts = 0, errors = 0,
           pairs_started = 0, pairs_done = 0;
  /// Answers that contradict the lock's order (see `pair_done`).
  uint64_t odd_answers = 0;
  std::string first_error, first_conflict, first_odd;
};

struct pair_slot {
  uint64_t idx = 0;
  int left = 0;            ///< swipes of the pair not answered yet
  int good = 0;            ///< swipes of the pair answered OK
  int made = 0;            ///< of them, answered created=true
  int first_ok_mutual = 0; ///< of them, mutual without created
};

struct driver_state {
  swipe_actor swipes;
  std::shared_ptr<run_shared> sh;
  caf::actor done_to;
  std::string prefix;
  bool hot = false;
  bool cross = false;
  uint64_t next_pair = 0;
  uint64_t hot_turn = 0;
  size_t outstanding = 0;
  run_shared out; ///< the plain fields, handed over at the end
  std::vector<uint64_t> lat;
  std::vector<std::pair<uint64_t, std::string>> mutual_answers;
  static inline const char* name = "swipe_driver";
};

using driver_ptr = caf::stateful_actor<driver_state>*;

std::string user_of(const driver_state& st, uint64_t idx, bool b) {
  return st.prefix + std::to_string(idx) + (b ? "-b" : "-a");
}

bool is_conflict(const caf::error& e) {
  return e.category() == caf::atom("mm")
         && e.code() == static_cast<uint8_t>(errc::conflict);
}

void finish(driver_ptr self) {
  auto& st = self->state;
  auto& sh = *st.sh;
  sh.latencies_ns = std::move(st.lat);
  sh.mutual_answers = std::move(st.mutual_answers);
  sh.sent = st.out.sent;
  sh.ok = st.out.ok;
  sh.mutual = st.out.mutual;
  sh.created = st.out.created;
  sh.conflicts = st.out.conflicts;
  sh.errors = st.out.errors;
  sh.pairs_started = st.out.pairs_started;
  sh.pairs_done = st.out.pairs_done;
  sh.odd_answers = st.out.odd_answers;
  sh.first_error = st.out.first_error;
  sh.first_conflict = st.out.first_conflict;
  sh.first_odd = st.out.first_odd;
  self->send(st.done_to, uint32_t{1});
  self->quit();
}

bool running(driver_ptr self) {
  return self->state.sh->phase.load(std::memory_order_relaxed) < 2;
}

bool measuring(driver_ptr self) {
  return self->state.sh->phase.load(std::memory_order_relaxed) == 1;
}

void odd(driver_ptr self, std::string what) {
  auto& out = self->state.out;
  if (out.odd_answers++ == 0)
    out.first_odd = std::move(what);
}

void start_pair(driver_ptr self);
void send_hot(driver_ptr self);

/// Sends one swipe; `then` runs with the answer (null result on error).
template <class F>
void send_swipe(driver_ptr self, uint64_t idx, bool from_b, F then) {
  auto& st = self->state;
  ++st.outstanding;
  ++st.out.sent;
  auto t0 = steady_ns();
  auto done = [self, idx, t0, then](const swipe_result* r,
                                    const caf::error* err) {
    auto& st = self->state;
    --st.outstanding;
    st.sh->answered.fetch_add(1, std::memory_order_relaxed);
    bool in_window = measuring(self);
    if (r != nullptr) {
      ++st.out.ok;
      if (r->mutual) {
        ++st.out.mutual;
        st.mutual_answers.emplace_back(idx, r->session_id);
        if (r->session_id.empty())
          odd(self, "a mutual answer without a session id");
      } else if (r->created || !r->session_id.empty()) {
        odd(self, "created/session id without mutual");
      }
      if (r->created)
        ++st.out.created;
      if (in_window) {
        st.lat.push_back(steady_ns() - t0);
        st.sh->window_ok.fetch_add(1, std::memory_order_relaxed);
        if (r->created)
          st.sh->window_created.fetch_add(1, std::memory_order_relaxed);
      }
    } else if (is_conflict(*err)) {
      if (st.out.conflicts++ == 0)
        st.out.first_conflict = self->system().render(*err);
      if (in_window)
        st.sh->window_conflicts.fetch_add(1, std::memory_order_relaxed);
    } else {
      if (st.out.errors++ == 0)
        st.out.first_error = self->system().render(*err);
      if (in_window)
        st.sh->window_errors.fetch_add(1, std::memory_order_relaxed);
    }
    then(r);
    if (!running(self) && st.outstanding == 0)
      finish(self);
  };
  swipe_request req{user_of(st, idx, from_b), user_of(st, idx, !from_b), true};
  self->request(st.swipes, caf::infinite, swipe_atom_v, std::move(req))
    .then([done](swipe_result& r) { done(&r, nullptr); },
          [done](caf::error& err) { done(nullptr, &err); });
}

/// A distinct pair whose swipes were all answered: checks the answers
/// against the lock's order, then starts the next pair.
void pair_done(driver_ptr self, const pair_slot& p) {
  auto& st = self->state;
  if (p.good == 2) {
    ++st.out.pairs_done;
    if (measuring(self))
      st.sh->window_pairs.fetch_add(1, std::memory_order_relaxed);
    // Under the pair's lock one of the two runs first and sees no opposite
    // like; the other completes the pair and creates its one match.
    if (p.made != 1 || p.first_ok_mutual != 0)
      odd(self, "pair " + std::to_string(p.idx) + ": " + std::to_string(p.made)
                  + " created answers, " + std::to_string(p.first_ok_mutual)
                  + " mutual answers that did not create");
  }
  if (running(self))
    start_pair(self);
}

void on_pair_answer(driver_ptr self, std::shared_ptr<pair_slot> p,
                    const swipe_result* r) {
  --p->left;
  if (r != nullptr) {
    ++p->good;
    if (r->created)
      ++p->made;
    else if (r->mutual)
      ++p->first_ok_mutual;
  }
  if (p->left > 0)
    return;
  if (!self->state.cross && p->good == 1 && r != nullptr && running(self)) {
    // seq: the first swipe is in; now the other direction.
    p->left = 1;
    send_swipe(self, p->idx, true, [self, p](const swipe_result* r2) {
      on_pair_answer(self, p, r2);
    });
    return;
  }
  pair_done(self, *p);
}

void start_pair(driver_ptr self) {
  auto& st = self->state;
  auto p = std::make_shared<pair_slot>();
  p->idx = st.next_pair++;
  ++st.out.pairs_started;
  p->left = st.cross ? 2 : 1;
  auto cb = [self, p](const swipe_result* r) { on_pair_answer(self, p, r); };
  send_swipe(self, p->idx, false, cb);
  if (st.cross)
    send_swipe(self, p->idx, true, cb);
}

void send_hot(driver_ptr self) {
  auto& st = self->state;
  bool from_b = (st.hot_turn++ % 2) == 1;
  send_swipe(self, 0, from_b, [self](const swipe_result*) {
    if (running(self))
      send_hot(self);
  });
}

caf::behavior driver(driver_ptr self, swipe_actor swipes,
                     std::shared_ptr<run_shared> sh, caf::actor done_to,
                     std::string prefix, bool hot, bool cross,
                     size_t in_flight) {
  auto& st = self->state;
  st.swipes = std::move(swipes);
  st.sh = std::move(sh);
  st.done_to = std::move(done_to);
  st.prefix = std::move(prefix);
  st.hot = hot;
  st.cross = cross;
  st.lat.reserve(1 << 17);
  if (hot) {
    ++st.out.pairs_started;
    for (size_t i = 0; i < in_flight; ++i)
      send_hot(self);
  } else {
    auto slots = cross ? std::max<size_t>(1, in_flight / 2) : in_flight;
    for (size_t i = 0; i < slots; ++i)
      start_pair(self);
  }
  return {
    [](uint32_t) {
      // nop: the driver lives on its answers
    },
  };
}

// -- one variant --------------------------------------------------------------

struct variant_result {
  variant v;
  double swipes_per_s = 0, matches_per_s = 0, pairs_per_s = 0;
  double p50_ms = 0, p99_ms = 0;
  uint64_t conflicts = 0, errors = 0, violations = 0;
};

struct env {
  const options& o;
  caf::actor_system& sys;
  pg_conn& admin;
  queue_store& redis_admin;
  int postmaster = 0;
};

/// What one backend was seen doing, by pid, and which kind it is.
struct backend_samples {
  std::map<std::string, uint64_t> states;
  std::string kind; ///< "swipe", "finalizer" or "" (not yet known)
};

std::string describe_states(const std::map<std::string, uint64_t>& states) {
  auto out = describe_shares(states, 2.0);
  return out.empty() ? "no samples" : out;
}

variant_result run_variant(env& e, const variant& v, size_t run_no) {
  const auto& o = e.o;
  variant_result res;
  res.v = v;
  const auto& tag = v.label;
  auto db = "mm_swipe_" + std::to_string(getpid()) + "_"
            + std::to_string(run_no) + "_" + v.label;
  create_database(e.admin, db);
  auto conninfo = with_dbname(o.conninfo, db);

  engine_config ec;
  ec.node = "bench-" + std::to_string(run_no);
  ec.use_redis = true;
  ec.redis.host = o.redis_host;
  ec.redis.port = o.redis_port;
  ec.use_postgres = true;
  ec.postgres.conninfo = conninfo;
  ec.run_relay = false;
  ec.broker.sweep_interval_ms = 0;
  ec.lock.global = v.global;
  ec.lock.prefix = "mm:lock:bench-" + std::to_string(getpid()) + "-"
                   + std::to_string(run_no) + ":";
  if (o.swipe_workers > 0)
    ec.swipe.workers = o.swipe_workers;
  if (o.fin_delay_ms >= 0)
    ec.finalizer.batch_delay_ms = static_cast<uint32_t>(o.fin_delay_ms);
  auto started = engine::start(e.sys, ec);
  if (!started)
    throw std::runtime_error("engine::start: " + started.error().detail);
  auto eng = *started;
  const auto& cfg = eng->config();

  auto sh = std::make_shared<run_shared>();
  caf::scoped_actor waiter{e.sys};
  bool cross = o.order == "cross";
  auto drv = e.sys.spawn(driver, eng->swipes(), sh,
                         caf::actor_cast<caf::actor>(waiter),
                         v.label + "-" + std::to_string(run_no) + "-u", v.hot,
                         cross, o.in_flight);

  sleep_s(o.warmup_s);
  auto cpu0 = process_cpu_ns();
  auto pgcpu0 = server_cpu_ns(e.postmaster);
  auto r0 = sample_redis(e.redis_admin);
  auto m0 = machine_busy_ns();
  auto t0 = now_s();
  sh->phase = 1;
  // Meanwhile: what the variant's backends are doing, every 20 ms. A
  // backend's kind comes from the statements it was seen running (the swipe
  // actor's: the advisory lock and the likes upsert; the finalizer's: the
  // batch statement and NOTIFY); "unclassified": never caught in one.
  std::map<std::string, backend_samples> backends;
  uint64_t samples = 0;
  auto activity_sql
    = std::string{"SELECT pid, "} + backend_state_sql
      + ", CASE WHEN query LIKE "
        "'%pg_advisory_xact_lock%' OR query LIKE '%INSERT INTO likes%' THEN "
        "'swipe' WHEN query LIKE '%INSERT INTO match_sessions%' OR query LIKE "
        "'%NOTIFY%' THEN 'finalizer' ELSE '' END FROM pg_stat_activity WHERE "
        "datname = '"
      + db + "' AND backend_type = 'client backend'";
  sample_until(e.admin, activity_sql, t0 + o.duration_s, [&](auto& row) {
    auto& b = backends[row[0]];
    ++b.states[row[1]];
    if (b.kind.empty())
      b.kind = row[2];
    ++samples;
  });
  sh->phase = 2;
  auto t1 = now_s();
  auto m1 = machine_busy_ns();
  auto window_ok = sh->window_ok.load();
  auto window_created = sh->window_created.load();
  auto window_pairs = sh->window_pairs.load();
  auto window_conflicts = sh->window_conflicts.load();
  auto window_errors = sh->window_errors.load();
  auto cpu1 = process_cpu_ns();
  auto pgcpu1 = server_cpu_ns(e.postmaster);
  auto r1 = sample_redis(e.redis_admin);

  await_drain(waiter, drv, tag);
  {
    auto sw = eng->swipes();
    auto lock = eng->pair_lock();
    auto fin = eng->finalizer();
    auto broker = eng->broker();
    auto dir = eng->directory();
    eng->stop();
    waiter->wait_for(sw, lock, fin, broker, dir);
  }
  // Transactions of the whole run (warm-up and drain included): a backend
  // reports its counts when it ends at the latest, so wait for the engine's
  // connections to close (their detached workers end after their parents).
  uint64_t xacts = 0;
  {
    auto conns_sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = '"
                     + db + "'";
    for (int i = 0; i < 100 && e.admin.count(conns_sql) > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    e.admin.query("SELECT pg_stat_clear_snapshot()");
    xacts = e.admin.count("SELECT xact_commit + xact_rollback FROM "
                          "pg_stat_database WHERE datname = '"
                          + db + "'");
  }

  auto dt = t1 - t0;
  auto swipes = static_cast<double>(window_ok);
  res.swipes_per_s = swipes / dt;
  res.matches_per_s = static_cast<double>(window_created) / dt;
  res.pairs_per_s = static_cast<double>(window_pairs) / dt;
  res.p50_ms = percentile_ms(sh->latencies_ns, 0.50);
  res.p99_ms = percentile_ms(sh->latencies_ns, 0.99);
  res.conflicts = sh->conflicts;
  res.errors = sh->errors;
  auto what = v.hot ? std::string{"one hot pair, directions alternating"}
                    : std::string{cross ? "distinct pairs, A->B and B->A at "
                                          "once"
                                        : "distinct pairs, A->B then B->A"};
  std::printf("[%s] %s, %s lock, %zu in flight: %.0f swipes/s, %.0f "
              "matches/s, %.0f mutual pairs/s (%" PRIu64 " swipes, %" PRIu64
              " matches in %.2f s), latency p50 %.2f ms p99 %.2f ms | "
              "conflicts %" PRIu64 ", errors %" PRIu64 " (window; whole run "
              "%" PRIu64 " / %" PRIu64 ")\n",
              tag.c_str(), what.c_str(), v.global ? "ONE global" : "per-pair",
              o.in_flight, res.swipes_per_s, res.matches_per_s, res.pairs_per_s,
              window_ok, window_created, dt, res.p50_ms, res.p99_ms,
              window_conflicts, window_errors, sh->conflicts, sh->errors);
  {
    window_rates rates{dt, swipes};
    auto per_swipe_us = [&](uint64_t a, uint64_t b) {
      return rates.per_unit_us(a, b);
    };
    auto busy = [&](uint64_t a, uint64_t b) { return rates.busy_pct(a, b); };
    auto ours = (cpu1 - cpu0) + (pgcpu1 - pgcpu0) + (r1.cpu_ns - r0.cpu_ns);
    auto all = m1 - m0;
    auto cores = std::max(1u, std::thread::hardware_concurrency());
    std::printf("[%s]   cpu per swipe: bench %.1f us, postgres %.1f us, "
                "redis %.1f us | busy (%% of one core): bench %.0f%%, "
                "postgres %.0f%%, redis %.0f%%; machine %.0f%% of %u cores, "
                "other processes %.0f%% of one core\n",
                tag.c_str(), per_swipe_us(cpu0, cpu1),
                per_swipe_us(pgcpu0, pgcpu1),
                per_swipe_us(r0.cpu_ns, r1.cpu_ns), busy(cpu0, cpu1),
                busy(pgcpu0, pgcpu1), busy(r0.cpu_ns, r1.cpu_ns),
                busy(0, all) / cores, cores,
                all > ours ? busy(ours, all) : 0.0);
    auto answered = sh->answered.load();
    std::printf(
      "[%s]   per swipe: %.2f redis commands (lock: SET NX PX; "
      "unlock: EVALSHA running GET + DEL), %.2f postgres "
      "transactions (whole run, pg_stat_database) | lock "
      "wait_ms=%u lease_ms=%u, swipe workers=%u, finalizer "
      "batch_max=%u delay=%u ms workers=%u\n",
      tag.c_str(),
      swipes > 0 ? static_cast<double>(r1.commands - r0.commands) / swipes
                 : 0.0,
      answered > 0 ? static_cast<double>(xacts) / static_cast<double>(answered)
                   : 0.0,
      cfg.lock.wait_ms, cfg.lock.lease_ms, cfg.swipe.workers,
      cfg.finalizer.batch_max, cfg.finalizer.batch_delay_ms,
      cfg.finalizer.workers);
    std::map<std::string, std::map<std::string, uint64_t>> by_kind;
    std::map<std::string, size_t> conns;
    for (auto& [pid, b] : backends) {
      auto kind = b.kind.empty() ? std::string{"unclassified"} : b.kind;
      ++conns[kind];
      for (auto& [state, n] : b.states)
        by_kind[kind][state] += n;
    }
    std::string line;
    for (auto& [kind, states] : by_kind)
      line += (line.empty() ? "" : " | ") + kind + " ("
              + std::to_string(conns[kind])
              + " conn): " + describe_states(states);
    std::printf("[%s]   postgres backends (pg_stat_activity every 20 ms, "
                "%" PRIu64 " samples): %s\n",
                tag.c_str(), samples, line.empty() ? "none" : line.c_str());
  }

  // -- verification against the database --------------------------------------
  problem_list problems;
  auto expect = [&](const std::string& what, uint64_t got, uint64_t want) {
    problems.expect(what, got, want);
  };
  {
    pg_conn check{conninfo};
    // Unordered pairs liked both ways (the lower id's row first).
    const std::string liked
      = "SELECT x.from_user AS lo, x.to_user AS hi FROM likes x JOIN likes y "
        "ON y.from_user = x.to_user AND y.to_user = x.from_user WHERE "
        "x.kind = 'LIKE' AND y.kind = 'LIKE' AND x.from_user COLLATE \"C\" "
        "< x.to_user COLLATE \"C\"";
    auto liked_pairs = check.count("SELECT count(*) FROM (" + liked + ") l");
    auto like_rows = check.count("SELECT count(*) FROM likes");
    auto mm_rows = check.count("SELECT count(*) FROM mutual_matches");
    auto sessions = check.count("SELECT count(*) FROM match_sessions");
    auto events
      = check.count("SELECT count(*) FROM outbox WHERE type = 'match.created'");
    auto liked_not_one_row = check.count(
      "SELECT count(*) FROM (" + liked
      + ") l WHERE (SELECT count(*) FROM "
        "mutual_matches p WHERE p.pair_min = l.lo AND p.pair_max = l.hi) <> 1");
    auto row_not_liked = check.count(
      "SELECT count(*) FROM mutual_matches p WHERE NOT EXISTS (SELECT 1 FROM ("
      + liked + ") l WHERE l.lo = p.pair_min AND l.hi = p.pair_max)");
    auto row_bad_session = check.count(
      "SELECT count(*) FROM mutual_matches p LEFT JOIN match_sessions s ON "
      "s.id = p.session_id WHERE s.id IS NULL OR NOT ((s.user_a = "
      "p.pair_min AND s.user_b = p.pair_max) OR (s.user_a = p.pair_max AND "
      "s.user_b = p.pair_min))");
    auto session_not_mutual = check.count(
      "SELECT count(*) FROM match_sessions s WHERE NOT EXISTS (SELECT 1 FROM "
      "mutual_matches p WHERE p.session_id = s.id)");
    auto session_not_one_event = check.count(
      // One pass (a hash join): the outbox has no index by session.
      "SELECT count(*) FROM (SELECT s.id FROM match_sessions s LEFT JOIN "
      "outbox o ON o.aggregate_id = s.id AND o.type = 'match.created' "
      "GROUP BY s.id HAVING count(o.id) <> 1) x");
    auto orphan_events = check.count(
      "SELECT count(*) FROM outbox o WHERE NOT EXISTS (SELECT 1 FROM "
      "match_sessions s WHERE s.id = o.aggregate_id)");
    auto bad_members = check.count(
      "SELECT count(*) FROM match_sessions s WHERE (SELECT count(*) FROM "
      "session_members m WHERE m.session_id = s.id AND NOT m.active AND "
      "m.user_id IN (s.user_a, s.user_b)) <> 2 OR EXISTS (SELECT 1 FROM "
      "session_members m WHERE m.session_id = s.id AND m.active)");
    // Every mutual answer names its pair's session.
    std::map<std::string, std::string> session_of; // pair_min -> session
    for (auto& row : check.query("SELECT pair_min, session_id FROM "
                                 "mutual_matches"))
      session_of[row[0]] = row[1];
    uint64_t wrong_answers = 0;
    std::string driver_prefix = v.label + "-" + std::to_string(run_no) + "-u";
    for (auto& [idx, sid] : sh->mutual_answers) {
      auto i = session_of.find(driver_prefix + std::to_string(idx) + "-a");
      if (i == session_of.end() || i->second != sid)
        ++wrong_answers;
    }
    auto unanswered = sh->sent - sh->answered.load();
    expect("pairs liked both ways without exactly one mutual_matches row",
           liked_not_one_row, 0);
    expect("mutual_matches rows of pairs not liked both ways", row_not_liked,
           0);
    expect("mutual_matches rows without their pair's session", row_bad_session,
           0);
    expect("sessions without a mutual_matches row", session_not_mutual, 0);
    expect("sessions without exactly one match.created event",
           session_not_one_event, 0);
    expect("outbox events without a session", orphan_events, 0);
    expect("sessions without their two (inactive) members", bad_members, 0);
    expect("sessions vs pairs liked both ways", sessions, liked_pairs);
    expect("created answers vs sessions", sh->created, sessions);
    expect("mutual answers naming another session than the pair's",
           wrong_answers, 0);
    expect("answers contradicting the lock's order", sh->odd_answers, 0);
    expect("swipes without an answer", unanswered, 0);
    if (v.hot && sh->ok >= 2)
      expect("hot pair: sessions", sessions, 1);
    // Distinct pairs: every OK swipe wrote its own direction's row, and a
    // swipe refused with `conflict` wrote nothing. (An error may come
    // before or after the write: then the count proves nothing.)
    if (!v.hot && sh->errors == 0)
      expect("like rows vs OK swipes (a conflict writes nothing)", like_rows,
             sh->ok);
    std::printf("[%s]   verify (%s): %" PRIu64 " swipes sent, %" PRIu64
                " OK (%" PRIu64 " mutual, %" PRIu64 " created), %" PRIu64
                " conflicts, %" PRIu64 " errors; %" PRIu64
                " like rows, %" PRIu64 " pairs liked both ways, %" PRIu64
                " mutual_matches rows, %" PRIu64 " sessions, %" PRIu64
                " match.created events -> %zu violations\n",
                tag.c_str(), db.c_str(), sh->sent, sh->ok, sh->mutual,
                sh->created, sh->conflicts, sh->errors, like_rows, liked_pairs,
                mm_rows, sessions, events, problems.size());
  }
  problems.print(tag);
  if (!sh->first_odd.empty())
    std::printf("[%s]   first odd answer: %s\n", tag.c_str(),
                sh->first_odd.c_str());
  if (!sh->first_conflict.empty())
    std::printf("[%s]   first conflict: %s\n", tag.c_str(),
                sh->first_conflict.c_str());
  if (!sh->first_error.empty())
    std::printf("[%s]   first error: %s\n", tag.c_str(),
                sh->first_error.c_str());
  res.violations = problems.size();
  std::fflush(stdout);
  eng.reset();
  if (!o.keep_databases)
    drop_database(e.admin, db);
  return res;
}

} // namespace

int run(const options& o) {
  // The store's "applied migration" lines would interleave with the figures.
  spdlog::set_level(spdlog::level::warn);
  std::vector<variant> variants;
  for (auto& s : o.variants)
    variants.push_back(parse_variant(s));
  if (o.order != "seq" && o.order != "cross")
    throw std::invalid_argument("--order: seq or cross");
  pg_conn admin{o.conninfo};
  int postmaster = postmaster_of(admin);
  auto setting = [&](const char* name) {
    return admin.scalar(std::string{"SHOW "} + name);
  };

  caf::actor_system_config cfg;
  configure(cfg, o.scheduler_threads);
  caf::actor_system sys{cfg};

  redis_options ro;
  ro.host = o.redis_host;
  ro.port = o.redis_port;
  auto redis_admin = make_redis_store(ro)->connect();
  std::printf("# swipe_bench: %u cores, PostgreSQL %s (fsync=%s, "
              "synchronous_commit=%s)%s, Redis %s:%u (the pair lock's "
              "lease)\n",
              std::thread::hardware_concurrency(),
              setting("server_version").c_str(), setting("fsync").c_str(),
              setting("synchronous_commit").c_str(),
              postmaster > 0 ? "" : ", server CPU not visible from here",
              o.redis_host.c_str(), o.redis_port);
  std::printf("# %zu swipes (LIKE) in flight from one driver actor through "
              "engine::swipes(), %.1f s measured per variant after %.1f s "
              "warm-up, a fresh database and engine per variant, distinct "
              "pairs: %s; CAF scheduler threads=%zu\n",
              o.in_flight, o.duration_s, o.warmup_s,
              o.order == "cross" ? "both directions at once"
                                 : "A->B, then B->A once answered",
              o.scheduler_threads);
  std::fflush(stdout);

  env e{o, sys, admin, *redis_admin, postmaster};
  std::vector<variant_result> results;
  for (size_t i = 0; i < variants.size(); ++i)
    results.push_back(run_variant(e, variants[i], i + 1));

  return print_summary(
    results, &variant_result::swipes_per_s, o.ratio, "swipes/s",
    "swipe_ratio_vs_global_lock",
    [](const std::string& label, const variant_result& r,
       const std::string& runs) {
      std::printf(" %s=%.0f swipes/s(runs %s, %.0f matches/s, p50 %.2f ms, "
                  "p99 %.2f ms, %" PRIu64 " conflicts, %" PRIu64 " errors)",
                  label.c_str(), r.swipes_per_s, runs.c_str(), r.matches_per_s,
                  r.p50_ms, r.p99_ms, r.conflicts, r.errors);
    });
}

} // namespace mm::swipe_bench

int main(int argc, char** argv) {
  using namespace mm::swipe_bench;
  CLI::App app{"swipe_bench: mutual swipes per second through the engine's "
               "swipe actor, per-pair locks vs one global lock (see bench/run "
               "swipe)"};
  options o;
  add_pg_options(app, o);
  add_redis_options(app, o);
  add_variant_options(app, o,
                      "label:pairs|hot:pair|global — distinct pairs or one "
                      "hot pair, per-pair locks or the global-lock baseline; "
                      "a label given twice runs twice and counts with its "
                      "best run",
                      "two labels A,B: the last line is A's swipes/s / B's");
  app
    .add_option("--order", o.order,
                "distinct pairs: seq (B->A once A->B is answered) or cross "
                "(both at once; they meet at the pair's lock)")
    ->check(CLI::IsMember({"seq", "cross"}))
    ->capture_default_str();
  add_window_options(app, o, "swipes outstanding");
  app
    .add_option("--swipe-workers", o.swipe_workers,
                "swipe_config::workers (database connections of the swipe "
                "actor; 0: the engine's default)")
    ->capture_default_str();
  app
    .add_option("--finalizer-delay-ms", o.fin_delay_ms,
                "finalizer_config::batch_delay_ms (-1: the engine's "
                "default)")
    ->capture_default_str();
  add_run_options(app, o);
  CLI11_PARSE(app, argc, argv);

  if (!resolve_conninfo(o))
    return 2;
  if (!resolve_redis_port(o, "Redis is needed (the pair lock's lease): "
                             "--redis-port P or --redis-dir DIR\n"))
    return 2;
  try {
    return run(o);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "swipe_bench: %s\n", ex.what());
    return 1;
  }
}
