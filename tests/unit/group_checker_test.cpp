// The group checker's count of full matches left among waiting parties
// (matchctl load --players; app/matchctl/load/checker.hpp): what a quiet
// queue without rules must never hold at the end of a run; how it reads
// the ready check (app/matchctl/load/proposal_check.hpp); and a party's
// team under leaves and fills (app/matchctl/load/group_tally.cpp).

#include <gtest/gtest.h>

#include "app/matchctl/load/checker.hpp"
#include "app/matchctl/load/group_run.hpp"
#include "app/matchctl/load/proposal_check.hpp"

using mm::full_matches_of;

TEST(group_checker, two_teams_of_five_by_party_sizes) {
  // 3+2 and 3+2: one 5-vs-5.
  EXPECT_EQ(full_matches_of({3, 3, 2, 2}, 2, 10), 1u);
  // Six 3s and one 2 (20 players) make no team pair of 5: nothing missed.
  EXPECT_EQ(full_matches_of({3, 3, 3, 3, 3, 3, 2}, 2, 10), 0u);
  // 3+2 leaves 2+1 for the other team: short by two.
  EXPECT_EQ(full_matches_of({3, 2, 2, 1}, 2, 10), 0u);
  // 3+2 and 2+1+1+1.
  EXPECT_EQ(full_matches_of({3, 2, 2, 1, 1, 1}, 2, 10), 1u);
  // Twenty singles: two matches.
  EXPECT_EQ(full_matches_of(std::vector<uint32_t>(20, 1), 2, 10), 2u);
}

TEST(group_checker, one_lobby_by_sum) {
  EXPECT_EQ(full_matches_of({2, 2, 2}, 0, 6), 1u);
  EXPECT_EQ(full_matches_of({2, 2, 1}, 0, 6), 0u);
  EXPECT_EQ(full_matches_of({5, 2}, 0, 6), 0u);
  // 4 first leaves room 2 that nothing fills: found by trying 3+3.
  EXPECT_EQ(full_matches_of({4, 3, 3}, 0, 6), 1u);
  EXPECT_EQ(full_matches_of({}, 2, 10), 0u);
  // A party larger than a team never counts.
  EXPECT_EQ(full_matches_of({7, 3}, 2, 10), 0u);
}

TEST(proposal_check, holder_and_order_from_ids) {
  EXPECT_EQ(mm::proposal_holder("proposal:node-3:q2:g17:proposed"), "node-3");
  EXPECT_EQ(mm::proposal_holder("outbox:42"), "?");
  EXPECT_EQ(mm::proposal_holder("proposal:node-3"), "?");
  EXPECT_EQ(mm::proposal_seq("g17"), 17u);
  EXPECT_LT(mm::proposal_seq("g9"), mm::proposal_seq("g10"));
  EXPECT_EQ(mm::proposal_seq("x17"), 0u);
  EXPECT_EQ(mm::proposal_seq("gx"), 0u);
}

TEST(proposal_check, how_a_proposal_ended) {
  mm::heard_proposal h;
  h.seq = 5;
  std::map<std::string, std::string> ended{{"g5", "told"}};
  EXPECT_EQ(mm::proposal_end(ended, "g5", h, false, 5, false), "told");
  ended.clear();
  EXPECT_EQ(mm::proposal_end(ended, "g5", h, true, 5, false), "matched");
  EXPECT_EQ(mm::proposal_end(ended, "g5", h, false, 9, false), "later");
  EXPECT_EQ(mm::proposal_end(ended, "g5", h, false, 5, true), "queued");
  // Heard, never ended, the party not back in the queue: held forever.
  EXPECT_EQ(mm::proposal_end(ended, "g5", h, false, 5, false), "leaked");
  mm::group_holder_tally t;
  for (auto how : {"told", "removed", "later", "matched", "queued", "leaked"})
    mm::tally_end(t, how);
  EXPECT_EQ(t.heard, 6u);
  EXPECT_EQ(t.told + t.removed + t.later + t.matched + t.queued + t.leaked, 6u);
  EXPECT_EQ(t.leaked, 1u);
  EXPECT_TRUE(mm::removal_reason("timed_out"));
  EXPECT_FALSE(mm::removal_reason("requeued"));
}

TEST(proposal_check, a_session_needs_the_accept_of_its_proposal) {
  std::set<std::string> roster{"a", "b", "c", "d"};
  std::map<std::string, mm::heard_proposal> heard;
  EXPECT_FALSE(mm::accepted_session(heard, roster)); // heard none
  heard["g3"] = {"node-1", roster, 3, true};
  heard["g8"] = {"node-2", {"a", "b", "e", "f"}, 8, false};
  EXPECT_TRUE(mm::accepted_session(heard, roster));
  // The same users proposed again (all requeued by a lapse): the later
  // proposal made the session, and it was ignored.
  heard["g9"] = {"node-3", roster, 9, false};
  EXPECT_FALSE(mm::accepted_session(heard, roster));
}

TEST(group_checker, a_party_s_team_is_read_from_its_own_match_event) {
  // 2-vs-2 with leaves and fills: x was in session z-s (as its first
  // observer a saw it), left, and then played with y, its party, in team 1
  // of a-s. Each member's team comes from its own event; read from another
  // session's roster, x and y would look split.
  using namespace mm::group_run;
  using json = nlohmann::json;
  std::vector<member> users(7);
  auto set = [&](size_t i, std::string user, std::string session, json teams) {
    users[i].user = std::move(user);
    users[i].session = std::move(session);
    users[i].teams = teams;
    for (auto& t : teams)
      for (auto& u : t)
        users[i].roster.insert(u.get<std::string>());
  };
  // (json::array: a list of string pairs would be read as an object)
  auto teams = [](json a, json b) { return json::array({a, b}); };
  auto old_teams = teams({"a", "b"}, {"x", "c"});
  auto new_teams = teams({"p", "q"}, {"x", "y"});
  set(0, "a", "z-s", old_teams);
  set(1, "b", "z-s", old_teams);
  set(2, "c", "z-s", old_teams);
  set(3, "x", "a-s", new_teams);
  set(4, "y", "a-s", new_teams);
  set(5, "p", "a-s", new_teams);
  set(6, "q", "a-s", new_teams);
  std::vector<party_run> parties(6);
  parties[0].members = {3, 4}; // x and y
  for (size_t i = 1; i < 6; ++i)
    parties[i].members = {i == 1 ? 0u : i == 2 ? 1u : i == 3 ? 2u : i + 1};
  for (auto& p : parties)
    p.queued = true;
  mm::group_load_options g;
  g.min_players = 4;
  g.max_players = 4;
  g.teams = 2;
  g.leave_rate = 0.5;
  mm::fill_ledger fills;
  std::map<std::string, int64_t> removed;
  group_tallies t;
  t.fills = &fills;
  t.last_removed_ms = &removed;
  auto c = check_group_run(users, parties, g, t);
  EXPECT_EQ(c.split_parties, 0u);
  // A party really split over two teams is still found.
  users[4].teams = teams({"p", "y"}, {"x", "q"});
  EXPECT_EQ(check_group_run(users, parties, g, t).split_parties, 1u);
}

TEST(fill_check, a_backfill_load_ends_only_when_fills_are_quiet) {
  // The last party matched by a fill: its event to the members already
  // playing may be in flight; closing their sockets now would count them
  // untold (cluster_groups_test failed 1 run in 10 so).
  using std::chrono::milliseconds;
  EXPECT_TRUE(mm::fills_may_end(false, milliseconds(0), milliseconds(2000)));
  EXPECT_FALSE(mm::fills_may_end(true, milliseconds(50), milliseconds(2000)));
  EXPECT_TRUE(mm::fills_may_end(true, milliseconds(2000), milliseconds(2000)));
}

TEST(group_checker, a_lost_requeued_member_is_named) {
  // r heard proposal g1 end `requeued`, then neither matched, nor waiting,
  // nor removed: counted, and named with its proposals' ends.
  using namespace mm::group_run;
  std::vector<member> users(1);
  users[0].user = "r";
  users[0].proposed["g1"] = mm::heard_proposal{};
  users[0].ended["g1"] = "requeued";
  std::vector<party_run> parties(1);
  parties[0].members = {0};
  parties[0].queued = true;
  parties[0].final_phase = "failed";
  mm::group_load_options g;
  g.min_players = 4;
  g.max_players = 4;
  g.teams = 2;
  mm::fill_ledger fills;
  std::map<std::string, int64_t> removed;
  group_tallies t;
  t.fills = &fills;
  t.last_removed_ms = &removed;
  t.proposals_heard = 1;
  auto c = check_group_run(users, parties, g, t);
  EXPECT_EQ(c.requeued_lost, 1u);
  ASSERT_EQ(c.lost_examples.size(), 1u);
  EXPECT_EQ(c.lost_examples[0], "r failed heard 1 g1:requeued");
}
