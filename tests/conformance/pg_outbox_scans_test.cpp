// PostgreSQL only: the relay's and the pruner's statements read what they
// look for, not the history of delivered events. Every delivered event
// leaves a dead row in outbox_pending and a dead entry in its indexes until
// VACUUM (autovacuum: a minute at best) or until a plain index scan finds
// it dead and marks it so; a sequential or bitmap scan reads every one of
// them, on every call (before 0007, the same with the partial index
// outbox_undelivered; bench/run soak: 2-3 ms per fetch and per mark, 875 ms
// per prune of 167 sessions). Each test builds a history of delivered events with
// autovacuum off, then runs the store's own statement text under EXPLAIN
// (ANALYZE, BUFFERS) and bounds the blocks it touches. The same for ending
// one session among many active ones.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "persistence/matchdb/match_store.hpp"
#include "persistence/matchdb/pg/pg_statements.hpp"
#include "tests/support/pg_client.hpp"
#include "tests/support/test_env.hpp"

using namespace mm;

namespace {

/// Delivered events in the history: several pages of the partial index
/// (~400 entries a page) and ~150 pages of the table.
constexpr int history = 3000;

/// For the pruner, whose old plan read the partial index (not the table)
/// once per session: ~50 pages of it; and active sessions for an end.
constexpr int big_history = 20000;

class pg_outbox_scans : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = "mm_scan" + std::to_string(getpid());
    admin_.query("DROP DATABASE IF EXISTS " + db_ + " WITH (FORCE)");
    admin_.query("CREATE DATABASE " + db_);
    pg_options o;
    o.conninfo = test::pg_conninfo(db_);
    store_ = make_pg_match_store(o)->connect();
    auto m = store_->apply_migrations();
    ASSERT_TRUE(m) << m.error().detail;
    sql_ = std::make_unique<test::pg_client>(test::pg_conninfo(db_));
    for (const char* t : {"outbox_default", "outbox_pending", "match_sessions",
                          "session_members"})
      sql_->query(std::string{"ALTER TABLE "} + t
                  + " SET (autovacuum_enabled = false)");
  }

  void TearDown() override {
    sql_.reset();
    store_.reset();
    admin_.query("DROP DATABASE IF EXISTS " + db_ + " WITH (FORCE)");
  }

  /// Commits `n` matches of fresh users; answers their session ids.
  std::vector<std::string> commit(int n, const std::string& tag) {
    std::vector<std::string> ids;
    for (int done = 0; done < n;) {
      std::vector<match_request> batch;
      for (; done < n && batch.size() < 500; ++done) {
        match_request r;
        r.queue = "q";
        r.user_a = tag + "a" + std::to_string(done);
        r.ticket_a = "t1";
        r.user_b = tag + "b" + std::to_string(done);
        r.ticket_b = "t1";
        batch.push_back(r);
      }
      for (auto& r : store_->commit_matches(batch)) {
        EXPECT_TRUE(r) << r.error().detail;
        if (r)
          ids.push_back(r->session_id);
      }
    }
    return ids;
  }

  /// Leases and marks every undelivered event, as a relay does.
  void deliver_all() {
    for (;;) {
      auto evs = store_->fetch_undelivered(1000, 60000);
      ASSERT_TRUE(evs) << evs.error().detail;
      if (evs->empty())
        return;
      std::vector<std::string> ids;
      for (auto& e : *evs)
        ids.push_back(e.event_id);
      auto m = store_->mark_delivered(ids);
      ASSERT_TRUE(m) << m.error().detail;
    }
  }

  /// blocks(s, args) after ANALYZE: what autovacuum tells the planner in a
  /// running system (hardly any outbox row is undelivered, so the partial
  /// index looks empty). The first run may walk the history once, marking
  /// dead entries dead; the second one counts.
  int64_t blocks_analyzed(pg::stmt s, const std::string& args) {
    sql_->query("ANALYZE");
    blocks(s, args);
    return blocks(s, args);
  }

  /// The larger of blocks(s, args) as the tables are (never analyzed: what
  /// the planner knows of a young database, as in the first minute of a
  /// soak) and blocks_analyzed(s, args). As there, the first run may mark
  /// dead entries; the second one counts.
  int64_t blocks_both_ways(pg::stmt s, const std::string& args) {
    blocks(s, args);
    auto young = blocks(s, args);
    return std::max(young, blocks_analyzed(s, args));
  }

  /// Shared blocks (hit + read) that statement `s` touches with `args`
  /// (SQL literals), run in a transaction that is rolled back.
  int64_t blocks(pg::stmt s, const std::string& args) {
    const auto& st = pg::statements[s];
    sql_->query("DEALLOCATE ALL");
    sql_->query(std::string{"PREPARE probe AS "} + st.sql);
    sql_->query("BEGIN");
    auto rows = sql_->query("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
                            "EXECUTE probe("
                            + args + ")");
    // This transaction's own index scans of outbox_pending, counted before
    // they are reported (a statement inside a function has no plan here).
    last_index_scans_ = sql_->count(
      "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_xact_user_tables"
      " WHERE relname = 'outbox_pending'");
    sql_->query("ROLLBACK");
    auto plan = nlohmann::json::parse(rows.at(0).at(0)).at(0).at("Plan");
    last_plan_ = plan.dump(1);
    auto n = plan.at("Shared Hit Blocks").get<int64_t>()
             + plan.at("Shared Read Blocks").get<int64_t>();
    std::cout << st.name << "("
              << (args.size() > 120 ? args.substr(0, 120) + "..." : args)
              << "): " << n << " blocks\n";
    return n;
  }

  test::pg_client admin_{test::pg_conninfo()};
  std::string db_;
  std::unique_ptr<match_store> store_;
  std::unique_ptr<test::pg_client> sql_;
  std::string last_plan_; ///< of the last `blocks`, for failure messages
  /// Index scans of outbox_pending by the last `blocks` (one per probe).
  int64_t last_index_scans_ = 0;
};

TEST_F(pg_outbox_scans, fetch_reads_past_the_delivered_history) {
  commit(history, "h");
  deliver_all();
  commit(1, "new");
  // Table and index pages of the history: ~150 and ~10.
  auto b = blocks_both_ways(pg::st_fetch, "100, 30000");
  EXPECT_GT(last_index_scans_, 0);
  EXPECT_LT(b, 60) << "a fetch of one event read " << b << " blocks:\n"
                   << last_plan_;
}

TEST_F(pg_outbox_scans, mark_reads_past_the_delivered_history) {
  commit(history, "h");
  deliver_all();
  commit(1, "new");
  auto id = sql_->query("SELECT event_id FROM outbox_pending").at(0).at(0);
  auto b = blocks_both_ways(pg::st_mark, "'{\"" + id + "\"}'");
  EXPECT_LT(b, 60) << "marking one event read " << b << " blocks:\n"
                   << last_plan_;
}

// A relay marks its events in batches, seconds after commit, while the
// history of delivered events is still in outbox_pending as dead rows. The
// mark used to walk a partial index of them whole (the planner deemed it
// tiny): ~7,000 blocks per mark of 100 events after 100,000 deliveries
// (EXPLAIN after bench/floor_bench --rows product). Young and analyzed, a
// mark of 100 reads ~5 blocks per event (a probe of the event id's index
// and the row) and walks no table whole.
TEST_F(pg_outbox_scans, a_batch_mark_reads_past_the_delivered_history) {
  commit(big_history, "h");
  deliver_all();
  commit(100, "new");
  std::string arg = "'{";
  int n = 0;
  for (auto& row : sql_->query("SELECT event_id FROM outbox_pending")) {
    arg += (n++ ? ",\"" : "\"") + row.at(0) + "\"";
  }
  arg += "}'";
  ASSERT_EQ(n, 100);
  for (bool analyzed : {false, true}) {
    auto b = analyzed ? blocks_analyzed(pg::st_mark, arg)
                      : blocks(pg::st_mark, arg);
    // A sequential scan of the dead rows (no probe of the index) read ~800
    // blocks; probes ~500-600.
    EXPECT_GT(last_index_scans_, 0)
      << (analyzed ? "analyzed" : "young") << ": " << b << " blocks";
    EXPECT_LT(b, 100 * 8) << last_plan_;
  }
}

// The outbox's prune has no index by age since 0007: it walks the primary
// key from the oldest id and must stop at the first row younger than the
// retention, not read every row still kept (~750 pages here).
TEST_F(pg_outbox_scans, prune_outbox_stops_at_the_first_young_event) {
  commit(big_history, "h");
  deliver_all();
  // Retention an hour: nothing is due.
  auto b = blocks_both_ways(pg::st_prune_outbox, "3600000, 500");
  EXPECT_LT(b, 60) << "a prune with nothing due read " << b << " blocks:\n"
                   << last_plan_;
}

TEST_F(pg_outbox_scans, prune_reads_the_undelivered_events_once) {
  // A long history of delivered events of sessions that stay active (not
  // due), then a few sessions that are over and due.
  commit(big_history, "h");
  deliver_all();
  auto due = commit(50, "d");
  for (size_t i = 0; i < due.size(); ++i)
    ASSERT_TRUE(store_->end_session(due[i], "da" + std::to_string(i), "done"));
  deliver_all();
  // Retention 0: all 50 are due. Per session: its row, its pair row, its
  // members; and once per call the undelivered events. The old plan read
  // the ~50 index pages of the history once per session.
  auto b = blocks_both_ways(pg::st_prune_sessions, "0, 500");
  EXPECT_LT(b, 50 * 20) << "pruning 50 sessions read " << b << " blocks:\n"
                        << last_plan_;
}

TEST_F(pg_outbox_scans, an_end_reads_its_session_not_all_active_ones) {
  auto ids = commit(big_history, "h"); // all active
  nlohmann::json e = nlohmann::json::array();
  e.push_back({{"idx", 0},
               {"id", ids.at(7)},
               {"ended_by", ""},
               {"reason", "r"},
               {"event_id", "session.ended:" + ids.at(7)},
               {"payload", "{}"}});
  // The old plan hashed every active session (~400 pages here). (In a
  // never-analyzed database both read the ~3000 entries of the partial
  // index of active sessions: not measured.)
  auto b = blocks_analyzed(pg::st_end, "'" + e.dump() + "'");
  EXPECT_LT(b, 60) << "ending one session read " << b << " blocks:\n"
                   << last_plan_;
}

} // namespace
