#pragma once

// Simulation kit: the whole engine on the embedded stores, inside a CAF
// `test_coordinator_fixture`, with ONE clock that the test moves (the queue
// store's clock and CAF's timers advance together), plus a seeded user
// population (arrivals, cancels, heartbeats lapsing). Include it after
// <caf/test/dsl.hpp> in your own CAF test DSL suites; docs/simulation.md has
// a complete example. Same seed, same configuration -> same matches.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/engine.hpp"

namespace mm::sim {

/// An actor system config with the engine's types registered.
struct sim_config : caf::actor_system_config {
  /// Registers the engine's types (`register_types`).
  sim_config() {
    register_types(*this);
  }
};

/// Engine settings suited to simulations: short timers, no wall clock.
inline engine_config default_engine_config() {
  engine_config cfg;
  cfg.session.ttl_ms = 3000;
  cfg.session.heartbeat_ms = 1000;
  cfg.session.grace_ms = 500;
  cfg.broker.hold_ms = 2000;
  cfg.broker.sweep_interval_ms = 1000;
  cfg.finalizer.batch_delay_ms = 5;
  cfg.relay.poll_ms = 50;
  return cfg;
}

/// What the users' sessions reported.
struct report {
  std::map<std::string, session_state> last;             ///< per user
  std::set<std::pair<std::string, std::string>> matches; ///< (min, max) user
};

/// The engine in a deterministic test fixture.
template <class Base = test_coordinator_fixture<sim_config>>
struct engine_fixture : Base {
  std::shared_ptr<std::atomic<int64_t>> clock_ms
    = std::make_shared<std::atomic<int64_t>>(1'700'000'000'000);
  std::shared_ptr<engine> eng;
  std::shared_ptr<report> seen = std::make_shared<report>();
  subscriber_actor recorder;

  /// Starts an engine with `cfg` on the fixture's clock (`cfg.clock` is
  /// replaced) and a recorder that fills `seen`; fails the test when the
  /// engine does not start.
  explicit engine_fixture(engine_config cfg = default_engine_config()) {
    auto c = clock_ms;
    cfg.clock = [c] { return c->load(); };
    auto started = engine::start(this->sys, cfg);
    if (!started)
      CAF_FAIL("engine: " << started.error().detail);
    eng = *started;
    auto r = seen;
    recorder = this->sys.spawn(
      [r](subscriber_actor::pointer) -> subscriber_actor::behavior_type {
        return {
          [r](session_state& st) { r->last[st.user] = st; },
          [r](match_event& ev) {
            r->matches.emplace(std::min(ev.user_a, ev.user_b),
                               std::max(ev.user_a, ev.user_b));
          },
        };
      });
    this->sched.run();
  }

  /// Stops the engine and the recorder, then fires every timer left.
  ~engine_fixture() {
    eng->stop();
    caf::anon_send_exit(recorder, caf::exit_reason::user_shutdown);
    this->sched.run();
    // Timers of stopped actors fire into nothing.
    while (this->sched.trigger_timeout())
      this->sched.run();
  }

  /// Moves the one clock by `ms`, 10 ms at a time, firing due timers and
  /// running every message they cause. Idempotent for ms == 0.
  void advance(int64_t ms) {
    for (int64_t done = 0; done < ms;) {
      auto step = std::min<int64_t>(10, ms - done);
      *clock_ms += step;
      this->sched.clock().advance_time(std::chrono::milliseconds(step));
      this->sched.run();
      done += step;
    }
  }

  /// Sends `xs` to `dst` and runs every message it causes (no timer: the
  /// clock stands still); the answer. The asker may outlive this call (no
  /// answer yet: its timeout fires later): it writes to a shared slot,
  /// never to this frame.
  template <class T, class Handle, class... Ts>
  caf::expected<T> ask(const Handle& dst, Ts&&... xs) {
    auto out = std::make_shared<caf::expected<T>>(caf::sec::request_timeout);
    this->sys.spawn([&, out](caf::event_based_actor* self) {
      self->request(dst, std::chrono::seconds(10), std::forward<Ts>(xs)...)
        .then([out](T& x) { *out = std::move(x); },
              [out](caf::error& err) { *out = std::move(err); });
    });
    this->sched.run();
    return *out;
  }

  /// The session of `user`, reporting to the fixture's recorder.
  session_actor session(const std::string& user) {
    return eng->session(user, recorder);
  }
};

/// A seeded population of users for `engine_fixture`.
struct population_config {
  uint32_t users = 1000;
  std::string queue = "sim";
  int64_t arrival_window_ms = 100000; ///< arrivals spread uniformly
  double cancel_rate = 0.1;           ///< cancels some time after joining
  int64_t max_cancel_delay_ms = 300;
  double lapse_rate = 0.02; ///< the app dies: heartbeats stop
  uint64_t seed = 1;
};

/// Who did what in a played population.
struct played {
  std::set<std::string> cancelling; ///< asked to cancel (maybe too late)
  std::set<std::string> lapsed;     ///< their app died
};

/// Plays a population against a fixture: joins, cancels and lapses (the
/// session actor is killed, so its ticket goes stale), then lets the clock
/// run `settle_ms` further. Deterministic for a given seed.
template <class Fixture>
played
play(Fixture& fx, const population_config& cfg, int64_t settle_ms = 10000) {
  played out;
  enum kind { join, cancel, lapse };
  std::mt19937_64 rng{cfg.seed};
  std::uniform_real_distribution<double> u01{0.0, 1.0};
  std::multimap<int64_t, std::pair<kind, std::string>> plan;
  for (uint32_t i = 0; i < cfg.users; ++i) {
    auto user = "user" + std::to_string(i);
    auto at = static_cast<int64_t>(u01(rng) * cfg.arrival_window_ms);
    plan.emplace(at, std::make_pair(join, user));
    auto roll = u01(rng);
    auto later = at + 1
                 + static_cast<int64_t>(u01(rng) * cfg.max_cancel_delay_ms);
    if (roll < cfg.cancel_rate) {
      plan.emplace(later, std::make_pair(cancel, user));
      out.cancelling.insert(user);
    } else if (roll < cfg.cancel_rate + cfg.lapse_rate) {
      plan.emplace(later, std::make_pair(lapse, user));
      out.lapsed.insert(user);
    }
  }
  int64_t now = 0;
  for (auto& [at, what] : plan) {
    fx.advance(at - now);
    now = at;
    auto s = fx.session(what.second);
    switch (what.first) {
      case join:
        caf::anon_send(s, join_atom_v,
                       join_request{cfg.queue, what.second + "-t", ""});
        break;
      case cancel:
        caf::anon_send(s, cancel_atom_v);
        break;
      case lapse:
        caf::anon_send_exit(s, caf::exit_reason::kill);
        break;
    }
    fx.sched.run();
  }
  fx.advance(settle_ms);
  return out;
}

} // namespace mm::sim
