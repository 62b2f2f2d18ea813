// The time partitions on a real PostgreSQL (migrations 0004 and 0005,
// match_store::maintain_partitions) of the outbox and of the ended
// sessions' history: windows created ahead, rows in them, a window with
// rows in the default partition left to it, and old windows dropped whole
// while commits, ends, leases and marks run — with no failed commit or end
// and no event lost (issue 15: "Partition maintenance drops an old
// partition while commits run, with 0 failed commits"); ended sessions
// leave match_sessions for the history, also those that ended before
// migration 0005. The in-memory store has no partitions: it answers an
// empty report, and both refuse bad arguments.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "mm_migrations.hpp" // generated from persistence/matchdb/migrations/
#include "persistence/matchdb/match_store.hpp"
#include "tests/support/pg_client.hpp"
#include "tests/support/test_env.hpp"

using namespace mm;
using namespace std::chrono_literals;

namespace {

class pg_partitions : public ::testing::Test {
 protected:
  void SetUp() override {
    conninfo_ = test::fresh_database("mm_part");
    pg_options o;
    o.conninfo = conninfo_;
    factory_ = make_pg_match_store(o);
    store_ = factory_->connect();
    auto m = store_->apply_migrations();
    ASSERT_TRUE(m) << m.error().detail;
    sql_ = std::make_unique<test::pg_client>(conninfo_);
  }

  /// Where the outbox's rows are, by partition.
  int64_t rows_in(const std::string& table) {
    return sql_->count("SELECT count(*) FROM " + table);
  }

  /// The time windows of `parent` (not its default partition).
  int64_t windows(const std::string& parent = "outbox") {
    return sql_->count("SELECT count(*) FROM pg_inherits i JOIN pg_class c"
                       " ON c.oid = i.inhrelid WHERE i.inhparent = '"
                       + parent + "'::regclass AND c.relname <> '" + parent
                       + "_default'");
  }

  match_request pair(const std::string& tag) {
    return match_request{"q", tag + "a", "t", "", tag + "b", "t", ""};
  }

  std::string conninfo_;
  std::shared_ptr<match_store_factory> factory_;
  std::unique_ptr<match_store> store_;
  std::unique_ptr<test::pg_client> sql_;
};

TEST_F(pg_partitions, windows_are_created_ahead_and_take_the_rows) {
  auto r = store_->maintain_partitions(3600, 86400, 3);
  ASSERT_TRUE(r) << r.error().detail;
  // The current window and three ahead, of each table.
  EXPECT_EQ(r->created, 8u);
  EXPECT_EQ(r->partitions, 8u);
  EXPECT_EQ(windows(), 4);
  EXPECT_EQ(windows("session_history"), 4);
  auto again = store_->maintain_partitions(3600, 86400, 3);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->created, 0u); // idempotent
  EXPECT_EQ(again->partitions, 8u);
  auto c = store_->commit_matches({pair("x")});
  ASSERT_TRUE(c.at(0));
  EXPECT_EQ(rows_in("outbox"), 1);
  EXPECT_EQ(rows_in("outbox_default"), 0); // in its window
  // The relay's statements work across partitions.
  auto evs = store_->fetch_undelivered(10, 30000);
  ASSERT_TRUE(evs);
  ASSERT_EQ(evs->size(), 1u);
  auto marked = store_->mark_delivered({evs->at(0).event_id});
  ASSERT_TRUE(marked);
  EXPECT_EQ(*marked, 1u);
  EXPECT_EQ(sql_->count("SELECT count(*) FROM outbox_pending"), 0);
  // An ended session leaves the live table for its window of the history,
  // and answers from there.
  const auto sid = c.at(0)->session_id;
  auto e = store_->end_session(sid, "xa", "done");
  ASSERT_TRUE(e) << e.error().detail;
  EXPECT_TRUE(e->ended_now);
  EXPECT_EQ(rows_in("match_sessions"), 0);
  EXPECT_EQ(rows_in("session_members"), 0);
  EXPECT_EQ(rows_in("session_history"), 1);
  EXPECT_EQ(rows_in("session_history_default"), 0);
  auto f = store_->find_session(sid);
  ASSERT_TRUE(f && f->has_value());
  EXPECT_EQ((*f)->status, session_status::closed);
  auto twice = store_->end_session(sid, "xb", "again");
  ASSERT_TRUE(twice) << twice.error().detail;
  EXPECT_FALSE(twice->ended_now);
  EXPECT_EQ(twice->ended_by, "xa");
  EXPECT_EQ(twice->reason, "done");
  auto stranger = store_->end_session(sid, "zz", "no");
  ASSERT_FALSE(stranger);
  EXPECT_EQ(stranger.error().code, errc::forbidden);
  auto closed = store_->close_session(sid, "late");
  ASSERT_TRUE(closed) << closed.error().detail;
  EXPECT_FALSE(*closed); // ended already
  auto batch = store_->end_sessions({end_request{sid, "xb", "b"}});
  ASSERT_TRUE(batch.at(0)) << batch.at(0).error().detail;
  EXPECT_FALSE(batch.at(0)->ended_now);
  EXPECT_EQ(batch.at(0)->ended_by, "xa");
  // The users are free: the same pair matches again.
  auto re = store_->commit_matches({pair("x")});
  ASSERT_TRUE(re.at(0)) << re.at(0).error().detail;
  EXPECT_TRUE(re.at(0)->created);
  // Another width overlaps those windows: left alone, nothing fails.
  auto other = store_->maintain_partitions(600, 86400, 3);
  ASSERT_TRUE(other) << other.error().detail;
  EXPECT_EQ(windows() + windows("session_history"),
            8 + static_cast<int64_t>(other->created));
}

TEST_F(pg_partitions, a_window_with_rows_in_the_default_is_left_to_it) {
  // Rows of the current window before any window exists (today's rows at
  // the migration): that window stays in the default partition, where
  // prune deletes rows one by one as before.
  auto c = store_->commit_matches({pair("y")});
  ASSERT_TRUE(c.at(0));
  auto r = store_->maintain_partitions(3600, 86400, 3);
  ASSERT_TRUE(r) << r.error().detail;
  EXPECT_EQ(r->created, 3u + 4u); // the outbox's current window is left
  EXPECT_EQ(windows(), 3);
  EXPECT_EQ(rows_in("outbox_default"), 1);
  auto evs = store_->fetch_undelivered(10, 30000);
  ASSERT_TRUE(evs);
  ASSERT_EQ(evs->size(), 1u);
  ASSERT_TRUE(store_->mark_delivered({evs->at(0).event_id}));
  std::this_thread::sleep_for(20ms);
  auto pruned = store_->prune(1, 100);
  ASSERT_TRUE(pruned) << pruned.error().detail;
  EXPECT_EQ(pruned->outbox, 1u);
  EXPECT_EQ(rows_in("outbox"), 0);
}

TEST_F(pg_partitions, old_windows_go_whole_while_commits_run) {
  // 1 s windows, dropped 2 s after they end, three ahead; two committers,
  // an ender that ends what they committed (the history's windows), a
  // relay that leases and marks, and the maintenance every 200 ms, for
  // 8 s. A window is dropped only when all its events were delivered.
  constexpr uint32_t width_s = 1, retention_s = 2;
  auto r = store_->maintain_partitions(width_s, retention_s, 3);
  ASSERT_TRUE(r) << r.error().detail;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> commits{0}, failed{0}, maint_failed{0};
  std::atomic<uint64_t> ends{0}, end_failed{0};
  std::atomic<uint64_t> dropped{0}, kept{0};
  std::mutex mtx;
  std::set<std::string> committed, delivered, ended, ended_delivered;
  std::vector<end_request> to_end;
  std::vector<std::string> errors;
  auto committer = [&](int k) {
    auto s = factory_->connect();
    for (int n = 0; !stop; ++n) {
      std::vector<match_request> batch;
      for (int j = 0; j < 5; ++j)
        batch.push_back(pair("c" + std::to_string(k) + "_" + std::to_string(n)
                             + "_" + std::to_string(j) + "_"));
      auto res = s->commit_matches(batch);
      std::lock_guard<std::mutex> guard{mtx};
      for (auto& x : res) {
        if (!x) {
          ++failed;
          errors.push_back(x.error().detail);
          continue;
        }
        ++commits;
        committed.insert(x->session_id);
        to_end.push_back(end_request{x->session_id, x->user_a, "done"});
      }
    }
  };
  auto relay = [&] {
    auto s = factory_->connect();
    while (!stop) {
      auto evs = s->fetch_undelivered(500, 30000);
      if (!evs || evs->empty()) {
        std::this_thread::sleep_for(5ms);
        continue;
      }
      std::vector<std::string> ids;
      for (auto& e : *evs)
        ids.push_back(e.event_id);
      if (!s->mark_delivered(ids))
        continue; // leased: delivered again after the lease
      std::lock_guard<std::mutex> guard{mtx};
      for (auto& e : *evs)
        (e.type == "session.ended" ? ended_delivered : delivered)
          .insert(e.aggregate_id);
    }
  };
  auto ender = [&] {
    auto s = factory_->connect();
    while (!stop) {
      std::vector<end_request> batch;
      {
        std::lock_guard<std::mutex> guard{mtx};
        batch.swap(to_end);
      }
      if (batch.empty()) {
        std::this_thread::sleep_for(5ms);
        continue;
      }
      auto res = s->end_sessions(batch);
      std::lock_guard<std::mutex> guard{mtx};
      for (size_t i = 0; i < res.size(); ++i) {
        if (!res[i] || !res[i]->ended_now) {
          ++end_failed;
          errors.push_back(res[i] ? "not ended now" : res[i].error().detail);
          continue;
        }
        ++ends;
        ended.insert(batch[i].session_id);
      }
    }
  };
  auto maintainer = [&] {
    auto s = factory_->connect();
    while (!stop) {
      auto m = s->maintain_partitions(width_s, retention_s, 3);
      if (!m)
        ++maint_failed;
      else {
        dropped += m->dropped;
        kept += m->kept;
      }
      std::this_thread::sleep_for(200ms);
    }
  };
  std::vector<std::thread> ts;
  ts.emplace_back(committer, 0);
  ts.emplace_back(committer, 1);
  ts.emplace_back(relay);
  ts.emplace_back(ender);
  ts.emplace_back(maintainer);
  std::this_thread::sleep_for(8s);
  stop = true;
  for (auto& t : ts)
    t.join();
  // The last events: delivered by one more pass.
  for (;;) {
    auto evs = store_->fetch_undelivered(1000, 30000);
    ASSERT_TRUE(evs) << evs.error().detail;
    if (evs->empty())
      break;
    std::vector<std::string> ids;
    for (auto& e : *evs) {
      ids.push_back(e.event_id);
      (e.type == "session.ended" ? ended_delivered : delivered)
        .insert(e.aggregate_id);
    }
    ASSERT_TRUE(store_->mark_delivered(ids));
  }
  EXPECT_EQ(failed.load(), 0u) << (errors.empty() ? "" : errors.front());
  EXPECT_EQ(end_failed.load(), 0u) << (errors.empty() ? "" : errors.front());
  EXPECT_EQ(maint_failed.load(), 0u);
  EXPECT_GT(commits.load(), 100u);
  EXPECT_GT(ends.load(), 100u);
  // Old windows of both tables (three each at least).
  EXPECT_GE(dropped.load(), 6u) << "old windows were not dropped";
  // Nothing lost: every committed match's event was delivered (a window
  // goes only when all of its events were).
  size_t lost = 0;
  for (auto& id : committed)
    lost += delivered.count(id) == 0 ? 1 : 0;
  EXPECT_EQ(lost, 0u);
  size_t lost_ends = 0;
  for (auto& id : ended)
    lost_ends += ended_delivered.count(id) == 0 ? 1 : 0;
  EXPECT_EQ(lost_ends, 0u);
  // The windows ahead took every row: none in the default partition, and
  // the outbox holds only the last seconds, not every event written (one
  // match.created per commit, one session.ended per end: the ended ones
  // count too, else the bound depends on how fast the ender ran).
  EXPECT_EQ(rows_in("outbox_default"), 0);
  EXPECT_LT(rows_in("outbox"),
            static_cast<int64_t>(commits.load() + ends.load()));
  EXPECT_LE(windows(), 3 + 1 + 3 + 1); // kept + current + ahead
  // Likewise the ended sessions: in their windows, only the last seconds.
  EXPECT_EQ(rows_in("session_history_default"), 0);
  EXPECT_LT(rows_in("session_history"), static_cast<int64_t>(ends.load()));
  EXPECT_LE(windows("session_history"), 3 + 1 + 3 + 1);
  std::cout << "commits " << commits << ", ends " << ends
            << ", windows dropped " << dropped << ", kept a while " << kept
            << ", rows now " << rows_in("outbox") << " (outbox), "
            << rows_in("session_history") << " (history)\n";
}

TEST(partitions_memory_store, no_partitions_and_the_same_refusals) {
  auto mem = make_memory_match_store()->connect();
  auto r = mem->maintain_partitions(60, 3600, 3);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->created + r->dropped + r->partitions, 0u);
  for (auto [w, a] : {std::pair<uint32_t, uint32_t>{0, 3},
                      {max_partition_width_s + 1, 3},
                      {60, 0},
                      {60, 65}}) {
    auto bad = mem->maintain_partitions(w, 3600, a);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, errc::invalid_argument);
  }
}

TEST_F(pg_partitions, bad_arguments_are_refused) {
  auto bad = store_->maintain_partitions(0, 3600, 3);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, errc::invalid_argument);
  EXPECT_EQ(windows(), 0);
}

/// SQL text as a literal ('' for ').
std::string literal(const std::string& text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string{"''"} : std::string(1, c);
  return out + "'";
}

TEST(pg_session_history_migration, sessions_that_ended_before_it_move) {
  // A database as the migrations before 0005 left it, recorded as the
  // store records them, with one session of each kind.
  auto conninfo = test::fresh_database("mm_mig5");
  test::pg_client sql{conninfo};
  sql.query("CREATE TABLE schema_migrations (version int PRIMARY KEY,"
            " name text NOT NULL, checksum text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())");
  for (const auto& m : migration_sources) {
    if (m.version >= 5)
      break;
    sql.query(std::string{"BEGIN;\n"} + m.sql + "\n;COMMIT");
    sql.query("INSERT INTO schema_migrations (version, name, checksum)"
              " VALUES ("
              + std::to_string(m.version) + ", " + literal(m.name) + ", md5("
              + literal(m.sql) + "))");
  }
  auto session = [&](const std::string& id, const std::string& key, bool closed,
                     const std::string& ended_by) {
    sql.query("INSERT INTO match_sessions (id, match_key, queue, user_a,"
              " ticket_a, user_b, ticket_b, status, closed_at, ended_by)"
              " VALUES ('"
              + id + "', '" + key + "', 'q', '" + id
              + "a', 't',"
                " '"
              + id + "b', 't', "
              + (closed ? "'closed', now()" : "'active', NULL") + ", "
              + (ended_by.empty() ? "NULL" : "'" + ended_by + "'") + ")");
    sql.query("INSERT INTO session_members (session_id, user_id, active)"
              " VALUES ('"
              + id + "', '" + id + "a', " + (closed ? "false" : "true")
              + "), ('" + id + "', '" + id + "b', "
              + (closed ? "false" : "true") + ")");
  };
  session("ended", "k1#ended", true, "endeda"); // by a member
  session("expired", "k2#expired", true, "");   // by the engine
  session("closed", "k3", true, "");            // close_session
  session("active", "k4", false, "");
  session("mutual", "k5#mutual", true, "mutuala");
  sql.query("INSERT INTO mutual_matches (pair_min, pair_max, session_id)"
            " VALUES ('mutuala', 'mutualb', 'mutual')");
  pg_options o;
  o.conninfo = conninfo;
  auto store = make_pg_match_store(o)->connect();
  auto m = store->apply_migrations();
  ASSERT_TRUE(m) << m.error().detail;
  // 0005 and every migration after it.
  auto later = known_migrations();
  later.erase(later.begin(), later.begin() + 4);
  ASSERT_EQ(*m, later);
  EXPECT_EQ(m->at(0), "0005_session_history");
  auto ids = [&](const std::string& table) {
    std::set<std::string> out;
    for (auto& row : sql.query("SELECT id FROM " + table))
      out.insert(row.at(0));
    return out;
  };
  EXPECT_EQ(ids("session_history"),
            (std::set<std::string>{"ended", "expired"}));
  EXPECT_EQ(ids("match_sessions"),
            (std::set<std::string>{"closed", "active", "mutual"}));
  EXPECT_EQ(sql.count("SELECT count(*) FROM session_members"
                      " WHERE session_id IN ('ended', 'expired')"),
            0);
  EXPECT_EQ(sql.count("SELECT count(*) FROM all_sessions"), 5);
  // They answer as before.
  auto f = store->find_session("expired");
  ASSERT_TRUE(f && f->has_value());
  EXPECT_EQ((*f)->status, session_status::closed);
  auto e = store->end_session("ended", "endedb", "again");
  ASSERT_TRUE(e) << e.error().detail;
  EXPECT_FALSE(e->ended_now);
  EXPECT_EQ(e->ended_by, "endeda");
  auto a = store->active_session_of("activea");
  ASSERT_TRUE(a && a->has_value());
  EXPECT_EQ((*a)->session_id, "active");
}

TEST(pg_session_history_migration, a_newer_schema_is_refused) {
  // An older binary after a newer one migrated: it would look for ended
  // sessions where they no longer are, so it refuses to start.
  auto conninfo = test::fresh_database("mm_mig6");
  pg_options o;
  o.conninfo = conninfo;
  auto store = make_pg_match_store(o)->connect();
  ASSERT_TRUE(store->apply_migrations());
  test::pg_client sql{conninfo};
  sql.query("INSERT INTO schema_migrations (version, name, checksum)"
            " VALUES (9999, '9999_later', 'x')");
  auto r = store->apply_migrations();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, errc::protocol_error);
  EXPECT_NE(r.error().detail.find("newer than this binary"), std::string::npos)
    << r.error().detail;
}

} // namespace
