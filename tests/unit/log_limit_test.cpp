// Repeated log lines are rate-limited (core/log_limit.hpp): at most N per
// interval, the rest counted and reported with the next line written.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>
#include <string>

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

/// MM_LOG_LIMITED: one limiter per call site, 5 lines per 10 s.
TEST(log_limit, a_call_site_writes_five_lines_of_a_thousand) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto log = std::make_shared<spdlog::logger>("log_limit_test", sink);
  log->set_pattern("%v");
  for (int i = 0; i < 1000; ++i)
    MM_LOG_LIMITED(log, warn, "user {} not looked up", i);
  // Another call site has a budget of its own.
  MM_LOG_LIMITED(log, warn, "another site");
  std::string text = out.str();
  auto lines = std::count(text.begin(), text.end(), '\n');
  EXPECT_EQ(lines, 6) << text;
  EXPECT_NE(text.find("user 4 not looked up"), std::string::npos);
  EXPECT_EQ(text.find("user 5 not looked up"), std::string::npos);
  EXPECT_NE(text.find("another site"), std::string::npos);
}

} // namespace
