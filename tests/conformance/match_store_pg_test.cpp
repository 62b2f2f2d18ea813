// Match store conformance, PostgreSQL only: what the in-memory store cannot
// lose. Reconnects, unreachable databases, connections lost mid
// transaction, waits on a concurrent pair, changed migrations, the index
// behind the store.

#include <chrono>
#include <thread>

#include "tests/conformance/match_store_fixture.hpp"

using namespace mm;
using namespace mm::test;
using namespace mm::test::store_conformance;

namespace {

// -- PostgreSQL only: what the in-memory store cannot lose --------------------

class pg_match_store_test : public ::testing::Test {
 protected:
  void TearDown() override {
    maker_.reset();
  }

  std::unique_ptr<store_maker> maker_
    = std::make_unique<store_maker>("postgres");
};

/// The backend pids of connections named `app`, optionally only those that
/// wait for a lock.
std::vector<std::string> backends(pg_admin& admin, const std::string& app,
                                  bool waiting_for_lock) {
  auto sql = "SELECT pid FROM pg_stat_activity WHERE application_name = '" + app
             + "'";
  if (waiting_for_lock)
    sql += " AND wait_event_type = 'Lock'";
  std::vector<std::string> out;
  for (auto& row : admin.query(sql))
    out.push_back(row.at(0));
  return out;
}

TEST_F(pg_match_store_test, reconnects_after_the_backend_was_killed) {
  auto app = unique_name("mm_victim");
  pg_options o;
  o.conninfo = "application_name=" + app;
  auto f = maker_->fresh(o);
  auto st = f->connect();
  ASSERT_OK(st->apply_migrations());
  ASSERT_OK(st->commit_matches({req("q", "a", "b")}).at(0));
  auto pids = backends(maker_->admin(), app, false);
  ASSERT_EQ(pids.size(), 1u);
  maker_->admin().query("SELECT pg_terminate_backend(" + pids[0] + ")");
  auto r = st->commit_matches({req("q", "c", "d")});
  ASSERT_OK(r.at(0));
  EXPECT_TRUE(r[0]->created);
  maker_->admin().query("SELECT pg_terminate_backend(pid) FROM "
                        "pg_stat_activity WHERE application_name = '"
                        + app + "'");
  auto fetched = st->fetch_undelivered(10);
  ASSERT_OK(fetched);
  EXPECT_EQ(fetched->size(), 2u);
}

TEST_F(pg_match_store_test, an_unreachable_database_fails_every_entry) {
  // A loopback port that nobody listens on.
  pg_options o;
  o.conninfo = "host=127.0.0.1 port=1 user=postgres dbname=postgres";
  auto st = make_pg_match_store(o)->connect();
  auto t0 = std::chrono::steady_clock::now();
  auto res = st->commit_matches(
    {req("q", "a", "b"), req("q", "c", "c"), req("q", "d", "e")});
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[0].error().code, errc::store_unavailable);
  EXPECT_EQ(res[1].error().code, errc::invalid_argument);
  EXPECT_EQ(res[2].error().code, errc::store_unavailable);
  EXPECT_EQ(st->apply_migrations().error().code, errc::store_unavailable);
  EXPECT_EQ(st->active_session_of("a").error().code, errc::store_unavailable);
  EXPECT_EQ(st->close_session("s", "r").error().code, errc::store_unavailable);
  EXPECT_EQ(st->fetch_undelivered(1).error().code, errc::store_unavailable);
  EXPECT_EQ(st->mark_delivered({"e"}).error().code, errc::store_unavailable);
  EXPECT_EQ(st->wait_for_events(10).error().code, errc::store_unavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

TEST_F(pg_match_store_test, a_connection_lost_mid_transaction_writes_nothing) {
  auto app = unique_name("mm_victim");
  pg_options o;
  o.conninfo = "application_name=" + app;
  o.statement_timeout_ms = 60000; // the kills below end the waits, not this
  auto f = maker_->fresh(o);
  auto st = f->connect();
  ASSERT_OK(st->apply_migrations());
  // An uncommitted session of user z makes the batch wait on the unique
  // index in the middle of its transaction, after it wrote p1–p2.
  pg_admin blocker{pg_conninfo(maker_->last_db())};
  blocker.query("BEGIN");
  blocker.query("INSERT INTO match_sessions (id, match_key, queue, user_a,"
                " ticket_a, user_b, ticket_b)"
                " VALUES ('blocker', 'k', 'q', 'z', 'tz', 'w', 'tw')");
  blocker.query("INSERT INTO session_members (session_id, user_id)"
                " VALUES ('blocker', 'z')");
  std::vector<outcome<match_record>> res;
  std::thread committer([&] {
    res = st->commit_matches({req("q", "p1", "p2"), req("q", "z", "p3")});
  });
  // Kill the waiting backend twice: the first loss is retried on a new
  // connection, the second one fails the call.
  std::set<std::string> killed;
  for (int kill = 0; kill < 2; ++kill) {
    std::string victim;
    for (int i = 0; i < 1000 && victim.empty(); ++i) {
      for (auto& pid : backends(maker_->admin(), app, true))
        if (killed.count(pid) == 0)
          victim = pid;
      if (victim.empty())
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (victim.empty()) {
      blocker.query("ROLLBACK");
      committer.join();
      FAIL() << "the commit never waited on the blocker (kill " << kill << ")";
    }
    killed.insert(victim);
    maker_->admin().query("SELECT pg_terminate_backend(" + victim + ")");
  }
  committer.join();
  blocker.query("ROLLBACK");
  ASSERT_EQ(res.size(), 2u);
  for (auto& r : res) {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, errc::store_unavailable) << r.error().detail;
  }
  pg_admin db{pg_conninfo(maker_->last_db())};
  EXPECT_EQ(db.count("SELECT count(*) FROM match_sessions"), 0);
  EXPECT_EQ(db.count("SELECT count(*) FROM session_members"), 0);
  EXPECT_EQ(db.count("SELECT count(*) FROM outbox"), 0);
  // The same store works again, and the retried batch commits whole.
  auto again = st->commit_matches({req("q", "p1", "p2"), req("q", "z", "p3")});
  ASSERT_OK(again.at(0));
  ASSERT_OK(again.at(1));
  EXPECT_EQ(db.count("SELECT count(*) FROM outbox"), 2);
}

// The pair of a mutual request is taken by a transaction that has not ended:
// the commit waits for it, then answers its session when it committed, or
// creates the match when it rolled back — never a second match.
TEST_F(pg_match_store_test, a_mutual_commit_waits_for_a_concurrent_pair) {
  auto app = unique_name("mm_waiter");
  pg_options o;
  o.conninfo = "application_name=" + app;
  o.statement_timeout_ms = 60000;
  auto f = maker_->fresh(o);
  auto st = f->connect();
  ASSERT_OK(st->apply_migrations());
  pg_admin other{pg_conninfo(maker_->last_db())};
  for (bool other_commits : {true, false}) {
    std::string a = other_commits ? "alice" : "carol";
    std::string b = other_commits ? "bob" : "dave";
    std::string sid = "other-" + a;
    other.query("BEGIN");
    other.query("INSERT INTO match_sessions (id, match_key, queue, user_a,"
                " ticket_a, user_b, ticket_b) VALUES ('"
                + sid + "', 'k-" + a + "', 'likes', '" + a + "', 'ta', '" + b
                + "', 'tb')");
    other.query("INSERT INTO mutual_matches (pair_min, pair_max, session_id)"
                " VALUES ('"
                + a + "', '" + b + "', '" + sid + "')");
    std::vector<outcome<match_record>> res;
    std::thread committer(
      [&] { res = st->commit_matches({mutual_req(b, a, "mine")}); });
    bool waited = false;
    for (int i = 0; i < 1000 && !waited; ++i) {
      waited = !backends(maker_->admin(), app, true).empty();
      if (!waited)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    other.query(other_commits ? "COMMIT" : "ROLLBACK");
    committer.join();
    EXPECT_TRUE(waited) << "the commit never waited for the pair";
    ASSERT_EQ(res.size(), 1u);
    ASSERT_OK(res[0]);
    if (other_commits) {
      EXPECT_FALSE(res[0]->created);
      EXPECT_EQ(res[0]->session_id, sid);
    } else {
      EXPECT_TRUE(res[0]->created);
      EXPECT_NE(res[0]->session_id, sid);
      EXPECT_EQ(res[0]->ticket_a, "t-" + b + "-mine");
    }
    auto m = st->mutual_match_of(a, b);
    ASSERT_OK(m);
    ASSERT_TRUE(m->has_value());
    EXPECT_EQ((*m)->session_id, res[0]->session_id);
  }
  pg_admin db{pg_conninfo(maker_->last_db())};
  EXPECT_EQ(db.count("SELECT count(*) FROM mutual_matches"), 2);
  EXPECT_EQ(db.count("SELECT count(*) FROM outbox"), 1); // ours only
}

TEST_F(pg_match_store_test, a_changed_migration_is_refused) {
  auto f = maker_->fresh();
  auto st = f->connect();
  ASSERT_OK(st->apply_migrations());
  pg_admin db{pg_conninfo(maker_->last_db())};
  db.query("UPDATE schema_migrations SET checksum = 'edited'"
           " WHERE version = 1");
  auto r = st->apply_migrations();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, errc::protocol_error);
  EXPECT_NE(r.error().detail.find("0001_init"), std::string::npos);
}

TEST_F(pg_match_store_test, the_index_refuses_double_booking_behind_the_store) {
  auto f = maker_->fresh();
  auto st = f->connect();
  ASSERT_OK(st->apply_migrations());
  auto r = st->commit_matches({req("q", "a", "b")});
  ASSERT_OK(r.at(0));
  pg_admin db{pg_conninfo(maker_->last_db())};
  db.query("INSERT INTO match_sessions (id, match_key, queue, user_a,"
           " ticket_a, user_b, ticket_b)"
           " VALUES ('manual', 'k', 'q', 'a', 'ta', 'c', 'tc')");
  EXPECT_THROW(db.query("INSERT INTO session_members (session_id, user_id)"
                        " VALUES ('manual', 'a')"),
               std::runtime_error);
  EXPECT_EQ(db.count("SELECT count(*) FROM schema_migrations"),
            static_cast<int64_t>(known_migrations().size()));
}

} // namespace
