// Match rules on every queue store (docs/rules.md): the same tests against
// the embedded store and a real redis-server. The invariant races of
// queue_conformance_test.cpp are repeated here on a queue with rules.

#include <gtest/gtest.h>

#include "core/rules.hpp"
#include "tests/support/race.hpp"
#include "tests/support/store_harness.hpp"

using namespace mm;
using namespace mm::test;

namespace {

#define ASSERT_OK(x) \
  ASSERT_TRUE(x) << to_string((x).error().code) << ": " << (x).error().detail

// Skill widens 50 -> 400 by 50 every 100 ms (short, so that the Redis run
// can wait for real); region relaxes after 300 ms; languages overlap; the
// last 2 partners are avoided until both waited 300 ms.
constexpr const char* book_json = R"({
  "ranked": {
    "attributes": {
      "skill": {"type": "number", "min": 0, "max": 5000},
      "region": {"type": "string"},
      "mode": {"type": "string", "values": ["ranked", "casual"]},
      "langs": {"type": "list", "max_items": 4}
    },
    "rules": [
      {"kind": "distance", "attribute": "skill", "base": 50, "step": 50,
       "every_s": 0.1, "cap": 400},
      {"kind": "equal", "attribute": "region", "relax_after_s": 0.3},
      {"kind": "equal", "attribute": "mode"},
      {"kind": "overlap", "attribute": "langs"},
      {"kind": "avoid", "last": 2, "relax_after_s": 0.3}
    ]
  }
})";

const rule_set& ranked() {
  static rule_book book = [] {
    auto b = parse_rule_book(book_json);
    if (!b)
      throw std::runtime_error(b.error().detail);
    return *b;
  }();
  return book.at("ranked");
}

class rules_conformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    store_ = make_store_under_test(GetParam());
    client_ = std::make_unique<store_client>(store_.factory->connect());
    q_ = fresh_queue(GetParam() + "-rules");
  }

  store_client& c() {
    return *client_;
  }

  /// A ticket of `user` on `q` with these attributes (checked by the rules).
  static ticket_spec rspec(const std::string& q, const std::string& user,
                           const std::string& ticket, double skill,
                           const std::string& region = "eu",
                           const std::string& langs = R"(["en"])",
                           const std::string& avoid = "",
                           uint32_t ttl = 30000) {
    auto s = spec(q, user, ticket, ttl);
    auto attrs = check_attributes(
      ranked(), R"({"skill": )" + std::to_string(skill) + R"(, "region": ")"
                  + region + R"(", "mode": "ranked", "langs": )" + langs + "}");
    if (!attrs)
      throw std::runtime_error(attrs.error().detail);
    s.attrs = attrs->json;
    s.rk = attrs->rk;
    s.rules = ranked().spec;
    s.avoid = avoid;
    return s;
  }

  int64_t index_size(const std::string& q) {
    return c().command({"ZCARD", codec::queue_keys(q)[5]}).integer;
  }

  store_under_test store_;
  std::unique_ptr<store_client> client_;
  std::string q_;
};

constexpr int rounds = 1000;

TEST_P(rules_conformance, only_a_compatible_waiter_is_claimed) {
  ASSERT_OK(c().enqueue(rspec(q_, "far", "t-far", 1800)));     // skill
  ASSERT_OK(c().enqueue(rspec(q_, "us", "t-us", 1500, "us"))); // region
  ASSERT_OK(c().enqueue(rspec(q_, "fr", "t-fr", 1500, "eu", R"(["fr"])")));
  auto k = c().claim(rspec(q_, "me", "t-me", 1520, "eu", R"(["ko", "en"])"));
  ASSERT_OK(k);
  EXPECT_EQ(k->outcome, claim_outcome::queued);
  EXPECT_FALSE(k->windows.empty());
  EXPECT_EQ(k->next_change_ms, 100);
  auto near
    = c().claim(rspec(q_, "near", "t-near", 1560, "eu", R"(["en", "de"])"));
  ASSERT_OK(near);
  ASSERT_EQ(near->outcome, claim_outcome::matched);
  EXPECT_EQ(near->partner.user, "me");
  // The index holds exactly the three waiters left, one cell each.
  EXPECT_EQ(c().waiting(q_),
            (std::vector<std::string>{"t-far", "t-us", "t-fr"}));
  EXPECT_EQ(index_size(q_), 3);
}

TEST_P(rules_conformance, the_oldest_compatible_waiter_goes_first) {
  ASSERT_OK(c().enqueue(rspec(q_, "w1", "t1", 1500)));
  ASSERT_OK(c().enqueue(rspec(q_, "x", "tx", 3000)));
  ASSERT_OK(c().enqueue(rspec(q_, "w2", "t2", 1540))); // other band
  ASSERT_OK(c().enqueue(rspec(q_, "w3", "t3", 1480))); // other band
  std::vector<std::string> order;
  for (auto u : {"a", "b", "c"}) {
    auto k = c().claim(rspec(q_, u, std::string{"t-"} + u, 1510));
    ASSERT_OK(k);
    ASSERT_EQ(k->outcome, claim_outcome::matched) << u;
    order.push_back(k->partner.user);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"w1", "w2", "w3"}));
  EXPECT_EQ(c().waiting(q_), std::vector<std::string>{"tx"});
}

TEST_P(rules_conformance,
       a_compatible_waiter_behind_500_incompatible_is_found) {
  for (int i = 0; i < 500; ++i) {
    // Incompatible by skill, by region and by language, in turn.
    auto u = "x" + std::to_string(i);
    auto s = i % 3 == 0   ? rspec(q_, u, "t" + u, 3000 + i)
             : i % 3 == 1 ? rspec(q_, u, "t" + u, 1500, "us")
                          : rspec(q_, u, "t" + u, 1500, "eu", R"(["fr"])");
    ASSERT_OK(c().enqueue(s));
  }
  ASSERT_OK(c().enqueue(rspec(q_, "good", "t-good", 1490)));
  auto k = c().claim(rspec(q_, "me", "t-me", 1500), 10);
  ASSERT_OK(k);
  ASSERT_EQ(k->outcome, claim_outcome::matched);
  EXPECT_EQ(k->partner.user, "good");
  EXPECT_EQ(k->scans, 1u);
}

TEST_P(rules_conformance, windows_widen_with_waiting_time_without_arrivals) {
  auto a = c().claim(rspec(q_, "a", "ta", 1000));
  ASSERT_OK(a);
  auto b = c().claim(rspec(q_, "b", "tb", 1300));
  ASSERT_OK(b);
  ASSERT_EQ(b->outcome, claim_outcome::queued); // 300 apart, windows 50
  // At 250 ms both windows are 150: still apart. From 500 ms they are 300.
  store_.advance(250);
  auto early = c().claim(rspec(q_, "b", "tb", 1300), 10, true);
  ASSERT_OK(early);
  EXPECT_EQ(early->outcome, claim_outcome::queued);
  store_.advance(300);
  auto late = c().claim(rspec(q_, "b", "tb", 1300), 10, true);
  ASSERT_OK(late);
  ASSERT_EQ(late->outcome, claim_outcome::matched);
  EXPECT_EQ(late->partner.user, "a");
  EXPECT_EQ(index_size(q_), 0);
}

TEST(rules_clock, a_window_step_comes_at_the_exact_time_the_rule_says) {
  // The embedded store on a clock that moves only when told to.
  auto now = std::make_shared<int64_t>(1700000000000);
  embedded_options opts;
  opts.clock = [now] { return *now; };
  store_client c{make_embedded_store(opts)->connect()};
  auto q = fresh_queue("clock-rules");
  auto mk = [&](const char* user, double skill) {
    auto s = spec(q, user, std::string{"t-"} + user);
    auto attrs = check_attributes(
      ranked(), R"({"skill": )" + std::to_string(skill)
                  + R"(, "region": "eu", "mode": "ranked", "langs": ["en"]})");
    s.attrs = attrs->json;
    s.rk = attrs->rk;
    s.rules = ranked().spec;
    return s;
  };
  auto a = c.claim(mk("a", 1000));
  ASSERT_OK(a);
  ASSERT_EQ(a->outcome, claim_outcome::queued);
  EXPECT_EQ(a->next_change_ms, 100);
  auto b = c.claim(mk("b", 1300));
  ASSERT_OK(b);
  ASSERT_EQ(b->outcome, claim_outcome::queued);
  // 300 apart: both windows reach 300 after 5 steps of 100 ms.
  *now += 499;
  auto before = c.claim(mk("b", 1300), 10, true);
  ASSERT_OK(before);
  EXPECT_EQ(before->outcome, claim_outcome::queued);
  EXPECT_EQ(before->next_change_ms, 1);
  *now += 1;
  auto at = c.claim(mk("b", 1300), 10, true);
  ASSERT_OK(at);
  ASSERT_EQ(at->outcome, claim_outcome::matched);
  EXPECT_EQ(at->partner.user, "a");
}

TEST_P(rules_conformance, equal_relaxes_only_when_both_have_waited) {
  ASSERT_OK(c().claim(rspec(q_, "a", "ta", 1500, "eu")));
  auto b = c().claim(rspec(q_, "b", "tb", 1500, "us"));
  ASSERT_OK(b);
  EXPECT_EQ(b->outcome, claim_outcome::queued);
  store_.advance(400);
  // A fresh user from "sa" does not accept either of them yet.
  auto fresh = c().claim(rspec(q_, "c", "tc", 1500, "sa"));
  ASSERT_OK(fresh);
  EXPECT_EQ(fresh->outcome, claim_outcome::queued);
  // Each waiter looks again once its rule relaxed (sessions do so at the
  // moment the claim named): a, relaxed first, is filed under "any region"
  // too and finds nobody relaxed yet; b, relaxed next, finds a there.
  auto a2 = c().claim(rspec(q_, "a", "ta", 1500, "eu"), 10, true);
  ASSERT_OK(a2);
  EXPECT_EQ(a2->outcome, claim_outcome::queued);
  auto again = c().claim(rspec(q_, "b", "tb", 1500, "us"), 10, true);
  ASSERT_OK(again);
  ASSERT_EQ(again->outcome, claim_outcome::matched);
  EXPECT_EQ(again->partner.user, "a");
}

TEST_P(rules_conformance, recent_partners_are_avoided_while_others_wait) {
  ASSERT_OK(
    c().enqueue(rspec(q_, "bob", "tb", 1500, "eu", R"(["en"])", "alice")));
  ASSERT_OK(c().enqueue(rspec(q_, "carol", "tc", 1500)));
  auto a = c().claim(rspec(q_, "alice", "ta", 1500, "eu", R"(["en"])", "bob"));
  ASSERT_OK(a);
  ASSERT_EQ(a->outcome, claim_outcome::matched);
  EXPECT_EQ(a->partner.user, "carol"); // bob is older, but was her partner
  // Only alice and bob left: apart until both waited the relax time.
  auto a2 = c().claim(
    rspec(q_, "alice", "ta2", 1500, "eu", R"(["en"])", "bob,carol"));
  ASSERT_FALSE(a2) << "alice's first ticket is still a claimer";
  ASSERT_OK(c().release(q_, "ta"));
  auto a3 = c().claim(
    rspec(q_, "alice", "ta3", 1500, "eu", R"(["en"])", "bob,carol"));
  ASSERT_OK(a3);
  EXPECT_EQ(a3->outcome, claim_outcome::queued);
  store_.advance(400);
  auto b2 = c().claim(rspec(q_, "bob", "tb", 1500, "eu", R"(["en"])", "alice"),
                      10, true);
  ASSERT_OK(b2);
  ASSERT_EQ(b2->outcome, claim_outcome::matched);
  EXPECT_EQ(b2->partner.user, "alice");
}

TEST_P(rules_conformance,
       stale_candidates_are_never_claimed_and_leave_no_index) {
  ASSERT_OK(
    c().enqueue(rspec(q_, "ghost", "tg", 1500, "eu", R"(["en"])", "", 30)));
  ASSERT_OK(c().enqueue(rspec(q_, "live", "tl", 1500)));
  store_.advance(80);
  auto k = c().claim(rspec(q_, "me", "tm", 1500));
  ASSERT_OK(k);
  ASSERT_EQ(k->outcome, claim_outcome::matched);
  EXPECT_EQ(k->partner.user, "live");
  EXPECT_EQ(k->stale_removed, 1u);
  EXPECT_EQ(c().user_ticket(q_, "ghost"), "");
  EXPECT_EQ(index_size(q_), 0);
  // Swept and cancelled tickets leave nothing in the index either.
  ASSERT_OK(c().enqueue(rspec(q_, "s", "ts", 1500, "eu", R"(["en"])", "", 30)));
  auto w = c().enqueue(rspec(q_, "w", "tw", 2500));
  ASSERT_OK(w);
  store_.advance(80);
  ASSERT_OK(c().sweep(q_));
  ASSERT_OK(c().cancel(ticket_ref{q_, "w", w->token}));
  EXPECT_EQ(index_size(q_), 0);
}

TEST_P(rules_conformance, requeue_restores_place_and_index) {
  auto a = c().enqueue(rspec(q_, "alice", "ta", 1500));
  ASSERT_OK(a);
  ASSERT_OK(c().enqueue(rspec(q_, "bob", "tb", 1500)));
  auto k = c().claim(rspec(q_, "carol", "tc", 1500));
  ASSERT_OK(k);
  ASSERT_EQ(k->partner.ticket, "ta");
  EXPECT_EQ(index_size(q_), 1);
  auto r = c().requeue(q_, "ta");
  ASSERT_OK(r);
  EXPECT_EQ(r->score, a->score);
  EXPECT_EQ(index_size(q_), 2);
  ASSERT_OK(c().release(q_, "tc"));
  auto again = c().claim(rspec(q_, "dave", "td", 1500));
  ASSERT_OK(again);
  EXPECT_EQ(again->partner.ticket, "ta");
}

TEST_P(rules_conformance, explain_names_the_refusing_rule) {
  auto side = [](double skill, const std::string& region, int64_t waited) {
    auto attrs = check_attributes(
      ranked(), R"({"skill": )" + std::to_string(skill) + R"(, "region": ")"
                  + region + R"(", "mode": "ranked", "langs": ["en"]})");
    return codec::explain_side{attrs->rk, waited, "u", ""};
  };
  auto run = [&](codec::explain_side a, codec::explain_side b) {
    return c().call(codec::explain_call(ranked().spec, a, b),
                    codec::parse_explain);
  };
  auto far = run(side(1000, "eu", 0), side(1300, "eu", 0));
  ASSERT_OK(far);
  EXPECT_FALSE(far->compatible);
  EXPECT_EQ(far->rule, 1u);
  EXPECT_EQ(
    windows_json(ranked(), far->windows_a),
    R"({"avoid":"same","langs":"same","mode":"same","region":"same","skill":50.0})");
  auto later = run(side(1000, "eu", 600), side(1300, "eu", 500));
  ASSERT_OK(later);
  EXPECT_TRUE(later->compatible);
  auto region = run(side(1000, "eu", 0), side(1000, "us", 1000));
  ASSERT_OK(region);
  EXPECT_FALSE(region->compatible);
  EXPECT_EQ(region->rule, 2u);
}

// -- the invariant races of queue_conformance_test, on a queue with rules ----

TEST_P(rules_conformance, two_claimers_one_waiter_exactly_one_wins) {
  auto c1 = std::make_unique<store_client>(store_.factory->connect());
  auto c2 = std::make_unique<store_client>(store_.factory->connect());
  racer race;
  int violations = 0;
  for (int i = 0; i < rounds; ++i) {
    auto q = q_ + "-" + std::to_string(i);
    ASSERT_OK(c().enqueue(rspec(q, "w", "tw", 1500)));
    outcome<claim_result> r1{errc::none}, r2{errc::none};
    race.run([&] { r1 = c1->claim(rspec(q, "a", "ta", 1490)); },
             [&] { r2 = c2->claim(rspec(q, "b", "tb", 1510)); });
    ASSERT_OK(r1);
    ASSERT_OK(r2);
    // a, b and w are all compatible: exactly one of a and b gets w, the
    // other waits (the winner is a claimer, never a waiter).
    int wins = (r1->outcome == claim_outcome::matched)
               + (r2->outcome == claim_outcome::matched);
    auto& winner = r1->outcome == claim_outcome::matched ? r1 : r2;
    auto& loser = r1->outcome == claim_outcome::matched ? r2 : r1;
    if (wins != 1 || winner->partner.user != "w"
        || loser->outcome != claim_outcome::queued)
      ++violations;
    if (c().waiting(q) != std::vector<std::string>{loser->ticket})
      ++violations;
    if (index_size(q) != 1)
      ++violations;
  }
  EXPECT_EQ(violations, 0);
}

TEST_P(rules_conformance, two_compatible_arrivals_always_pair) {
  auto c1 = std::make_unique<store_client>(store_.factory->connect());
  auto c2 = std::make_unique<store_client>(store_.factory->connect());
  racer race;
  int violations = 0;
  for (int i = 0; i < rounds; ++i) {
    auto q = q_ + "-" + std::to_string(i);
    outcome<claim_result> r1{errc::none}, r2{errc::none};
    // Different bands (1499 / 1540 with band 100 -> b14 / b15).
    race.run([&] { r1 = c1->claim(rspec(q, "a", "ta", 1499)); },
             [&] { r2 = c2->claim(rspec(q, "b", "tb", 1540)); });
    ASSERT_OK(r1);
    ASSERT_OK(r2);
    bool a_claimed_b = r1->outcome == claim_outcome::matched
                       && r1->partner.user == "b"
                       && r2->outcome == claim_outcome::queued;
    bool b_claimed_a = r2->outcome == claim_outcome::matched
                       && r2->partner.user == "a"
                       && r1->outcome == claim_outcome::queued;
    if (a_claimed_b == b_claimed_a || !c().waiting(q).empty()
        || index_size(q) != 0)
      ++violations;
  }
  EXPECT_EQ(violations, 0);
}

TEST_P(rules_conformance, cancel_and_claim_never_both_succeed) {
  auto c1 = std::make_unique<store_client>(store_.factory->connect());
  auto c2 = std::make_unique<store_client>(store_.factory->connect());
  racer race;
  int violations = 0, cancels = 0, matches = 0;
  for (int i = 0; i < rounds; ++i) {
    auto q = q_ + "-" + std::to_string(i);
    auto w = c().enqueue(rspec(q, "w", "tw", 1500));
    ASSERT_OK(w);
    outcome<cancel_result> x{errc::none};
    outcome<claim_result> k{errc::none};
    race.run(
      [&] {
        x = c1->cancel(ticket_ref{q, "w", w->token});
      },
      [&] { k = c2->claim(rspec(q, "b", "tb", 1520)); });
    ASSERT_OK(x);
    ASSERT_OK(k);
    bool cancelled = x->outcome == cancel_outcome::cancelled;
    bool matched = k->outcome == claim_outcome::matched;
    cancels += cancelled;
    matches += matched;
    if (cancelled == matched)
      ++violations;
    if (matched && x->outcome != cancel_outcome::in_flight)
      ++violations;
  }
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(cancels + matches, rounds);
}

INSTANTIATE_TEST_SUITE_P(stores, rules_conformance,
                         ::testing::Values("embedded", "redis",
                                           "redis_cluster"),
                         [](const auto& info) { return info.param; });

} // namespace
