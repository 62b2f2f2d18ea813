// Match store conformance: backfill (problem 16 of docs/design.md, I1 and
// I13). New members fill the open seats of an active group session in one
// transaction with one session.members_changed event, never taking it over
// its maximum; a retry of a fill changes nothing.

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/conformance/match_store_fixture.hpp"

using namespace mm;
using namespace mm::test;
using namespace mm::test::store_conformance;

namespace {

/// A group of `users` in `q` (tickets "t-<user>"), teams by `teams`.
group_match_request group(const std::string& q, const std::string& id,
                          const std::vector<std::string>& users,
                          const std::vector<uint32_t>& teams = {},
                          uint32_t min_players = 2) {
  group_match_request r;
  r.queue = q;
  r.group = id;
  r.min_players = min_players;
  for (size_t i = 0; i < users.size(); ++i)
    r.members.push_back(
      {users[i], "t-" + users[i], "{}", i < teams.size() ? teams[i] : 0, true});
  return r;
}

/// A fill of `session` by `users` (tickets "f-<user>", attrs naming the
/// user), teams by `teams`.
backfill_request
fill(const std::string& q, const std::string& session, const std::string& id,
     const std::vector<std::string>& users, uint32_t max_players,
     uint32_t team_size = 0, const std::vector<uint32_t>& teams = {}) {
  backfill_request r;
  r.session_id = session;
  r.queue = q;
  r.group = id;
  r.max_players = max_players;
  r.team_size = team_size;
  for (size_t i = 0; i < users.size(); ++i)
    r.members.push_back({users[i], "f-" + users[i],
                         "{\"u\":\"" + users[i] + "\"}",
                         i < teams.size() ? teams[i] : 0, true});
  return r;
}

/// The payloads of the events of `evs` of type `type`.
std::vector<nlohmann::json> payloads(const std::vector<outbox_event>& evs,
                                     const std::string& type) {
  std::vector<nlohmann::json> out;
  for (const auto& ev : evs)
    if (ev.type == type)
      out.push_back(nlohmann::json::parse(ev.payload));
  return out;
}

/// The `user` of each entry of `list` (an event's users, added or members).
std::vector<std::string> names(const nlohmann::json& list) {
  std::vector<std::string> out;
  for (const auto& u : list)
    out.push_back(u.at("user").get<std::string>());
  return out;
}

/// The users of a roster, in order; `active_only`: the active ones.
std::vector<std::string> roster(const match_record& s,
                                bool active_only = false) {
  std::vector<std::string> out;
  for (const auto& m : s.members)
    if (m.active || !active_only)
      out.push_back(m.user);
  return out;
}

using names_t = std::vector<std::string>;

/// The active session of `user`, "" for none.
std::string active_of(match_store& s, const std::string& user) {
  auto a = s.active_session_of(user);
  if (!a)
    throw std::runtime_error("active_session_of: " + a.error().detail);
  return a->has_value() ? (*a)->session_id : "";
}

/// The session `id` as the store has it now (throws when it has none).
match_record session_of(match_store& s, const std::string& id) {
  auto f = s.find_session(id);
  if (!f || !f->has_value())
    throw std::runtime_error("no session " + id);
  return **f;
}

/// Commits a group and takes its event out of the way; its session id.
std::string open_group(match_store& s, const group_match_request& g) {
  auto rec = s.commit_group(g);
  if (!rec)
    throw std::runtime_error("commit_group: " + rec.error().detail);
  drain(s);
  return rec->session_id;
}

/// A refusal of `res` with `code` whose detail holds `part`.
template <class T>
void expect_refused(const outcome<T>& res, errc code, const std::string& part) {
  ASSERT_FALSE(res) << "not refused";
  EXPECT_EQ(res.error().code, code) << res.error().detail;
  EXPECT_NE(res.error().detail.find(part), std::string::npos)
    << res.error().detail;
}

/// Nothing of a refused fill of `sid` by `users` is visible: the roster is
/// `before`, the users are free, no event was written, and (PostgreSQL, `db`
/// set) the session has no other member rows.
void expect_unchanged(match_store& s, pg_admin* db, const std::string& sid,
                      const names_t& before, const names_t& users) {
  EXPECT_EQ(roster(session_of(s, sid)), before);
  for (const auto& u : users)
    EXPECT_EQ(active_of(s, u), "") << u;
  EXPECT_TRUE(drain(s).empty());
  if (db != nullptr) {
    EXPECT_EQ(db->count("SELECT count(*) FROM session_members"
                        " WHERE session_id = '"
                        + sid + "'"),
              static_cast<int64_t>(before.size()));
  }
}

TEST_P(match_store_conformance,
       backfill_one_seat_is_filled_and_every_member_told) {
  auto db = pg_of(GetParam(), *maker_);
  auto sid = open_group(s(), group(q_, "g1", {"a", "b", "c"}));
  auto r = s().add_members(fill(q_, sid, "f1", {"d"}, 4));
  ASSERT_OK(r);
  EXPECT_TRUE(r->added_now);
  EXPECT_EQ(r->session.session_id, sid);
  EXPECT_EQ(r->session.group, "g1") << "the session keeps its own group";
  EXPECT_EQ(roster(r->session), (names_t{"a", "b", "c", "d"}));
  EXPECT_EQ(r->session.members[3].ticket, "f-d");
  EXPECT_TRUE(r->session.members[3].active);
  EXPECT_EQ(active_of(s(), "d"), sid);
  auto found = session_of(s(), sid);
  ASSERT_EQ(found.members.size(), 4u);
  EXPECT_EQ(found.members[3].user, "d");
  EXPECT_EQ(found.members[3].ticket, "f-d");
  EXPECT_EQ(found.members[3].attrs, "{\"u\":\"d\"}");
  auto evs = drain(s());
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].type, members_changed_type);
  EXPECT_EQ(evs[0].aggregate_id, sid);
  EXPECT_EQ(evs[0].event_id, members_changed_event_id(sid, "f1"));
  EXPECT_EQ(evs[0].event_id, "session.members_changed:" + sid + ":f1");
  auto p = nlohmann::json::parse(evs[0].payload);
  EXPECT_EQ(p.at("event_id"), evs[0].event_id);
  EXPECT_EQ(p.at("type"), "session.members_changed");
  EXPECT_EQ(p.at("session_id"), sid);
  EXPECT_EQ(p.at("queue"), q_);
  EXPECT_EQ(p.at("group"), "f1");
  EXPECT_EQ(p.at("added"),
            nlohmann::json::parse(R"([{"user":"d","ticket":"f-d","team":0}])"));
  EXPECT_EQ(names(p.at("users")), (names_t{"a", "b", "c", "d"}));
  EXPECT_EQ(p.at("users").at(0).at("ticket"), "t-a")
    << "users as match.created lists them: the relay reads them so";
  EXPECT_EQ(p.at("remaining"), 4);
  EXPECT_EQ(names(p.at("members")), (names_t{"a", "b", "c", "d"}));
  EXPECT_EQ(p.at("members").at(3).at("active"), true);
  EXPECT_EQ(p.at("teams"), nlohmann::json::parse(R"([["a","b","c","d"]])"));
  if (db) {
    EXPECT_EQ(db->count("SELECT count(*) FROM session_members WHERE active"),
              4);
    EXPECT_EQ(db->count("SELECT count(*) FROM session_members"
                        " WHERE user_id = 'd' AND ord = 3 AND ticket = 'f-d'"),
              1);
    EXPECT_EQ(db->count("SELECT count(*) FROM outbox"), 2);
  }
}

TEST_P(match_store_conformance,
       backfill_several_seats_are_filled_after_a_leave_in_teams) {
  // Two teams of three; c (team 1) leaves; two new ones join, one a team.
  auto sid = open_group(s(),
                        group(q_, "g1", {"a", "b", "c", "d"}, {0, 0, 1, 1}, 2));
  ASSERT_OK(s().leave_session(sid, "c", "bye"));
  drain(s());
  auto r = s().add_members(fill(q_, sid, "f1", {"e", "f"}, 6, 3, {1, 0}));
  ASSERT_OK(r);
  EXPECT_TRUE(r->added_now);
  EXPECT_EQ(roster(r->session), (names_t{"a", "b", "c", "d", "e", "f"}));
  EXPECT_EQ(roster(r->session, true), (names_t{"a", "b", "d", "e", "f"}));
  for (auto user : {"e", "f"})
    EXPECT_EQ(active_of(s(), user), sid) << user;
  EXPECT_EQ(active_of(s(), "c"), "") << "a leaver is not taken back in";
  auto changed = payloads(drain(s()), members_changed_type);
  ASSERT_EQ(changed.size(), 1u);
  const auto& p = changed[0];
  EXPECT_EQ(names(p.at("added")), (names_t{"e", "f"}));
  EXPECT_EQ(p.at("added").at(0).at("team"), 1);
  EXPECT_EQ(names(p.at("users")), (names_t{"a", "b", "d", "e", "f"}))
    << "every active member, old first, in roster order";
  EXPECT_EQ(p.at("remaining"), 5);
  EXPECT_EQ(names(p.at("members")), (names_t{"a", "b", "c", "d", "e", "f"}));
  EXPECT_EQ(p.at("members").at(2).at("active"), false);
  EXPECT_EQ(p.at("teams"),
            nlohmann::json::parse(R"([["a","b","f"],["d","e"]])"));
  // The session goes on as a group: a leave tells the new members too.
  ASSERT_OK(s().leave_session(sid, "a", "bye"));
  auto left = payloads(drain(s()), member_left_type);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].at("remaining"), 4);
  EXPECT_EQ(names(left[0].at("users")).size(), 6u);
  // And an end frees everyone, the new members with the rest.
  ASSERT_OK(s().end_session(sid, "e", "done"));
  for (auto user : {"b", "d", "e", "f"})
    EXPECT_EQ(active_of(s(), user), "") << user;
  auto ended = payloads(drain(s()), session_ended_type);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(names(ended[0].at("users")).size(), 6u);
}

TEST_P(match_store_conformance,
       backfill_a_retry_answers_the_session_and_writes_nothing) {
  auto sid = open_group(s(), group(q_, "g1", {"a", "b"}));
  auto f = fill(q_, sid, "f1", {"c", "d"}, 4);
  auto first = s().add_members(f);
  ASSERT_OK(first);
  EXPECT_TRUE(first->added_now);
  // The session is full now: a retry is still answered, not refused.
  auto other = factory_->connect();
  for (auto* store : {&s(), other.get()}) {
    auto again = store->add_members(f);
    ASSERT_OK(again);
    EXPECT_FALSE(again->added_now);
    EXPECT_EQ(again->session.session_id, sid);
    EXPECT_EQ(roster(again->session), (names_t{"a", "b", "c", "d"}));
  }
  auto evs = drain(s());
  ASSERT_EQ(evs.size(), 1u) << "a retry wrote another event";
  EXPECT_EQ(evs[0].type, members_changed_type);
  // A retry whose checkpoints would withdraw it is never asked.
  checkpoints cp{{{after_create, 0}}};
  auto unasked = s().add_members(f, cp.fn());
  ASSERT_OK(unasked);
  EXPECT_FALSE(unasked->added_now);
  EXPECT_TRUE(cp.calls.empty());
  // Another ticket of c is not this fill: c is busy in the session.
  auto changed = f;
  changed.members[0].ticket = "f-c-2";
  expect_refused(s().add_members(changed), errc::conflict,
                 "'c' is already in active session " + sid);
  // Once one of the fill left, its retry is refused.
  ASSERT_OK(s().leave_session(sid, "d", "bye"));
  drain(s());
  expect_refused(s().add_members(f), errc::conflict, "'d' was a member");
  EXPECT_TRUE(drain(s()).empty());
}

TEST_P(match_store_conformance,
       backfill_a_fill_over_capacity_is_refused_and_changes_nothing) {
  auto db = pg_of(GetParam(), *maker_);
  auto sid = open_group(s(), group(q_, "g1", {"a", "b", "c"}));
  const names_t before{"a", "b", "c"};
  expect_refused(s().add_members(fill(q_, sid, "f1", {"d", "e"}, 4)),
                 errc::conflict, "over capacity");
  expect_unchanged(s(), db.get(), sid, before, {"d", "e"});
  // Full: not one more.
  ASSERT_OK(s().add_members(fill(q_, sid, "f2", {"d"}, 4)));
  drain(s());
  expect_refused(s().add_members(fill(q_, sid, "f3", {"e"}, 4)), errc::conflict,
                 "over capacity");
  expect_unchanged(s(), db.get(), sid, {"a", "b", "c", "d"}, {"e"});
  // A seat freed by a leave is taken again.
  ASSERT_OK(s().leave_session(sid, "b", "bye"));
  drain(s());
  auto r = s().add_members(fill(q_, sid, "f4", {"e"}, 4));
  ASSERT_OK(r);
  EXPECT_EQ(roster(r->session, true), (names_t{"a", "c", "d", "e"}));
}

TEST_P(match_store_conformance,
       backfill_a_team_over_its_size_is_refused_and_changes_nothing) {
  auto db = pg_of(GetParam(), *maker_);
  // Two teams of three: team 0 holds two, team 1 one.
  auto sid = open_group(s(), group(q_, "g1", {"a", "b", "c"}, {0, 0, 1}));
  const names_t before{"a", "b", "c"};
  // Four of six fit in all, but not two more in team 0.
  expect_refused(s().add_members(fill(q_, sid, "f1", {"x", "y"}, 6, 3, {0, 0})),
                 errc::conflict, "over capacity: team 0");
  expect_unchanged(s(), db.get(), sid, before, {"x", "y"});
  auto r = s().add_members(fill(q_, sid, "f2", {"x", "y"}, 6, 3, {0, 1}));
  ASSERT_OK(r);
  EXPECT_EQ(r->session.members[3].team, 0u);
  EXPECT_EQ(r->session.members[4].team, 1u);
}

TEST_P(match_store_conformance,
       backfill_an_ended_or_unknown_session_is_not_found) {
  auto sid = open_group(s(), group(q_, "g1", {"a", "b", "c"}));
  ASSERT_OK(s().end_session(sid, "a", "done"));
  drain(s());
  expect_refused(s().add_members(fill(q_, sid, "f1", {"d"}, 4)),
                 errc::not_found, "ended");
  EXPECT_EQ(active_of(s(), "d"), "");
  expect_refused(s().add_members(fill(q_, "no-such-session", "f1", {"d"}, 4)),
                 errc::not_found, "no session");
  // A session that too many left ended too.
  auto sid2 = open_group(s(), group(q_, "g2", {"a", "b", "c"}, {}, 3));
  ASSERT_OK(s().leave_session(sid2, "c", "bye"));
  drain(s());
  expect_refused(s().add_members(fill(q_, sid2, "f2", {"d"}, 4)),
                 errc::not_found, "ended");
  // A closed one (close_session) too.
  auto sid3 = open_group(s(), group(q_, "g3", {"a", "b"}));
  ASSERT_OK(s().close_session(sid3, "closed"));
  expect_refused(s().add_members(fill(q_, sid3, "f3", {"d"}, 4)),
                 errc::not_found, "ended");
  EXPECT_TRUE(drain(s()).empty());
}

TEST_P(match_store_conformance, backfill_a_pair_or_another_queue_is_invalid) {
  auto db = pg_of(GetParam(), *maker_);
  auto pair = s().commit_matches({req(q_, "alice", "bob")}).at(0);
  ASSERT_OK(pair);
  drain(s());
  expect_refused(s().add_members(fill(q_, pair->session_id, "f1", {"c"}, 4)),
                 errc::invalid_argument, "pair");
  auto sid = open_group(s(), group(q_, "g1", {"a", "b"}));
  expect_refused(s().add_members(fill("games", sid, "f1", {"c"}, 4)),
                 errc::invalid_argument, "queue");
  expect_unchanged(s(), db.get(), sid, {"a", "b"}, {"c"});
}

TEST_P(match_store_conformance,
       backfill_a_new_member_busy_elsewhere_refuses_the_fill) {
  auto db = pg_of(GetParam(), *maker_);
  ASSERT_OK(s().commit_matches({req(q_, "alice", "bob")}).at(0));
  auto busy = open_group(s(), group(q_, "g0", {"carol", "dave"}));
  auto sid = open_group(s(), group(q_, "g1", {"a", "b"}));
  auto r = s().add_members(fill(q_, sid, "f1", {"x", "alice", "carol"}, 6));
  expect_refused(r, errc::conflict, "'alice' is already in active session");
  EXPECT_NE(
    r.error().detail.find("'carol' is already in active session " + busy),
    std::string::npos)
    << "every busy one is named: " << r.error().detail;
  expect_unchanged(s(), db.get(), sid, {"a", "b"}, {"x"});
  // A member of this very session is busy too.
  expect_refused(s().add_members(fill(q_, sid, "f2", {"x", "b"}, 6)),
                 errc::conflict, "'b' is already in active session " + sid);
  expect_unchanged(s(), db.get(), sid, {"a", "b"}, {"x"});
  // Once free, the same fill goes in.
  ASSERT_OK(s().end_session(busy, "carol", "done"));
  drain(s());
  auto ok = s().add_members(fill(q_, sid, "f3", {"x", "carol"}, 6));
  ASSERT_OK(ok);
  EXPECT_EQ(roster(ok->session), (names_t{"a", "b", "x", "carol"}));
}

TEST_P(match_store_conformance, backfill_a_former_member_is_not_taken_back) {
  auto sid = open_group(s(), group(q_, "g1", {"a", "b", "c"}));
  ASSERT_OK(s().leave_session(sid, "c", "bye"));
  drain(s());
  expect_refused(s().add_members(fill(q_, sid, "f1", {"d", "c"}, 4)),
                 errc::conflict, "'c' was a member of session " + sid);
  EXPECT_EQ(roster(session_of(s(), sid), true), (names_t{"a", "b"}));
  EXPECT_EQ(active_of(s(), "d"), "");
  EXPECT_TRUE(drain(s()).empty());
}

TEST_P(match_store_conformance, backfill_a_withdrawn_fill_leaves_no_trace) {
  auto db = pg_of(GetParam(), *maker_);
  auto sid = open_group(s(), group(q_, "g1", {"a", "b"}));
  for (auto stage : {after_create, before_commit}) {
    checkpoints cp{{{stage, 0}}};
    auto r = s().add_members(fill(q_, sid, "f1", {"c", "d"}, 4), cp.fn());
    EXPECT_WITHDRAWN(r, to_string(stage));
    expect_unchanged(s(), db.get(), sid, {"a", "b"}, {"c", "d"});
  }
  // The same fill goes in later: nothing of it stayed.
  checkpoints all;
  auto r = s().add_members(fill(q_, sid, "f1", {"c", "d"}, 4), all.fn());
  ASSERT_OK(r);
  EXPECT_TRUE(r->added_now);
  EXPECT_EQ(all.calls,
            (std::vector<std::string>{"after_create:0", "before_commit:0"}));
  EXPECT_EQ(drain(s()).size(), 1u);
  // A check that throws fails the call and writes nothing.
  auto r2 = s().add_members(fill(q_, sid, "f2", {"e"}, 6),
                            [](commit_stage, size_t) -> bool {
                              throw std::runtime_error("boom");
                            });
  ASSERT_FALSE(r2);
  EXPECT_EQ(r2.error().code, errc::protocol_error);
  expect_unchanged(s(), db.get(), sid, {"a", "b", "c", "d"}, {"e"});
}

TEST_P(match_store_conformance,
       backfill_a_malformed_fill_is_refused_and_changes_nothing) {
  auto db = pg_of(GetParam(), *maker_);
  auto sid = open_group(s(), group(q_, "g1", {"a", "b"}, {0, 1}));
  std::vector<backfill_request> bad;
  bad.push_back(fill(q_, sid, "f", {}, 4));
  bad.push_back(fill(q_, sid, "f", {"c", "c"}, 4));
  bad.push_back(fill(q_, sid, "f", {"c"}, 1));
  bad.push_back(fill(q_, sid, "f", {"c"}, 65));
  bad.push_back(fill(q_, sid, "f", {"c"}, 4, 2, {2})); // team 2 of 2
  bad.push_back(fill(q_, sid, "f", {"c"}, 4, 0, {1})); // a team, no teams
  bad.push_back(fill(q_, sid, "f", {"c"}, 4, 3, {0})); // 3 does not divide 4
  bad.push_back(fill(q_, sid, "f", {"c"}, 4, 4, {0})); // one team
  bad.push_back(fill(q_, sid, "", {"c"}, 4));
  bad.push_back(fill(q_, "", "f", {"c"}, 4));
  bad.push_back(fill("", sid, "f", {"c"}, 4));
  bad.push_back(fill(q_, sid, "f", {"c\n"}, 4));
  auto attrs = fill(q_, sid, "f", {"c"}, 4);
  attrs.members[0].attrs = std::string("x\0y", 3);
  bad.push_back(attrs);
  auto ticket = fill(q_, sid, "f", {"c"}, 4);
  ticket.members[0].ticket.clear();
  bad.push_back(ticket);
  std::vector<std::string> many;
  for (int i = 0; i < 64; ++i)
    many.push_back("u" + std::to_string(i));
  bad.push_back(fill(q_, sid, "f", many, 64));
  for (const auto& r : bad) {
    auto x = s().add_members(r);
    ASSERT_FALSE(x);
    EXPECT_EQ(x.error().code, errc::invalid_argument) << x.error().detail;
  }
  expect_unchanged(s(), db.get(), sid, {"a", "b"}, {"c"});
}

TEST_P(match_store_conformance,
       backfill_a_leased_fill_is_the_committers_to_deliver) {
  auto sid = open_group(s(), group(q_, "g1", {"a", "b"}));
  auto listener = factory_->connect();
  ASSERT_OK(listener->wait_for_events(0)); // listening from now on
  s().set_commit_lease(60000);
  ASSERT_OK(s().add_members(fill(q_, sid, "f1", {"c"}, 4)));
  auto woken = listener->wait_for_events(200);
  ASSERT_OK(woken);
  EXPECT_FALSE(*woken) << "a leased event is announced to nobody";
  EXPECT_TRUE(drain(s()).empty()) << "leased: no relay fetches it";
  s().set_commit_lease(0);
  ASSERT_OK(s().add_members(fill(q_, sid, "f2", {"d"}, 4)));
  woken = listener->wait_for_events(5000);
  ASSERT_OK(woken);
  EXPECT_TRUE(*woken);
  auto evs = drain(s());
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].event_id, members_changed_event_id(sid, "f2"));
}

// PostgreSQL: the roster is read after the session's lock, not in the
// snapshot of the statement that waited for it. A leave that held the lock
// (its member already inactive) frees the seat the fill takes; and a fill
// whose connection is lost while it waits runs again on a new one.
TEST_P(match_store_conformance, backfill_reads_the_roster_after_the_lock) {
  if (GetParam() != "postgres")
    GTEST_SKIP() << "PostgreSQL's locks and snapshots";
  auto sid = open_group(s(), group(q_, "g1", {"a", "b", "c"}));
  const auto db_name = maker_->last_db();
  pg_admin leaver{pg_conninfo(db_name)};
  leaver.query("BEGIN");
  leaver.query("SELECT 1 FROM match_sessions WHERE id = '" + sid
               + "' FOR UPDATE");
  leaver.query("UPDATE session_members SET active = false"
               " WHERE session_id = '"
               + sid + "' AND user_id = 'c'");
  std::optional<outcome<backfill_record>> res;
  std::thread filler(
    [&] { res = s().add_members(fill(q_, sid, "f1", {"d"}, 3)); });
  // The fill's backend, once it waits for the lock.
  auto waiting = [&](const std::string& other_than) {
    for (int i = 0; i < 1000; ++i) {
      for (auto& row : maker_->admin().query(
             "SELECT pid FROM pg_stat_activity WHERE datname = '" + db_name
             + "' AND wait_event_type = 'Lock'"))
        if (row.at(0) != other_than)
          return row.at(0);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::string{};
  };
  auto first = waiting("");
  if (!first.empty()) {
    maker_->admin().query("SELECT pg_terminate_backend(" + first + ")");
    EXPECT_FALSE(waiting(first).empty()) << "the fill did not wait again";
  }
  leaver.query("COMMIT");
  filler.join();
  ASSERT_FALSE(first.empty()) << "the fill never waited for the lock";
  ASSERT_TRUE(res.has_value());
  ASSERT_OK(*res);
  EXPECT_TRUE((*res)->added_now);
  EXPECT_EQ(roster((*res)->session, true), (names_t{"a", "b", "d"}));
  auto changed = payloads(drain(s()), members_changed_type);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(names(changed[0].at("users")), (names_t{"a", "b", "d"}));
}

// N connections fill the last seat of one session at the same instant,
// round after round, each with other users under another group: exactly
// one wins each round, the others are refused "over capacity", and the
// session never holds more than its maximum (I1, I13).
TEST_P(match_store_conformance,
       backfill_racing_fills_of_the_last_seat_one_wins) {
  constexpr int racers = 4;
  constexpr uint32_t max_players = 4;
  const int rounds = 200;
  std::vector<std::unique_ptr<match_store>> conns;
  for (int k = 0; k < racers; ++k)
    conns.push_back(factory_->connect());
  int violations = 0;
  int refused_other = 0;
  for (int i = 0; i < rounds; ++i) {
    auto tag = std::to_string(i);
    // Not drained: the events of every round are counted at the end.
    auto opened = s().commit_group(
      group(q_, "g" + tag, {"a" + tag, "b" + tag, "c" + tag}, {}, 2));
    ASSERT_OK(opened);
    const auto sid = opened->session_id;
    std::vector<std::optional<outcome<backfill_record>>> res(racers);
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int k = 0; k < racers; ++k) {
      threads.emplace_back([&, k] {
        auto f = fill(q_, sid, "f" + tag + "_" + std::to_string(k),
                      {"r" + tag + "_" + std::to_string(k)}, max_players);
        ready.fetch_add(1);
        while (ready.load() < racers)
          std::this_thread::yield(); // released together
        res[k] = conns[k]->add_members(f);
      });
    }
    for (auto& t : threads)
      t.join();
    int won = 0;
    for (int k = 0; k < racers; ++k) {
      const auto& r = *res[k];
      if (r && r->added_now) {
        ++won;
        continue;
      }
      if (r || r.error().code != errc::conflict
          || r.error().detail.find("over capacity") == std::string::npos) {
        ++refused_other;
        ++violations;
        ADD_FAILURE() << "round " << i << ": "
                      << (r ? "answered without adding"
                            : to_string(r.error().code) + std::string{": "}
                                + r.error().detail);
      }
      // A loser holds no session.
      if (!r && !active_of(s(), "r" + tag + "_" + std::to_string(k)).empty())
        ++violations;
    }
    if (won != 1)
      ++violations;
    auto after = session_of(s(), sid);
    if (roster(after, true).size() != max_players)
      ++violations;
    ASSERT_OK(s().end_session(sid, "a" + tag, "next"));
  }
  EXPECT_EQ(violations, 0) << refused_other << " refused otherwise";
  // One event per fill that won, none for the losers.
  auto evs = drain(s());
  EXPECT_EQ(payloads(evs, match_created_type).size(),
            static_cast<size_t>(rounds));
  EXPECT_EQ(payloads(evs, members_changed_type).size(),
            static_cast<size_t>(rounds));
}

} // namespace
