// The outbox's time partitions on a real PostgreSQL (migration 0004,
// match_store::maintain_partitions): windows created ahead, rows in them,
// a window with rows in the default partition left to it, and old windows
// dropped whole while commits, leases and marks run — with no failed
// commit and no event lost (issue 15: "Partition maintenance drops an old
// partition while commits run, with 0 failed commits"). The in-memory store
// has no partitions: it answers an empty report, and both refuse bad
// arguments.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

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

  int64_t windows() {
    return sql_->count("SELECT count(*) FROM pg_inherits i JOIN pg_class c"
                       " ON c.oid = i.inhrelid WHERE i.inhparent ="
                       " 'outbox'::regclass AND c.relname <> 'outbox_default'");
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
  EXPECT_EQ(r->created, 4u); // the current window and three ahead
  EXPECT_EQ(r->partitions, 4u);
  EXPECT_EQ(windows(), 4);
  auto again = store_->maintain_partitions(3600, 86400, 3);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->created, 0u); // idempotent
  EXPECT_EQ(again->partitions, 4u);
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
  EXPECT_EQ(sql_->count("SELECT count(*) FROM outbox WHERE delivered_at"
                        " IS NULL"),
            0);
  // Another width overlaps those windows: left alone, nothing fails.
  auto other = store_->maintain_partitions(600, 86400, 3);
  ASSERT_TRUE(other) << other.error().detail;
  EXPECT_EQ(windows(), 4 + static_cast<int64_t>(other->created));
}

TEST_F(pg_partitions, a_window_with_rows_in_the_default_is_left_to_it) {
  // Rows of the current window before any window exists (today's rows at
  // the migration): that window stays in the default partition, where
  // prune deletes rows one by one as before.
  auto c = store_->commit_matches({pair("y")});
  ASSERT_TRUE(c.at(0));
  auto r = store_->maintain_partitions(3600, 86400, 3);
  ASSERT_TRUE(r) << r.error().detail;
  EXPECT_EQ(r->created, 3u);
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
  // a relay that leases and marks, and the maintenance every 200 ms, for
  // 8 s. A window is dropped only when all its events were delivered.
  constexpr uint32_t width_s = 1, retention_s = 2;
  auto r = store_->maintain_partitions(width_s, retention_s, 3);
  ASSERT_TRUE(r) << r.error().detail;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> commits{0}, failed{0}, maint_failed{0};
  std::atomic<uint64_t> dropped{0}, kept{0};
  std::mutex mtx;
  std::set<std::string> committed, delivered;
  std::vector<std::string> errors;
  auto committer = [&](int k) {
    auto s = factory_->connect();
    for (int n = 0; !stop; ++n) {
      std::vector<match_request> batch;
      for (int j = 0; j < 5; ++j)
        batch.push_back(pair("c" + std::to_string(k) + "_"
                             + std::to_string(n) + "_" + std::to_string(j)
                             + "_"));
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
        delivered.insert(e.aggregate_id);
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
      delivered.insert(e.aggregate_id);
    }
    ASSERT_TRUE(store_->mark_delivered(ids));
  }
  EXPECT_EQ(failed.load(), 0u) << (errors.empty() ? "" : errors.front());
  EXPECT_EQ(maint_failed.load(), 0u);
  EXPECT_GT(commits.load(), 100u);
  EXPECT_GE(dropped.load(), 3u) << "old windows were not dropped";
  // Nothing lost: every committed match's event was delivered (a window
  // goes only when all of its events were).
  size_t lost = 0;
  for (auto& id : committed)
    lost += delivered.count(id) == 0 ? 1 : 0;
  EXPECT_EQ(lost, 0u);
  // The windows ahead took every row: none in the default partition, and
  // the outbox holds only the last seconds (not all `commits` rows).
  EXPECT_EQ(rows_in("outbox_default"), 0);
  EXPECT_LT(rows_in("outbox"), static_cast<int64_t>(commits.load()));
  EXPECT_LE(windows(), 3 + 1 + 3 + 1); // kept + current + ahead
  std::cout << "commits " << commits << ", windows dropped " << dropped
            << ", kept a while " << kept << ", rows now "
            << rows_in("outbox") << "\n";
}

TEST(partitions_memory_store, no_partitions_and_the_same_refusals) {
  auto mem = make_memory_match_store()->connect();
  auto r = mem->maintain_partitions(60, 3600, 3);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->created + r->dropped + r->partitions, 0u);
  for (auto [w, a] : {std::pair<uint32_t, uint32_t>{0, 3},
                      {max_partition_width_s + 1, 3}, {60, 0}, {60, 65}}) {
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

} // namespace
