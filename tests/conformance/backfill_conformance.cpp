// Backfill on every queue store (problem 16 of docs/design.md;
// docs/groups.md "Backfill"): a session's request for players waits in the
// queue as a ticket ('~' + the session) holding the session's members with
// their teams; a claim fills its open seats with waiting tickets that fit
// the teams, the parties and the former members, never more than the
// seats, and the request is never a candidate of another match.

#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "tests/conformance/group_fixture.hpp"

using namespace mm;
using namespace mm::test;

namespace {

class backfill_conformance : public group_fixture {
 protected:
  /// A 2-vs-2 in parties of 1..2.
  std::string sh_ = shape_of(R"({"players": {"min": 4, "max": 4},
    "teams": {"count": 2, "size": 2}, "party_max": 2, "backfill": "auto"})");

  /// Session `session`'s request: `members` with their teams (1-based).
  group_ticket_spec
  bspec(const std::string& session,
        const std::vector<std::pair<std::string, uint32_t>>& members,
        const std::vector<std::string>& former = {},
        const std::string& shape = {}) {
    std::vector<std::string> users;
    for (auto& [u, t] : members)
      users.push_back(u);
    auto s = gspec(backfill_ticket(session), users,
                   shape.empty() ? sh_ : shape);
    for (auto& [u, t] : members)
      s.teams.push_back(t);
    s.former = former;
    return s;
  }

  group_ticket_spec single(const std::string& user,
                           const std::string& shape = {}) {
    return gspec("t" + user, {user}, shape.empty() ? sh_ : shape);
  }

  outcome<group_cancel_result> cancel_request(const std::string& session) {
    return client_->call_with<group_cancel_result>(
      codec::backfill_cancel_call(q_, session),
      [&session](const store_reply& r) {
        return codec::parse_backfill_cancel(session, r);
      });
  }

  outcome<group_settle_result> requeue(const std::string& group,
                                       std::vector<std::string> leaving) {
    return client_->call(codec::group_requeue_call(q_, group, leaving),
                         codec::parse_group_settle);
  }

  outcome<group_settle_result> release(const std::string& group) {
    return client_->call(codec::group_release_call(q_, group),
                         codec::parse_group_settle);
  }
};

/// Ticket -> team of a claimed group.
std::map<std::string, uint32_t> teams_of(const group_claim_result& r) {
  std::map<std::string, uint32_t> out;
  for (auto& t : r.tickets)
    out[t.ticket] = t.team;
  return out;
}

TEST_P(backfill_conformance, a_request_fills_its_open_seat_from_the_queue) {
  auto x = claim(single("x"));
  ASSERT_OK(x);
  ASSERT_EQ(x->outcome, group_claim_outcome::queued);
  // a in team 1, b and c in team 2: one seat, in team 1.
  auto r = claim(bspec("s1", {{"a", 1}, {"b", 2}, {"c", 2}}));
  ASSERT_OK(r);
  ASSERT_EQ(r->outcome, group_claim_outcome::matched);
  EXPECT_TRUE(r->in_group);
  ASSERT_EQ(r->tickets.size(), 2u);
  EXPECT_EQ(r->tickets[0].ticket, backfill_ticket("s1"));
  EXPECT_EQ(r->tickets[0].members.size(), 3u);
  EXPECT_EQ(teams_of(*r)["tx"], 1u);
  EXPECT_TRUE(waiting().empty());
  // Committed: the fill leaves the queue, the request with it.
  auto rel = release(r->group);
  ASSERT_OK(rel);
  EXPECT_EQ(rel->removed, 2u); // the fill and the request
  auto again = bspec("s1", {{"a", 1}, {"b", 2}, {"c", 2}});
  again.rescan = true;
  auto g = claim(again);
  ASSERT_OK(g);
  EXPECT_EQ(g->outcome, group_claim_outcome::gone);
}

TEST_P(backfill_conformance, a_plain_claim_fills_an_older_request) {
  // a in team 1, b in team 2: a seat in each.
  auto r = claim(bspec("s2", {{"a", 1}, {"b", 2}}));
  ASSERT_OK(r);
  ASSERT_EQ(r->outcome, group_claim_outcome::queued);
  // A party of two fits no team: it waits; a single fills one seat.
  auto p = claim(gspec("tp", {"p1", "p2"}, sh_));
  ASSERT_OK(p);
  EXPECT_EQ(p->outcome, group_claim_outcome::queued);
  auto x = claim(single("x"));
  ASSERT_OK(x);
  ASSERT_EQ(x->outcome, group_claim_outcome::matched);
  EXPECT_TRUE(x->in_group);
  ASSERT_EQ(x->tickets.size(), 2u);
  EXPECT_EQ(x->tickets[0].ticket, backfill_ticket("s2"));
  EXPECT_EQ(x->tickets[1].ticket, "tx");
  auto t = teams_of(*x)["tx"];
  EXPECT_TRUE(t == 1u || t == 2u);
  EXPECT_EQ(waiting(), std::vector<std::string>{"tp"});
}

TEST_P(backfill_conformance, never_more_than_the_open_seats) {
  for (auto u : {"x", "y", "z"})
    ASSERT_OK(claim(single(u)));
  auto r = claim(bspec("s3", {{"a", 1}, {"b", 2}, {"c", 2}}));
  ASSERT_OK(r);
  ASSERT_EQ(r->outcome, group_claim_outcome::matched);
  ASSERT_EQ(r->tickets.size(), 2u); // one seat: the oldest takes it
  EXPECT_EQ(r->tickets[1].ticket, "tx");
  EXPECT_EQ((std::vector<std::string>{"ty", "tz"}), waiting());
}

TEST_P(backfill_conformance, former_members_are_never_taken_back) {
  ASSERT_OK(claim(single("gone")));
  ASSERT_OK(claim(single("y")));
  auto r = claim(bspec("s4", {{"a", 1}, {"b", 2}, {"c", 2}}, {"gone"}));
  ASSERT_OK(r);
  ASSERT_EQ(r->outcome, group_claim_outcome::matched);
  ASSERT_EQ(r->tickets.size(), 2u);
  EXPECT_EQ(r->tickets[1].ticket, "ty");
  EXPECT_EQ(waiting(), std::vector<std::string>{"tgone"});
}

TEST_P(backfill_conformance, a_request_is_never_part_of_another_match) {
  // A lobby of three: the request (two members, nobody fits it) waits
  // while three singles make a match of their own.
  auto lobby
    = shape_of(R"({"players": {"min": 3, "max": 3}, "backfill": "manual"})");
  auto r = claim(bspec("s5", {{"a", 0}, {"b", 0}}, {"x", "y", "z"}, lobby));
  ASSERT_OK(r);
  ASSERT_EQ(r->outcome, group_claim_outcome::queued);
  ASSERT_OK(claim(single("x", lobby)));
  ASSERT_OK(claim(single("y", lobby)));
  auto z = claim(single("z", lobby));
  ASSERT_OK(z);
  ASSERT_EQ(z->outcome, group_claim_outcome::matched);
  ASSERT_EQ(z->tickets.size(), 3u);
  for (auto& t : z->tickets)
    EXPECT_FALSE(is_backfill_ticket(t.ticket)) << t.ticket;
  EXPECT_EQ(waiting(), std::vector<std::string>{backfill_ticket("s5")});
}

TEST_P(backfill_conformance, an_undone_fill_puts_everyone_back_in_place) {
  auto r0 = claim(bspec("s6", {{"a", 1}, {"b", 2}, {"c", 2}}));
  ASSERT_OK(r0);
  auto request_score = score_of(backfill_ticket("s6"));
  auto x = claim(single("x"));
  ASSERT_OK(x);
  ASSERT_EQ(x->outcome, group_claim_outcome::matched);
  auto x_score = x->tickets[1].score;
  // The session refused the fill (it ended): the request leaves, the
  // player goes back to its place.
  auto q = requeue(x->group, {backfill_ticket("s6")});
  ASSERT_OK(q);
  EXPECT_EQ(q->back, 1u);
  EXPECT_EQ(q->removed, 1u);
  EXPECT_EQ(score_of("tx"), x_score);
  EXPECT_EQ(score_of(backfill_ticket("s6")), -1);
  // Undone whole (the database was out): both back at their places.
  auto r1 = claim(bspec("s7", {{"a", 1}, {"b", 2}, {"c", 2}}));
  ASSERT_OK(r1);
  ASSERT_EQ(r1->outcome, group_claim_outcome::matched); // x fills it
  auto before = score_of(backfill_ticket("s7"));
  EXPECT_EQ(before, -1); // claimed: out of the waiting set
  ASSERT_OK(requeue(r1->group, {}));
  EXPECT_EQ(score_of("tx"), x_score);
  EXPECT_GT(score_of(backfill_ticket("s7")), request_score);
}

TEST_P(backfill_conformance, a_cancel_ends_a_waiting_request_only) {
  auto r = claim(bspec("s8", {{"a", 1}, {"b", 2}, {"c", 2}}));
  ASSERT_OK(r);
  auto c = cancel_request("s8");
  ASSERT_OK(c);
  EXPECT_FALSE(c->in_flight);
  EXPECT_TRUE(waiting().empty());
  auto none = cancel_request("s8");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, errc::not_found);
  // Claimed: its claimer settles it.
  ASSERT_OK(claim(bspec("s9", {{"a", 1}, {"b", 2}, {"c", 2}})));
  auto x = claim(single("x"));
  ASSERT_OK(x);
  ASSERT_EQ(x->outcome, group_claim_outcome::matched);
  auto f = cancel_request("s9");
  ASSERT_OK(f);
  EXPECT_TRUE(f->in_flight);
  EXPECT_EQ(f->group, x->group);
}

TEST_P(backfill_conformance, bad_requests_are_named_and_change_nothing) {
  // Teams without the request's ticket, and the ticket without teams.
  auto s = single("x");
  s.teams = {1};
  auto r = claim(s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, errc::invalid_argument);
  auto b = bspec("s10", {{"a", 1}});
  b.teams.clear();
  r = claim(b);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, errc::invalid_argument);
  // A team the shape does not have.
  r = claim(bspec("s10", {{"a", 3}}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, errc::invalid_argument);
  EXPECT_TRUE(waiting().empty());
}

TEST_P(backfill_conformance, racing_arrivals_never_overfill_a_request) {
  // Per round: a request with one open seat, re-scanned on one connection
  // while three singles arrive on another; whichever claim fills it, the
  // fill takes one ticket into team 1, and no ticket is in two groups.
  int violations = 0, fills = 0;
  const int rounds = GetParam() == "redis_cluster" ? 50 : 200;
  for (int i = 0; i < rounds; ++i) {
    auto k = std::to_string(i);
    std::vector<group_claim_result> seen;
    std::mutex m;
    std::thread t([&] {
      for (auto u : {"x", "y", "z"}) {
        auto r = claim(*other_, single(u + k));
        std::lock_guard<std::mutex> g{m};
        if (r)
          seen.push_back(*r);
      }
    });
    auto spec = bspec("r" + k, {{"a" + k, 1}, {"b" + k, 2}, {"c" + k, 2}});
    for (int j = 0; j < 3; ++j) {
      auto r = claim(*client_, spec);
      spec.rescan = true;
      std::lock_guard<std::mutex> g{m};
      if (r)
        seen.push_back(*r);
    }
    t.join();
    std::map<std::string, std::set<std::string>> groups; // group -> tickets
    for (auto& r : seen) {
      if (r.outcome != group_claim_outcome::matched)
        continue;
      for (auto& tk : r.tickets)
        groups[r.group].insert(tk.ticket);
      if (!r.tickets.empty() && is_backfill_ticket(r.tickets[0].ticket)) {
        ++fills;
        if (r.tickets.size() != 2 || r.tickets[1].team != 1)
          ++violations;
      }
    }
    std::map<std::string, int> in;
    for (auto& [g, ts] : groups)
      for (auto& tk : ts)
        if (++in[tk] > 1)
          ++violations;
    for (auto& [g, ts] : groups) // settled, as a commit would
      (void)release(g);
  }
  EXPECT_EQ(violations, 0);
  EXPECT_GT(fills, rounds / 2);
}

INSTANTIATE_TEST_SUITE_P(stores, backfill_conformance,
                         ::testing::Values("embedded", "redis",
                                           "redis_cluster"),
                         [](const auto& info) { return info.param; });

} // namespace
