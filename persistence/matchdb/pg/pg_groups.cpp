// The PostgreSQL match store's group matches (problem 15 of docs/design.md,
// migrations/0006_groups.sql): a group commits whole as one session of N
// members, and its members leave one by one until too few stay.
//
// A group's session is a row of match_sessions keyed by `group_key` (queue
// and group id) with `group_id` and `min_players` set; every member is a row
// of session_members (ticket, team, attrs, its position `ord`), so the
// one-active-session index guards each of them (I1) and every statement that
// ends a session frees them all. Readers get the roster with the session
// (`MM_SESSION_COLS`, in the same snapshot), except the statements that lock
// sessions: those read it right after the lock (`load_rosters`), so a leave
// committed while they waited is seen.
//
// Commit: ONE transaction, one statement for the session, its members and
// its match.created event (`mm_commit_group`), then the two cancel
// checkpoints; a withdrawal rolls the transaction back (nothing of the group
// was ever visible). A busy member fails the statement on the unique index:
// the transaction rolls back and one read of the members' active
// memberships names every busy one (a read in a new snapshot, as after a
// rollback to a savepoint: nothing of the refused transaction is worth
// keeping). A retry of a committed group finds its key taken (ON CONFLICT DO
// NOTHING, after waiting for a concurrent committer of the same key) and
// answers that session.
//
// Leave: lock the session as `end_session` does, mark the member inactive
// and write its `session.member_left` event; when fewer than min_players
// stay, end the session in the same transaction with the same statement as
// `end_session` (`end_locked`: moved to the history with its roster, one
// `session.ended` naming every member). A pair's leave is its end.

#include "persistence/matchdb/pg/pg_match_store.hpp"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

namespace mm::pg {

namespace {

/// How often a group is tried when a deadlock or a busy member whose
/// session ended meanwhile refused it (as for one request of a batch,
/// pg_commit.cpp): then it is refused as a conflict.
constexpr int max_group_tries = 2;

/// The record of the group session `id` that `req` just created.
match_record created_record(const group_match_request& req,
                            const std::string& id, int64_t created_at) {
  match_record rec;
  rec.session_id = id;
  rec.queue = req.queue;
  rec.user_a = req.members[0].user;
  rec.ticket_a = req.members[0].ticket;
  rec.user_b = req.members[1].user;
  rec.ticket_b = req.members[1].ticket;
  rec.status = session_status::active;
  rec.created_at = created_at;
  rec.created = true;
  rec.group = req.group;
  rec.min_players = req.min_players;
  rec.members = req.members;
  for (auto& m : rec.members)
    m.active = true;
  return rec;
}

} // namespace

outcome<match_record>
pg_match_store::do_commit_group(const group_match_request& req,
                                const commit_check& check) {
  // Made once, before the transaction: a second attempt after a lost
  // connection writes the same session id, so it recognizes a first attempt
  // whose COMMIT went through (its key answers our own id).
  const auto id = new_session_id();
  const auto key = group_key(req);
  auto members = nlohmann::json::array();
  for (size_t i = 0; i < req.members.size(); ++i) {
    const auto& m = req.members[i];
    members.push_back({{"user_id", m.user},
                       {"ticket", m.ticket},
                       {"attrs", m.attrs},
                       {"team", m.team},
                       {"ord", i}});
  }
  const auto& first = req.members[0];
  const auto& second = req.members[1];
  // In the statement's order ($1..$15).
  const std::vector<std::string> params{
    id,
    key,
    req.queue,
    first.user,
    first.ticket,
    first.attrs,
    second.user,
    second.ticket,
    second.attrs,
    req.group,
    std::to_string(req.min_players),
    members.dump(),
    match_created_event_id(id),
    group_created_payload(id, req),
    std::to_string(commit_lease_ms_),
  };
  // Outlives a lost connection: a withdrawn group is not written again when
  // `run` repeats the transaction, and answers `cancelled` whatever becomes
  // of the transaction.
  std::optional<failure> withdrawn;
  auto res = run<match_record>("commit group", [&]() -> outcome<match_record> {
    if (withdrawn)
      return *withdrawn;
    for (int tries = 1;; ++tries) {
      must(exec("BEGIN"), "BEGIN");
      auto r = exec_prepared(st_commit_group, params);
      if (ok(r.get())) {
        if (PQntuples(r.get()) == 0) {
          // The key is taken: committed before (a retry). Nothing written.
          auto arg = nlohmann::json::array({key}).dump();
          auto k = exec_prepared(st_by_key, {&arg});
          must(k, "read group session");
          must(exec("ROLLBACK"), "ROLLBACK");
          if (PQntuples(k.get()) == 0)
            return failure{errc::protocol_error,
                           "commit inserted nothing and found no session for "
                           "the group"};
          auto rec = read_session(k.get(), 0);
          // Our own id: an earlier attempt of this very call committed it.
          rec.created = rec.session_id == id;
          return rec;
        }
        auto rec = created_record(req, id, int_of(r.get(), 0, 1));
        for (auto stage :
             {commit_stage::after_create, commit_stage::before_commit}) {
          if (check && !check(stage, 0)) {
            withdrawn = failure{errc::cancelled, std::string{"withdrawn at "}
                                                   + to_string(stage)};
            must(exec("ROLLBACK"), "ROLLBACK");
            return *withdrawn;
          }
        }
        // NOTIFY + COMMIT in one round trip; a leased event is ours to
        // deliver (set_commit_lease): nobody else needs waking.
        commit(commit_lease_ms_ == 0);
        return rec;
      }
      auto state = sqlstate_of(r.get());
      auto constraint = field_of(r.get(), PG_DIAG_CONSTRAINT_NAME);
      auto why = to_failure(r.get(), "commit group");
      must(exec("ROLLBACK"), "ROLLBACK");
      if (state == "23505" && constraint == one_active_index) {
        auto detail = busy_detail(req.members);
        if (!detail.empty())
          return failure{errc::conflict, std::move(detail)};
        // The other session ended meanwhile: the group may fit now.
        why = failure{errc::conflict, "a member of the group was in an active "
                                      "session that ended meanwhile"};
      } else if (state == "40P01" || state == "40001") {
        why = failure{errc::conflict,
                      "contended by a concurrent commit: " + why.detail};
      } else {
        throw db_refusal{std::move(why)};
      }
      if (tries >= max_group_tries)
        return why;
    }
  });
  if (!res && withdrawn)
    return *withdrawn;
  return res;
}

std::string
pg_match_store::busy_detail(const std::vector<session_member>& members) {
  auto users = nlohmann::json::array();
  for (const auto& m : members)
    users.push_back(m.user);
  auto arg = users.dump();
  auto r = exec_prepared(st_busy_of, {&arg});
  must(r, "read busy members");
  std::unordered_map<std::string, std::string> busy; // user -> session
  for (int i = 0; i < PQntuples(r.get()); ++i)
    busy.emplace(text(r.get(), i, 0), text(r.get(), i, 1));
  std::string detail;
  for (const auto& m : members) {
    auto i = busy.find(m.user);
    if (i == busy.end())
      continue;
    if (!detail.empty())
      detail += "; ";
    detail += "user '" + m.user + "' is already in active session " + i->second;
  }
  return detail;
}

void pg_match_store::load_rosters(const std::vector<match_record*>& sessions) {
  std::unordered_map<std::string, match_record*> groups; // by session id
  auto ids = nlohmann::json::array();
  for (auto* s : sessions) {
    if (s->group.empty() || !s->members.empty())
      continue;
    if (groups.emplace(s->session_id, s).second)
      ids.push_back(s->session_id);
  }
  if (groups.empty())
    return; // pairs only: no statement
  auto arg = ids.dump();
  auto r = exec_prepared(st_roster, {&arg});
  must(r, "read group members");
  for (int i = 0; i < PQntuples(r.get()); ++i)
    if (auto g = groups.find(text(r.get(), i, 0)); g != groups.end())
      read_roster(r.get(), i, 1, *g->second);
  for (auto& [id, s] : groups)
    if (s->members.empty()) // locked by this transaction: cannot happen
      throw db_refusal{failure{errc::protocol_error,
                               "group session " + id + " has no members"}};
}

outcome<leave_record>
pg_match_store::do_leave_session(const std::string& session_id,
                                 const std::string& user,
                                 const std::string& reason) {
  return run<leave_record>("leave session", [&]() -> outcome<leave_record> {
    leave_record out;
    must(exec("BEGIN"), "BEGIN");
    auto r = exec_prepared(st_lock_session, {&session_id});
    must(r, "lock session");
    if (PQntuples(r.get()) == 0) {
      auto e = ended_state(session_id, user); // over, or unknown
      if (!e)
        return e.error();
      out.session = std::move(e->session);
      return out; // over: the recorded state
    }
    auto e = read_ended(r.get(), 0);
    load_rosters({&e.session});
    if (auto f = check_member(e.session, user); f.code != errc::none) {
      must(exec("ROLLBACK"), "ROLLBACK");
      return f;
    }
    auto& members = e.session.members;
    auto m
      = std::find_if(members.begin(), members.end(),
                     [&](const session_member& x) { return x.user == user; });
    const bool pair = e.session.group.empty();
    if (e.session.status != session_status::active
        || (!pair && (m == members.end() || !m->active))) {
      // Over, or this member left before: the recorded state.
      must(exec("ROLLBACK"), "ROLLBACK");
      out.session = std::move(e.session);
      return out;
    }
    if (!pair) {
      m->active = false;
      auto event_id = member_left_event_id(session_id, user);
      auto payload = member_left_payload(e.session, user, reason);
      auto l = exec_prepared(st_leave,
                             {&session_id, &user, &event_id, &payload});
      must(l, "leave session");
      if (PQntuples(l.get()) != 1) // locked and read active: cannot happen
        throw db_refusal{failure{errc::protocol_error,
                                 "user '" + user + "' was not in session "
                                   + session_id + " when it left"}};
      out.left_now = true;
    }
    auto stay = std::count_if(members.begin(), members.end(),
                              [](const session_member& x) { return x.active; });
    if (pair || static_cast<uint32_t>(stay) < e.session.min_players) {
      // A pair's leave, or too few stay: the end, as end_session ends.
      std::vector<end_record> todo{std::move(e)};
      todo[0].ended_by = user;
      todo[0].reason = reason;
      end_locked(todo);
      out.session = std::move(todo[0].session);
      out.left_now = out.ended_now = true;
    } else {
      out.session = std::move(e.session);
    }
    commit(true); // NOTIFY + COMMIT in one round trip
    return out;
  });
}

} // namespace mm::pg
