// The rescan call (lua/rescan.lua) on every queue store: the heartbeats of
// many waiting tickets of one queue in one call answer each ticket as its
// own claim with `rescan` would, in order, and keep I1/I2 of
// docs/design.md when raced against another connection's claims.

#include <gtest/gtest.h>

#include <map>

#include "tests/support/race.hpp"
#include "tests/support/store_harness.hpp"

using namespace mm;
using namespace mm::test;

namespace {

#define ASSERT_OK(x) \
  ASSERT_TRUE(x) << to_string((x).error().code) << ": " << (x).error().detail

class rescan_conformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    store_ = make_store_under_test(GetParam());
    client_ = std::make_unique<store_client>(store_.factory->connect());
    q_ = fresh_queue(GetParam() + "-rescan");
  }

  store_client& c() {
    return *client_;
  }

  static outcome<std::vector<outcome<claim_result>>>
  rescan(store_client& on, const std::vector<ticket_spec>& specs,
         uint32_t scan = 10) {
    std::vector<codec::rescan_item> items;
    for (auto& s : specs)
      items.push_back({&s, scan});
    return on.call_with<std::vector<outcome<claim_result>>>(
      codec::rescan_call(items, 10000),
      [n{specs.size()}](const store_reply& r) {
        return codec::parse_rescan(r, n);
      });
  }

  store_under_test store_;
  std::unique_ptr<store_client> client_;
  std::string q_;
};

TEST_P(rescan_conformance, each_ticket_is_answered_as_its_own_rescan) {
  auto a = c().claim(spec(q_, "alice", "ta"));
  ASSERT_OK(a);
  ASSERT_EQ(a->outcome, claim_outcome::queued);
  store_.advance(5); // the re-scan's deadline is a later one
  // alice still waits, in her place; carol has no ticket: a rescan never
  // files nor claims for her (she was claimed, or her ticket lapsed).
  auto r = rescan(c(), {spec(q_, "alice", "ta"), spec(q_, "carol", "tc")});
  ASSERT_OK(r);
  ASSERT_EQ(r->size(), 2u);
  auto& ra = (*r)[0];
  auto& rc = (*r)[1];
  ASSERT_OK(ra);
  ASSERT_OK(rc);
  EXPECT_EQ(ra->outcome, claim_outcome::queued);
  EXPECT_EQ(ra->score, a->score);
  EXPECT_EQ(ra->token, a->token);
  EXPECT_GT(ra->deadline, a->deadline);
  EXPECT_EQ(rc->outcome, claim_outcome::claimed_by_other);
  EXPECT_TRUE(rc->partner.user.empty());
  EXPECT_EQ(c().waiting(q_), std::vector<std::string>{"ta"});
  EXPECT_EQ(c().user_ticket(q_, "carol"), "");
}

TEST_P(rescan_conformance, waiters_side_by_side_pair_within_one_call) {
  // Two live waiters filed without a claim (as a waiter put back beside a
  // newer arrival, problem 4): the first re-scan pairs them, the second
  // answers that it is held by the first.
  ASSERT_OK(c().enqueue(spec(q_, "bob", "tb")));
  ASSERT_OK(c().enqueue(spec(q_, "alice", "ta")));
  auto r = rescan(c(), {spec(q_, "alice", "ta"), spec(q_, "bob", "tb")});
  ASSERT_OK(r);
  ASSERT_EQ(r->size(), 2u);
  ASSERT_OK((*r)[0]);
  ASSERT_OK((*r)[1]);
  EXPECT_EQ((*r)[0]->outcome, claim_outcome::matched);
  EXPECT_EQ((*r)[0]->partner.user, "bob");
  EXPECT_EQ((*r)[1]->outcome, claim_outcome::claimed_by_other);
  EXPECT_EQ((*r)[1]->partner.user, "alice");
  EXPECT_TRUE(c().waiting(q_).empty());
}

TEST_P(rescan_conformance, a_ticket_that_fails_alone_leaves_the_others) {
  // A record that cannot be read (no layout of lua/lib/common.lua) makes
  // its ticket's claim raise; the tickets after it still run.
  auto keys = codec::queue_keys(q_);
  c().command({"HSET", keys[2], "#bad", "tbad", "tbad", "x:1"});
  auto a = c().claim(spec(q_, "alice", "ta"));
  ASSERT_OK(a);
  // Sent raw: the codec would refuse the third ticket's user itself.
  std::vector<std::string> args{"10000"};
  for (auto [user, ticket] :
       {std::pair{"bad", "tbad"}, std::pair{"alice", "ta"},
        std::pair{"bo b", "tz"}})
    for (const char* v : {user, ticket, "n1", "", "30000", "10", "", "", ""})
      args.emplace_back(v);
  std::vector<script_call> call{{script_id::rescan, keys, args}};
  auto r = codec::parse_rescan(c().conn().run(call).at(0), 3);
  ASSERT_OK(r);
  ASSERT_EQ(r->size(), 3u);
  ASSERT_FALSE((*r)[0]);
  EXPECT_EQ((*r)[0].error().code, errc::protocol_error);
  ASSERT_OK((*r)[1]);
  EXPECT_EQ((*r)[1]->outcome, claim_outcome::queued);
  EXPECT_EQ((*r)[1]->token, a->token);
  ASSERT_FALSE((*r)[2]);
  EXPECT_EQ((*r)[2].error().code, errc::invalid_argument);
  EXPECT_EQ(c().waiting(q_), std::vector<std::string>{"ta"});
  EXPECT_EQ(c().user_ticket(q_, "bo b"), "");
}

TEST_P(rescan_conformance, a_malformed_call_is_named_and_changes_nothing) {
  ASSERT_OK(c().claim(spec(q_, "alice", "ta")));
  auto before = c().waiting(q_);
  auto records = c().records(q_);
  // The codec: no ticket, tickets of two queues, a bad field.
  EXPECT_EQ(rescan(c(), {}).error().code, errc::invalid_argument);
  EXPECT_EQ(rescan(c(), {spec(q_, "alice", "ta"), spec(q_ + "x", "b", "tb")})
              .error()
              .code,
            errc::invalid_argument);
  EXPECT_EQ(rescan(c(), {spec(q_, "bo b", "tb")}).error().code,
            errc::invalid_argument);
  EXPECT_EQ(rescan(c(), {spec(q_, "alice", "ta")}, 0).error().code,
            errc::invalid_argument);
  // The script on its own: a short ticket, too many tickets, a bad hold.
  auto keys = codec::queue_keys(q_);
  std::vector<std::string> many{"10000"};
  for (int i = 0; i < 101; ++i)
    for (const char* v : {"u", "t", "n", "", "1000", "10", "", "", ""})
      many.emplace_back(v);
  std::vector<script_call> raw{
    {script_id::rescan, keys, {"10000", "alice", "ta", "n1"}},
    {script_id::rescan, keys, many},
    {script_id::rescan,
     keys,
     {"x", "alice", "ta", "n1", "", "30000", "10", "", "", ""}},
  };
  auto replies = c().conn().run(raw);
  ASSERT_EQ(replies.size(), raw.size());
  for (auto& rep : replies) {
    auto p = codec::parse_rescan(rep, 1);
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error().code, errc::invalid_argument);
  }
  EXPECT_EQ(c().waiting(q_), before);
  EXPECT_EQ(c().records(q_), records);
}

// I1 and I2 under a race: a node's rescan of two waiters against another
// connection's claim. Whatever the order, every user is in at most one
// pair, a ticket held by a claimer names that claimer's match, and nobody
// is left both unmatched and not waiting.
TEST_P(rescan_conformance, a_rescan_raced_with_a_claim_never_double_books) {
  auto c1 = std::make_unique<store_client>(store_.factory->connect());
  auto c2 = std::make_unique<store_client>(store_.factory->connect());
  racer race;
  constexpr int rounds = 200;
  int violations = 0, pairs_seen = 0;
  for (int i = 0; i < rounds; ++i) {
    auto q = q_ + "-" + std::to_string(i);
    ASSERT_OK(c().enqueue(spec(q, "a", "ta")));
    ASSERT_OK(c().enqueue(spec(q, "b", "tb")));
    outcome<std::vector<outcome<claim_result>>> r{errc::none};
    outcome<claim_result> k{errc::none};
    race.run(
      [&] {
        r = rescan(*c1, {spec(q, "a", "ta"), spec(q, "b", "tb")});
      },
      [&] { k = c2->claim(spec(q, "c", "tc")); });
    ASSERT_OK(r);
    ASSERT_OK(k);
    ASSERT_OK((*r)[0]);
    ASSERT_OK((*r)[1]);
    std::map<std::string, const claim_result*> of{
      {"a", &*(*r)[0]}, {"b", &*(*r)[1]}, {"c", &*k}};
    std::map<std::string, int> paired;
    int waiting = 0;
    for (auto& [user, res] : of) {
      if (res->outcome == claim_outcome::matched) {
        ++pairs_seen;
        ++paired[user];
        ++paired[res->partner.user];
      } else if (res->outcome == claim_outcome::claimed_by_other) {
        // Held: its claimer's answer must be this very match.
        auto by = of.find(res->partner.user);
        if (by == of.end() || by->second->outcome != claim_outcome::matched
            || by->second->partner.user != user)
          ++violations;
      } else {
        ++waiting;
      }
    }
    for (auto& [user, n] : paired)
      if (n != 1)
        ++violations;
    // Three users: one pair and one waiter, always.
    if (paired.size() != 2 || waiting != 1
        || c().waiting(q).size() != static_cast<size_t>(waiting))
      ++violations;
  }
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(pairs_seen, rounds);
}

INSTANTIATE_TEST_SUITE_P(stores, rescan_conformance,
                         ::testing::Values("embedded", "redis",
                                           "redis_cluster"),
                         [](const auto& info) { return info.param; });

} // namespace
