// The queue broker against a real private redis-server: pipelined concurrent
// claims, stale windows, and a Redis restart.

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <cstdlib>
#include <future>
#include <map>
#include <set>

#include "actors/queue_broker.hpp"
#include "tests/support/caf_config.hpp"
#include "tests/support/store_harness.hpp"

using namespace mm;

namespace {

using mm_config = test::caf_config;

class broker_redis : public ::testing::Test {
 protected:
  void SetUp() override {
    opts_.port = test::redis_port();
    opts_.retry_delay_ms = 50;
    store_ = make_redis_store(opts_);
    raw_ = std::make_unique<test::store_client>(store_->connect());
  }

  queue_broker_actor spawn(broker_config cfg = {}) {
    cfg.sweep_interval_ms = 0;
    return spawn_queue_broker(sys_, store_, cfg);
  }

  template <class T, class... Ts>
  outcome<T> ask(const queue_broker_actor& b, Ts&&... xs) {
    outcome<T> out{errc::none};
    caf::scoped_actor self{sys_};
    self->request(b, std::chrono::seconds(30), std::forward<Ts>(xs)...)
      .receive([&](T& x) { out = std::move(x); },
               [&](caf::error& e) {
                 out = failure{e.category() == caf::atom("mm")
                                 ? static_cast<errc>(e.code())
                                 : errc::protocol_error,
                               sys_.render(e)};
               });
    return out;
  }

  mm_config cfg_;
  caf::actor_system sys_{cfg_};
  redis_options opts_;
  std::shared_ptr<queue_store_factory> store_;
  std::unique_ptr<test::store_client> raw_;
};

TEST_F(broker_redis, finds_the_live_waiter_behind_a_stale_window) {
  auto q = test::fresh_queue("stale");
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(raw_->enqueue(
      test::spec(q, "g" + std::to_string(i), "tg" + std::to_string(i), 20)));
  ASSERT_TRUE(raw_->enqueue(test::spec(q, "live", "tl", 60000)));
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  broker_config cfg;
  cfg.scan = 2;
  auto b = spawn(cfg);
  auto r = ask<claim_result>(b, claim_atom_v, test::spec(q, "carol", "tc"));
  ASSERT_TRUE(r) << r.error().detail;
  EXPECT_EQ(r->outcome, claim_outcome::matched);
  EXPECT_EQ(r->partner.user, "live");
  EXPECT_EQ(r->stale_removed, 5u) << "scans " << r->scans;
  EXPECT_EQ(r->scans, 3u);
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
}

TEST_F(broker_redis, concurrent_claims_form_a_valid_matching) {
  // Thousands of claims in flight at once: the broker pipelines them over its
  // workers' connections; the outcome must still be a valid matching.
  auto q = test::fresh_queue("many");
  auto b = spawn();
  static constexpr int n = 4000;
  struct tally {
    std::vector<claim_result> results;
    std::vector<std::string> users; // claimer of results[i]
    int errors = 0;
  };
  std::promise<tally> done;
  sys_.spawn([&done, b, q](caf::event_based_actor* self) {
    auto t = std::make_shared<tally>();
    auto left = std::make_shared<int>(n);
    auto finish = [&done, t, left] {
      if (--*left == 0)
        done.set_value(std::move(*t));
    };
    for (int i = 0; i < n; ++i) {
      auto user = "u" + std::to_string(i);
      self
        ->request(b, std::chrono::seconds(60), claim_atom_v,
                  test::spec(q, user, "t" + std::to_string(i)))
        .then(
          [t, finish, user](claim_result& r) {
            t->results.push_back(std::move(r));
            t->users.push_back(user);
            finish();
          },
          [t, finish](caf::error&) {
            ++t->errors;
            finish();
          });
    }
  });
  auto t = done.get_future().get();
  EXPECT_EQ(t.errors, 0);
  ASSERT_EQ(t.results.size(), size_t{n});
  std::set<std::string> paired;
  int matched = 0, queued = 0, violations = 0;
  for (size_t i = 0; i < t.results.size(); ++i) {
    auto& r = t.results[i];
    if (r.outcome == claim_outcome::matched) {
      ++matched;
      if (!paired.insert(t.users[i]).second
          || !paired.insert(r.partner.user).second)
        ++violations; // somebody is in two pairs: a double booking
    } else if (r.outcome == claim_outcome::queued) {
      ++queued;
    } else {
      ++violations; // fresh arrivals are never "claimed by other"
    }
  }
  EXPECT_EQ(violations, 0);
  auto left = raw_->waiting(q);
  EXPECT_LE(left.size(), 1u); // never two users waiting side by side
  EXPECT_EQ(queued, matched + static_cast<int>(left.size()));
  EXPECT_EQ(static_cast<int>(paired.size()), 2 * matched);
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
}

TEST_F(broker_redis, survives_a_redis_restart) {
  auto q = test::fresh_queue("restart");
  auto b = spawn();
  ASSERT_TRUE(ask<enqueue_result>(b, enqueue_atom_v, test::spec(q, "a", "ta")));
  auto dir = test::redis_dir();
  auto port = std::to_string(opts_.port);
  // SHUTDOWN closes the connection without a reply: ignore redis-cli's status.
  (void)std::system(
    ("redis-cli -p " + port + " shutdown nosave >/dev/null 2>&1").c_str());
  auto down = ask<claim_result>(b, claim_atom_v, test::spec(q, "b", "tb"));
  ASSERT_FALSE(down);
  EXPECT_EQ(down.error().code, errc::store_unavailable);
  auto start = "redis-server --port " + port
               + " --bind 127.0.0.1 --save '' --appendonly no --daemonize yes"
                 " --dir "
               + dir + " --pidfile " + dir
               + "/redis.pid"
                 " --logfile "
               + dir + "/redis.log";
  ASSERT_EQ(std::system(start.c_str()), 0);
  for (int i = 0; i < 100; ++i) {
    auto pong = "redis-cli -p " + port + " ping >/dev/null 2>&1";
    if (std::system(pong.c_str()) == 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // The restarted server lost its data (no persistence here): the broker
  // reconnects and reloads its scripts; the claim is answered normally.
  auto up = ask<claim_result>(b, claim_atom_v, test::spec(q, "b", "tb"));
  ASSERT_TRUE(up) << up.error().detail;
  EXPECT_EQ(up->outcome, claim_outcome::queued);
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
}

} // namespace
