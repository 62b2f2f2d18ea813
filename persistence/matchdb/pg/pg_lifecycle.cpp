// The PostgreSQL match store's session lifecycle: a member ends a session,
// the engine expires old ones, and prune deletes what is over.
//
// Ending is lock, then write, in one transaction: the session row is locked
// first (`mm_lock_session`, or `mm_expire_pick` with SKIP LOCKED for many;
// a session that is not live is looked up in the history, `mm_ended_of`),
// the event payloads are built here from what the lock read and, for a
// group, from its members read right after the lock (`load_rosters`; the
// same function as the in-memory store's: one payload format), and `mm_end`
// ends the sessions (moved to session_history, members freed, a group's
// roster with it; a mutual match's stays, closed) and inserts one
// `session.ended` event each; NOTIFY and COMMIT go in one round trip. Of two
// concurrent ends, the second waits for the first's row lock and then finds
// the session ended: it answers that state and writes nothing.

#include "persistence/matchdb/pg/pg_match_store.hpp"

#include <cstdlib>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

namespace mm::pg {

void pg_match_store::end_locked(std::vector<end_record>& todo) {
  auto rows = nlohmann::json::array();
  for (size_t k = 0; k < todo.size(); ++k) {
    const auto& e = todo[k];
    rows.push_back({
      {"idx", static_cast<int64_t>(k)},
      {"id", e.session.session_id},
      {"ended_by", e.ended_by},
      {"reason", e.reason},
      {"event_id", session_ended_event_id(e.session.session_id)},
      {"payload", session_ended_payload(e.session, e.ended_by, e.reason)},
    });
  }
  auto arg = rows.dump();
  auto r = exec_prepared(st_end, {&arg});
  must(r, "end sessions");
  std::unordered_map<std::string, int64_t> closed_at; // by session id
  for (int i = 0; i < PQntuples(r.get()); ++i)
    closed_at.emplace(text(r.get(), i, 0), int_of(r.get(), i, 1));
  for (auto& e : todo) {
    auto i = closed_at.find(e.session.session_id);
    if (i == closed_at.end()) // locked while active: cannot happen
      throw db_refusal{
        failure{errc::protocol_error, "session " + e.session.session_id
                                        + " was not active when ended"}};
    e.session.status = session_status::closed;
    e.session.closed_at = i->second;
    e.session.close_reason = e.reason;
    e.ended_now = true;
  }
}

outcome<end_record>
pg_match_store::do_end_session(const std::string& session_id,
                               const std::string& user,
                               const std::string& reason) {
  return run<end_record>("end session", [&]() -> outcome<end_record> {
    must(exec("BEGIN"), "BEGIN");
    auto r = exec_prepared(st_lock_session, {&session_id});
    must(r, "lock session");
    if (PQntuples(r.get()) == 0)
      return ended_state(session_id, user); // ended before, or unknown
    auto e = read_ended(r.get(), 0);
    load_rosters({&e.session}); // a group's: any member may end it
    if (auto f = check_member(e.session, user); f.code != errc::none) {
      must(exec("ROLLBACK"), "ROLLBACK");
      return f;
    }
    if (e.session.status == session_status::closed) {
      must(exec("ROLLBACK"), "ROLLBACK"); // ended before: the recorded state
      return e;
    }
    std::vector<end_record> todo{std::move(e)};
    todo[0].ended_by = user;
    todo[0].reason = reason;
    end_locked(todo);
    commit(true); // NOTIFY + COMMIT in one round trip
    return std::move(todo[0]);
  });
}

std::vector<outcome<end_record>>
pg_match_store::do_end_sessions(const std::vector<end_request>& requests) {
  auto ids = nlohmann::json::array();
  for (const auto& r : requests)
    ids.push_back(r.session_id);
  auto arg = ids.dump();
  using answers = std::vector<outcome<end_record>>;
  auto res = run<answers>("end sessions", [&] {
    must(exec("BEGIN"), "BEGIN");
    auto r = exec_prepared(st_lock_sessions, {&arg});
    must(r, "lock sessions");
    // By id: each session as it is now, then as this batch leaves it.
    std::unordered_map<std::string, end_record> now;
    auto take = [&now](const PGresult* res) {
      for (int i = 0; i < PQntuples(res); ++i) {
        auto e = read_ended(res, i);
        auto id = e.session.session_id;
        now.emplace(std::move(id), std::move(e));
      }
    };
    take(r.get());
    {
      // The groups' members, read now that they are locked.
      std::vector<match_record*> live;
      for (auto& [id, e] : now)
        live.push_back(&e.session);
      load_rosters(live);
    }
    // The ones not live: ended (in the history) or unknown.
    auto gone = nlohmann::json::array();
    for (const auto& q : requests)
      if (now.count(q.session_id) == 0)
        gone.push_back(q.session_id);
    if (!gone.empty()) {
      auto garg = gone.dump();
      auto h = exec_prepared(st_ended_of, {&garg});
      must(h, "ended sessions");
      take(h.get());
    }
    answers out(requests.size(), outcome<end_record>{errc::none});
    std::vector<end_record> todo;
    std::unordered_map<std::string, size_t> ending; // id -> index in todo
    std::vector<std::pair<size_t, size_t>> later;   // (request, todo index)
    for (size_t k = 0; k < requests.size(); ++k) {
      const auto& q = requests[k];
      auto i = now.find(q.session_id);
      if (i == now.end()) {
        out[k] = outcome<end_record>{errc::not_found,
                                     "no session " + q.session_id};
        continue;
      }
      if (auto f = check_member(i->second.session, q.user);
          f.code != errc::none) {
        out[k] = f;
        continue;
      }
      if (auto j = ending.find(q.session_id); j != ending.end()) {
        later.emplace_back(k, j->second); // ended earlier in this batch
        continue;
      }
      if (i->second.session.status == session_status::closed) {
        out[k] = i->second; // ended before: the recorded state
        continue;
      }
      ending.emplace(q.session_id, todo.size());
      todo.push_back(i->second);
      todo.back().ended_by = q.user;
      todo.back().reason = q.reason;
      later.emplace_back(k, todo.size() - 1);
    }
    if (todo.empty()) {
      must(exec("ROLLBACK"), "ROLLBACK");
      return outcome<answers>{std::move(out)};
    }
    end_locked(todo);
    commit(true); // NOTIFY + COMMIT in one round trip
    std::vector<bool> answered(todo.size(), false);
    for (auto [k, t] : later) {
      out[k] = todo[t];
      if (answered[t]) // a later request of the batch: ended before it
        out[k]->ended_now = false;
      answered[t] = true;
    }
    return outcome<answers>{std::move(out)};
  });
  if (!res)
    return answers(requests.size(), outcome<end_record>{res.error()});
  return std::move(*res);
}

outcome<std::vector<end_record>>
pg_match_store::do_expire_sessions(uint32_t max_age_ms, uint32_t limit) {
  auto age = std::to_string(max_age_ms);
  auto lim = std::to_string(limit);
  return run<std::vector<end_record>>("expire sessions", [&] {
    must(exec("BEGIN"), "BEGIN");
    auto r = exec_prepared(st_expire_pick, {&age, &lim});
    must(r, "pick expired sessions");
    std::vector<end_record> todo;
    todo.reserve(static_cast<size_t>(PQntuples(r.get())));
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      todo.push_back(read_ended(r.get(), i));
      todo.back().ended_by.clear();
      todo.back().reason = expired_reason;
    }
    std::vector<match_record*> picked; // the groups' members, once locked
    for (auto& e : todo)
      picked.push_back(&e.session);
    load_rosters(picked);
    if (todo.empty()) {
      must(exec("ROLLBACK"), "ROLLBACK");
    } else {
      end_locked(todo);
      commit(true);
    }
    return outcome<std::vector<end_record>>{std::move(todo)};
  });
}

outcome<prune_counts> pg_match_store::do_prune(uint32_t retention_ms,
                                               uint32_t limit) {
  auto keep = std::to_string(retention_ms);
  auto lim = std::to_string(limit);
  // Each statement is its own transaction (no BEGIN): short, and a lost
  // connection repeats only the statement that was cut off.
  auto one = [&](stmt s, const char* what) {
    return run<size_t>(what, [&] {
      auto r = exec_prepared(s, {&keep, &lim});
      must(r, what);
      return outcome<size_t>{
        static_cast<size_t>(std::strtoull(PQcmdTuples(r.get()), nullptr, 10))};
    });
  };
  auto outbox = one(st_prune_outbox, "prune outbox");
  if (!outbox)
    return outbox.error();
  auto sessions = one(st_prune_sessions, "prune sessions");
  if (!sessions)
    return sessions.error();
  // At most `limit` sessions in all: the history gets what is left.
  outcome<size_t> history{size_t{0}};
  if (*sessions < limit) {
    lim = std::to_string(limit - *sessions);
    history = one(st_prune_history, "prune ended sessions");
    if (!history)
      return history.error();
  }
  prune_counts out;
  out.outbox = *outbox;
  out.sessions = *sessions + *history;
  return out;
}

outcome<end_record> pg_match_store::ended_state(const std::string& session_id,
                                                const std::string& user) {
  // Not live: ended (moved to the history) or unknown.
  auto arg = nlohmann::json::array({session_id}).dump();
  auto r = exec_prepared(st_ended_of, {&arg});
  must(r, "ended session");
  must(exec("ROLLBACK"), "ROLLBACK");
  if (PQntuples(r.get()) == 0)
    return outcome<end_record>{errc::not_found, "no session " + session_id};
  auto e = read_ended(r.get(), 0);
  if (auto f = check_member(e.session, user); f.code != errc::none)
    return f;
  return e;
}

} // namespace mm::pg
