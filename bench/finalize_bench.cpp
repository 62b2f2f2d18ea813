// finalize_bench: matches committed per second through the finalizer actor,
// group commit against one transaction per match, on PostgreSQL.
//
// Every variant gets a fresh database (CREATE DATABASE, migrations), a fresh
// queue broker and a fresh finalizer; one driver actor keeps N finalizations
// (`finalize_atom, claim_pair`) in flight, each pair with two users of its
// own (no conflicts), and counts what comes back during the measured window:
// matches/s and the finalize latency (request to answer, which includes the
// group commit wait, the transaction and the two ticket releases through the
// broker). Afterwards the database is checked against the answers: one
// session per committed answer and the same ids, one match.created outbox
// row each, two members each, nobody in two active sessions.
//
// Where the time goes (perf is not available here): a counting wrapper
// around the match store gives transactions, matches per transaction and
// the share of time the commit workers spend inside the store (and one
// around the queue store the release calls per round trip); CPU of this
// process (getrusage, split by thread class from /proc/self/task), of the
// PostgreSQL server (/proc: the postmaster and its children), of Redis
// (INFO cpu) and of the whole machine (/proc/stat: other work on a shared
// VM); what the variant's backends are doing (pg_stat_activity, sampled).
//
// A label given more than once runs again and counts with its best run.
// bench/run finalize drives it against a private PostgreSQL and Redis.

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/finalizer.hpp"
#include "actors/queue_broker.hpp"
#include "bench/bench_caf.hpp"
#include "bench/bench_cli.hpp"
#include "bench/bench_common.hpp"
#include "bench/bench_pg.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm::fin_bench {

using namespace mm::bench;

namespace {

// -- options ------------------------------------------------------------------

/// One finalizer configuration to measure:
/// "label:batch_max:batch_delay_ms[:workers]" (workers: --workers if absent).
struct variant {
  std::string label;
  uint32_t batch_max = 100;
  uint32_t batch_delay_ms = 2;
  uint32_t workers = 0;
};

struct options : service_options {
  std::string store = "redis";
  uint32_t workers = 2;

  options() {
    variants = {"group:100:2", "group500:500:2", "single:1:0"};
    ratio = {"group", "single"};
  }
};

variant parse_variant(const std::string& s) {
  variant v;
  auto a = s.find(':');
  auto b = a == std::string::npos ? a : s.find(':', a + 1);
  if (a == 0 || b == std::string::npos)
    throw std::invalid_argument(
      "variant '" + s + "': expected label:batch_max:delay_ms[:workers]");
  v.label = s.substr(0, a);
  check_label(v.label);
  v.batch_max = static_cast<uint32_t>(std::stoul(s.substr(a + 1, b - a - 1)));
  auto c = s.find(':', b + 1);
  v.batch_delay_ms
    = static_cast<uint32_t>(std::stoul(s.substr(b + 1, c - b - 1)));
  if (c != std::string::npos)
    v.workers = static_cast<uint32_t>(std::stoul(s.substr(c + 1)));
  return v;
}

// -- a counting wrapper around the match store --------------------------------

struct commit_counters {
  std::atomic<uint64_t> transactions{0}; ///< commit_matches calls
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> busy_ns{0};
  std::atomic<uint64_t> max_batch{0};
  thread_set threads; ///< the commit workers
};

class counting_match_store final : public match_store {
 public:
  counting_match_store(std::unique_ptr<match_store> inner,
                       std::shared_ptr<commit_counters> c)
    : inner_(std::move(inner)), c_(std::move(c)) {}

  outcome<std::vector<std::string>> apply_migrations() override {
    return inner_->apply_migrations();
  }

  outcome<size_t>
  mark_delivered(const std::vector<std::string>& event_ids) override {
    return inner_->mark_delivered(event_ids);
  }

  outcome<bool> wait_for_events(uint32_t timeout_ms) override {
    return inner_->wait_for_events(timeout_ms);
  }

  bool blocking() const noexcept override {
    return inner_->blocking();
  }

 protected:
  std::vector<outcome<match_record>>
  do_commit_matches(const std::vector<match_request>& requests,
                    const commit_check& check) override {
    c_->threads.note();
    auto t0 = steady_ns();
    auto out = inner_->commit_matches(requests, check);
    c_->busy_ns.fetch_add(steady_ns() - t0, std::memory_order_relaxed);
    c_->transactions.fetch_add(1, std::memory_order_relaxed);
    uint64_t n = requests.size();
    c_->requests.fetch_add(n, std::memory_order_relaxed);
    raise_max(c_->max_batch, n);
    return out;
  }

  outcome<bool> do_close_session(const std::string& session_id,
                                 const std::string& reason) override {
    return inner_->close_session(session_id, reason);
  }

  outcome<std::optional<match_record>>
  do_active_session_of(const std::string& user) override {
    return inner_->active_session_of(user);
  }

  outcome<std::optional<match_record>>
  do_find_session(const std::string& session_id) override {
    return inner_->find_session(session_id);
  }

  outcome<std::vector<outbox_event>>
  do_fetch_undelivered(uint32_t limit, uint32_t lease_ms) override {
    return inner_->fetch_undelivered(limit, lease_ms);
  }

 private:
  std::unique_ptr<match_store> inner_;
  std::shared_ptr<commit_counters> c_;
};

using counting_match_factory
  = counting_factory_of<match_store_factory, counting_match_store,
                        commit_counters>;

// -- the driver ---------------------------------------------------------------

/// Shared between the main thread and the driver. `phase` is set by the main
/// thread; the rest is written by the driver only, and read by the main
/// thread after the driver said it is done (a message: happens-before).
struct run_shared {
  std::atomic<int> phase{0}; ///< 0 warm-up, 1 measuring, 2 stop
  std::atomic<uint64_t> window_committed{0};
  std::atomic<uint64_t> answered{0};
  std::vector<uint64_t> latencies_ns;   ///< answers inside the window
  std::vector<std::string> session_ids; ///< every committed answer
  uint64_t sent = 0, committed = 0, retry = 0, cancelled = 0, refused = 0,
           errors = 0, empty_ids = 0;
  std::string first_problem;
};

struct driver_state {
  finalizer_actor fin;
  std::shared_ptr<run_shared> sh;
  caf::actor done_to;
  std::string queue;
  std::string prefix;
  uint64_t next = 0;
  size_t outstanding = 0;
  std::vector<uint64_t> lat;
  std::vector<std::string> sids;
  uint64_t committed = 0, retry = 0, cancelled = 0, refused = 0, errors = 0,
           empty_ids = 0;
  std::string first_problem;
  static inline const char* name = "finalize_driver";
};

using driver_ptr = caf::stateful_actor<driver_state>*;

/// A claimed pair with two users nobody else uses.
claim_pair next_pair(driver_state& st) {
  auto n = std::to_string(st.next);
  claim_pair p;
  p.queue = st.queue;
  p.claimer_user = st.prefix + n + "-a";
  p.claimer_ticket = "t" + st.prefix + n + "-a";
  p.claimed.user = st.prefix + n + "-b";
  p.claimed.ticket = "t" + st.prefix + n + "-b";
  p.claimed.node = "n1";
  p.claimed.score = static_cast<int64_t>(st.next);
  p.claimed.token = "k" + n;
  ++st.next;
  return p;
}

void finish(driver_ptr self) {
  auto& st = self->state;
  auto& sh = *st.sh;
  sh.latencies_ns = std::move(st.lat);
  sh.session_ids = std::move(st.sids);
  sh.sent = st.next;
  sh.committed = st.committed;
  sh.retry = st.retry;
  sh.cancelled = st.cancelled;
  sh.refused = st.refused;
  sh.errors = st.errors;
  sh.empty_ids = st.empty_ids;
  sh.first_problem = st.first_problem;
  self->send(st.done_to, uint32_t{1});
  self->quit();
}

void send_next(driver_ptr self);

void answered(driver_ptr self) {
  auto& st = self->state;
  --st.outstanding;
  st.sh->answered.fetch_add(1, std::memory_order_relaxed);
  if (st.sh->phase.load(std::memory_order_relaxed) < 2)
    send_next(self);
  else if (st.outstanding == 0)
    finish(self);
}

void send_next(driver_ptr self) {
  auto& st = self->state;
  ++st.outstanding;
  auto t0 = steady_ns();
  self->request(st.fin, caf::infinite, finalize_atom_v, next_pair(st))
    .then(
      [self, t0](finalize_result& r) {
        auto& st = self->state;
        auto t1 = steady_ns();
        switch (r.outcome) {
          case finalize_outcome::committed:
            ++st.committed;
            if (r.session_id.empty())
              ++st.empty_ids;
            st.sids.emplace_back(std::move(r.session_id));
            if (st.sh->phase.load(std::memory_order_relaxed) == 1) {
              st.sh->window_committed.fetch_add(1, std::memory_order_relaxed);
              st.lat.push_back(t1 - t0);
            }
            break;
          case finalize_outcome::retry:
            ++st.retry;
            break;
          case finalize_outcome::cancelled:
            ++st.cancelled;
            break;
          case finalize_outcome::refused:
            ++st.refused;
            break;
        }
        if (r.outcome != finalize_outcome::committed
            && st.first_problem.empty())
          st.first_problem = std::string{to_string(r.outcome)} + ": "
                             + r.detail;
        answered(self);
      },
      [self](caf::error& err) {
        auto& st = self->state;
        ++st.errors;
        if (st.first_problem.empty())
          st.first_problem = "error: " + self->system().render(err);
        answered(self);
      });
}

caf::behavior driver(driver_ptr self, finalizer_actor fin,
                     std::shared_ptr<run_shared> sh, caf::actor done_to,
                     std::string queue, std::string prefix, size_t in_flight) {
  auto& st = self->state;
  st.fin = std::move(fin);
  st.sh = std::move(sh);
  st.done_to = std::move(done_to);
  st.queue = std::move(queue);
  st.prefix = std::move(prefix);
  st.lat.reserve(1 << 18);
  for (size_t i = 0; i < in_flight; ++i)
    send_next(self);
  return {
    [](uint32_t) {
      // nop: the driver lives on its answers
    },
  };
}

// -- one variant --------------------------------------------------------------

struct variant_result {
  variant v;
  double matches_per_s = 0;
  double p50_ms = 0, p99_ms = 0;
  double matches_per_tx = 0;
  uint64_t violations = 0;
};

struct env {
  const options& o;
  caf::actor_system& sys;
  pg_conn& admin;
  std::shared_ptr<queue_store_factory> queue_factory;
  queue_store* redis_admin = nullptr; ///< INFO cpu; null: embedded store
  int postmaster = 0;

  uint64_t redis_cpu() const {
    return redis_admin != nullptr ? redis_cpu_ns(*redis_admin) : 0;
  }
};

variant_result run_variant(env& e, const variant& v, size_t run_no) {
  const auto& o = e.o;
  variant_result res;
  res.v = v;
  auto tag = v.label;
  auto db = "mm_fin_" + std::to_string(getpid()) + "_" + std::to_string(run_no)
            + "_" + v.label;
  create_database(e.admin, db);
  auto conninfo = with_dbname(o.conninfo, db);
  auto pg = make_pg_match_store(pg_options{conninfo});
  {
    auto m = pg->connect();
    auto applied = m->apply_migrations();
    if (!applied)
      throw std::runtime_error("migrations: " + applied.error().detail);
  }
  auto counters = std::make_shared<commit_counters>();
  auto factory = std::make_shared<counting_match_factory>(pg, counters);
  auto rel = std::make_shared<store_counters>();
  auto qf = counting_factory(e.queue_factory, rel);
  auto workers = v.workers > 0 ? v.workers : o.workers;

  broker_config bc;
  bc.sweep_interval_ms = 0; // no background sweeps inside the measurement
  auto broker = spawn_queue_broker(e.sys, qf, bc);
  finalizer_config fc;
  fc.batch_max = v.batch_max;
  fc.batch_delay_ms = v.batch_delay_ms;
  fc.workers = workers;
  auto fin = spawn_finalizer(e.sys, factory, broker, fc);

  auto sh = std::make_shared<run_shared>();
  caf::scoped_actor waiter{e.sys};
  auto queue = "fin-" + std::to_string(getpid()) + "-" + std::to_string(run_no)
               + "-" + v.label;
  auto drv = e.sys.spawn(driver, fin, sh, caf::actor_cast<caf::actor>(waiter),
                         queue, v.label + "-u", o.in_flight);

  sleep_s(o.warmup_s);
  // Window start: the counters first, then the phase flag.
  auto c0 = counters->transactions.load();
  auto r0 = counters->requests.load();
  auto b0 = counters->busy_ns.load();
  auto trips0 = rel->batches.load();
  auto calls0 = rel->calls.load();
  auto th0 = thread_cpu_ns();
  auto cpu0 = process_cpu_ns();
  auto pgcpu0 = server_cpu_ns(e.postmaster);
  auto rcpu0 = e.redis_cpu();
  auto mcpu0 = machine_busy_ns();
  auto t0 = now_s();
  sh->phase = 1;
  // Meanwhile: what the variant's backends are doing, every 20 ms.
  std::map<std::string, uint64_t> waits;
  uint64_t wait_samples = 0;
  auto wait_sql = std::string{"SELECT "} + backend_state_sql
                  + " FROM pg_stat_activity WHERE datname = '" + db
                  + "' AND backend_type = 'client backend'";
  sample_until(e.admin, wait_sql, t0 + o.duration_s, [&](auto& row) {
    ++waits[row[0]];
    ++wait_samples;
  });
  sh->phase = 2;
  auto t1 = now_s();
  auto mcpu1 = machine_busy_ns();
  auto c1 = counters->transactions.load();
  auto r1 = counters->requests.load();
  auto b1 = counters->busy_ns.load();
  auto trips1 = rel->batches.load();
  auto calls1 = rel->calls.load();
  auto cpu1 = process_cpu_ns();
  auto th1 = thread_cpu_ns();
  auto pgcpu1 = server_cpu_ns(e.postmaster);
  auto rcpu1 = e.redis_cpu();
  auto window = sh->window_committed.load();

  await_drain(waiter, drv, tag);
  caf::anon_send_exit(fin, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(broker, caf::exit_reason::user_shutdown);
  waiter->wait_for(fin, broker);

  auto dt = t1 - t0;
  auto matches = static_cast<double>(window);
  res.matches_per_s = matches / dt;
  res.p50_ms = percentile_ms(sh->latencies_ns, 0.50);
  res.p99_ms = percentile_ms(sh->latencies_ns, 0.99);
  auto tx = static_cast<double>(c1 - c0);
  res.matches_per_tx = tx > 0 ? static_cast<double>(r1 - r0) / tx : 0;
  window_rates rates{dt, matches};
  auto per_match_us = [&](uint64_t a, uint64_t b) {
    return rates.per_unit_us(a, b);
  };
  auto busy_pct = [&](uint64_t a, uint64_t b) { return rates.busy_pct(a, b); };
  // This process's CPU by thread class: commit workers (JSON + libpq), the
  // broker's store workers (hiredis; only with a blocking store), the rest
  // (the CAF scheduler running driver, finalizer and broker; main thread).
  uint64_t commit_ns = 0, broker_ns = 0, rest_ns = 0;
  {
    auto commit_tids = counters->threads.get();
    auto broker_tids = e.redis_admin != nullptr ? rel->threads.get()
                                                : std::set<int>{};
    for (auto& [tid, ns] : th1) {
      auto i = th0.find(tid);
      auto d = ns - (i != th0.end() ? std::min(i->second, ns) : 0);
      if (commit_tids.count(tid) > 0)
        commit_ns += d;
      else if (broker_tids.count(tid) > 0)
        broker_ns += d;
      else
        rest_ns += d;
    }
  }
  auto trips = static_cast<double>(trips1 - trips0);
  std::printf("[%s] batch_max=%u batch_delay_ms=%u workers=%u, %zu in "
              "flight: %.0f matches/s (%.0f in %.2f s), finalize latency "
              "p50 %.2f ms p99 %.2f ms (%zu answers)\n",
              tag.c_str(), v.batch_max, v.batch_delay_ms, workers, o.in_flight,
              res.matches_per_s, matches, dt, res.p50_ms, res.p99_ms,
              sh->latencies_ns.size());
  std::printf("[%s]   postgres: %.0f transactions/s, %.1f matches per "
              "transaction (max %" PRIu64 "), %.2f ms per transaction, "
              "commit workers inside the store %.0f%% of the time | "
              "releases: %.1f calls per broker round trip\n",
              tag.c_str(), tx / dt, res.matches_per_tx,
              counters->max_batch.load(),
              tx > 0 ? static_cast<double>(b1 - b0) / tx / 1e6 : 0.0,
              100.0 * static_cast<double>(b1 - b0)
                / (dt * 1e9 * std::max<uint32_t>(1, workers)),
              trips > 0 ? static_cast<double>(calls1 - calls0) / trips : 0.0);
  std::printf(
    "[%s]   cpu per match: bench %.1f us (commit workers %.1f, "
    "broker workers %.1f, CAF scheduler + rest %.1f), postgres "
    "%.1f us, redis %.1f us | busy (%% of one core): bench %.0f%%, "
    "postgres %.0f%%, redis %.0f%%, sum %.0f%% of %u cores\n",
    tag.c_str(), per_match_us(cpu0, cpu1), per_match_us(0, commit_ns),
    per_match_us(0, broker_ns), per_match_us(0, rest_ns),
    per_match_us(pgcpu0, pgcpu1), per_match_us(rcpu0, rcpu1),
    busy_pct(cpu0, cpu1), busy_pct(pgcpu0, pgcpu1), busy_pct(rcpu0, rcpu1),
    busy_pct(cpu0, cpu1) + busy_pct(pgcpu0, pgcpu1) + busy_pct(rcpu0, rcpu1),
    std::thread::hardware_concurrency());
  {
    // Everything else on the machine in the same window (other work on a
    // shared VM shows here), and the ceiling the measured CPU cost implies.
    auto ours = (cpu1 - cpu0) + (pgcpu1 - pgcpu0) + (rcpu1 - rcpu0);
    auto all = mcpu1 - mcpu0;
    auto cores = std::max(1u, std::thread::hardware_concurrency());
    auto per_match = matches > 0 ? static_cast<double>(ours) / matches : 0.0;
    std::printf("[%s]   machine busy %.0f%% of %u cores, other processes "
                "%.0f%% of one core | CPU ceiling at this cost: %u cores / "
                "%.1f us = %.0f matches/s (measured: %.0f%% of it)\n",
                tag.c_str(), busy_pct(0, all) / cores, cores,
                all > ours ? busy_pct(ours, all) : 0.0, cores, per_match / 1e3,
                per_match > 0 ? cores * 1e9 / per_match : 0.0,
                per_match > 0
                  ? 100.0 * res.matches_per_s * per_match / (cores * 1e9)
                  : 0.0);
    // States of at least 1% of the samples; the rest summed up.
    auto w = describe_shares(waits, 1.0);
    std::printf("[%s]   postgres backends of the %u connections "
                "(pg_stat_activity every 20 ms, %" PRIu64 " samples): %s\n",
                tag.c_str(), workers, wait_samples, w.c_str());
  }

  // -- verification against the database --------------------------------------
  problem_list problems;
  auto expect = [&](const std::string& what, uint64_t got, uint64_t want) {
    problems.expect(what, got, want);
  };
  {
    pg_conn check{conninfo};
    auto sessions = check.count("SELECT count(*) FROM match_sessions");
    auto active = check.count(
      "SELECT count(*) FROM match_sessions WHERE status = 'active'");
    auto outbox = check.count("SELECT count(*) FROM outbox");
    auto members = check.count("SELECT count(*) FROM session_members");
    auto not_one_event = check.count(
      // One pass (a hash join): the outbox has no index by session.
      "SELECT count(*) FROM (SELECT s.id FROM match_sessions s LEFT JOIN "
      "outbox o ON o.aggregate_id = s.id AND o.type = 'match.created' "
      "GROUP BY s.id HAVING count(o.id) <> 1) x");
    auto orphan_events = check.count(
      "SELECT count(*) FROM outbox o WHERE NOT EXISTS (SELECT 1 FROM "
      "match_sessions s WHERE s.id = o.aggregate_id)");
    auto not_two_members = check.count(
      "SELECT count(*) FROM match_sessions s WHERE (SELECT count(*) FROM "
      "session_members m WHERE m.session_id = s.id AND m.active AND "
      "m.user_id IN (s.user_a, s.user_b)) <> 2");
    auto double_booked = check.count(
      "SELECT count(*) FROM (SELECT user_id FROM session_members WHERE "
      "active GROUP BY user_id HAVING count(*) > 1) x");
    auto wrong_pair = check.count(
      "SELECT count(*) FROM match_sessions WHERE left(user_a, -2) <> "
      "left(user_b, -2)");
    auto rows = check.query("SELECT id FROM match_sessions");
    std::vector<std::string> in_db;
    in_db.reserve(rows.size());
    for (auto& r : rows)
      in_db.emplace_back(std::move(r[0]));
    auto answered_ids = sh->session_ids;
    std::sort(in_db.begin(), in_db.end());
    std::sort(answered_ids.begin(), answered_ids.end());
    auto dup = static_cast<uint64_t>(
      answered_ids.end()
      - std::unique(answered_ids.begin(), answered_ids.end()));
    answered_ids.erase(std::unique(answered_ids.begin(), answered_ids.end()),
                       answered_ids.end());
    std::vector<std::string> missing, extra;
    std::set_difference(answered_ids.begin(), answered_ids.end(), in_db.begin(),
                        in_db.end(), std::back_inserter(missing));
    std::set_difference(in_db.begin(), in_db.end(), answered_ids.begin(),
                        answered_ids.end(), std::back_inserter(extra));
    expect("sessions vs committed answers", sessions, sh->committed);
    expect("active sessions", active, sessions);
    expect("outbox rows vs sessions", outbox, sessions);
    expect("member rows vs 2 x sessions", members, 2 * sessions);
    expect("sessions without exactly one match.created row", not_one_event, 0);
    expect("outbox rows without a session", orphan_events, 0);
    expect("sessions without both users active", not_two_members, 0);
    expect("users in two active sessions", double_booked, 0);
    expect("sessions pairing users of different pairs", wrong_pair, 0);
    expect("answered session ids not in the database", missing.size(), 0);
    expect("sessions in the database nobody was told of", extra.size(), 0);
    expect("session id answered twice", dup, 0);
    expect("committed answers without a session id", sh->empty_ids, 0);
    expect("answers other than committed (retry/cancelled/refused)",
           sh->retry + sh->cancelled + sh->refused, 0);
    expect("errors", sh->errors, 0);
    expect("requests without an answer", sh->sent - sh->answered.load(), 0);
    std::printf("[%s]   verify (%s): %" PRIu64 " sent, %" PRIu64
                " committed answers (whole run), %" PRIu64 " sessions, %" PRIu64
                " outbox rows, %" PRIu64 " member rows, %" PRIu64
                " double-booked users -> %zu violations\n",
                tag.c_str(), db.c_str(), sh->sent, sh->committed, sessions,
                outbox, members, double_booked, problems.size());
  }
  problems.print(tag);
  if (!problems.empty() && !sh->first_problem.empty())
    std::printf("[%s]   first non-committed answer: %s\n", tag.c_str(),
                sh->first_problem.c_str());
  res.violations = problems.size();
  std::fflush(stdout);
  if (!o.keep_databases) {
    factory.reset();
    pg.reset();
    drop_database(e.admin, db);
  }
  return res;
}

} // namespace

int run(const options& o) {
  // The store's "applied migration" lines would interleave with the figures.
  spdlog::set_level(spdlog::level::warn);
  std::vector<variant> variants;
  for (auto& s : o.variants)
    variants.push_back(parse_variant(s));
  pg_conn admin{o.conninfo};
  // The postmaster: the parent of our backend (only when it runs here).
  int postmaster = postmaster_of(admin);
  auto setting = [&](const char* name) {
    return admin.scalar(std::string{"SHOW "} + name);
  };

  caf::actor_system_config cfg;
  configure(cfg, o.scheduler_threads);
  caf::actor_system sys{cfg};

  std::unique_ptr<queue_store> redis_admin;
  std::shared_ptr<queue_store_factory> qf;
  std::string release_path;
  if (o.store == "redis") {
    redis_options ro;
    ro.host = o.redis_host;
    ro.port = o.redis_port;
    qf = make_redis_store(ro);
    redis_admin = qf->connect();
    release_path = "queue broker on Redis " + o.redis_host + ":"
                   + std::to_string(o.redis_port)
                   + " (real FCALL release calls; the bench's tickets "
                     "were never enqueued, so each answers 'gone')";
  } else {
    qf = make_embedded_store({});
    release_path = "queue broker on the embedded store (in-process Lua; "
                   "releases answer 'gone')";
  }
  std::printf("# finalize_bench: %u cores, PostgreSQL %s (fsync=%s, "
              "synchronous_commit=%s, wal_sync_method=%s)%s\n",
              std::thread::hardware_concurrency(),
              setting("server_version").c_str(), setting("fsync").c_str(),
              setting("synchronous_commit").c_str(),
              setting("wal_sync_method").c_str(),
              postmaster > 0 ? "" : ", server CPU not visible from here");
  std::printf("# release path: %s\n", release_path.c_str());
  std::printf("# %zu finalizations in flight from one driver actor, unique "
              "users per pair, %.1f s measured per variant after %.1f s "
              "warm-up, a fresh database per variant, finalizer "
              "workers=%u, CAF scheduler threads=%zu\n",
              o.in_flight, o.duration_s, o.warmup_s, o.workers,
              o.scheduler_threads);
  std::fflush(stdout);

  env e{o, sys, admin, qf, redis_admin.get(), postmaster};
  std::vector<variant_result> results;
  for (size_t i = 0; i < variants.size(); ++i)
    results.push_back(run_variant(e, variants[i], i + 1));

  // A label that ran more than once counts with its best run (the machine
  // is shared: a run disturbed by other work shows "other processes").
  return print_summary(
    results, &variant_result::matches_per_s, o.ratio, "matches/s",
    "finalize_ratio_group_vs_single",
    [](const std::string& label, const variant_result& r,
       const std::string& runs) {
      std::printf(" %s=%.0f/s(runs %s, p50 %.2f ms, p99 %.2f ms, %.1f per "
                  "tx)",
                  label.c_str(), r.matches_per_s, runs.c_str(), r.p50_ms,
                  r.p99_ms, r.matches_per_tx);
    });
}

} // namespace mm::fin_bench

int main(int argc, char** argv) {
  using namespace mm::fin_bench;
  CLI::App app{"finalize_bench: matches committed per second through the "
               "finalizer, group commit vs one transaction per match (see "
               "bench/run finalize)"};
  options o;
  add_pg_options(app, o);
  app
    .add_option("--store", o.store,
                "queue store behind the broker that releases the tickets")
    ->check(CLI::IsMember({"redis", "embedded"}))
    ->capture_default_str();
  add_redis_options(app, o);
  add_variant_options(app, o,
                      "finalizer configurations, "
                      "label:batch_max:batch_delay_ms[:workers]; a label "
                      "given twice runs twice and counts with its best run",
                      "two labels A,B: the last line is A's rate / B's rate");
  add_window_options(app, o, "finalizations outstanding from the driver");
  app
    .add_option("--workers", o.workers,
                "finalizer_config::workers (database connections)")
    ->capture_default_str();
  add_run_options(app, o);
  CLI11_PARSE(app, argc, argv);

  if (!resolve_conninfo(o))
    return 2;
  if (o.store == "redis"
      && !resolve_redis_port(o, "a Redis port is needed: --redis-port P or "
                                "--redis-dir DIR (or --store embedded)\n"))
    return 2;
  try {
    return run(o);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "finalize_bench: %s\n", ex.what());
    return 1;
  }
}
