// Group claims on every queue store (problem 15 of docs/design.md,
// docs/groups.md): the same tests against the embedded store, one
// redis-server and a Redis Cluster. A match is made whole in one call or
// not at all, parties stay whole in one team, the oldest compatible tickets
// go first, a short match waits fill_after, teams are balanced, and two
// nodes racing for the last slot never both win.

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <gtest/gtest.h>

#include "core/rules.hpp"
#include "core/shape.hpp"
#include "persistence/queue/group_codec.hpp"
#include "tests/conformance/group_fixture.hpp"
#include "tests/support/race.hpp"
#include "tests/support/store_harness.hpp"

using namespace mm;
using namespace mm::test;

namespace {

class group_conformance : public group_fixture {};

/// All users of a claimed group.
std::vector<std::string> users_of(const group_claim_result& r) {
  std::vector<std::string> out;
  for (auto& t : r.tickets)
    for (auto& m : t.members)
      out.push_back(m.user);
  return out;
}

TEST_P(group_conformance, a_rescan_never_files_a_settled_ticket_again) {
  // A party's heartbeat is a re-scan: it keeps a waiting ticket's place and
  // finds a claimed one, but a ticket whose group was settled (or that
  // lapsed) answers `gone`, never a new ticket (the party asks the
  // database instead: it may be matched).
  auto sh = shape_of(R"({"players": {"min": 2, "max": 2}, "party_max": 2})");
  auto first = claim(gspec("ta", {"a"}, sh));
  ASSERT_OK(first);
  auto re = gspec("ta", {"a"}, sh);
  re.rescan = true;
  auto again = claim(re);
  ASSERT_OK(again);
  EXPECT_EQ(again->outcome, group_claim_outcome::queued);
  EXPECT_EQ(again->score, first->score);
  auto b = claim(gspec("tb", {"b"}, sh));
  ASSERT_OK(b);
  ASSERT_EQ(b->outcome, group_claim_outcome::matched);
  auto held = claim(re);
  ASSERT_OK(held);
  EXPECT_EQ(held->outcome, group_claim_outcome::claimed_by_other);
  auto rel = client_->call(codec::group_release_call(q_, b->group),
                           codec::parse_group_settle);
  ASSERT_OK(rel);
  auto gone = claim(re);
  ASSERT_OK(gone);
  EXPECT_EQ(gone->outcome, group_claim_outcome::gone);
  EXPECT_TRUE(waiting().empty());
  auto fresh = gspec("tx", {"x"}, sh);
  fresh.rescan = true;
  auto never = claim(fresh);
  ASSERT_OK(never);
  EXPECT_EQ(never->outcome, group_claim_outcome::gone);
  EXPECT_TRUE(waiting().empty());
}

TEST_P(group_conformance, a_full_lobby_is_made_in_one_call) {
  auto sh = shape_of(R"({"players": {"min": 3, "max": 3}})");
  auto a = claim(gspec("ta", {"a"}, sh));
  ASSERT_OK(a);
  EXPECT_EQ(a->outcome, group_claim_outcome::queued);
  auto b = claim(gspec("tb", {"b"}, sh));
  ASSERT_OK(b);
  EXPECT_EQ(b->outcome, group_claim_outcome::queued);
  auto c = claim(gspec("tc", {"c"}, sh));
  ASSERT_OK(c);
  ASSERT_EQ(c->outcome, group_claim_outcome::matched);
  EXPECT_TRUE(c->in_group);
  ASSERT_EQ(c->tickets.size(), 3u);
  EXPECT_EQ(users_of(*c), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(c->tickets[0].members[0].attrs, R"({"u":"a"})");
  EXPECT_TRUE(waiting().empty());
  // The first one's re-scan learns its ticket is in the group.
  auto again = claim(gspec("ta", {"a"}, sh));
  ASSERT_OK(again);
  EXPECT_EQ(again->outcome, group_claim_outcome::claimed_by_other);
  EXPECT_EQ(again->group, c->group);
  // A retry of the call that made it answers the same group.
  auto retry = claim(gspec("tc", {"c"}, sh));
  ASSERT_OK(retry);
  ASSERT_EQ(retry->outcome, group_claim_outcome::matched);
  EXPECT_EQ(retry->group, c->group);
  EXPECT_EQ(users_of(*retry), users_of(*c));
}

TEST_P(group_conformance, parties_stay_whole_in_one_team) {
  // 2 teams of 3, parties up to 3: three parties of 2 cannot make it (a
  // team of 3 takes one pair), so p3 is passed over and the match is
  // p1 + p2 + the two singles, one pair and one single a team.
  auto sh = shape_of(R"({"players": {"min": 6, "max": 6},
                         "teams": {"count": 2, "size": 3}, "party_max": 3})");
  ASSERT_OK(claim(gspec("p1", {"a1", "a2"}, sh)));
  ASSERT_OK(claim(gspec("p2", {"b1", "b2"}, sh)));
  auto p3 = claim(gspec("p3", {"c1", "c2"}, sh));
  ASSERT_OK(p3);
  EXPECT_EQ(p3->outcome, group_claim_outcome::queued)
    << "2 + 2 + 2 players do not fit two teams of 3 whole";
  auto p4 = claim(gspec("p4", {"d1"}, sh));
  ASSERT_OK(p4);
  EXPECT_EQ(p4->outcome, group_claim_outcome::queued);
  auto p5 = claim(gspec("p5", {"e1"}, sh));
  ASSERT_OK(p5);
  ASSERT_EQ(p5->outcome, group_claim_outcome::matched);
  std::map<uint32_t, int> team_size;
  std::set<std::string> tickets;
  for (auto& t : p5->tickets) {
    team_size[t.team] += static_cast<int>(t.members.size());
    tickets.insert(t.ticket);
  }
  EXPECT_EQ(tickets, (std::set<std::string>{"p1", "p2", "p4", "p5"}));
  EXPECT_EQ(team_size[1], 3);
  EXPECT_EQ(team_size[2], 3);
  EXPECT_EQ(waiting(), std::vector<std::string>{"p3"});
}

TEST_P(group_conformance, a_match_the_first_pass_misses_is_searched_for) {
  // 2 teams of 5 from parties of 2 and 3: taking every ticket that fits in
  // FIFO order stops at 2 + 3 + 2 + 2 = 9 players, yet 2 + 3 + 2 + 3 fills
  // the match. Without the search these tickets would wait for a single
  // that may never come (found by bench/run groups: every party of one
  // matched, hundreds of pairs and trios left waiting).
  auto sh = shape_of(R"({"players": {"min": 10, "max": 10},
                         "teams": {"count": 2, "size": 5}, "party_max": 3})");
  ASSERT_OK(claim(gspec("p1", {"a1", "a2"}, sh)));
  ASSERT_OK(claim(gspec("p2", {"b1", "b2", "b3"}, sh)));
  ASSERT_OK(claim(gspec("p3", {"c1", "c2"}, sh)));
  ASSERT_OK(claim(gspec("p4", {"d1", "d2"}, sh)));
  auto p5 = claim(gspec("p5", {"e1", "e2"}, sh));
  ASSERT_OK(p5);
  EXPECT_EQ(p5->outcome, group_claim_outcome::queued);
  auto p6 = claim(gspec("p6", {"f1", "f2", "f3"}, sh));
  ASSERT_OK(p6);
  ASSERT_EQ(p6->outcome, group_claim_outcome::matched);
  std::map<uint32_t, int> team_size;
  std::set<std::string> tickets;
  for (auto& t : p6->tickets) {
    team_size[t.team] += static_cast<int>(t.members.size());
    tickets.insert(t.ticket);
  }
  // The earliest tickets in FIFO order that fill it, parties whole.
  EXPECT_EQ(tickets, (std::set<std::string>{"p1", "p2", "p3", "p6"}));
  EXPECT_EQ(team_size[1], 5);
  EXPECT_EQ(team_size[2], 5);
  EXPECT_EQ(waiting(), (std::vector<std::string>{"p4", "p5"}));
}

TEST_P(group_conformance, a_head_that_cannot_fill_a_match_does_not_block) {
  // A window (scan 4) of parties of two cannot make teams of five among
  // themselves; two parties of three arriving behind it complete a match
  // with the oldest two (found by bench/run groups on PostgreSQL: the
  // first 64 tickets were parties of two, 380 parties of three waited
  // behind them, and nothing was matched any more).
  auto sh = shape_of(R"({"players": {"min": 10, "max": 10},
                         "teams": {"count": 2, "size": 5}, "party_max": 3})");
  for (auto t : {"p1", "p2", "p3", "p4", "p5"}) {
    auto r = claim(gspec(t, {std::string{t} + "a", std::string{t} + "b"}, sh),
                   4);
    ASSERT_OK(r);
    EXPECT_EQ(r->outcome, group_claim_outcome::queued);
  }
  auto q1 = claim(gspec("q1", {"q1a", "q1b", "q1c"}, sh), 4);
  ASSERT_OK(q1);
  EXPECT_EQ(q1->outcome, group_claim_outcome::queued);
  auto q2 = claim(gspec("q2", {"q2a", "q2b", "q2c"}, sh), 4);
  ASSERT_OK(q2);
  ASSERT_EQ(q2->outcome, group_claim_outcome::matched);
  std::set<std::string> tickets;
  for (auto& t : q2->tickets)
    tickets.insert(t.ticket);
  EXPECT_EQ(tickets, (std::set<std::string>{"p1", "p2", "q1", "q2"}));
  EXPECT_EQ(waiting(), (std::vector<std::string>{"p3", "p4", "p5"}));
}

TEST_P(group_conformance, the_oldest_tickets_go_first) {
  auto sh = shape_of(R"({"players": {"min": 3, "max": 3}})");
  // Five singles filed one by one: the first claim that can make a lobby
  // takes the three oldest.
  std::vector<std::string> order;
  group_claim_result made;
  for (int i = 0; i < 3; ++i) {
    auto r
      = claim(gspec("t" + std::to_string(i), {"u" + std::to_string(i)}, sh));
    ASSERT_OK(r);
    if (r->outcome == group_claim_outcome::matched)
      made = *r;
  }
  EXPECT_EQ(users_of(made), (std::vector<std::string>{"u0", "u1", "u2"}));
  // A party that does not fit is passed over, not a wall: lobby of 3,
  // parties up to 2: {x1,x2} waits, then y (1), then {z1,z2}: y fits with
  // x's party (3 players).
  auto sh2 = shape_of(R"({"players": {"min": 3, "max": 3}, "party_max": 2})");
  q_ = fresh_queue(GetParam() + "-groups");
  ASSERT_OK(claim(gspec("x", {"x1", "x2"}, sh2)));
  ASSERT_OK(claim(gspec("z", {"z1", "z2"}, sh2)));
  auto y = claim(gspec("y", {"y1"}, sh2));
  ASSERT_OK(y);
  ASSERT_EQ(y->outcome, group_claim_outcome::matched);
  EXPECT_EQ(users_of(*y), (std::vector<std::string>{"x1", "x2", "y1"}));
  EXPECT_EQ(waiting(), std::vector<std::string>{"z"});
}

TEST_P(group_conformance, a_short_match_waits_fill_after) {
  // 2 to 4 players; the oldest waits 1 s for a full match.
  auto sh = shape_of(R"({"players": {"min": 2, "max": 4}, "fill_after_s": 1})");
  auto a = claim(gspec("ta", {"a"}, sh));
  ASSERT_OK(a);
  auto b = claim(gspec("tb", {"b"}, sh));
  ASSERT_OK(b);
  EXPECT_EQ(b->outcome, group_claim_outcome::queued);
  store_.advance(1100);
  // b's re-scan: a has waited past fill_after: a match of 2.
  auto again = claim(gspec("tb", {"b"}, sh));
  ASSERT_OK(again);
  ASSERT_EQ(again->outcome, group_claim_outcome::matched);
  EXPECT_EQ(users_of(*again), (std::vector<std::string>{"a", "b"}));
}

TEST_P(group_conformance, teams_are_balanced_on_known_skills) {
  auto sh = shape_of(R"({"players": {"min": 6, "max": 6},
                         "teams": {"count": 2, "size": 3},
                         "balance": "skill"})",
                     {"skill"});
  // 1, 2, 3, 4, 5, 9: the only even split is {9, 2, 1} against {3, 4, 5}.
  std::vector<int> skills{9, 5, 4, 3, 2, 1};
  group_claim_result made;
  for (size_t i = 0; i < skills.size(); ++i) {
    auto r = claim(gspec("t" + std::to_string(i), {"u" + std::to_string(i)}, sh,
                         {static_cast<double>(skills[i])}));
    ASSERT_OK(r);
    if (r->outcome == group_claim_outcome::matched)
      made = *r;
  }
  ASSERT_EQ(made.tickets.size(), 6u);
  std::map<uint32_t, int> sum, size;
  for (size_t i = 0; i < made.tickets.size(); ++i) {
    auto idx = std::stoi(made.tickets[i].ticket.substr(1));
    sum[made.tickets[i].team] += skills[static_cast<size_t>(idx)];
    size[made.tickets[i].team] += 1;
  }
  EXPECT_EQ(size[1], 3);
  EXPECT_EQ(size[2], 3);
  EXPECT_EQ(sum[1], 12);
  EXPECT_EQ(sum[2], 12);
}

TEST_P(group_conformance, the_scan_is_bounded_and_a_stale_window_says_so) {
  auto sh = shape_of(R"({"players": {"min": 6, "max": 6}})");
  for (int i = 0; i < 5; ++i)
    ASSERT_OK(claim(
      gspec("s" + std::to_string(i), {"s" + std::to_string(i)}, sh, {}, 50)));
  store_.advance(120); // all five are stale
  auto r = claim(gspec("live", {"l1"}, sh), 3);
  ASSERT_OK(r);
  EXPECT_EQ(r->outcome, group_claim_outcome::queued);
  EXPECT_EQ(r->stale_removed, 3u);
  EXPECT_TRUE(r->more) << "a window of only stale tickets is not 'empty'";
  auto again = claim(gspec("live", {"l1"}, sh), 3);
  ASSERT_OK(again);
  EXPECT_EQ(again->stale_removed, 2u);
  EXPECT_EQ(waiting(), std::vector<std::string>{"live"});
}

TEST_P(group_conformance, a_user_is_in_one_ticket_and_bad_input_is_named) {
  auto sh = shape_of(R"({"players": {"min": 4, "max": 4}, "party_max": 2})");
  ASSERT_OK(claim(gspec("p1", {"a", "b"}, sh)));
  auto dup = claim(gspec("p2", {"c", "b"}, sh));
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, errc::duplicate_ticket);
  auto big = claim(gspec("p3", {"x", "y", "z"}, sh));
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, errc::invalid_argument) << "over party_max";
  auto twice = claim(gspec("p4", {"x", "x"}, sh));
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().code, errc::invalid_argument);
  auto noshape = claim(gspec("p5", {"x"}, "nonsense"));
  ASSERT_FALSE(noshape);
  EXPECT_EQ(noshape.error().code, errc::invalid_argument);
  EXPECT_EQ(waiting(), std::vector<std::string>{"p1"});
}

TEST_P(group_conformance, an_undone_group_goes_back_to_its_places) {
  auto sh = shape_of(R"({"players": {"min": 3, "max": 3}, "party_max": 2})");
  auto a = claim(gspec("ta", {"a"}, sh));
  ASSERT_OK(a);
  auto b = claim(gspec("tb", {"b1", "b2"}, sh));
  ASSERT_OK(b);
  ASSERT_EQ(b->outcome, group_claim_outcome::matched);
  // a member of tb leaves while the group is held: in flight.
  auto leave = client_->call(codec::group_cancel_call(q_, "b2", b->token),
                             codec::parse_group_cancel);
  ASSERT_OK(leave);
  EXPECT_TRUE(leave->in_flight);
  EXPECT_EQ(leave->group, b->group);
  // The claimer undoes the group: tb leaves, ta goes back at its score.
  auto undo = client_->call(codec::group_requeue_call(q_, b->group, {"tb"}),
                            codec::parse_group_settle);
  ASSERT_OK(undo);
  EXPECT_EQ(undo->back, 1u);
  EXPECT_EQ(undo->removed, 1u);
  EXPECT_EQ(waiting(), std::vector<std::string>{"ta"});
  EXPECT_EQ(score_of("ta"), a->score);
  auto twice = client_->call(codec::group_requeue_call(q_, b->group, {}),
                             codec::parse_group_settle);
  ASSERT_OK(twice);
  EXPECT_TRUE(twice->gone);
  // b1 may join again (its ticket went); a waits and is cancelled whole.
  auto b1 = claim(gspec("tb2", {"b1"}, sh));
  ASSERT_OK(b1);
  EXPECT_EQ(b1->outcome, group_claim_outcome::queued);
  auto ca = client_->call(codec::group_cancel_call(q_, "a", a->token),
                          codec::parse_group_cancel);
  ASSERT_OK(ca);
  EXPECT_FALSE(ca->in_flight);
  EXPECT_EQ(waiting(), std::vector<std::string>{"tb2"});
}

TEST_P(group_conformance, a_released_group_leaves_no_trace) {
  auto sh = shape_of(R"({"players": {"min": 2, "max": 2}, "party_max": 2})");
  auto p = claim(gspec("p", {"a", "b"}, sh));
  ASSERT_OK(p);
  ASSERT_EQ(p->outcome, group_claim_outcome::matched);
  auto rel = client_->call(codec::group_release_call(q_, p->group),
                           codec::parse_group_settle);
  ASSERT_OK(rel);
  EXPECT_EQ(rel->removed, 1u);
  auto all = client_->command({"HLEN", codec::group_keys(q_)[2]});
  EXPECT_EQ(all.integer, 0) << "records, pointers and the group record go";
  auto dl = client_->command({"ZCARD", codec::group_keys(q_)[3]});
  EXPECT_EQ(dl.integer, 0);
  // The same users may join again at once.
  auto again = claim(gspec("p2", {"a", "b"}, sh));
  ASSERT_OK(again);
  EXPECT_EQ(again->outcome, group_claim_outcome::matched);
}

constexpr int rounds = 1000;

/// Two nodes race for the last slot of a lobby of 3 (two waiting): exactly
/// one makes the match; the other waits; nobody is in two groups, no group
/// is partial. 1,000 rounds on fresh queues.
TEST_P(group_conformance, two_nodes_racing_for_the_last_slot) {
  auto sh = shape_of(R"({"players": {"min": 3, "max": 3}})");
  racer race;
  int violations = 0, matched_once = 0;
  for (int i = 0; i < rounds; ++i) {
    q_ = fresh_queue(GetParam() + "-race");
    ASSERT_OK(claim(gspec("w1", {"w1"}, sh)));
    ASSERT_OK(claim(gspec("w2", {"w2"}, sh)));
    std::optional<outcome<group_claim_result>> ox, oy;
    auto sx = gspec("x", {"x"}, sh);
    auto sy = gspec("y", {"y"}, sh);
    sy.node = "n2";
    race.run([&] { ox = claim(*client_, sx); },
             [&] { oy = claim(*other_, sy); });
    auto& x = *ox;
    auto& y = *oy;
    if (!x || !y) {
      ++violations;
      continue;
    }
    int made = (x->outcome == group_claim_outcome::matched)
               + (y->outcome == group_claim_outcome::matched);
    if (made != 1) {
      ++violations;
      continue;
    }
    ++matched_once;
    auto& m = x->outcome == group_claim_outcome::matched ? *x : *y;
    auto& loser = x->outcome == group_claim_outcome::matched ? *y : *x;
    auto u = users_of(m);
    std::set<std::string> distinct(u.begin(), u.end());
    if (u.size() != 3 || distinct.size() != 3 || !distinct.count("w1")
        || !distinct.count("w2"))
      ++violations;
    if (loser.outcome != group_claim_outcome::queued)
      ++violations;
    if (waiting() != std::vector<std::string>{loser.ticket})
      ++violations;
  }
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(matched_once, rounds);
}

INSTANTIATE_TEST_SUITE_P(stores, group_conformance,
                         ::testing::Values("embedded", "redis",
                                           "redis_cluster"),
                         [](const auto& info) { return info.param; });

} // namespace
