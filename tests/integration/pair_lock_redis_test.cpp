// The pair lock against a real private redis-server, with two lock actors
// standing for two nodes (they share nothing but Redis): races on one pair,
// holders that die, and stale tokens.

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "actors/pair_lock.hpp"
#include "tests/support/caf_config.hpp"
#include "tests/support/race.hpp"
#include "tests/support/store_harness.hpp"

using namespace mm;
using namespace std::chrono;

namespace {

using mm_config = test::caf_config;

struct acquired {
  std::string token; ///< empty on error
  std::string error;
  milliseconds waited{0};
};

class pair_lock_redis : public ::testing::Test {
 protected:
  void SetUp() override {
    opts_.port = test::redis_port();
    opts_.retry_delay_ms = 50;
    raw_ = std::make_unique<test::store_client>(
      make_redis_store(opts_)->connect());
    // Keys of this run only.
    prefix_ = "mm:lock:" + test::fresh_queue("t") + ":";
  }

  /// A node: its own lock actor over its own Redis connections.
  pair_lock_actor node(pair_lock_config cfg = {}) {
    cfg.prefix = prefix_;
    auto n = spawn_pair_lock(sys_, make_redis_store(opts_), cfg);
    nodes_.push_back(n);
    return n;
  }

  void TearDown() override {
    for (auto& n : nodes_)
      caf::anon_send_exit(n, caf::exit_reason::user_shutdown);
  }

  acquired acquire(caf::scoped_actor& self, const pair_lock_actor& n,
                   const std::string& a, const std::string& b) {
    acquired out;
    auto t0 = steady_clock::now();
    self->request(n, seconds(30), acquire_atom_v, a, b)
      .receive([&](std::string& token) { out.token = std::move(token); },
               [&](caf::error& e) { out.error = sys_.render(e); });
    out.waited = duration_cast<milliseconds>(steady_clock::now() - t0);
    return out;
  }

  std::string key(const std::string& a, const std::string& b) {
    return prefix_ + "{" + pair_lock_key(a, b) + "}";
  }

  std::string stored(const std::string& a, const std::string& b) {
    auto v = raw_->command({"GET", key(a, b)});
    return v.type == store_value::kind::string ? v.str : std::string{};
  }

  std::string unlock_raw(const std::string& a, const std::string& b,
                         const std::string& token) {
    std::vector<script_call> calls{
      script_call{script_id::unlock, {key(a, b)}, {token}}};
    auto r = raw_->conn().run(calls).at(0);
    EXPECT_EQ(r.code, errc::none) << r.detail;
    if (r.value.type != store_value::kind::array || r.value.elements.empty())
      return "unreadable: " + r.value.str;
    return r.value.elements[0].str;
  }

  /// Waits (bounded) until the pair's key holds `want` ("" = gone).
  bool eventually_stored(const std::string& a, const std::string& b,
                         const std::string& want) {
    for (int i = 0; i < 200; ++i) {
      if (stored(a, b) == want)
        return true;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return false;
  }

  mm_config cfg_;
  caf::actor_system sys_{cfg_};
  redis_options opts_;
  std::unique_ptr<test::store_client> raw_;
  std::string prefix_;
  std::vector<pair_lock_actor> nodes_;
};

TEST_F(pair_lock_redis, two_nodes_racing_for_one_pair_never_both_hold_it) {
  pair_lock_config cfg;
  cfg.retry_ms = 2; // keeps 1,000 rounds short; the bound stays 4 s
  auto n1 = node(cfg);
  auto n2 = node(cfg);
  constexpr int rounds = 1000;
  std::atomic<bool> inside{false};
  std::atomic<int> overlaps{0};
  int failures = 0;
  milliseconds longest{0};
  std::string first_error;
  test::racer race;
  // One contender per node and thread, asking with the ids in either order.
  auto contend = [&](const pair_lock_actor& n, const std::string& a,
                     const std::string& b, acquired& out) {
    caf::scoped_actor self{sys_};
    out = acquire(self, n, a, b);
    if (out.token.empty())
      return;
    if (inside.exchange(true))
      ++overlaps;
    // Stay a moment, so that an overlap would be seen.
    std::this_thread::sleep_for(microseconds(100));
    inside = false;
    self->send(n, release_atom_v, a, b, out.token);
  };
  for (int i = 0; i < rounds; ++i) {
    acquired r1, r2;
    race.run([&] { contend(n1, "alice", "bob", r1); },
             [&] { contend(n2, "bob", "alice", r2); });
    for (auto* r : {&r1, &r2}) {
      if (r->token.empty()) {
        ++failures;
        if (first_error.empty())
          first_error = "round " + std::to_string(i) + ": " + r->error;
      }
      longest = std::max(longest, r->waited);
    }
  }
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(failures, 0) << first_error;
  EXPECT_LT(longest.count(), cfg.wait_ms);
  std::cout << rounds << " rounds, longest wait " << longest.count() << " ms\n";
  EXPECT_TRUE(eventually_stored("alice", "bob", ""));
}

TEST_F(pair_lock_redis,
       a_dead_holder_of_another_node_is_outlived_by_its_lease) {
  auto n1 = node();
  // "Another node" takes the pair and dies without releasing it.
  constexpr int lease = 500;
  auto set = raw_->command({"SET", key("alice", "bob"), "dead-node-token", "NX",
                            "PX", std::to_string(lease)});
  ASSERT_EQ(set.str, "OK");
  auto t0 = steady_clock::now();
  caf::scoped_actor self{sys_};
  auto r = acquire(self, n1, "bob", "alice");
  ASSERT_FALSE(r.token.empty()) << r.error;
  auto waited = duration_cast<milliseconds>(steady_clock::now() - t0);
  EXPECT_GE(waited.count(), lease - 50); // Redis's clock, not ours: slack
  EXPECT_LT(waited.count(), 4000);
  EXPECT_EQ(stored("alice", "bob"), r.token);
  // The dead node's late unlock with its old token leaves the key in place.
  EXPECT_EQ(unlock_raw("alice", "bob", "dead-node-token"), "not_owner");
  EXPECT_EQ(stored("alice", "bob"), r.token);
  // So does a release with it through the lock. (The acquire after it, from
  // the same sender, is answered after the release was handled.)
  self->send(n1, release_atom_v, std::string{"alice"}, std::string{"bob"},
             std::string{"dead-node-token"});
  auto probe = acquire(self, n1, "carol", "dave");
  ASSERT_FALSE(probe.token.empty()) << probe.error;
  EXPECT_EQ(stored("alice", "bob"), r.token);
  // The holder's own release frees it.
  self->send(n1, release_atom_v, std::string{"alice"}, std::string{"bob"},
             r.token);
  EXPECT_TRUE(eventually_stored("alice", "bob", ""));
  self->send(n1, release_atom_v, std::string{"carol"}, std::string{"dave"},
             probe.token);
  EXPECT_TRUE(eventually_stored("carol", "dave", ""));
}

TEST_F(pair_lock_redis, a_holder_actor_that_dies_frees_the_pair_at_once) {
  auto n1 = node();
  auto n2 = node();
  std::promise<std::string> granted;
  auto holder = sys_.spawn([n1, &granted](caf::event_based_actor* self) {
    self
      ->request(n1, seconds(30), acquire_atom_v, std::string{"alice"},
                std::string{"bob"})
      .then([&granted](std::string& token) { granted.set_value(token); });
    return caf::behavior{[](int) {}};
  });
  auto token = granted.get_future().get();
  ASSERT_EQ(stored("alice", "bob"), token);
  caf::anon_send_exit(holder, caf::exit_reason::kill);
  caf::scoped_actor self{sys_};
  auto r = acquire(self, n2, "alice", "bob");
  ASSERT_FALSE(r.token.empty()) << r.error;
  // Well before the 3 s lease: n1 saw its holder go down and unlocked.
  EXPECT_LT(r.waited.count(), 1500);
  EXPECT_EQ(stored("alice", "bob"), r.token);
  self->send(n2, release_atom_v, std::string{"alice"}, std::string{"bob"},
             r.token);
  EXPECT_TRUE(eventually_stored("alice", "bob", ""));
}

TEST_F(pair_lock_redis, a_waiter_on_another_node_gets_conflict_at_its_bound) {
  auto n1 = node();
  pair_lock_config short_wait;
  short_wait.wait_ms = 300;
  auto n2 = node(short_wait);
  caf::scoped_actor holder{sys_};
  auto h = acquire(holder, n1, "alice", "bob");
  ASSERT_FALSE(h.token.empty()) << h.error;
  caf::scoped_actor self{sys_};
  auto r = acquire(self, n2, "bob", "alice");
  EXPECT_TRUE(r.token.empty());
  EXPECT_NE(r.error.find("conflict"), std::string::npos) << r.error;
  EXPECT_GE(r.waited.count(), 290);
  EXPECT_LT(r.waited.count(), 1000);
  // The loser never holds it: the key stays the holder's, also later.
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(stored("alice", "bob"), h.token);
  holder->send(n1, release_atom_v, std::string{"alice"}, std::string{"bob"},
               h.token);
  EXPECT_TRUE(eventually_stored("alice", "bob", ""));
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(stored("alice", "bob"), "");
}

} // namespace
