// The PostgreSQL match store's backfill (problem 16 of docs/design.md, I1,
// I13): new members for the open seats of an active group session.
//
// ONE transaction, in as few round trips as the rules allow: lock the
// session row (`mm_lock_session`, as a leave or an end does), read its
// roster in a statement of its own (`load_rosters`: a statement that waited
// for the lock has a snapshot from before the wait, and would miss a fill or
// a leave committed meanwhile), decide by the shared rule (`check_fill`:
// retry, ended, pair, queue, former members, capacity), then one statement
// writes every new member and the session.members_changed event
// (`mm_add_members`), the two cancel checkpoints, COMMIT. Every change of a
// group's roster holds the session's row lock (a leave, an end, a close, a
// fill), so what the roster read shows stays true until COMMIT: of
// concurrent fills of one session each sees the ones before it, and none
// takes the session over its maximum. A new member busy in another session
// fails the statement on the one-active index (I1): the transaction rolls
// back and one read names every busy one, as for a group commit. No schema
// change: the members are session_members rows as a group commit's are
// (`ord` continues the roster).

#include "persistence/matchdb/pg/pg_match_store.hpp"

#include <utility>

#include <nlohmann/json.hpp>

namespace mm::pg {

namespace {

/// How often a fill is tried when a deadlock or a busy member whose session
/// ended meanwhile refused it (as for a group commit): then it is refused
/// as a conflict.
constexpr int max_fill_tries = 2;

} // namespace

failure pg_match_store::fill_target_gone(const std::string& session_id) {
  auto arg = nlohmann::json::array({session_id}).dump();
  auto r = exec_prepared(st_ended_of, {&arg});
  must(r, "ended session");
  must(exec("ROLLBACK"), "ROLLBACK");
  if (PQntuples(r.get()) == 0)
    return failure{errc::not_found, "no session " + session_id};
  return failure{errc::not_found, "session " + session_id + " has ended"};
}

outcome<backfill_record>
pg_match_store::do_add_members(const backfill_request& req,
                               const commit_check& check) {
  // Outlive a lost connection (`run` runs the body again): a withdrawn fill
  // is not written again, and a second attempt that finds the members added
  // after this call sent its COMMIT answers that this call added them.
  std::optional<failure> withdrawn;
  bool commit_sent = false;
  const auto lease = std::to_string(commit_lease_ms_);
  auto res = run<backfill_record>(
    "add members", [&]() -> outcome<backfill_record> {
      if (withdrawn)
        return *withdrawn;
      for (int tries = 1;; ++tries) {
        must(exec("BEGIN"), "BEGIN");
        auto r = exec_prepared(st_lock_session, {&req.session_id});
        must(r, "lock session");
        if (PQntuples(r.get()) == 0)
          return fill_target_gone(req.session_id); // over, or unknown
        backfill_record out;
        out.session = read_session(r.get(), 0);
        load_rosters({&out.session});
        auto retry = check_fill(out.session, req);
        if (!retry || *retry) {
          must(exec("ROLLBACK"), "ROLLBACK");
          if (!retry)
            return retry.error();
          out.added_now = commit_sent; // added before, maybe by our COMMIT
          return out;
        }
        auto& roster = out.session.members;
        auto members = nlohmann::json::array();
        for (const auto& m : req.members) {
          members.push_back({{"user_id", m.user},
                             {"ticket", m.ticket},
                             {"attrs", m.attrs},
                             {"team", m.team},
                             {"ord", roster.size()}});
          roster.push_back(m);
          roster.back().active = true;
        }
        const std::vector<std::string> params{
          req.session_id,
          members.dump(),
          members_changed_event_id(req.session_id, req.group),
          members_changed_payload(out.session, req),
          lease,
        };
        auto a = exec_prepared(st_add_members, params);
        if (ok(a.get())) {
          if (int_of(a.get(), 0, 0) != static_cast<int64_t>(req.members.size()))
            throw db_refusal{failure{errc::protocol_error,
                                     "add members wrote " + text(a.get(), 0, 0)
                                       + " of "
                                       + std::to_string(req.members.size())}};
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
          commit_sent = true;
          commit(commit_lease_ms_ == 0);
          out.added_now = true;
          return out;
        }
        auto state = sqlstate_of(a.get());
        auto constraint = field_of(a.get(), PG_DIAG_CONSTRAINT_NAME);
        auto why = to_failure(a.get(), "add members");
        must(exec("ROLLBACK"), "ROLLBACK");
        if (state == "23505" && constraint == one_active_index) {
          auto detail = busy_detail(req.members);
          if (!detail.empty())
            return failure{errc::conflict, std::move(detail)};
          // The other session ended meanwhile: the fill may go in now.
          why = failure{errc::conflict, "a new member was in an active session "
                                        "that ended meanwhile"};
        } else if (state == "40P01" || state == "40001") {
          why = failure{errc::conflict,
                        "contended by a concurrent commit: " + why.detail};
        } else {
          throw db_refusal{std::move(why)};
        }
        if (tries >= max_fill_tries)
          return why;
      }
    });
  if (!res && withdrawn)
    return *withdrawn;
  return res;
}

} // namespace mm::pg
