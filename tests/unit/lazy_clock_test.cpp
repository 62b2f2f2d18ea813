// The lazy clock (actors/lazy_clock.hpp) on a real actor system: delayed
// messages, request timeouts and receive timeouts fire, none before it is
// due, an earlier timer wakes a clock asleep until a later one, a cancelled
// receive timeout never fires, and thousands of timers all arrive; long
// request timeouts share few moments.

#include "actors/lazy_clock.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <set>
#include <typeinfo>
#include <vector>

#include <caf/all.hpp>
#include <gtest/gtest.h>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

struct lazy_system {
  lazy_system() {
    cfg.set("scheduler.max-threads", size_t{2});
    cfg.set("scheduler.policy", caf::atom("sharing"));
    cfg.set("logger.verbosity", caf::atom("quiet"));
    mm::use_lazy_clock(cfg);
  }
  caf::actor_system_config cfg;
};

TEST(lazy_clock, runs_the_scheduler_with_it) {
  lazy_system ls;
  caf::actor_system sys{ls.cfg};
  EXPECT_NE(
    dynamic_cast<caf::scheduler::abstract_coordinator*>(&sys.scheduler()),
    nullptr);
  // The default clock's thread is named caf.clock; ours is another object.
  caf::actor_clock& ours = sys.clock();
  caf::actor_system_config plain_cfg;
  plain_cfg.set("scheduler.policy", caf::atom("sharing"));
  plain_cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system plain{plain_cfg};
  caf::actor_clock& theirs = plain.clock();
  EXPECT_NE(typeid(ours), typeid(theirs));
}

TEST(lazy_clock, an_earlier_timer_wakes_it_from_a_later_one) {
  lazy_system ls;
  caf::actor_system sys{ls.cfg};
  std::promise<clock_type::time_point> early, late;
  auto start = clock_type::now();
  sys.spawn([&](caf::event_based_actor* self) -> caf::behavior {
    // The clock sleeps until the 3 s timer; the 50 ms one comes after it.
    self->delayed_send(self, 3s, caf::atom("late"));
    self->delayed_send(self, 50ms, caf::atom("early"));
    return {
      [&, self](caf::atom_value a) {
        if (a == caf::atom("early"))
          early.set_value(clock_type::now());
        else {
          late.set_value(clock_type::now());
          self->quit();
        }
      },
    };
  });
  auto e = early.get_future().get() - start;
  EXPECT_GE(e, 50ms);
  EXPECT_LT(e, 1500ms) << "the earlier timer waited for the later one";
  auto l = late.get_future().get() - start;
  EXPECT_GE(l, 3s);
}

TEST(lazy_clock, request_timeouts_fire_and_answers_win) {
  lazy_system ls;
  caf::actor_system sys{ls.cfg};
  // Keeps every promise and never answers.
  auto kept = std::make_shared<std::vector<caf::response_promise>>();
  auto silent
    = sys.spawn([kept](caf::event_based_actor* self) -> caf::behavior {
        return {[self, kept](int) {
          kept->push_back(self->make_response_promise());
          return kept->back();
        }};
      });
  auto echo
    = sys.spawn([]() -> caf::behavior { return {[](int x) { return x; }}; });
  std::promise<std::pair<bool, bool>> done;
  auto start = clock_type::now();
  clock_type::duration waited{};
  sys.spawn([&](caf::event_based_actor* self) {
    auto answered = std::make_shared<bool>(false);
    self->request(echo, 5s, 7).then([=](int x) { *answered = x == 7; });
    self->request(silent, 100ms, 1)
      .then(
        [&](int) {
          done.set_value({*answered, false});
        },
        [&, answered](caf::error& err) {
          waited = clock_type::now() - start;
          done.set_value({*answered, err == caf::sec::request_timeout});
        });
  });
  auto [answered, timed_out] = done.get_future().get();
  EXPECT_TRUE(answered);
  EXPECT_TRUE(timed_out);
  EXPECT_GE(waited, 100ms);
  anon_send_exit(silent, caf::exit_reason::user_shutdown);
  anon_send_exit(echo, caf::exit_reason::user_shutdown);
}

TEST(lazy_clock, long_request_timeouts_share_few_moments_none_early) {
  auto now = clock_type::now();
  // Short ones are exact.
  EXPECT_EQ(mm::request_timeout_due(now + 500ms, now), now + 500ms);
  std::set<clock_type::time_point> moments_2s, moments_20s;
  for (int i = 0; i < 1000; ++i) {
    // Requests sent over one second, each at another instant.
    auto at = now + std::chrono::microseconds(i * 997);
    auto due = mm::request_timeout_due(at + 2s, at);
    EXPECT_GE(due, at + 2s);
    EXPECT_LT(due, at + 2s + 125ms);
    EXPECT_EQ(due.time_since_epoch() % 125ms, clock_type::duration::zero());
    moments_2s.insert(due);
    due = mm::request_timeout_due(at + 20s, at);
    EXPECT_GE(due, at + 20s);
    EXPECT_LT(due, at + 20s + 125ms);
    moments_20s.insert(due);
  }
  EXPECT_LE(moments_2s.size(), 10u);
  EXPECT_LE(moments_20s.size(), 10u);
}

TEST(lazy_clock, a_long_request_timeout_still_fires_never_early) {
  lazy_system ls;
  caf::actor_system sys{ls.cfg};
  auto silent = sys.spawn([](caf::event_based_actor* self) -> caf::behavior {
    auto kept = std::make_shared<std::vector<caf::response_promise>>();
    return {[self, kept](int) {
      kept->push_back(self->make_response_promise());
      return kept->back();
    }};
  });
  std::promise<bool> done;
  auto start = clock_type::now();
  clock_type::duration waited{};
  sys.spawn([&](caf::event_based_actor* self) {
    self->request(silent, 1100ms, 1)
      .then([&](int) { done.set_value(false); },
            [&](caf::error& err) {
              waited = clock_type::now() - start;
              done.set_value(err == caf::sec::request_timeout);
            });
  });
  EXPECT_TRUE(done.get_future().get());
  EXPECT_GE(waited, 1100ms);
  anon_send_exit(silent, caf::exit_reason::user_shutdown);
}

TEST(lazy_clock, a_replaced_receive_timeout_never_fires) {
  lazy_system ls;
  caf::actor_system sys{ls.cfg};
  std::atomic<int> first{0}, second{0};
  std::promise<void> done;
  sys.spawn([&](caf::event_based_actor* self) -> caf::behavior {
    self->delayed_send(self, 20ms, caf::atom("switch"));
    return {
      [&, self](caf::atom_value) {
        // Replaces the 300 ms receive timeout below with a 600 ms one.
        self->become(caf::after(600ms) >> [&, self] {
          ++second;
          done.set_value();
          self->quit();
        });
      },
      caf::after(300ms) >> [&] { ++first; },
    };
  });
  done.get_future().get();
  EXPECT_EQ(first.load(), 0);
  EXPECT_EQ(second.load(), 1);
}

TEST(lazy_clock, thousands_of_timers_all_arrive_none_early) {
  lazy_system ls;
  caf::actor_system sys{ls.cfg};
  constexpr int n = 20000;
  std::atomic<int> early{0}, arrived{0};
  std::promise<void> done;
  auto start = clock_type::now();
  for (int a = 0; a < 4; ++a)
    sys.spawn([&, a](caf::event_based_actor* self) -> caf::behavior {
      std::minstd_rand rng(a);
      for (int i = 0; i < n / 4; ++i) {
        auto ms = static_cast<int>(rng() % 400);
        self->delayed_send(self, std::chrono::milliseconds(ms), ms);
      }
      auto mine = std::make_shared<int>(0);
      return {
        [&, self, mine](int ms) {
          if (clock_type::now() - start < std::chrono::milliseconds(ms))
            ++early;
          if (++*mine == n / 4)
            self->quit();
          if (++arrived == n)
            done.set_value();
        },
      };
    });
  ASSERT_EQ(done.get_future().wait_for(30s), std::future_status::ready)
    << arrived.load() << " of " << n << " arrived";
  EXPECT_EQ(early.load(), 0);
}

} // namespace
