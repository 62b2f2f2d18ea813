// Mutual likes through two engine instances that share one real Redis (the
// pair lock's lease) and one real PostgreSQL: A->B and B->A released
// together, 1,000 rounds, exactly one match and one event per pair.

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <future>
#include <map>

#include "actors/engine.hpp"
#include "tests/support/caf_config.hpp"
#include "tests/support/pg_client.hpp"
#include "tests/support/store_harness.hpp"

using namespace mm;

namespace {

constexpr int rounds = 1000;
constexpr int in_parallel = 50; // rounds in flight at once (distinct pairs)

TEST(mutual_likes, both_directions_at_once_make_exactly_one_match) {
  test::caf_config cfg;
  caf::actor_system sys{cfg};
  engine_config ecfg;
  ecfg.use_redis = true;
  ecfg.redis.port = test::redis_port();
  ecfg.use_postgres = true;
  ecfg.postgres.conninfo = test::fresh_database("mm_swipe");
  ecfg.run_relay = false;
  ecfg.broker.sweep_interval_ms = 0;
  ecfg.lock.prefix = "mm:lock:" + test::fresh_queue("swipe") + ":";
  auto e1 = engine::start(sys, ecfg);
  ecfg.node = "node-2";
  auto e2 = engine::start(sys, ecfg);
  ASSERT_TRUE(e1 && e2);
  auto s1 = (*e1)->swipes();
  auto s2 = (*e2)->swipes();

  struct round_result {
    caf::expected<swipe_result> a{caf::error{}}, b{caf::error{}};
    std::chrono::steady_clock::duration took{};
  };
  std::vector<round_result> results(rounds);
  std::promise<void> done;
  auto left = std::make_shared<int>(2 * rounds);
  sys.spawn([&, left](caf::event_based_actor* self) {
    auto start_round = std::make_shared<std::function<void(int)>>();
    *start_round = [&, self, left, start_round](int i) {
      if (i >= rounds)
        return;
      auto a = "a" + std::to_string(i), b = "b" + std::to_string(i);
      auto t0 = std::chrono::steady_clock::now();
      auto finished = std::make_shared<int>(0);
      auto on = [&, i, t0, finished, left,
                 start_round](bool first, caf::expected<swipe_result> r) {
        (first ? results[i].a : results[i].b) = std::move(r);
        if (++*finished == 2) {
          results[i].took = std::chrono::steady_clock::now() - t0;
          (*start_round)(i + in_parallel);
        }
        if (--*left == 0)
          done.set_value();
      };
      // Both directions released together, through different engines.
      self
        ->request(s1, std::chrono::seconds(30), swipe_atom_v,
                  swipe_request{a, b, true})
        .then([on](swipe_result& r) { on(true, r); },
              [on](caf::error& e) { on(true, e); });
      self
        ->request(s2, std::chrono::seconds(30), swipe_atom_v,
                  swipe_request{b, a, true})
        .then([on](swipe_result& r) { on(false, r); },
              [on](caf::error& e) { on(false, e); });
    };
    for (int i = 0; i < in_parallel; ++i)
      (*start_round)(i);
  });
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::minutes(3)), std::future_status::ready)
    << "deadlock: not every swipe was answered";

  test::pg_client db{ecfg.postgres.conninfo};
  std::map<std::string, int> events_per_session;
  for (auto& row : db.query("SELECT aggregate_id, count(*) FROM outbox WHERE "
                            "type = 'match.created' GROUP BY aggregate_id"))
    events_per_session[row[0]] = std::stoi(row[1]);
  std::map<std::string, std::string> pair_session;
  for (auto& row : db.query("SELECT pair_min, session_id FROM mutual_matches"))
    pair_session[row[0]] = row[1];
  int violations = 0;
  auto violation = [&](const std::string& what) {
    if (++violations <= 20)
      ADD_FAILURE() << what;
  };
  auto bound = std::chrono::milliseconds(ecfg.lock.wait_ms);
  for (int i = 0; i < rounds; ++i) {
    auto& r = results[i];
    auto a = "a" + std::to_string(i);
    if (!r.a || !r.b) {
      violation("round " + std::to_string(i)
                + ": an error: " + to_string(r.a ? r.b.error() : r.a.error()));
      continue;
    }
    // The lock orders the two: the first finds no opposite like, the
    // second completes the pair and creates its one match.
    auto& creator = r.a->created ? *r.a : *r.b;
    auto& other = r.a->created ? *r.b : *r.a;
    if (r.a->created == r.b->created || !creator.mutual
        || creator.session_id.empty())
      violation("round " + std::to_string(i) + ": created by both or none");
    if (other.mutual && other.session_id != creator.session_id)
      violation("round " + std::to_string(i) + ": two sessions for one pair");
    auto s = pair_session.find(a);
    if (s == pair_session.end() || s->second != creator.session_id)
      violation("round " + std::to_string(i) + ": no mutual_matches row");
    else if (events_per_session[s->second] != 1)
      violation("round " + std::to_string(i) + ": "
                + std::to_string(events_per_session[s->second]) + " events");
    if (r.took > bound)
      violation("round " + std::to_string(i) + " took longer than the bound");
  }
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(pair_session.size(), size_t{rounds});
  EXPECT_EQ(db.query("SELECT count(*) FROM match_sessions")[0][0],
            std::to_string(rounds));
  (*e1)->stop();
  (*e2)->stop();
}

} // namespace
