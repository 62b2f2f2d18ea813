// Match store conformance: the outbox. Fetch and mark deliver each event
// once, expired leases hand events out again, concurrent fetchers never
// share a lease, and a commit wakes a waiting relay.

#include <chrono>
#include <optional>
#include <thread>

#include "tests/conformance/match_store_fixture.hpp"
#include "tests/support/race.hpp"

using namespace mm;
using namespace mm::test;
using namespace mm::test::store_conformance;

namespace {

// -- outbox -------------------------------------------------------------------

TEST_P(match_store_conformance, fetch_and_mark_deliver_each_event_once) {
  std::vector<match_request> batch;
  for (int i = 0; i < 10; ++i)
    batch.push_back(req(q_, "x" + std::to_string(i), "y" + std::to_string(i)));
  for (auto& r : s().commit_matches(batch))
    ASSERT_OK(r);
  auto first = s().fetch_undelivered(4, 60000);
  ASSERT_OK(first);
  ASSERT_EQ(first->size(), 4u);
  for (size_t i = 0; i < first->size(); ++i) {
    const auto& ev = (*first)[i];
    if (i > 0) {
      EXPECT_LT((*first)[i - 1].seq, ev.seq);
    }
    EXPECT_EQ(ev.attempts, 1);
    EXPECT_GE(ev.locked_until, ev.created_at + 59000);
    EXPECT_EQ(ev.delivered_at, 0);
  }
  auto rest = factory_->connect()->fetch_undelivered(100, 60000);
  ASSERT_OK(rest);
  ASSERT_EQ(rest->size(), 6u);
  EXPECT_LT(first->back().seq, rest->front().seq);
  auto none = s().fetch_undelivered(100);
  ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
  std::vector<std::string> ids;
  for (auto& ev : *first)
    ids.push_back(ev.event_id);
  auto m = s().mark_delivered(ids);
  ASSERT_OK(m);
  EXPECT_EQ(*m, 4u);
  auto m2 = s().mark_delivered(ids);
  ASSERT_OK(m2);
  EXPECT_EQ(*m2, 0u);
  auto m3 = s().mark_delivered({"match.created:nope", ""});
  ASSERT_OK(m3);
  EXPECT_EQ(*m3, 0u);
  EXPECT_EQ(*s().mark_delivered({}), 0u);
  ids.clear();
  for (auto& ev : *rest)
    ids.push_back(ev.event_id);
  ids.push_back(ids.front()); // duplicates count once
  auto m4 = s().mark_delivered(ids);
  ASSERT_OK(m4);
  EXPECT_EQ(*m4, 6u);
  // Delivered events never come back, not even after a short lease.
  auto after = s().fetch_undelivered(100, 1);
  ASSERT_OK(after);
  EXPECT_TRUE(after->empty());
}

TEST_P(match_store_conformance, an_expired_lease_hands_the_event_out_again) {
  for (auto& r : s().commit_matches(
         {req(q_, "a", "b"), req(q_, "c", "d"), req(q_, "e", "f")}))
    ASSERT_OK(r);
  auto leased = s().fetch_undelivered(10, 300);
  ASSERT_OK(leased);
  ASSERT_EQ(leased->size(), 3u);
  auto held = factory_->connect()->fetch_undelivered(10, 300);
  ASSERT_OK(held);
  EXPECT_TRUE(held->empty());
  // The relay that leased them "died": after the lease they come back.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto again = factory_->connect()->fetch_undelivered(10, 60000);
  ASSERT_OK(again);
  ASSERT_EQ(again->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*again)[i].event_id, (*leased)[i].event_id);
    EXPECT_EQ((*again)[i].attempts, 2);
  }
  std::vector<std::string> ids;
  for (auto& ev : *again)
    ids.push_back(ev.event_id);
  auto m = s().mark_delivered(ids);
  ASSERT_OK(m);
  EXPECT_EQ(*m, 3u);
}

TEST_P(match_store_conformance, concurrent_fetchers_never_share_a_lease) {
  constexpr int n = 600;
  for (int b = 0; b < n / 100; ++b) {
    std::vector<match_request> batch;
    for (int i = 0; i < 100; ++i) {
      auto k = std::to_string(b * 100 + i);
      batch.push_back(req(q_, "l" + k, "r" + k));
    }
    for (auto& r : s().commit_matches(batch))
      ASSERT_OK(r);
  }
  auto c1 = factory_->connect();
  auto c2 = factory_->connect();
  std::map<std::string, int> seen;
  int violations = 0;
  int errors = 0;
  int rounds = 0;
  racer race;
  for (; rounds < 10000; ++rounds) {
    std::vector<outbox_event> e1, e2;
    race.run(
      [&] {
        auto r = c1->fetch_undelivered(5, 60000);
        if (r)
          e1 = *r;
        else
          ++errors;
      },
      [&] {
        auto r = c2->fetch_undelivered(5, 60000);
        if (r)
          e2 = *r;
        else
          ++errors;
      });
    if (e1.empty() && e2.empty())
      break;
    std::vector<std::string> ids;
    for (auto* batch : {&e1, &e2}) {
      for (auto& ev : *batch) {
        if (++seen[ev.event_id] > 1)
          ++violations;
        ids.push_back(ev.event_id);
      }
    }
    // Deliver every other round, so fetches also race with marks.
    if (rounds % 2 == 0) {
      auto m = s().mark_delivered(ids);
      ASSERT_OK(m);
    }
  }
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(seen.size(), size_t{n});
  EXPECT_GT(rounds, n / 10 / 2); // both fetched, in many rounds
}

TEST_P(match_store_conformance, a_commit_wakes_a_waiting_relay) {
  auto relay = factory_->connect();
  auto first = relay->wait_for_events(0); // starts listening
  ASSERT_OK(first);
  EXPECT_FALSE(*first);
  auto idle = relay->wait_for_events(50);
  ASSERT_OK(idle);
  EXPECT_FALSE(*idle);
  std::optional<outcome<bool>> woke;
  auto t0 = std::chrono::steady_clock::now();
  std::thread waiter([&] { woke = relay->wait_for_events(10000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_OK(s().commit_matches({req(q_, "a", "b")}).at(0));
  waiter.join();
  ASSERT_OK(*woke);
  EXPECT_TRUE(**woke);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  // A commit that creates nothing announces nothing.
  ASSERT_FALSE(s().commit_matches({req(q_, "a", "c", "2")}).at(0));
  auto quiet = relay->wait_for_events(100);
  ASSERT_OK(quiet);
  EXPECT_FALSE(*quiet);
  // A commit while nobody waits is kept for the next wait.
  ASSERT_OK(s().commit_matches({req(q_, "x", "y")}).at(0));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto kept = relay->wait_for_events(1000);
  ASSERT_OK(kept);
  EXPECT_TRUE(*kept);
}

} // namespace
