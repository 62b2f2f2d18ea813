// The group checker's count of full matches left among waiting parties
// (matchctl load --players; app/matchctl/load/checker.hpp): what a quiet
// queue without rules must never hold at the end of a run.

#include <gtest/gtest.h>

#include "app/matchctl/load/checker.hpp"

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
