// The session lifecycle on the embedded stores, step by step under the CAF
// test coordinator: a match ends (by a member, or by age), both users hear of
// it and are free at once, and match again; a user in an active session is
// refused a join (`in_session`), never queued; only members may end a
// session, and ending is idempotent.

#define CAF_SUITE lifecycle
#define FAIL(msg) CAF_FAIL(msg) // Debian's dsl.hpp calls an undefined FAIL
#include <caf/test/dsl.hpp>

#include <caf/all.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "actors/engine.hpp"
#include "actors/simulation.hpp"

using namespace mm;

namespace {

engine_config lifecycle_engine_config(uint32_t max_session_s = 3600,
                                      uint32_t retention_s = 7 * 86400,
                                      uint32_t batch = 1000) {
  auto cfg = sim::default_engine_config();
  cfg.lifecycle.max_session_s = max_session_s;
  cfg.lifecycle.retention_s = retention_s;
  cfg.lifecycle.batch = batch;
  cfg.lifecycle.sweep_ms = 0; // the test sends the sweep's tick itself
  return cfg;
}

struct fixture : sim::engine_fixture<> {
  explicit fixture(uint32_t max_session_s = 3600,
                   uint32_t retention_s = 7 * 86400, uint32_t batch = 1000)
    : sim::engine_fixture<>(
      lifecycle_engine_config(max_session_s, retention_s, batch)) {
    // nop
  }

  /// Sends `xs` to `dst` and runs everything it causes; the answer.
  /// The asker outlives this call when no answer came (its 10 s timeout
  /// fires later, at the latest in ~engine_fixture): it writes to a shared
  /// slot, never to this frame (else a stack-use-after-return). Its init
  /// runs inside sched.run(), so `dst` and `xs` by reference are fine.
  template <class T, class Handle, class... Ts>
  caf::expected<T> ask(const Handle& dst, Ts&&... xs) {
    auto out = std::make_shared<caf::expected<T>>(caf::sec::request_timeout);
    sys.spawn([&, out](caf::event_based_actor* self) {
      self->request(dst, std::chrono::seconds(10), std::forward<Ts>(xs)...)
        .then([out](T& x) { *out = std::move(x); },
              [out](caf::error& err) { *out = std::move(err); });
    });
    sched.run();
    advance(100); // timers: group commit, relay polling
    return *out;
  }

  session_state join(const std::string& user, const std::string& queue,
                     const std::string& ticket) {
    auto st = ask<session_state>(session(user), join_atom_v,
                                 join_request{queue, ticket, ""});
    if (!st)
      CAF_FAIL("join of " << user << " failed: " << sys.render(st.error()));
    return *st;
  }

  session_state state_of(const std::string& user) {
    auto st = ask<session_state>(session(user), state_atom_v);
    if (!st)
      CAF_FAIL("state of " << user << ": " << sys.render(st.error()));
    return *st;
  }

  /// Joins both users into `queue` (ticket ids `ticket` + user: ticket ids
  /// are not yet scoped by user in the queue store) and returns the session
  /// they share.
  std::string match(const std::string& a, const std::string& b,
                    const std::string& queue, const std::string& ticket) {
    join(a, queue, ticket + a);
    join(b, queue, ticket + b);
    advance(200);
    auto sa = state_of(a);
    auto sb = state_of(b);
    CAF_REQUIRE_EQUAL(sa.phase, session_phase::matched);
    CAF_REQUIRE_EQUAL(sb.phase, session_phase::matched);
    CAF_REQUIRE_EQUAL(sa.session_id, sb.session_id);
    return sa.session_id;
  }

  std::unique_ptr<match_store> db() {
    return eng->match_store()->connect();
  }

  uint8_t code_of(const caf::error& err) {
    CAF_REQUIRE_EQUAL(err.category(), caf::atom("mm"));
    return err.code();
  }
};

uint8_t code(errc x) {
  return static_cast<uint8_t>(x);
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(lifecycle_tests, fixture)

CAF_TEST(an ended session frees both users who then match again) {
  auto s1 = match("alice", "bob", "voice", "t-1");
  auto ended = ask<end_result>(session("alice"), end_atom_v, s1,
                               std::string{"bye"});
  CAF_REQUIRE(ended);
  CAF_CHECK(ended->ended_now);
  CAF_CHECK_EQUAL(ended->ended_by, "alice");
  CAF_CHECK_EQUAL(ended->reason, "bye");
  advance(200); // the relay delivers session.ended to bob
  CAF_CHECK_EQUAL(state_of("alice").phase, session_phase::idle);
  CAF_CHECK_EQUAL(state_of("bob").phase, session_phase::idle);
  auto store = db();
  CAF_CHECK(!store->active_session_of("alice")->has_value());
  CAF_CHECK(!store->active_session_of("bob")->has_value());
  // Both rejoin at once (each with its ticket id of before: a new join)
  // and match again, with each other as the only ones waiting.
  auto s2 = match("alice", "bob", "games", "t-1");
  CAF_CHECK_NOT_EQUAL(s1, s2);
  // And with new partners: carol and dave wait, the pair ends, each of them
  // is matched with one of the newcomers.
  CAF_REQUIRE(
    ask<end_result>(session("bob"), end_atom_v, s2, std::string{"next"}));
  advance(200);
  join("carol", "voice", "c-1");
  join("alice", "voice", "t-2");
  join("dave", "voice", "d-1");
  join("bob", "voice", "t-2");
  advance(300);
  for (auto u : {"alice", "bob", "carol", "dave"})
    CAF_CHECK_EQUAL(state_of(u).phase, session_phase::matched);
  CAF_CHECK_EQUAL(state_of("alice").session_id, state_of("carol").session_id);
  CAF_CHECK_EQUAL(state_of("bob").session_id, state_of("dave").session_id);
}

CAF_TEST(a join while in a session is refused and changes nothing) {
  auto s1 = match("alice", "bob", "voice", "t-1");
  auto again = ask<session_state>(session("alice"), join_atom_v,
                                  join_request{"games", "t-9", ""});
  CAF_REQUIRE(!again);
  CAF_CHECK_EQUAL(code_of(again.error()), code(errc::in_session));
  CAF_CHECK_EQUAL(again.error().context().get_as<std::string>(0), s1);
  // The retry of the join that matched answers its final state.
  auto retry = ask<session_state>(session("alice"), join_atom_v,
                                  join_request{"voice", "t-1alice", ""});
  CAF_REQUIRE(retry);
  CAF_CHECK_EQUAL(retry->phase, session_phase::matched);
  // Nothing was queued: a newcomer in "games" just waits.
  auto carol = join("carol", "games", "c-1");
  CAF_CHECK_EQUAL(carol.phase, session_phase::queued);
  CAF_CHECK_EQUAL(state_of("alice").session_id, s1);
}

CAF_TEST(a fresh session actor asks the database before it queues) {
  auto s1 = match("alice", "bob", "voice", "t-1");
  // Alice's session actor goes away (e.g. released while idle); her next
  // actor knows nothing, the database does.
  eng->release("alice");
  sched.run();
  auto again = ask<session_state>(session("alice"), join_atom_v,
                                  join_request{"voice", "t-2", ""});
  CAF_REQUIRE(!again);
  CAF_CHECK_EQUAL(code_of(again.error()), code(errc::in_session));
  CAF_CHECK_EQUAL(again.error().context().get_as<std::string>(0), s1);
}

CAF_TEST(only members end a session and ending is idempotent) {
  auto s1 = match("alice", "bob", "voice", "t-1");
  auto by_carol = ask<end_result>(session("carol"), end_atom_v, s1,
                                  std::string{"mine now"});
  CAF_REQUIRE(!by_carol);
  CAF_CHECK_EQUAL(code_of(by_carol.error()), code(errc::forbidden));
  auto unknown = ask<end_result>(session("alice"), end_atom_v,
                                 std::string{"no-such-session"},
                                 std::string{"bye"});
  CAF_REQUIRE(!unknown);
  CAF_CHECK_EQUAL(code_of(unknown.error()), code(errc::not_found));
  CAF_CHECK_EQUAL(state_of("alice").phase, session_phase::matched);
  auto first = ask<end_result>(session("alice"), end_atom_v, s1,
                               std::string{"bye"});
  auto second = ask<end_result>(session("bob"), end_atom_v, s1,
                                std::string{"other reason"});
  CAF_REQUIRE(first && second);
  CAF_CHECK(first->ended_now);
  CAF_CHECK(!second->ended_now);
  CAF_CHECK_EQUAL(second->ended_by, "alice");
  CAF_CHECK_EQUAL(second->reason, "bye");
  // Exactly one session.ended event for the session.
  advance(200);
  auto store = db();
  size_t ended_events = 0;
  // Named: a range-for over *fetch_undelivered(...) would keep only the
  // reference into the outcome, which is gone before the first iteration.
  auto pending = store->fetch_undelivered(100, 1);
  CAF_REQUIRE(pending);
  for (auto& ev : *pending)
    ended_events += ev.type == "session.ended" ? 1 : 0;
  CAF_CHECK_EQUAL(ended_events, 0u); // all delivered by the relay
  CAF_CHECK_EQUAL(eng->metrics()->sessions_ended.load(), 1u);
}

CAF_TEST(a join that gives up leaves the queue and is never claimed) {
  auto st = ask<session_state>(session("alice"), join_atom_v,
                               join_request{"voice", "ta", "", 2});
  CAF_REQUIRE(st);
  CAF_CHECK_EQUAL(st->phase, session_phase::queued);
  advance(1500); // heartbeats keep the ticket alive meanwhile
  CAF_CHECK_EQUAL(state_of("alice").phase, session_phase::queued);
  advance(700);
  auto gave_up = state_of("alice");
  CAF_CHECK_EQUAL(gave_up.phase, session_phase::timed_out);
  CAF_CHECK_EQUAL(gave_up.detail, "gave up after 2 s");
  CAF_CHECK_EQUAL(eng->metrics()->cancels.load(), 0u); // not a cancel
  // Bob finds nobody: alice's ticket is gone from the queue.
  CAF_CHECK_EQUAL(join("bob", "voice", "tb").phase, session_phase::queued);
  advance(3000);
  CAF_CHECK_EQUAL(state_of("alice").phase, session_phase::timed_out);
  CAF_CHECK_EQUAL(state_of("bob").phase, session_phase::queued);
  // A join that is matched before its deadline stays matched.
  auto carol = ask<session_state>(session("carol"), join_atom_v,
                                  join_request{"voice", "tc", "", 2});
  CAF_REQUIRE(carol);
  advance(3000);
  CAF_CHECK_EQUAL(state_of("carol").phase, session_phase::matched);
  CAF_CHECK_EQUAL(state_of("bob").phase, session_phase::matched);
}

CAF_TEST_FIXTURE_SCOPE_END()

namespace {

struct short_sessions : fixture {
  short_sessions() : fixture(1) {
    // nop
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(expiry_tests, short_sessions)

CAF_TEST(a session past max_session_s ends by itself and frees both) {
  auto s1 = match("alice", "bob", "voice", "t-1");
  // The database's clock decides the age (the in-memory store's is the wall
  // clock): wait past one second, then let the sweep run.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  caf::anon_send(eng->lifecycle(), tick_atom_v);
  sched.run();
  advance(200);
  CAF_CHECK_EQUAL(state_of("alice").phase, session_phase::idle);
  CAF_CHECK_EQUAL(state_of("bob").phase, session_phase::idle);
  auto rec = db()->find_session(s1);
  CAF_REQUIRE(rec && rec->has_value());
  CAF_CHECK_EQUAL((*rec)->close_reason, "expired");
  CAF_CHECK_EQUAL(eng->metrics()->sessions_ended.load(), 1u);
  match("alice", "bob", "voice", "t-2");
}

CAF_TEST_FIXTURE_SCOPE_END()

namespace {

/// Sessions end after 1 s, closed rows and delivered events are kept 1 s,
/// and one prune statement takes at most 2 rows of a kind.
struct small_prunes : fixture {
  small_prunes() : fixture(1, 1, 2) {
    // nop
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(prune_tests, small_prunes)

// Found in the 1,000,000-lifecycle soak: one sweep a second pruned at most
// one batch (1,000 rows) while ~1,200 events a second were written, so the
// outbox grew with the users served (and expiry had the same bound). A sweep
// now expires and prunes until a batch comes back short (bounded per tick).
CAF_TEST(one sweep expires and prunes more than one batch) {
  match("alice", "bob", "voice", "t-1");
  match("carol", "dave", "voice", "t-1");
  match("erin", "frank", "voice", "t-1");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  auto ended_before = eng->metrics()->sessions_ended.load();
  caf::anon_send(eng->lifecycle(), tick_atom_v); // the three sessions expire
  sched.run();
  advance(500); // their session.ended events are delivered
  // All three in one sweep, though one statement ends at most 2.
  CAF_CHECK_EQUAL(eng->metrics()->sessions_ended.load() - ended_before, 3u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  auto before = eng->metrics()->rows_pruned.load();
  caf::anon_send(eng->lifecycle(), tick_atom_v);
  sched.run();
  advance(200);
  auto first = eng->metrics()->rows_pruned.load() - before;
  caf::anon_send(eng->lifecycle(), tick_atom_v);
  sched.run();
  advance(200);
  auto second = eng->metrics()->rows_pruned.load() - before - first;
  auto left = db()->prune(1000, 1000);
  CAF_REQUIRE(left);
  CAF_MESSAGE("first sweep " << first << ", second " << second << ", left "
                             << left->outbox << " events, " << left->sessions
                             << " sessions");
  // More than one statement's batch (2 + 2) in the first sweep, nothing
  // left over for the second.
  CAF_CHECK_GREATER(first, 4u);
  CAF_CHECK_EQUAL(second, 0u);
  CAF_CHECK_EQUAL(left->outbox + left->sessions, 0u);
}

CAF_TEST_FIXTURE_SCOPE_END()
