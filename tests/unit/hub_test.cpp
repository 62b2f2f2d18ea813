// What matchd keeps per user outside the engine: the hub's entries (a user
// served costs nothing once the presence check no longer reads its last
// sign of life) and the heap figures /metrics reports (app/matchd/heap.hpp), read
// from the allocator this binary runs on (glibc here; jemalloc in
// heap_jemalloc_test, the same source linked as matchd is).

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "app/matchd/heap.hpp"
#include "app/matchd/hub.hpp"

using namespace mm;
using namespace std::chrono_literals;

namespace {

struct counting_sink : event_sink {
  void push(std::shared_ptr<const std::string>) override {
    ++pushed;
  }
  int pushed = 0;
};

TEST(hub, a_user_gone_quiet_is_forgotten_after_the_presence_window) {
  hub h{64, std::chrono::seconds{300}, 50ms};
  for (int i = 0; i < 1000; ++i)
    h.touch("u" + std::to_string(i));
  EXPECT_EQ(h.users(), 1000u);
  h.prune();
  EXPECT_EQ(h.users(), 1000u); // still within the window
  std::this_thread::sleep_for(80ms);
  h.prune();
  EXPECT_EQ(h.users(), 0u);
  // What the presence check reads for a forgotten user: gone, as it read
  // for a user quiet longer than its TTL.
  EXPECT_GT(h.idle("u1"), std::chrono::hours(1));
  EXPECT_FALSE(h.connected("u1"));
}

TEST(hub, open_websockets_and_backlogs_keep_their_entry) {
  hub h{64, std::chrono::seconds{300}, 1ms};
  auto sink = std::make_shared<counting_sink>();
  h.attach("online", sink);
  EXPECT_EQ(h.publish("offline", "{\"type\":\"match.created\"}"), 0u);
  std::this_thread::sleep_for(10ms);
  h.prune();
  EXPECT_EQ(h.users(), 2u);
  EXPECT_TRUE(h.connected("online"));
  // The kept event still reaches the user's next WebSocket.
  auto later = std::make_shared<counting_sink>();
  h.attach("offline", later);
  EXPECT_EQ(later->pushed, 1);
  // Closed and quiet: forgotten at the next prune after the window.
  h.detach("online", sink.get());
  h.detach("offline", later.get());
  std::this_thread::sleep_for(10ms);
  h.prune();
  EXPECT_EQ(h.users(), 0u);
}

TEST(heap, figures_follow_an_allocation_and_its_release) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan's allocator serves malloc (no mallinfo2 figures)";
#endif
#ifdef MM_EXPECT_JEMALLOC
  EXPECT_STREQ(heap_allocator(), "jemalloc");
#else
  EXPECT_STREQ(heap_allocator(), "glibc");
#endif
  constexpr size_t mib = 1 << 20;
  auto before = heap_now();
  std::vector<std::unique_ptr<char[]>> blocks;
  for (int i = 0; i < 64; ++i) {
    blocks.emplace_back(new char[mib]);
    std::memset(blocks.back().get(), 1, mib);
  }
  auto held = heap_now();
  EXPECT_GE(held.in_use, before.in_use + 60 * mib); // caches move a little
  blocks.clear();
  heap_release();
  auto after = heap_now();
  EXPECT_LE(after.in_use, held.in_use - 60 * mib);
#ifdef MM_EXPECT_JEMALLOC
  // Purged: what jemalloc keeps resident beyond what is in use is small
  // again (its metadata and caches), not the 64 MiB just freed.
  EXPECT_LT(after.free, 32 * mib);
#endif
}

} // namespace
