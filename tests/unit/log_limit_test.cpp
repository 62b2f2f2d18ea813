// Repeated log lines are rate-limited (core/log_limit.hpp): at most N per
// interval, the rest counted and reported with the next line written.

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/log_limit.hpp"

using namespace mm;
using namespace std::chrono_literals;

namespace {

TEST(log_limit, at_most_burst_lines_per_interval_then_the_count) {
  log_limit lim{3, 200ms};
  uint64_t suppressed = 99;
  int written = 0;
  for (int i = 0; i < 1000; ++i)
    if (lim.admit(suppressed)) {
      ++written;
      EXPECT_EQ(suppressed, 0u);
    }
  EXPECT_EQ(written, 3);
  std::this_thread::sleep_for(250ms);
  // The next window: the first line written carries the 997 held back.
  ASSERT_TRUE(lim.admit(suppressed));
  EXPECT_EQ(suppressed, 997u);
  ASSERT_TRUE(lim.admit(suppressed));
  EXPECT_EQ(suppressed, 0u);
}

TEST(log_limit, threads_share_one_budget) {
  log_limit lim{5, std::chrono::hours(1)};
  std::atomic<int> written{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      uint64_t s = 0;
      for (int i = 0; i < 10000; ++i)
        if (lim.admit(s))
          ++written;
    });
  for (auto& t : ts)
    t.join();
  EXPECT_EQ(written.load(), 5);
}

} // namespace
