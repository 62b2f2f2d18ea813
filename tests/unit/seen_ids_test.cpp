// core/seen_ids.hpp: repeats are dropped, the window is bounded.

#include <string>

#include <gtest/gtest.h>

#include "core/seen_ids.hpp"

namespace {

TEST(seen_ids, a_repeat_within_the_window_is_refused) {
  mm::seen_ids s{3};
  EXPECT_TRUE(s.insert("a"));
  EXPECT_FALSE(s.insert("a"));
  EXPECT_TRUE(s.insert("b"));
  EXPECT_TRUE(s.insert("c"));
  EXPECT_FALSE(s.insert("b"));
  EXPECT_EQ(s.size(), 3u);
}

TEST(seen_ids, the_oldest_is_forgotten_past_the_capacity) {
  mm::seen_ids s{3};
  for (auto id : {"a", "b", "c", "d"})
    EXPECT_TRUE(s.insert(id));
  EXPECT_EQ(s.size(), 3u);
  EXPECT_TRUE(s.insert("a"));  // forgotten: "a" was the oldest
  EXPECT_FALSE(s.insert("c")); // still within the window
  EXPECT_TRUE(s.insert("b"));  // forgotten when "a" came back
  for (int i = 0; i < 1000; ++i)
    s.insert("x" + std::to_string(i));
  EXPECT_EQ(s.size(), 3u);
  EXPECT_FALSE(s.insert("x999"));
  EXPECT_TRUE(s.insert("x996"));
}

} // namespace
