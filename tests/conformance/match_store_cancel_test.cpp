// Match store conformance: cancel checkpoints. A request withdrawn at a
// checkpoint of the commit (after_create, before_commit) leaves no trace,
// in a batch and one by one, and racing cancels never leak a match.

#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

#include "tests/conformance/match_store_fixture.hpp"

using namespace mm;
using namespace mm::test;
using namespace mm::test::store_conformance;

namespace {

TEST_P(match_store_conformance, withdrawn_requests_leave_no_trace) {
  std::vector<match_request> batch{
    req(q_, "self", "self"), // 0: malformed, never asked
    req(q_, "k1", "k2"),     // 1: kept
    req(q_, "w1", "w2"),     // 2: withdrawn right after its rows were written
    req(q_, "k3", "k4"),     // 3: kept
    req(q_, "w3", "w4"),     // 4: withdrawn right before COMMIT
    req(q_, "k5", "k6"),     // 5: kept
  };
  checkpoints cp{{{after_create, 2}, {before_commit, 4}}};
  auto res = s().commit_matches(batch, cp.fn());
  ASSERT_EQ(res.size(), batch.size());
  ASSERT_FALSE(res[0]);
  EXPECT_EQ(res[0].error().code, errc::invalid_argument);
  for (size_t i : {1, 3, 5}) {
    ASSERT_OK(res[i]);
    EXPECT_TRUE(res[i]->created);
    EXPECT_EQ(res[i]->ticket_a, batch[i].ticket_a);
  }
  EXPECT_WITHDRAWN(res[2], "after_create");
  EXPECT_WITHDRAWN(res[4], "before_commit");
  // The caller's indices, not the store's (the malformed one is not passed
  // on); the survivors are asked again after a round that withdrew one.
  EXPECT_EQ(cp.calls,
            (std::vector<std::string>{
              "after_create:1", "after_create:2", "after_create:3",
              "after_create:4", "after_create:5", "before_commit:1",
              "before_commit:3", "before_commit:4", "before_commit:5",
              "before_commit:1", "before_commit:3", "before_commit:5"}));
  expect_no_trace_of(batch[2]);
  expect_no_trace_of(batch[4]);
  expect_rows(3);
  event_index evs{drain(s())};
  EXPECT_EQ(evs.per_session.size(), 3u);
  for (size_t i : {1, 3, 5})
    EXPECT_EQ(evs.per_session[res[i]->session_id], 1) << i;
  for (size_t i : {2, 4}) {
    EXPECT_EQ(evs.tickets.count(batch[i].ticket_a), 0u) << i;
    EXPECT_EQ(evs.tickets.count(batch[i].ticket_b), 0u) << i;
  }
  for (auto user : {"w1", "w2", "w3", "w4"}) {
    auto a = s().active_session_of(user);
    ASSERT_OK(a);
    EXPECT_FALSE(a->has_value()) << user;
  }
  // The users are free at once, and so is the pair: the very same request
  // creates a new session rather than answering a withdrawn one.
  auto next = s().commit_matches(
    {batch[2], req(q_, "w3", "n1", "2"), req(q_, "n2", "w4", "2")});
  for (auto& r : next) {
    ASSERT_OK(r);
    EXPECT_TRUE(r->created);
  }
  expect_rows(6);
  EXPECT_EQ(drain(s()).size(), 3u);
}

// A refused request sends the batch down the one-by-one path: there a
// withdrawal rolls back to the request's own savepoint at once, so a later
// request of the batch can take a withdrawn user (as in the memory store).
TEST_P(match_store_conformance, withdrawals_in_a_batch_committed_one_by_one) {
  ASSERT_OK(s().commit_matches({req(q_, "busy", "z")}).at(0));
  std::vector<match_request> batch{
    req(q_, "busy", "c"),     // 0: refused, never asked
    req(q_, "a1", "b1"),      // 1: withdrawn after its rows were written
    req(q_, "a1", "b2", "2"), // 2: takes a1 after all, kept
    req(q_, "a3", "b3"),      // 3: withdrawn right before COMMIT
    req(q_, "a4", "b4"),      // 4: kept
  };
  checkpoints cp{{{after_create, 1}, {before_commit, 3}}};
  auto res = s().commit_matches(batch, cp.fn());
  ASSERT_EQ(res.size(), batch.size());
  ASSERT_FALSE(res[0]);
  EXPECT_EQ(res[0].error().code, errc::conflict);
  EXPECT_WITHDRAWN(res[1], "after_create");
  ASSERT_OK(res[2]);
  EXPECT_TRUE(res[2]->created);
  EXPECT_WITHDRAWN(res[3], "before_commit");
  ASSERT_OK(res[4]);
  EXPECT_TRUE(res[4]->created);
  EXPECT_EQ(cp.calls,
            (std::vector<std::string>{
              "after_create:1", "after_create:2", "after_create:3",
              "after_create:4", "before_commit:2", "before_commit:3",
              "before_commit:4", "before_commit:2", "before_commit:4"}));
  expect_no_trace_of(batch[1]);
  expect_no_trace_of(batch[3]);
  auto a1 = s().active_session_of("a1");
  ASSERT_OK(a1);
  ASSERT_TRUE(a1->has_value());
  EXPECT_EQ((*a1)->session_id, res[2]->session_id);
  expect_rows(3);
  event_index evs{drain(s())};
  EXPECT_EQ(evs.per_session.size(), 3u);
  EXPECT_EQ(evs.per_session[res[2]->session_id], 1);
  EXPECT_EQ(evs.per_session[res[4]->session_id], 1);
  auto next = s().commit_matches({req(q_, "b1", "a3", "3"), batch[3]});
  ASSERT_OK(next.at(0));
  EXPECT_FALSE(next.at(1)) << "b3 is free, a3 was just taken";
  ASSERT_OK(s().commit_matches({req(q_, "b3", "b9", "3")}).at(0));
}

TEST_P(match_store_conformance, a_duplicate_shares_the_fate_of_its_pair) {
  std::vector<match_request> batch{
    req(q_, "d1", "d2"), // 0: withdrawn after its rows were written
    req(q_, "d2", "d1"), // 1: the same pair: withdrawn with it, unasked
    req(q_, "d3", "d4"), // 2: withdrawn right before COMMIT
    req(q_, "d3", "d4"), // 3: the same pair: withdrawn with it, unasked
    req(q_, "d5", "d6"), // 4: kept
    req(q_, "d6", "d5"), // 5: the same pair: answers 4's session, unasked
  };
  checkpoints cp{{{after_create, 0}, {before_commit, 2}}};
  auto res = s().commit_matches(batch, cp.fn());
  ASSERT_EQ(res.size(), batch.size());
  EXPECT_WITHDRAWN(res[0], "after_create");
  EXPECT_WITHDRAWN(res[1], "after_create");
  EXPECT_WITHDRAWN(res[2], "before_commit");
  EXPECT_WITHDRAWN(res[3], "before_commit");
  ASSERT_OK(res[4]);
  EXPECT_TRUE(res[4]->created);
  ASSERT_OK(res[5]);
  EXPECT_FALSE(res[5]->created);
  EXPECT_EQ(res[5]->session_id, res[4]->session_id);
  EXPECT_EQ(cp.calls,
            (std::vector<std::string>{"after_create:0", "after_create:2",
                                      "after_create:4", "before_commit:2",
                                      "before_commit:4", "before_commit:4"}));
  expect_no_trace_of(batch[0]);
  expect_no_trace_of(batch[2]);
  expect_rows(1);
  EXPECT_EQ(drain(s()).size(), 1u);
}

TEST_P(match_store_conformance, a_retry_is_not_asked) {
  auto first = s().commit_matches({req(q_, "r1", "r2")});
  ASSERT_OK(first.at(0));
  // Would withdraw 0 and 2 if it were asked about them: it must not be.
  checkpoints cp{{{after_create, 0},
                  {before_commit, 0},
                  {after_create, 2},
                  {before_commit, 2}}};
  auto res = s().commit_matches(
    {req(q_, "r2", "r1"), req(q_, "r3", "r4"), req(q_, "r4", "r3")}, cp.fn());
  ASSERT_EQ(res.size(), 3u);
  ASSERT_OK(res[0]);
  EXPECT_FALSE(res[0]->created);
  EXPECT_EQ(res[0]->session_id, first[0]->session_id);
  ASSERT_OK(res[1]);
  EXPECT_TRUE(res[1]->created);
  ASSERT_OK(res[2]);
  EXPECT_FALSE(res[2]->created);
  EXPECT_EQ(res[2]->session_id, res[1]->session_id);
  EXPECT_EQ(cp.calls,
            (std::vector<std::string>{"after_create:1", "before_commit:1"}));
  expect_rows(2);
  EXPECT_EQ(drain(s()).size(), 2u);
}

TEST_P(match_store_conformance, withdrawing_everything_commits_nothing) {
  auto relay = factory_->connect();
  auto first = relay->wait_for_events(0); // starts listening
  ASSERT_OK(first);
  EXPECT_FALSE(*first);
  std::vector<match_request> batch{req(q_, "v1", "v2"), req(q_, "v3", "v4"),
                                   req(q_, "v5", "v6")};
  auto none = [](commit_stage, size_t) { return false; };
  auto late = [](commit_stage stage, size_t) {
    return stage != commit_stage::before_commit;
  };
  auto with_refused = batch;
  with_refused.push_back(req(q_, "v1", "v9", "2")); // v1 is taken before it
  std::vector<outcome<match_record>> r1, r2, r3;
  std::optional<outcome<bool>> woke;
  {
    std::thread waiter([&] { woke = relay->wait_for_events(1500); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // Everything at the first checkpoint, everything at the last one, and
    // at the last one in the one-by-one path (a refused request).
    r1 = s().commit_matches(batch, none);
    r2 = s().commit_matches(batch, late);
    r3 = s().commit_matches(with_refused, late);
    waiter.join();
  }
  ASSERT_EQ(r1.size(), 3u);
  ASSERT_EQ(r2.size(), 3u);
  ASSERT_EQ(r3.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_WITHDRAWN(r1[i], "after_create");
    EXPECT_WITHDRAWN(r2[i], "before_commit");
    EXPECT_WITHDRAWN(r3[i], "before_commit");
  }
  ASSERT_FALSE(r3[3]);
  EXPECT_EQ(r3[3].error().code, errc::conflict);
  ASSERT_TRUE(woke.has_value());
  ASSERT_OK(*woke);
  EXPECT_FALSE(**woke) << "a commit that kept nothing woke a relay";
  for (auto& r : with_refused)
    expect_no_trace_of(r);
  expect_rows(0);
  EXPECT_TRUE(drain(s()).empty());
  // A commit that keeps something still wakes it.
  ASSERT_OK(s().commit_matches({batch[0]}).at(0));
  auto kept = relay->wait_for_events(1000);
  ASSERT_OK(kept);
  EXPECT_TRUE(*kept);
}

TEST_P(match_store_conformance, a_throwing_check_fails_the_call) {
  std::vector<match_request> batch{req(q_, "e1", "e2"), req(q_, "e3", "e4"),
                                   req(q_, "e5", "e6")};
  auto boom = [](commit_stage stage, size_t i) -> bool {
    if (i == 0)
      return false; // withdrawn before the failure: stays withdrawn
    if (stage == commit_stage::before_commit && i == 2)
      throw std::runtime_error("boom");
    return true;
  };
  auto res = s().commit_matches(batch, boom);
  ASSERT_EQ(res.size(), 3u);
  EXPECT_WITHDRAWN(res[0], "after_create");
  for (size_t i : {1, 2}) {
    ASSERT_FALSE(res[i]);
    EXPECT_EQ(res[i].error().code, errc::protocol_error);
    EXPECT_NE(res[i].error().detail.find("boom"), std::string::npos)
      << res[i].error().detail;
  }
  auto odd = [](commit_stage, size_t) -> bool { throw 42; };
  for (auto& r : s().commit_matches(batch, odd)) {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, errc::protocol_error);
  }
  for (auto& r : batch)
    expect_no_trace_of(r);
  expect_rows(0);
  EXPECT_TRUE(drain(s()).empty());
  // The connection is fine afterwards.
  for (auto& r : s().commit_matches(batch))
    ASSERT_OK(r);
  expect_rows(3);
}

// Cancels arrive on another thread while commits run, as in the finalizer:
// whatever the interleaving, an answer and the store agree, a request
// cancelled before the call never commits, and a committed one was still
// wanted at its last checkpoint.
TEST_P(match_store_conformance, racing_cancels_never_leak_a_match) {
  constexpr int rounds = 40;
  constexpr int per_batch = 12;
  std::mutex mtx;
  std::set<std::string> cancelled; // tickets
  auto is_cancelled = [&](const std::string& ticket) {
    std::lock_guard<std::mutex> guard{mtx};
    return cancelled.count(ticket) > 0;
  };
  int committed = 0;
  int withdrawn = 0;
  std::vector<match_request> all_withdrawn;
  for (int round = 0; round < rounds; ++round) {
    std::vector<match_request> batch;
    for (int i = 0; i < per_batch; ++i) {
      auto k = std::to_string(round) + "-" + std::to_string(i);
      batch.push_back(req(q_, "ra" + k, "rb" + k));
    }
    {
      std::lock_guard<std::mutex> guard{mtx};
      cancelled.insert(batch[0].ticket_a); // before the call
    }
    std::vector<std::optional<bool>> last_before_commit(per_batch);
    auto check = [&](commit_stage stage, size_t i) {
      std::this_thread::yield(); // let the canceller in
      bool wanted = !is_cancelled(batch[i].ticket_a)
                    && !is_cancelled(batch[i].ticket_b);
      if (stage == commit_stage::before_commit)
        last_before_commit[i] = wanted;
      return wanted;
    };
    std::atomic<bool> go{false};
    std::thread canceller([&] {
      while (!go)
        std::this_thread::yield();
      for (int i = 1; i < per_batch; i += 2) {
        {
          std::lock_guard<std::mutex> guard{mtx};
          cancelled.insert(i % 4 == 1 ? batch[i].ticket_a : batch[i].ticket_b);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    });
    go = true;
    auto res = s().commit_matches(batch, check);
    canceller.join();
    ASSERT_EQ(res.size(), batch.size());
    for (size_t i = 0; i < res.size(); ++i) {
      if (res[i]) {
        EXPECT_TRUE(res[i]->created);
        EXPECT_NE(i, 0u) << "cancelled before the call, committed anyway";
        EXPECT_TRUE(last_before_commit[i].value_or(false)) << i;
        ++committed;
      } else {
        EXPECT_EQ(res[i].error().code, errc::cancelled)
          << res[i].error().detail;
        all_withdrawn.push_back(batch[i]);
        ++withdrawn;
      }
    }
  }
  EXPECT_GE(withdrawn, rounds); // at least the ones cancelled before
  // The even ones but the first are never cancelled.
  EXPECT_GE(committed, rounds * (per_batch / 2 - 1));
  for (auto& r : all_withdrawn)
    expect_no_trace_of(r);
  expect_rows(committed);
  event_index evs{drain(s())};
  EXPECT_EQ(evs.per_session.size(), size_t(committed));
  for (auto& [sid, n] : evs.per_session)
    EXPECT_EQ(n, 1) << sid;
  for (auto& r : all_withdrawn)
    EXPECT_EQ(evs.tickets.count(r.ticket_a), 0u) << r.ticket_a;
}

} // namespace
