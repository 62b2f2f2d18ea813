// The checks of an e2e_bench run (see e2e_verify.hpp): every user matched
// once or still waiting, both users of a session told alike, no user in two
// sessions; the engine's and the database's counts agree. No CAF here.

#include "bench/e2e_verify.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <unordered_map>

namespace mm::e2e_bench {

using namespace mm::bench;

namespace {

/// A session as its users' events told of it.
struct session_seen {
  std::string event_id, queue, user_a, user_b;
  std::vector<size_t> receivers; ///< users whose session forwarded it
  bool two_events = false;       ///< receivers got different event ids
};

/// Counts the per-user findings of `r`, user `i`, into `t` and notes its
/// event's session in `sessions`.
void tally_user(tally& t, const user_rec& r, size_t i,
                const std::string& prefix,
                const std::vector<std::string>& queue_names,
                std::unordered_map<std::string, session_seen>& sessions) {
  auto queues = queue_names.size();
  if (r.join_ns == 0)
    return;
  ++t.joined;
  t.first_join = std::min(t.first_join, r.join_ns);
  t.last_join = std::max(t.last_join, r.join_ns);
  if (r.state_ns != 0)
    t.ttm_state.push_back(r.state_ns - r.join_ns);
  if (r.events == 0) {
    if (r.phase != session_phase::failed)
      t.waiting[i % queues].push_back(i);
    return;
  }
  t.last_event = std::max(t.last_event, r.event_ns);
  t.ttm.push_back(r.event_ns - r.join_ns);
  if (r.state_ns != 0 && r.state_ns < r.event_ns)
    t.relay.push_back(r.event_ns - r.state_ns);
  if (r.events > 1)
    ++t.two_events;
  auto me = user_name(prefix, i);
  if (r.user_a != me && r.user_b != me)
    ++t.not_named;
  if (r.phase != session_phase::matched)
    ++t.not_matched_state;
  else if (r.state_session != r.session_id)
    ++t.state_mismatch;
  if (r.queue != queue_names[i % queues])
    ++t.wrong_queue;
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

/// Counts the per-session findings into `t`: both users heard of it, it
/// names them, it pairs two users of one queue, nobody is in two sessions.
void tally_sessions(
  tally& t, const std::unordered_map<std::string, session_seen>& sessions,
  size_t users, size_t queues, const std::string& prefix) {
  // Users by name (events name their users).
  std::unordered_map<std::string, size_t> index_of;
  index_of.reserve(users);
  for (size_t i = 0; i < users; ++i)
    index_of.emplace(user_name(prefix, i), i);
  std::vector<uint32_t> sessions_of(users, 0);
  for (auto& [sid, s] : sessions) {
    if (s.two_events)
      ++t.split_events;
    if (s.receivers.size() != 2)
      ++t.one_sided;
    for (auto i : s.receivers) {
      auto me = user_name(prefix, i);
      if (me != s.user_a && me != s.user_b)
        ++t.other_receivers;
    }
    auto a = index_of.find(s.user_a);
    auto b = index_of.find(s.user_b);
    if (a == index_of.end() || b == index_of.end() || a->second == b->second
        || a->second % queues != b->second % queues) {
      ++t.cross_queue;
      continue;
    }
    ++sessions_of[a->second];
    ++sessions_of[b->second];
  }
  for (auto n : sessions_of)
    if (n > 1)
      ++t.double_booked;
}

} // namespace

tally tally_users(const std::vector<driver_report>& reports, size_t users,
                  const std::string& prefix,
                  const std::vector<std::string>& queue_names) {
  tally t;
  auto drivers = reports.size();
  auto queues = queue_names.size();
  std::vector<const user_rec*> recs(users, nullptr);
  for (size_t d = 0; d < drivers; ++d) {
    auto& rep = reports[d];
    for (size_t k = 0; k < rep.users.size(); ++k)
      recs[d + k * drivers] = &rep.users[k];
    t.join_errors += rep.join_errors;
    t.unknown += rep.unknown_senders;
    t.failed += rep.failed;
    if (t.first_error.empty())
      t.first_error = rep.first_error;
  }
  t.ttm.reserve(users);
  t.ttm_state.reserve(users);
  t.waiting.resize(queues);
  std::unordered_map<std::string, session_seen> sessions;
  sessions.reserve(users / 2 + 1);
  for (size_t i = 0; i < users; ++i)
    tally_user(t, *recs[i], i, prefix, queue_names, sessions);
  t.sessions = sessions.size();
  tally_sessions(t, sessions, users, queues, prefix);
  // The users left without a match: at most one per queue.
  for (auto& ws : t.waiting) {
    t.waiting_total += ws.size();
    if (ws.size() > 1)
      t.too_many_waiting += ws.size() - 1;
  }
  return t;
}

void check_users(problem_list& problems, const tally& t, size_t users,
                 bool bounded, uint64_t not_queued, uint64_t engine_matches) {
  auto expect = [&](const std::string& what, uint64_t got, uint64_t want) {
    problems.expect(what, got, want);
  };
  expect("users that never joined (--duration bound)",
         bounded ? 0 : users - t.joined, 0);
  expect("users with two match events (two sessions)", t.two_events, 0);
  expect("users whose event does not name them", t.not_named, 0);
  expect("users with an event whose session did not end matched",
         t.not_matched_state, 0);
  expect("users whose matched state names another session", t.state_mismatch,
         0);
  expect("users matched in another queue than theirs", t.wrong_queue, 0);
  expect("sessions not heard of by exactly two users", t.one_sided, 0);
  expect("sessions whose users got different event ids", t.split_events, 0);
  expect("events reaching a user they do not name", t.other_receivers, 0);
  expect("sessions pairing unknown users, a user with itself or two queues",
         t.cross_queue, 0);
  expect("users in two sessions", t.double_booked, 0);
  expect("unmatched users beyond one per queue", t.too_many_waiting, 0);
  expect("unmatched users whose session is not queued", not_queued, 0);
  expect("failed joins (session state failed)", t.failed, 0);
  expect("join requests answered with an error", t.join_errors, 0);
  expect("messages from sessions not ours", t.unknown, 0);
  expect("engine match counter vs sessions seen", engine_matches, t.sessions);
}

uint64_t check_database(problem_list& problems, pg_conn& admin,
                        const std::string& conninfo, const std::string& db,
                        size_t sessions, const std::string& tag) {
  pg_conn check{conninfo};
  auto rows = check.count("SELECT count(*) FROM match_sessions");
  auto outbox
    = check.count("SELECT count(*) FROM outbox WHERE type = 'match.created'");
  auto booked = check.count(
    "SELECT count(*) FROM (SELECT user_id FROM session_members WHERE "
    "active GROUP BY user_id HAVING count(*) > 1) x");
  problems.expect("database sessions vs sessions seen", rows, sessions);
  problems.expect("database match.created events vs sessions seen", outbox,
                  sessions);
  problems.expect("database: users in two active sessions", booked, 0);
  std::printf("[%s]   database %s: %" PRIu64 " sessions, %" PRIu64
              " match.created events, %" PRIu64 " users in two active "
              "sessions\n",
              tag.c_str(), db.c_str(), rows, outbox, booked);
  // Transactions of the whole run: the engine's connections are closed,
  // so every backend has reported its counts.
  admin.query("SELECT pg_stat_clear_snapshot()");
  return admin.count("SELECT xact_commit + xact_rollback FROM "
                     "pg_stat_database WHERE datname = '"
                     + db + "'");
}

} // namespace mm::e2e_bench
