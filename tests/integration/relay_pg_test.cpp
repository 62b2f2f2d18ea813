// The outbox relay against a real PostgreSQL (private CTest fixture, a fresh
// database per test) and a real Redis: 2,000 committed matches, two relays
// sharing the work, one of them killed in the middle. Every event must reach
// the Redis Stream, be marked delivered, and reach both users' sessions at
// least once (invariant I5 of docs/design.md).

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <unistd.h>

#include <libpq-fe.h>

#include "actors/directory.hpp"
#include "actors/outbox_relay.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "persistence/queue/queue_store.hpp"
#include "tests/support/caf_config.hpp"
#include "tests/support/pg_client.hpp"
#include "tests/support/test_env.hpp"

using namespace mm;
using namespace std::chrono_literals;

namespace {

using mm_config = test::caf_config;

using pg_conn = test::pg_client;

/// What the stand-in sessions received: user -> event ids (thread-safe).
struct received_log {
  std::mutex mtx;
  std::unordered_map<std::string, std::unordered_set<std::string>> got;
  size_t total = 0;

  void add(const std::string& user, const std::string& id) {
    std::lock_guard<std::mutex> guard{mtx};
    got[user].insert(id);
    ++total;
  }

  bool has(const std::string& user, const std::string& id) {
    std::lock_guard<std::mutex> guard{mtx};
    auto i = got.find(user);
    return i != got.end() && i->second.count(id) > 0;
  }
};

session_actor::behavior_type recorder(session_actor::pointer,
                                      std::shared_ptr<received_log> log,
                                      std::string user) {
  return {
    [](join_atom, join_request&) { return session_state{}; },
    [](cancel_atom) { return session_state{}; },
    [](state_atom) { return session_state{}; },
    [log, user](deliver_atom, match_event& ev) { log->add(user, ev.event_id); },
    [](rescan_atom, uint64_t, int64_t, claim_result&) {},
    [](grace_atom, uint64_t) {},
    [](end_atom, std::string&, std::string&) { return end_result{}; },
    [](leave_atom, std::string&, std::string&) { return leave_result{}; },
    [](give_up_atom, uint64_t) {},
    [](settle_atom, uint64_t) {},
    [](retry_atom, uint64_t) {},
    [](release_atom) {},
    [](pin_atom, bool) {},
  };
}

/// Real Redis, but every execute takes `delay` longer and says when it is
/// under way: a relay using it holds its leased batch for a while, so a kill
/// can be aimed at a relay that has events in hand.
class slow_sink final : public queue_store_factory {
 public:
  slow_sink(std::shared_ptr<queue_store_factory> inner,
            std::chrono::milliseconds delay)
    : inner_(std::move(inner)), delay_(delay) {}

  std::unique_ptr<queue_store> connect() override {
    return std::make_unique<conn>(inner_->connect(), delay_, inside_);
  }

  std::string describe() const override {
    return "slow " + inner_->describe();
  }

  /// Number of calls under way right now.
  int inside() const {
    return inside_->load();
  }

 private:
  class conn final : public queue_store {
   public:
    conn(std::unique_ptr<queue_store> inner, std::chrono::milliseconds delay,
         std::shared_ptr<std::atomic<int>> inside)
      : inner_(std::move(inner)), delay_(delay), inside_(std::move(inside)) {}

    std::vector<store_reply> run(const std::vector<script_call>& c) override {
      return inner_->run(c);
    }

    std::vector<store_reply>
    execute(const std::vector<store_command>& cmds) override {
      ++*inside_;
      std::this_thread::sleep_for(delay_);
      auto out = inner_->execute(cmds);
      --*inside_;
      return out;
    }

    bool blocking() const noexcept override {
      return inner_->blocking();
    }

   private:
    std::unique_ptr<queue_store> inner_;
    std::chrono::milliseconds delay_;
    std::shared_ptr<std::atomic<int>> inside_;
  };

  std::shared_ptr<queue_store_factory> inner_;
  std::chrono::milliseconds delay_;
  std::shared_ptr<std::atomic<int>> inside_
    = std::make_shared<std::atomic<int>>(0);
};

/// Polls `pred` until it holds or `limit` passed.
bool eventually(std::function<bool()> pred, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

class relay_pg : public ::testing::Test {
 protected:
  void SetUp() override {
    admin_ = std::make_unique<pg_conn>(test::pg_conninfo());
    db_ = "mm_relay_" + std::to_string(getpid());
    admin_->query("DROP DATABASE IF EXISTS " + db_ + " WITH (FORCE)");
    admin_->query("CREATE DATABASE " + db_);
    pg_options opts;
    opts.conninfo = test::pg_conninfo(db_);
    store_ = make_pg_match_store(opts);
    conn_ = store_->connect();
    auto m = conn_->apply_migrations();
    ASSERT_TRUE(m) << m.error().detail;
    db_conn_ = std::make_unique<pg_conn>(test::pg_conninfo(db_));
    redis_options ropts;
    ropts.port = test::redis_port();
    sink_ = make_redis_store(ropts);
    redis_ = sink_->connect();
    stream_ = "mm:test:relay:" + std::to_string(getpid());
    redis_->execute({{"DEL", stream_}});
    sys_ = std::make_unique<caf::actor_system>(cfg_);
  }

  void TearDown() override {
    sys_.reset(); // waits for every actor: the tests stop theirs
    if (redis_)
      redis_->execute({{"DEL", stream_}});
    conn_.reset();
    db_conn_.reset();
    if (admin_)
      admin_->query("DROP DATABASE IF EXISTS " + db_ + " WITH (FORCE)");
  }

  /// Event id -> how often it is in the stream.
  std::map<std::string, int> stream_ids() {
    auto r = redis_->execute({{"XRANGE", stream_, "-", "+"}}).at(0);
    if (r.code != errc::none)
      throw std::runtime_error("XRANGE failed: " + r.detail);
    std::map<std::string, int> out;
    for (auto& entry : r.value.elements) {
      auto& fields = entry.elements.at(1).elements;
      for (size_t i = 0; i + 1 < fields.size(); i += 2)
        if (fields[i].str == "event_id")
          ++out[fields[i + 1].str];
    }
    return out;
  }

  int64_t stream_len() {
    auto r = redis_->execute({{"XLEN", stream_}}).at(0);
    return r.code == errc::none ? r.value.integer : -1;
  }

  int64_t undelivered() {
    return db_conn_->count("SELECT count(*) FROM outbox_pending");
  }

  mm_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::unique_ptr<pg_conn> admin_;
  std::unique_ptr<pg_conn> db_conn_;
  std::string db_;
  std::shared_ptr<match_store_factory> store_;
  std::unique_ptr<match_store> conn_;
  std::shared_ptr<queue_store_factory> sink_;
  std::unique_ptr<queue_store> redis_;
  std::string stream_;
};

TEST_F(relay_pg, two_relays_one_killed_deliver_every_event) {
  constexpr int matches = 2000;
  constexpr int commit_batch = 50;
  auto& sys = *sys_;
  auto log = std::make_shared<received_log>();
  auto dir = spawn_directory(sys);
  std::vector<caf::actor> sessions;
  for (int i = 0; i < matches; ++i) {
    for (auto side : {"a", "b"}) {
      auto user = "u" + std::to_string(i) + side;
      auto s = sys.spawn(recorder, log, user);
      sessions.push_back(caf::actor_cast<caf::actor>(s));
      caf::anon_send(dir, register_atom_v, user, s);
    }
  }
  relay_config rc;
  rc.batch = 50;
  rc.lease_ms = 2000; // the killed relay's leases come back quickly
  rc.poll_ms = 200;
  rc.stream = stream_;
  rc.backoff_min_ms = 20;
  rc.backoff_max_ms = 500;
  // A delivered event leaves no row behind (0007_compact_rows.sql): each
  // lease after the first is recorded here as it is taken.
  db_conn_->query(
    "CREATE TABLE test_releases (event_id text NOT NULL);"
    "CREATE FUNCTION test_record_release() RETURNS trigger LANGUAGE plpgsql"
    " AS $$BEGIN INSERT INTO test_releases VALUES (NEW.event_id);"
    " RETURN NEW; END$$;"
    "CREATE TRIGGER test_release AFTER UPDATE ON outbox_pending FOR EACH ROW"
    " WHEN (NEW.attempts > 1) EXECUTE FUNCTION test_record_release()");
  // r1 is slow, so it is sure to have leased events in hand when killed.
  auto slow = std::make_shared<slow_sink>(sink_, 30ms);
  auto r1 = spawn_outbox_relay(sys, store_, slow, dir, rc);
  auto r2 = spawn_outbox_relay(sys, store_, sink_, dir, rc);
  auto commit = [&](int from, int to) {
    std::vector<match_request> reqs;
    for (int i = from; i < to; ++i) {
      match_request r;
      r.queue = "voice";
      r.user_a = "u" + std::to_string(i) + "a";
      r.ticket_a = "t" + std::to_string(i) + "a";
      r.user_b = "u" + std::to_string(i) + "b";
      r.ticket_b = "t" + std::to_string(i) + "b";
      reqs.push_back(std::move(r));
    }
    for (auto& res : conn_->commit_matches(reqs))
      EXPECT_TRUE(res && res->created)
        << (res ? "not created" : res.error().detail);
  };
  // Commits go on in the background while one relay is killed mid-stream.
  std::thread committer([&] {
    for (int i = 0; i < matches; i += commit_batch) {
      commit(i, i + commit_batch);
      std::this_thread::sleep_for(2ms);
    }
  });
  bool busy = eventually([&] { return stream_len() >= 300; }, 30s)
              // r1 is inside an XADD of a batch it leased: it never marks it.
              && eventually([&] { return slow->inside() > 0; }, 30s);
  caf::anon_send_exit(r1, caf::exit_reason::kill);
  auto at_kill = stream_len();
  committer.join();
  ASSERT_TRUE(busy) << "the relays never got to work";
  // The survivor takes over the killed relay's leases once they expire.
  EXPECT_TRUE(eventually([&] { return undelivered() == 0; }, 60s))
    << undelivered() << " events still undelivered";
  {
    caf::scoped_actor self{sys};
    self->request(r2, std::chrono::seconds(30), flush_atom_v)
      .receive([](uint32_t) {},
               [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  }
  EXPECT_EQ(undelivered(), 0);
  EXPECT_EQ(db_conn_->count("SELECT count(*) FROM outbox"), matches);
  // Sessions get their events asynchronously after the directory answered.
  eventually(
    [&] {
      std::lock_guard<std::mutex> guard{log->mtx};
      return log->total >= static_cast<size_t>(2 * matches);
    },
    10s);
  auto rows = db_conn_->query(
    "SELECT event_id, payload_text::jsonb->'users'->0->>'user',"
    " payload_text::jsonb->'users'->1->>'user' FROM outbox ORDER BY id");
  ASSERT_EQ(rows.size(), static_cast<size_t>(matches));
  auto in_stream = stream_ids();
  int lost_stream = 0;
  int lost_session = 0;
  int duplicates = 0;
  for (auto& row : rows) {
    auto i = in_stream.find(row[0]);
    if (i == in_stream.end())
      ++lost_stream;
    else
      duplicates += i->second - 1;
    for (int k = 1; k <= 2; ++k)
      if (!log->has(row[k], row[0]))
        ++lost_session;
  }
  auto redelivered
    = db_conn_->count("SELECT count(DISTINCT event_id) FROM test_releases");
  std::cout << "stream length at the kill: " << at_kill
            << ", stream entries: " << stream_len()
            << ", duplicates in the stream: " << duplicates
            << ", events leased more than once: " << redelivered << "\n";
  EXPECT_EQ(lost_stream, 0) << "events missing from the stream";
  EXPECT_EQ(lost_session, 0) << "deliveries missing at the sessions";
  EXPECT_EQ(in_stream.size(), static_cast<size_t>(matches));
  // The killed relay's batch was handed out again after its lease expired.
  EXPECT_GE(redelivered, 1);
  caf::anon_send_exit(r2, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(dir, caf::exit_reason::user_shutdown);
  for (auto& s : sessions)
    caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
}

} // namespace
