// Idle users cost nothing (I9 of docs/design.md), on the embedded stores under the CAF test
// coordinator: after users join, match and end their sessions, and then stay
// quiet past the idle grace, the engine holds no session actor, the
// directory no entry and no kept event for them; a later join works and is
// matched. A session held by a connection stays with no request or timer
// and goes once let go. A swipe to a user who never connected creates
// nothing for it.

#define CAF_SUITE idle
#define FAIL(msg) CAF_FAIL(msg) // Debian's dsl.hpp calls an undefined FAIL
#include <caf/test/dsl.hpp>

#include <caf/all.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "actors/engine.hpp"
#include "actors/simulation.hpp"

using namespace mm;

namespace {

constexpr uint32_t idle_ms = 5000;
constexpr uint32_t parked_ms = 1000;

engine_config idle_engine_config() {
  auto cfg = sim::default_engine_config();
  cfg.lifecycle.sweep_ms = 0; // no expiry sweeps: the test ends sessions
  cfg.session.idle_release_ms = idle_ms;
  cfg.directory.parked_ttl_ms = parked_ms;
  return cfg;
}

struct fixture : sim::engine_fixture<> {
  fixture() : sim::engine_fixture<>(idle_engine_config()) {
    // nop
  }

  session_state state_of(const std::string& user) {
    auto st = ask<session_state>(session(user), state_atom_v);
    if (!st)
      CAF_FAIL("state of " << user << ": " << sys.render(st.error()));
    return *st;
  }

  /// Users u0..u(n-1) join in pairs (u0 with u1, ...) and are matched.
  void match_all(const std::vector<std::string>& users, const std::string& q,
                 const std::string& ticket) {
    for (auto& u : users) {
      auto st = ask<session_state>(session(u), join_atom_v,
                                   join_request{q, ticket + u, ""});
      CAF_REQUIRE(st);
    }
    advance(300);
    for (auto& u : users)
      CAF_REQUIRE_EQUAL(state_of(u).phase, session_phase::matched);
  }

  const engine_metrics& m() {
    return *eng->metrics();
  }
};

std::vector<std::string> users(size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back("u" + std::to_string(i));
  return out;
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(idle_tests, fixture)

CAF_TEST(idle users are released and match again afterwards) {
  auto all = users(40);
  match_all(all, "voice", "t1-");
  CAF_CHECK_EQUAL(eng->session_count(), all.size());
  CAF_CHECK_EQUAL(m().sessions_live.load(), 40);
  CAF_CHECK_EQUAL(m().directory_users.load(), 40);
  // One member of each pair ends the pair's session; both are told.
  for (size_t i = 0; i < all.size(); i += 2) {
    auto sid = state_of(all[i]).session_id;
    CAF_REQUIRE(
      ask<end_result>(session(all[i]), end_atom_v, sid, std::string{"bye"}));
  }
  advance(300);
  for (auto& u : all)
    CAF_CHECK_EQUAL(state_of(u).phase, session_phase::idle);
  // Quiet past the idle grace: nothing is left of them.
  advance(idle_ms + 500);
  CAF_CHECK_EQUAL(eng->session_count(), 0u);
  CAF_CHECK_EQUAL(m().sessions_live.load(), 0);
  CAF_CHECK_EQUAL(m().directory_users.load(), 0);
  CAF_CHECK_EQUAL(m().parked_events.load(), 0);
  CAF_CHECK_EQUAL(m().sessions_released.load(), 40u);
  // A later join of the same users works: fresh sessions ask the database,
  // and every user is matched again.
  match_all(all, "voice", "t2-");
  CAF_CHECK_EQUAL(eng->session_count(), all.size());
}

CAF_TEST(a session is kept while it is live or asked) {
  // A waiting user is never released, however long it waits.
  auto st = ask<session_state>(session("wait"), join_atom_v,
                               join_request{"solo", "tw", ""});
  CAF_REQUIRE(st);
  CAF_CHECK_EQUAL(st->phase, session_phase::queued);
  // A user that asks for its state more often than the grace stays too.
  CAF_REQUIRE(ask<session_state>(session("poll"), state_atom_v));
  for (int i = 0; i < 5; ++i) {
    advance(idle_ms / 2);
    CAF_REQUIRE(ask<session_state>(session("poll"), state_atom_v));
  }
  CAF_CHECK_EQUAL(eng->session_count(), 2u);
  CAF_CHECK_EQUAL(state_of("wait").phase, session_phase::queued);
  // The poller stops asking: released. The waiter cancels: released too.
  advance(idle_ms + 200);
  CAF_CHECK_EQUAL(eng->session_count(), 1u);
  auto c = ask<session_state>(session("wait"), cancel_atom_v);
  CAF_REQUIRE(c);
  CAF_CHECK_EQUAL(c->phase, session_phase::cancelled);
  advance(idle_ms + 200);
  CAF_CHECK_EQUAL(eng->session_count(), 0u);
  CAF_CHECK_EQUAL(m().directory_users.load(), 0);
}

CAF_TEST(a session held by a connection stays with no request or timer) {
  // The holder (matchd's client link while a WebSocket is open) says so
  // once; the session then stays however long nobody asks it anything.
  auto holder = sys.spawn([] { return caf::behavior{[](int) {}}; });
  auto held = session("held");
  caf::send_as(holder, held, pin_atom_v, true);
  sched.run();
  advance(idle_ms * 6);
  CAF_CHECK_EQUAL(eng->session_count(), 1u);
  CAF_CHECK(eng->session("held", recorder) == held);
  // Let go: released once quiet for the grace.
  caf::send_as(holder, held, pin_atom_v, false);
  sched.run();
  advance(idle_ms / 2);
  CAF_CHECK_EQUAL(eng->session_count(), 1u);
  advance(idle_ms / 2 + 200);
  CAF_CHECK_EQUAL(eng->session_count(), 0u);
  // A holder that dies lets go too.
  auto mortal = sys.spawn([] { return caf::behavior{[](int) {}}; });
  auto other = session("other");
  caf::send_as(mortal, other, pin_atom_v, true);
  sched.run();
  advance(idle_ms * 2);
  CAF_CHECK_EQUAL(eng->session_count(), 1u);
  caf::anon_send_exit(mortal, caf::exit_reason::kill);
  sched.run();
  advance(idle_ms + 200);
  CAF_CHECK_EQUAL(eng->session_count(), 0u);
  CAF_CHECK_EQUAL(m().directory_users.load(), 0);
  caf::anon_send_exit(holder, caf::exit_reason::kill);
}

CAF_TEST(a holder of a released session gets a fresh one) {
  auto old = session("ann");
  CAF_REQUIRE(ask<session_state>(old, state_atom_v));
  advance(idle_ms + 200);
  CAF_REQUIRE_EQUAL(eng->session_count(), 0u);
  // The old handle is dead: a request bounces at once (never hangs).
  auto gone = ask<session_state>(old, state_atom_v);
  CAF_REQUIRE(!gone);
  CAF_CHECK(gone.error() == caf::sec::request_receiver_down);
  auto fresh = eng->renew_session("ann", old, recorder);
  CAF_CHECK(fresh != old);
  CAF_CHECK(eng->session("ann") == fresh);
  CAF_CHECK(eng->renew_session("ann", old) == fresh); // idempotent
  auto st = ask<session_state>(fresh, join_atom_v,
                               join_request{"voice", "ta", ""});
  CAF_REQUIRE(st);
  CAF_CHECK_EQUAL(st->phase, session_phase::queued);
}

CAF_TEST(a swipe to a user who never connected creates nothing for it) {
  auto swipe = [&](std::string from, std::string to) {
    // A shared slot: the asker may outlive this call (see ask()).
    auto r = std::make_shared<caf::expected<swipe_result>>(
      caf::sec::request_timeout);
    sys.spawn([&, r](caf::event_based_actor* self) {
      self
        ->request(eng->swipes(), std::chrono::seconds(10), swipe_atom_v,
                  swipe_request{from, to, true})
        .then([r](swipe_result& x) { *r = x; },
              [r](caf::error& err) { *r = err; });
    });
    advance(100); // the finalizer's group commit
    if (!*r)
      CAF_FAIL("swipe " << from << " -> " << to << ": "
                        << sys.render(r->error()));
    return **r;
  };
  CAF_CHECK(!swipe("amy", "zed").mutual);
  CAF_CHECK_EQUAL(eng->session_count(), 0u);
  CAF_CHECK_EQUAL(m().directory_users.load(), 0);
  // The mutual like's event waits for both (neither has a session), at
  // most parked_ttl_ms.
  CAF_CHECK(swipe("zed", "amy").mutual);
  advance(200);
  CAF_CHECK_EQUAL(eng->session_count(), 0u);
  CAF_CHECK_EQUAL(m().parked_events.load(), 2);
  // Amy connects in time and gets it; zed's expires.
  auto amy = session("amy");
  sched.run();
  CAF_CHECK_EQUAL(m().parked_events.load(), 1);
  advance(parked_ms);
  CAF_CHECK_EQUAL(m().parked_events.load(), 0);
  CAF_CHECK_EQUAL(seen->matches.size(), 1u);
  CAF_CHECK_EQUAL(state_of("zed").phase, session_phase::idle);
}

CAF_TEST_FIXTURE_SCOPE_END()
