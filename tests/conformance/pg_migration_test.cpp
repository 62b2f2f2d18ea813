// PostgreSQL only: 0007_compact_rows and 0008_text_payloads taken by a
// database in use. The
// migrations before it are applied as the store applied them, the tables
// then hold what an engine of that version left (active pairs, a group, a
// closed session, an ended one in the history; events delivered, waiting,
// and leased to a node that died), and the store of this version migrates
// it. Then every event is delivered once, a retried commit still finds its
// session, and every session ends as it should.

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "mm_migrations.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "tests/support/pg_client.hpp"

using namespace mm;

namespace {

/// The version before 0007.
constexpr int before = 6;

/// `s` as a dollar-quoted SQL literal (the migrations hold no `$mm$`).
std::string quoted(const std::string& s) {
  return "$mm$" + s + "$mm$";
}

match_request pair_req(const std::string& n) {
  match_request r;
  r.queue = "voice";
  r.user_a = "a" + n;
  r.ticket_a = "ta" + n;
  r.user_b = "b" + n;
  r.ticket_b = "tb" + n;
  return r;
}

class pg_migration : public ::testing::Test {
 protected:
  void SetUp() override {
    conninfo_ = test::fresh_database("mm_migrate");
    sql_ = std::make_unique<test::pg_client>(conninfo_);
    // As pg_migrate.cpp applies and records them, up to `before`.
    for (size_t i = 0; i < migration_count; ++i) {
      const auto& m = migration_sources[i];
      if (m.version > before)
        break;
      sql_->query("BEGIN;"
                  "CREATE TABLE IF NOT EXISTS schema_migrations ("
                  " version int PRIMARY KEY, name text NOT NULL,"
                  " checksum text NOT NULL,"
                  " applied_at timestamptz NOT NULL DEFAULT now())");
      sql_->query(m.sql);
      sql_->query("INSERT INTO schema_migrations (version, name, checksum)"
                  " VALUES ("
                  + std::to_string(m.version) + ", " + quoted(m.name) + ", md5("
                  + quoted(m.sql) + "));COMMIT");
    }
  }

  /// A pair's live session as the commit of `before` wrote it, with its
  /// match.created event: delivered, waiting, or leased for `lease_ms`.
  std::string old_pair(const match_request& r, const char* state,
                       int lease_ms = 0) {
    auto id = new_session_id();
    auto ev = match_created_event_id(id);
    sql_->query(
      "INSERT INTO match_sessions (id, match_key, queue, user_a, ticket_a,"
      " user_b, ticket_b) VALUES ('"
      + id + "', " + quoted(match_key(r)) + ", '" + r.queue + "', '" + r.user_a
      + "', '" + r.ticket_a + "', '" + r.user_b + "', '" + r.ticket_b
      + "');"
        "INSERT INTO session_members (session_id, user_id) VALUES ('"
      + id + "', '" + r.user_a + "'), ('" + id + "', '" + r.user_b
      + "');"
        "INSERT INTO outbox (event_id, aggregate_id, type, payload,"
        " delivered_at, locked_until, attempts) VALUES ('"
      + ev + "', '" + id + "', 'match.created', "
      + quoted(match_created_payload(id, r)) + "::jsonb, "
      + (std::string{state} == "delivered" ? "now()" : "NULL") + ", "
      + (lease_ms > 0
           ? "now() + interval '" + std::to_string(lease_ms) + " milliseconds'"
           : std::string{"NULL"})
      + ", " + (lease_ms > 0 ? "1" : "0") + ")");
    return id;
  }

  std::string conninfo_;
  std::unique_ptr<test::pg_client> sql_;
};

TEST_F(pg_migration, a_database_in_use_migrates_and_goes_on) {
  // What an engine of version `before` left behind.
  auto delivered = old_pair(pair_req("1"), "delivered");
  auto waiting = old_pair(pair_req("2"), "waiting");
  auto leased = old_pair(pair_req("3"), "waiting", 1500); // its node died
  // A group of four, event waiting.
  const std::string group = new_session_id();
  group_match_request g;
  g.queue = "squad";
  g.group = "g1";
  g.min_players = 3;
  for (int i = 0; i < 4; ++i)
    g.members.push_back({"m" + std::to_string(i), "tm" + std::to_string(i), "",
                         static_cast<uint32_t>(i % 2), true});
  sql_->query(
    "INSERT INTO match_sessions (id, match_key, queue, user_a, ticket_a,"
    " user_b, ticket_b, group_id, min_players) VALUES ('"
    + group + "', " + quoted(group_key(g))
    + ", 'squad', 'm0', 'tm0', 'm1',"
      " 'tm1', 'g1', 3);"
      "INSERT INTO session_members (session_id, user_id, active, team, ticket,"
      " attrs, ord) VALUES ('"
    + group + "', 'm0', true, 0, 'tm0', '', 0), ('" + group
    + "', 'm1', true, 1, 'tm1', '', 1), ('" + group
    + "', 'm2', true, 0, 'tm2', '', 2), ('" + group
    + "', 'm3', true, 1, 'tm3', '', 3);"
      "INSERT INTO outbox (event_id, aggregate_id, type, payload) VALUES ('"
    + match_created_event_id(group) + "', '" + group + "', 'match.created', "
    + quoted(group_created_payload(group, g)) + "::jsonb)");
  // Closed by an operator: members inactive, kept until pruned.
  auto closed = old_pair(pair_req("4"), "delivered");
  sql_->query("UPDATE match_sessions SET status = 'closed', closed_at = now(),"
              " close_reason = 'admin' WHERE id = '"
              + closed
              + "'; UPDATE session_members SET active = false WHERE"
                " session_id = '"
              + closed + "'");
  // Ended: in the history, its session.ended event still to deliver.
  auto ended_req = pair_req("5");
  auto ended = new_session_id();
  sql_->query(
    "INSERT INTO session_history (id, match_key, queue, user_a, ticket_a,"
    " user_b, ticket_b, created_at, closed_at, close_reason, ended_by)"
    " VALUES ('"
    + ended + "', " + quoted(match_key(ended_req) + "#" + ended)
    + ", 'voice', 'a5', 'ta5', 'b5', 'tb5', now() - interval '1 minute',"
      " now(), 'done', 'a5');"
      "INSERT INTO outbox (event_id, aggregate_id, type, payload,"
      " delivered_at) VALUES ('"
    + match_created_event_id(ended) + "', '" + ended
    + "', 'match.created', '{}', now()), ('" + session_ended_event_id(ended)
    + "', '" + ended + "', 'session.ended', '{}', NULL)");

  pg_options o;
  o.conninfo = conninfo_;
  auto st = make_pg_match_store(o)->connect();
  auto applied = st->apply_migrations();
  ASSERT_TRUE(applied) << applied.error().detail;
  ASSERT_EQ(applied->size(), migration_count - before);
  EXPECT_EQ(applied->front(), "0007_compact_rows");

  // The waiting events became pending, the leased one with its lease.
  EXPECT_EQ(sql_->count("SELECT count(*) FROM outbox_pending"), 4);
  EXPECT_EQ(sql_->count("SELECT count(*) FROM outbox_pending WHERE"
                        " locked_until > now() AND attempts = 1"),
            1);
  EXPECT_EQ(sql_->count("SELECT count(*) FROM outbox"), 7);
  // 0008: the events written before it keep their jsonb payloads.
  EXPECT_EQ(sql_->count("SELECT count(*) FROM outbox WHERE payload IS NOT"
                        " NULL AND payload_text IS NULL"),
            7);

  // Every waiting event is delivered once; the leased one when its lease
  // has passed, as a relay takes over a dead node's events.
  std::set<std::string> got;
  auto deliver = [&] {
    auto evs = st->fetch_undelivered(100, 60000);
    EXPECT_TRUE(evs) << evs.error().detail;
    std::vector<std::string> ids;
    for (auto& e : *evs) {
      EXPECT_TRUE(got.insert(e.event_id).second) << "twice: " << e.event_id;
      EXPECT_NE(e.payload, "");
      if (e.event_id == match_created_event_id(waiting)) { // as written
        EXPECT_EQ(
          nlohmann::json::parse(e.payload),
          nlohmann::json::parse(match_created_payload(waiting, pair_req("2"))));
      }
      ids.push_back(e.event_id);
    }
    auto m = st->mark_delivered(ids);
    EXPECT_TRUE(m);
    EXPECT_EQ(*m, ids.size());
    return evs->size();
  };
  EXPECT_EQ(deliver(), 3u);
  EXPECT_EQ(got.count(match_created_event_id(leased)), 0u);
  for (int i = 0; i < 50 && got.size() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    deliver();
  }
  EXPECT_EQ(got, (std::set<std::string>{match_created_event_id(waiting),
                                        match_created_event_id(leased),
                                        match_created_event_id(group),
                                        session_ended_event_id(ended)}));
  EXPECT_EQ(sql_->count("SELECT count(*) FROM outbox_pending"), 0);

  // A retried commit of a migrated session finds it; its users stay taken.
  auto again = st->commit_matches({pair_req("2")}).at(0);
  ASSERT_TRUE(again) << again.error().detail;
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->session_id, waiting);
  match_request taken = pair_req("9");
  taken.user_a = "a1";
  auto refused = st->commit_matches({taken}).at(0);
  EXPECT_FALSE(refused && refused->created);

  // Every session ends as it should, with its event, and frees its users.
  for (const auto& [sid, user] :
       std::vector<std::pair<std::string, std::string>>{
         {delivered, "a1"}, {waiting, "b2"}, {leased, "a3"}}) {
    auto e = st->end_session(sid, user, "done");
    ASSERT_TRUE(e) << e.error().detail;
    EXPECT_TRUE(e->ended_now) << sid;
    auto mine = st->active_session_of(user);
    ASSERT_TRUE(mine);
    EXPECT_FALSE(mine->has_value()) << user;
  }
  auto left = st->leave_session(group, "m0", "bye");
  ASSERT_TRUE(left) << left.error().detail;
  EXPECT_TRUE(left->left_now);
  EXPECT_FALSE(left->ended_now);
  left = st->leave_session(group, "m1", "bye"); // two stay of min 3
  ASSERT_TRUE(left) << left.error().detail;
  EXPECT_TRUE(left->ended_now);
  auto e = st->end_session(ended, "a5", "again");
  ASSERT_TRUE(e) << e.error().detail;
  EXPECT_FALSE(e->ended_now); // answered from the history
  EXPECT_EQ(e->ended_by, "a5");
  auto c = st->end_session(closed, "a4", "done");
  ASSERT_TRUE(c) << c.error().detail;
  EXPECT_FALSE(c->ended_now);
  // Nobody is left in a live session; the freed users match again.
  EXPECT_EQ(sql_->count("SELECT count(*) FROM session_members WHERE active"),
            0);
  auto next = st->commit_matches({pair_req("1")}).at(0);
  ASSERT_TRUE(next) << next.error().detail;
  EXPECT_TRUE(next->created);
  EXPECT_NE(next->session_id, delivered);
  // The ends' events: 3 pair ends, 2 leaves and the group's end.
  size_t before_ends = got.size();
  while (deliver() > 0) {
  }
  EXPECT_EQ(got.size() - before_ends, 3u + 2u + 1u + 1u); // and next's
  // Every event since the migration is stored as text, no jsonb.
  EXPECT_EQ(sql_->count("SELECT count(*) FROM outbox WHERE payload IS NULL"
                        " AND payload_text IS NOT NULL"),
            7);
  // Pruning takes the delivered rows and the sessions that are over, and
  // the members of those that were closed.
  auto p = st->prune(0, 1000);
  ASSERT_TRUE(p) << p.error().detail;
  EXPECT_EQ(sql_->count("SELECT count(*) FROM outbox"), 0);
  EXPECT_EQ(sql_->count("SELECT count(*) FROM session_members WHERE"
                        " session_id = '"
                        + closed + "'"),
            0);
}

} // namespace
