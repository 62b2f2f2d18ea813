// groups_bench: users matched per second in a 5-vs-5 queue with parties of
// 1..3 against a 1:1 queue, through the embedding API, on one engine (bench/run
// groups, docs/benchmarks.md "Groups").
//
// One driver actor is the subscriber of every user's session. Pairs: each
// user joins queue `pairs` through its session. Groups: users come in
// parties of a random size 1..3 (seeded); a party of one joins through its
// session (a party of one at the hub), a larger one is made at the party
// hub, its members join with the invite code, and the leader queues it on
// `g5v5` with each member's skill (uniform 1000..2000). At most --in-flight
// users wait at a time. A run ends when every user joined and no match came
// for --quiet-ms, or --drain-s after the last join.
//
// The modes run in the order pairs, 5-vs-5, 5-vs-5, pairs (--rounds 2; 1:
// pairs, 5-vs-5), new users each round, and each mode counts with the mean
// of its rounds: every round is slower than the one before as the tables
// grow (the 1:1 queue by a third from its first round to its second), and
// the ABBA order's means cancel such a drift.
//
// Figures per mode: users matched / (last match event - first join). For
// the 5-vs-5: the mean difference of the two teams' skill sums over the
// mean team sum (`groups_balance`). Checked (a failure is a VIOLATION,
// exit 1): nobody in two sessions, every session of its queue's size, a
// party never split over sessions or teams, every member told.
// Last line: groups_users_ratio_to_pairs=X.XX.
//
// --mode ready (bench/run groups ready; docs/benchmarks.md "Ready check"):
// the same 5-vs-5 without a ready check and with one (accept_timeout_s
// 30) where every member accepts at once, ABBA (plain, ready, ready,
// plain); then the ready queue with --decline (10 %) of the answers
// declining. Printed: each mode's users/s, the time-to-match p95 of the
// ready runs without declines (join to match.created), and for the run
// with declines the time from each `requeued` (a declined proposal's
// other members) to that member's match: p95 and max, and whether the
// max is within the first p95. Last line: ready_ratio_to_plain=X.XX
// (ready users/s / plain users/s).

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "actors/engine.hpp"
#include "bench/bench_caf.hpp"
#include "bench/bench_pg.hpp"
#include "bench/e2e_costs.hpp"
#include "persistence/queue/queue_store.hpp"

namespace {

using namespace mm;
using namespace mm::bench;
using clock_type = std::chrono::steady_clock;

struct options {
  std::string store = "redis"; ///< redis | embedded
  std::string db = "postgres"; ///< postgres | memory
  std::string pg;              ///< admin conninfo
  std::string redis_host = "127.0.0.1";
  uint16_t redis_port = 0;
  size_t users = 20000;
  size_t in_flight = 2000;
  size_t sched_threads = 1;
  int rounds = 2;
  uint64_t seed = 1;
  int64_t quiet_ms = 3000;
  double drain_s = 30;
  std::string mode = "groups"; ///< groups | ready
  double decline = 0.1;        ///< ready mode: share of answers declining
};

// The 5-vs-5 queue of each round (a round's leftovers stay in its own).
constexpr const char* rules_json = R"({
  "g5v5": {
    "attributes": {"skill": {"type": "number", "min": 0, "max": 5000}},
    "shape": {"players": {"min": 10, "max": 10},
              "teams": {"count": 2, "size": 5}, "party_max": 3,
              "balance": "skill"}},
  "g5v5-2": {
    "attributes": {"skill": {"type": "number", "min": 0, "max": 5000}},
    "shape": {"players": {"min": 10, "max": 10},
              "teams": {"count": 2, "size": 5}, "party_max": 3,
              "balance": "skill"}},
  "r5v5": {"shape": {"players": {"min": 10, "max": 10},
           "teams": {"count": 2, "size": 5}, "party_max": 3,
           "accept_timeout_s": 30}},
  "r5v5-2": {"shape": {"players": {"min": 10, "max": 10},
             "teams": {"count": 2, "size": 5}, "party_max": 3,
             "accept_timeout_s": 30}},
  "r5v5-d": {"shape": {"players": {"min": 10, "max": 10},
             "teams": {"count": 2, "size": 5}, "party_max": 3,
             "accept_timeout_s": 30}},
  "p5v5": {"shape": {"players": {"min": 10, "max": 10},
           "teams": {"count": 2, "size": 5}, "party_max": 3}},
  "p5v5-2": {"shape": {"players": {"min": 10, "max": 10},
             "teams": {"count": 2, "size": 5}, "party_max": 3}}})";

/// One mode's plan and what the driver saw of it (written by the driver
/// only; read by main once the driver is gone).
struct tally {
  std::vector<std::vector<std::string>> parties; // users, leader first
  std::map<std::string, int> skill;
  clock_type::time_point first_join{};
  clock_type::time_point last_match{};
  size_t joined = 0;
  size_t failed = 0;
  std::string first_error;
  // session -> its users and their teams (from the match.created payload)
  std::map<std::string, std::vector<std::pair<std::string, int>>> sessions;
  std::map<std::string, size_t> told; // session -> deliveries to members
  std::map<std::string, std::string> session_of; // user -> session
  size_t double_booked = 0;
  // The ready check: when each user joined, matched and was last told
  // `requeued`; the time from each requeue to the match (ms).
  std::map<std::string, clock_type::time_point> joined_at, requeued_at;
  std::vector<double> ttm_ms, rematch_ms;
  std::set<std::string> seen_events; ///< proposal events, each once
  size_t proposals = 0, declined = 0;
};

struct driver_state {
  std::shared_ptr<engine> eng;
  options opt;
  std::string queue;
  bool groups = false;
  size_t next = 0;          // next party to start
  size_t waiting_users = 0; // joined, not matched
  std::shared_ptr<tally> out;
  static inline const char* name = "groups_driver";
};

using driver_actor = caf::stateful_actor<driver_state>;

std::string skill_attrs(int s) {
  return R"({"skill": )" + std::to_string(s) + "}";
}

void start_more(driver_actor* self);

void failed(driver_actor* self, const std::string& what) {
  auto& t = *self->state.out;
  if (t.failed++ == 0)
    t.first_error = what;
}

/// Queues party `p` (its members have sessions reporting to us).
void start_party(driver_actor* self, size_t p) {
  auto& st = self->state;
  const auto& members = st.out->parties[p];
  auto sub = caf::actor_cast<subscriber_actor>(self);
  auto& t = *st.out;
  for (auto& u : members) {
    st.eng->session(u, sub);
    t.joined_at[u] = clock_type::now();
  }
  if (t.joined == 0)
    t.first_join = clock_type::now();
  t.joined += members.size();
  st.waiting_users += members.size();
  const auto& leader = members.front();
  auto ticket = "t" + std::to_string(p);
  if (members.size() == 1) {
    join_request r{st.queue, ticket,
                   st.groups && st.queue[0] == 'g'
                     ? skill_attrs(st.out->skill[leader])
                     : std::string{}};
    self
      ->request(st.eng->session(leader, sub), std::chrono::seconds(60),
                join_atom_v, std::move(r))
      .then([](session_state&) {},
            [self](caf::error& e) { failed(self, to_string(e)); });
    return;
  }
  auto hub = st.eng->parties();
  self->request(hub, std::chrono::seconds(60), create_atom_v, leader)
    .then(
      [self, hub, p, ticket](party_info& info) {
        auto& st = self->state;
        auto members = st.out->parties[p];
        auto left = std::make_shared<size_t>(members.size() - 1);
        auto queue_it = [self, hub, p, ticket, party = info.party] {
          auto& st = self->state;
          party_queue_request q;
          q.user = st.out->parties[p].front();
          q.party = party;
          q.queue = st.queue;
          q.ticket = ticket;
          if (st.queue[0] == 'g') // the queues with a skill attribute
            for (auto& u : st.out->parties[p])
              q.attrs[u] = skill_attrs(st.out->skill[u]);
          self->request(hub, std::chrono::seconds(60), join_atom_v, q)
            .then([](party_info&) {},
                  [self](caf::error& e) { failed(self, to_string(e)); });
        };
        for (size_t i = 1; i < members.size(); ++i)
          self
            ->request(hub, std::chrono::seconds(60), join_atom_v, members[i],
                      info.party, info.code)
            .then(
              [left, queue_it](party_info&) {
                if (--*left == 0)
                  queue_it();
              },
              [self](caf::error& e) { failed(self, to_string(e)); });
      },
      [self](caf::error& e) { failed(self, to_string(e)); });
}

void start_more(driver_actor* self) {
  auto& st = self->state;
  while (st.next < st.out->parties.size()
         && st.waiting_users < st.opt.in_flight)
    start_party(self, st.next++);
}

/// Every user an event names.
std::vector<std::string> users_of(const match_event& ev) {
  std::vector<std::string> out{ev.user_a};
  if (!ev.user_b.empty())
    out.push_back(ev.user_b);
  out.insert(out.end(), ev.others.begin(), ev.others.end());
  return out;
}

/// A proposal event (seen once per member's session: taken once): every
/// member answers at once, a `--decline` share of them declining; a
/// `requeued` end starts its members' rematch clocks.
void on_proposal(driver_actor* self, const match_event& ev) {
  auto& st = self->state;
  auto& t = *st.out;
  if (!t.seen_events.insert(ev.event_id).second)
    return;
  auto j = nlohmann::json::parse(ev.payload, nullptr, false);
  if (!j.is_object())
    return;
  auto id = j.value("proposal", std::string{});
  if (ev.type == "match.proposal_ended") {
    auto outcome = j.value("outcome", std::string{});
    auto users = users_of(ev);
    if (outcome == "requeued")
      for (auto& u : users)
        t.requeued_at[u] = clock_type::now();
    if (outcome == "declined" || outcome == "timed_out") {
      // Out of the queue: no longer waiting.
      st.waiting_users -= std::min(st.waiting_users, users.size());
      start_more(self);
    }
    return;
  }
  ++t.proposals;
  static std::mt19937_64 rng{st.opt.seed + 7};
  std::bernoulli_distribution no{st.opt.decline};
  bool declined = false;
  for (auto& u : users_of(ev)) {
    bool d = st.queue == "r5v5-d" && no(rng);
    declined = declined || d;
    proposal_answer a{st.queue, id, u, d ? "decline" : "accept"};
    self->request(st.eng->parties(), std::chrono::seconds(60), answer_atom_v, a)
      .then([](proposal_state&) {},
            [](caf::error&) {}); // 404: another member declined first
  }
  t.declined += declined ? 1 : 0;
}

/// A match event as one member's session passed it on.
void on_event(driver_actor* self, const match_event& ev) {
  if (ev.type == "match.proposed" || ev.type == "match.proposal_ended") {
    on_proposal(self, ev);
    return;
  }
  if (ev.type != "match.created")
    return;
  auto& st = self->state;
  auto& t = *st.out;
  auto users = std::vector<std::string>{ev.user_a, ev.user_b};
  users.insert(users.end(), ev.others.begin(), ev.others.end());
  if (t.sessions.count(ev.session_id) == 0) {
    std::vector<std::pair<std::string, int>> roster;
    auto j = nlohmann::json::parse(ev.payload, nullptr, false);
    if (j.is_object() && j.contains("users") && j["users"].is_array()
        && !j["users"].empty() && j["users"][0].is_object()) {
      for (auto& u : j["users"])
        roster.emplace_back(u.value("user", ""), u.value("team", -1));
    } else {
      for (auto& u : users)
        roster.emplace_back(u, -1);
    }
    auto now = clock_type::now();
    for (auto& [u, team] : roster) {
      auto [i, added] = t.session_of.emplace(u, ev.session_id);
      if (!added && i->second != ev.session_id)
        ++t.double_booked;
      if (auto k = t.joined_at.find(u); k != t.joined_at.end())
        t.ttm_ms.push_back(
          std::chrono::duration<double, std::milli>(now - k->second).count());
      if (auto k = t.requeued_at.find(u); k != t.requeued_at.end())
        t.rematch_ms.push_back(
          std::chrono::duration<double, std::milli>(now - k->second).count());
    }
    t.sessions.emplace(ev.session_id, std::move(roster));
    st.waiting_users -= std::min(st.waiting_users, users.size());
    t.last_match = clock_type::now();
    start_more(self);
  }
  // Each member's session passes the event on once (it dedupes).
  ++t.told[ev.session_id];
}

caf::behavior driver(driver_actor* self, std::shared_ptr<engine> eng,
                     options opt, std::string queue, bool groups,
                     std::shared_ptr<tally> out) {
  auto& st = self->state;
  st.eng = std::move(eng);
  st.opt = opt;
  st.queue = std::move(queue);
  st.groups = groups;
  st.out = std::move(out);
  return {
    [self](session_state&) {},
    [self](match_event& ev) { on_event(self, ev); },
    [self](tick_atom) { start_more(self); },
    // Progress for main: users joined << 32 | sessions seen.
    [self](caf::get_atom) {
      auto& t = *self->state.out;
      return (uint64_t{t.joined} << 32) | uint64_t{t.sessions.size()};
    },
  };
}

struct mode_result {
  double users_per_s = 0;
  size_t matched_users = 0;
  size_t sessions = 0;
  double balance = 0;
  size_t violations = 0;
  std::vector<double> ttm_ms, rematch_ms;
  size_t proposals = 0, declined = 0;
};

/// The q-quantile (0..1) of `v` (sorted here); 0 when empty.
double quantile(std::vector<double> v, double q) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

/// Runs one mode on `eng` and prints its line.
mode_result run_mode(caf::actor_system& sys, std::shared_ptr<engine> eng,
                     const options& opt, const std::string& queue, bool groups,
                     int round, const e2e_bench::sampler& costs) {
  auto out = std::make_shared<tally>();
  {
    // The plan: parties of 1..3 (groups) or users alone, seeded skills.
    std::mt19937_64 rng{opt.seed};
    std::uniform_int_distribution<int> size{1, 3};
    std::uniform_int_distribution<int> skill{1000, 2000};
    // Users of each queue apart (each mode's are new).
    auto prefix = queue + "." + std::to_string(getpid()) + "r"
                  + std::to_string(round) + "-";
    size_t made = 0;
    while (made < opt.users) {
      size_t n = groups ? static_cast<size_t>(size(rng)) : 1;
      n = std::min(n, opt.users - made);
      std::vector<std::string> party;
      for (size_t i = 0; i < n; ++i) {
        auto u = prefix + std::to_string(made++);
        out->skill[u] = skill(rng);
        party.push_back(u);
      }
      out->parties.push_back(std::move(party));
    }
  }
  auto s0 = costs.take();
  auto drv = sys.spawn(driver, eng, opt, queue, groups, out);
  caf::anon_send(drv, tick_atom_v);
  caf::scoped_actor self{sys};
  auto last_change = clock_type::now();
  uint64_t last_sessions = 0;
  auto all_joined_at = clock_type::time_point{};
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    uint64_t progress = 0;
    self->request(drv, std::chrono::seconds(10), caf::get_atom_v)
      .receive([&](uint64_t x) { progress = x; }, [](caf::error&) {});
    auto joined = progress >> 32;
    auto sessions = progress & 0xffffffffu;
    auto now = clock_type::now();
    if (sessions != last_sessions) {
      last_sessions = sessions;
      last_change = now;
    }
    bool all_joined = joined >= opt.users;
    if (all_joined && all_joined_at == clock_type::time_point{})
      all_joined_at = now;
    if (all_joined
        && (now - last_change > std::chrono::milliseconds(opt.quiet_ms)
            || now - all_joined_at
                 > std::chrono::duration<double>(opt.drain_s)))
      break;
    if (!all_joined
        && now - last_change > std::chrono::duration<double>(opt.drain_s)) {
      std::printf("# [%s] stalled: %" PRIu64 " of %zu users joined\n",
                  queue.c_str(), joined, opt.users);
      break;
    }
  }
  self->send_exit(drv, caf::exit_reason::user_shutdown);
  self->wait_for(drv); // the tally is main's from here on
  auto s1 = costs.take();

  mode_result r;
  auto& t = *out;
  size_t want = groups ? 10 : 2;
  size_t bad_size = 0, split = 0, untold = 0;
  double diff_sum = 0, team_sum = 0;
  size_t balanced = 0;
  // A party is never split: all in one session and one team, or none.
  std::map<std::string, int> team_of;
  for (auto& [sid, roster] : t.sessions)
    for (auto& [u, team] : roster)
      team_of[u] = team;
  for (auto& p : t.parties) {
    std::set<std::string> where;
    std::set<int> teams;
    size_t matched = 0;
    for (auto& u : p)
      if (auto i = t.session_of.find(u); i != t.session_of.end()) {
        ++matched;
        where.insert(i->second);
        teams.insert(team_of[u]);
      }
    if ((matched != 0 && matched != p.size()) || where.size() > 1
        || teams.size() > 1)
      ++split;
  }
  for (auto& [sid, roster] : t.sessions) {
    if (roster.size() != want)
      ++bad_size;
    r.matched_users += roster.size();
    if (t.told[sid] < roster.size())
      ++untold;
    if (groups && queue[0] == 'g') { // the balanced queues
      double s0 = 0, s1 = 0;
      for (auto& [u, team] : roster)
        (team == 0 ? s0 : s1) += t.skill[u];
      diff_sum += std::fabs(s0 - s1);
      team_sum += (s0 + s1) / 2;
      ++balanced;
    }
  }
  r.sessions = t.sessions.size();
  auto secs
    = std::chrono::duration<double>(t.last_match - t.first_join).count();
  r.users_per_s = secs > 0 ? r.matched_users / secs : 0;
  r.balance = balanced > 0 && team_sum > 0 ? diff_sum / team_sum : 0;
  r.violations = t.double_booked + bad_size + split + untold;
  r.ttm_ms = std::move(t.ttm_ms);
  r.rematch_ms = std::move(t.rematch_ms);
  r.proposals = t.proposals;
  r.declined = t.declined;
  std::printf("# groups_bench [%s]: %zu users joined, %zu matched in %zu "
              "sessions over %.2f s: %.0f users/s; failed %zu%s%s; "
              "double_booked=%zu wrong_size=%zu split_parties=%zu untold=%zu\n",
              queue.c_str(), t.joined, r.matched_users, r.sessions, secs,
              r.users_per_s, t.failed, t.failed ? " first: " : "",
              t.first_error.c_str(), t.double_booked, bad_size, split, untold);
  // Where the CPU went, per session of 10 (the span includes the quiet
  // wait at the end, when little runs).
  if (r.sessions > 0) {
    auto per = [&](uint64_t a, uint64_t b) {
      return static_cast<double>(b - a) / 1e3 / static_cast<double>(r.sessions);
    };
    std::printf(
      "# [%s] cpu per session: bench process %.0f us, redis %.0f "
      "us, postgres %.0f us; threads: %s\n",
      queue.c_str(), per(s0.self_ns, s1.self_ns), per(s0.redis_ns, s1.redis_ns),
      per(s0.pg_ns, s1.pg_ns),
      e2e_bench::describe_cpu(s0.threads, s1.threads, s1.t - s0.t).c_str());
  }
  std::fflush(stdout);
  return r;
}

} // namespace

int main(int argc, char** argv) {
  options opt;
  CLI::App app{"groups_bench: 5-vs-5 with parties against 1:1, users/s"};
  app.add_option("--store", opt.store, "redis | embedded");
  app.add_option("--db", opt.db, "postgres | memory");
  app.add_option("--pg", opt.pg, "PostgreSQL admin conninfo");
  app.add_option("--redis-host", opt.redis_host);
  app.add_option("--redis-port", opt.redis_port);
  app.add_option("--users", opt.users, "users per mode");
  app.add_option("--in-flight", opt.in_flight, "users waiting at a time");
  app.add_option("--sched-threads", opt.sched_threads);
  app.add_option("--rounds", opt.rounds, "2: ABBA, each mode its mean")
    ->check(CLI::Range(1, 2));
  app.add_option("--seed", opt.seed);
  app.add_option("--quiet-ms", opt.quiet_ms);
  app.add_option("--drain-s", opt.drain_s);
  app.add_option("--mode", opt.mode, "groups | ready (the ready check)")
    ->check(CLI::IsMember({"groups", "ready"}));
  app.add_option("--decline", opt.decline,
                 "ready mode: share of answers declining in its last run");
  CLI11_PARSE(app, argc, argv);

  std::unique_ptr<mm::bench::pg_conn> admin;
  std::string db, conninfo;
  if (opt.db == "postgres") {
    admin = std::make_unique<mm::bench::pg_conn>(opt.pg);
    db = "mm_groups_" + std::to_string(getpid());
    create_database(*admin, db);
    conninfo = with_dbname(opt.pg, db);
  }
  e2e_bench::sampler costs;
  if (admin)
    costs.postmaster = postmaster_of(*admin);
  if (opt.store == "redis") {
    redis_options ro;
    ro.host = opt.redis_host;
    ro.port = opt.redis_port;
    costs.redis_admin = make_redis_store(ro)->connect();
  }
  mode_result pairs, groups, plain, ready, declines;
  {
    caf::actor_system_config cfg;
    configure(cfg, opt.sched_threads);
    caf::actor_system sys{cfg};
    engine_config ec;
    ec.node = "groups-" + std::to_string(getpid());
    ec.use_redis = opt.store == "redis";
    ec.redis.host = opt.redis_host;
    ec.redis.port = opt.redis_port;
    ec.use_postgres = opt.db == "postgres";
    ec.postgres.conninfo = conninfo;
    ec.relay.stream = "mm:groups" + std::to_string(getpid()) + "events";
    auto book = parse_rule_book(rules_json);
    if (!book) {
      std::fprintf(stderr, "rules: %s\n", book.error().detail.c_str());
      return 2;
    }
    ec.rules = std::make_shared<const rule_book>(std::move(*book));
    auto started = engine::start(sys, ec);
    if (!started) {
      std::fprintf(stderr, "engine::start: %s\n",
                   started.error().detail.c_str());
      return 2;
    }
    auto eng = *started;
    std::printf("# groups_bench: %u cores, store=%s db=%s, %zu users per "
                "mode, %zu in flight, CAF scheduler threads=%zu\n",
                std::thread::hardware_concurrency(), opt.store.c_str(),
                opt.db.c_str(), opt.users, opt.in_flight, opt.sched_threads);
    // ABBA; each mode counts with the mean of its rounds (a drift as the
    // tables grow cancels), violations of all rounds.
    auto mean_of = [](const std::vector<mode_result>& rs) {
      mode_result m;
      for (auto& r : rs) {
        m.users_per_s += r.users_per_s / rs.size();
        m.balance += r.balance / rs.size();
        m.violations += r.violations;
        m.ttm_ms.insert(m.ttm_ms.end(), r.ttm_ms.begin(), r.ttm_ms.end());
      }
      return m;
    };
    if (opt.mode == "ready") {
      std::vector<mode_result> p_rounds, r_rounds;
      p_rounds.push_back(run_mode(sys, eng, opt, "p5v5", true, 1, costs));
      r_rounds.push_back(run_mode(sys, eng, opt, "r5v5", true, 1, costs));
      r_rounds.push_back(run_mode(sys, eng, opt, "r5v5-2", true, 2, costs));
      p_rounds.push_back(run_mode(sys, eng, opt, "p5v5-2", true, 2, costs));
      plain = mean_of(p_rounds);
      ready = mean_of(r_rounds);
      declines = run_mode(sys, eng, opt, "r5v5-d", true, 3, costs);
    } else {
      std::vector<mode_result> p_rounds, g_rounds;
      p_rounds.push_back(run_mode(sys, eng, opt, "pairs", false, 1, costs));
      g_rounds.push_back(run_mode(sys, eng, opt, "g5v5", true, 1, costs));
      if (opt.rounds > 1) {
        g_rounds.push_back(run_mode(sys, eng, opt, "g5v5-2", true, 2, costs));
        p_rounds.push_back(run_mode(sys, eng, opt, "pairs-2", false, 2, costs));
      }
      pairs = mean_of(p_rounds);
      groups = mean_of(g_rounds);
    }
    eng->stop();
  }
  if (admin)
    admin->query("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
  if (opt.mode == "ready") {
    auto violations = plain.violations + ready.violations + declines.violations;
    auto p95 = quantile(ready.ttm_ms, 0.95);
    auto rematch_max = declines.rematch_ms.empty()
                         ? 0.0
                         : *std::max_element(declines.rematch_ms.begin(),
                                             declines.rematch_ms.end());
    std::printf("ready_plain_users_per_s=%.0f\n", plain.users_per_s);
    std::printf("ready_users_per_s=%.0f\n", ready.users_per_s);
    std::printf("ready_declines_users_per_s=%.0f\n", declines.users_per_s);
    std::printf("ready_proposals_declined=%zu of %zu\n", declines.declined,
                declines.proposals);
    std::printf("ready_ttm_p95_ms=%.0f\n", p95);
    std::printf("ready_rematch_p95_ms=%.0f\n",
                quantile(declines.rematch_ms, 0.95));
    std::printf("ready_rematch_max_ms=%.0f (of %zu requeued members)\n",
                rematch_max, declines.rematch_ms.size());
    std::printf("ready_rematch_within_p95=%s\n",
                rematch_max <= p95 ? "yes" : "no");
    std::printf("ready_violations=%zu\n", violations);
    std::printf("ready_ratio_to_plain=%.2f\n",
                plain.users_per_s > 0 ? ready.users_per_s / plain.users_per_s
                                      : 0.0);
    return violations == 0 ? 0 : 1;
  }
  auto violations = pairs.violations + groups.violations;
  std::printf("groups_pairs_users_per_s=%.0f\n", pairs.users_per_s);
  std::printf("groups_5v5_users_per_s=%.0f\n", groups.users_per_s);
  std::printf("groups_balance=%.3f\n", groups.balance);
  std::printf("groups_violations=%zu\n", violations);
  std::printf("groups_users_ratio_to_pairs=%.2f\n",
              pairs.users_per_s > 0 ? groups.users_per_s / pairs.users_per_s
                                    : 0.0);
  return violations == 0 ? 0 : 1;
}
