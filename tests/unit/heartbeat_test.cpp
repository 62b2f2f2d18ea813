// The broker's heartbeats of waiting tickets (actors/waiter_roster.hpp), on
// the embedded stores under the CAF test coordinator: a waiting ticket
// outlives many presence windows and is matched later; a ticket that stops
// waiting (cancelled, matched) is no longer re-scanned; a session that dies
// while its ticket waits leaves a ticket that lapses and is matched with
// nobody (I2 of docs/design.md). And the roster's own rules: due times on
// the grid or at a widening, which answers reach the session, and a
// waiter that leaves taking its due moment along.

#define CAF_SUITE heartbeat
#define FAIL(msg) CAF_FAIL(msg) // Debian's dsl.hpp calls an undefined FAIL
#include <caf/test/dsl.hpp>

#include <caf/all.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "actors/engine.hpp"
#include "actors/simulation.hpp"
#include "actors/waiter_roster.hpp"

using namespace mm;

namespace {

struct fixture : sim::engine_fixture<> {
  session_state join(const std::string& user, const std::string& ticket) {
    auto st = ask<session_state>(session(user), join_atom_v,
                                 join_request{"hb", ticket, ""});
    if (!st)
      CAF_FAIL("join of " << user << ": " << sys.render(st.error()));
    return *st;
  }

  session_phase phase_of(const std::string& user) {
    auto st = ask<session_state>(session(user), state_atom_v);
    if (!st)
      CAF_FAIL("state of " << user << ": " << sys.render(st.error()));
    return st->phase;
  }

  uint64_t claims() {
    return eng->metrics()->claims.load();
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(heartbeat_tests, fixture)

CAF_TEST(a waiting ticket outlives many presence windows and matches later) {
  CAF_REQUIRE_EQUAL(join("ann", "t-ann").phase, session_phase::queued);
  auto before = claims();
  advance(30000); // ten presence windows of 3 s, a heartbeat each second
  CAF_CHECK_EQUAL(phase_of("ann"), session_phase::queued);
  // One re-scan a heartbeat (give or take the first and the last).
  CAF_CHECK_GREATER_OR_EQUAL(claims() - before, 28u);
  CAF_CHECK_LESS_OR_EQUAL(claims() - before, 31u);
  join("bob", "t-bob");
  advance(300);
  CAF_CHECK_EQUAL(phase_of("ann"), session_phase::matched);
  CAF_CHECK_EQUAL(phase_of("bob"), session_phase::matched);
}

CAF_TEST(a ticket that stops waiting is no longer re - scanned) {
  join("cid", "t-cid");
  advance(2500);
  auto c = ask<session_state>(session("cid"), cancel_atom_v);
  CAF_REQUIRE(c);
  CAF_CHECK_EQUAL(c->phase, session_phase::cancelled);
  auto after_cancel = claims();
  advance(10000);
  CAF_CHECK_EQUAL(claims(), after_cancel);
  // Matched: the claimer's join claimed the waiter; neither beats on.
  join("dan", "t-dan");
  advance(1500);
  join("eve", "t-eve");
  advance(300);
  CAF_REQUIRE_EQUAL(phase_of("dan"), session_phase::matched);
  CAF_REQUIRE_EQUAL(phase_of("eve"), session_phase::matched);
  auto after_match = claims();
  advance(10000);
  CAF_CHECK_EQUAL(claims(), after_match);
}

CAF_TEST(the ticket of a session that died lapses and matches nobody) {
  auto ghost = session("gus");
  join("gus", "t-gus");
  advance(1500);
  caf::anon_send_exit(ghost, caf::exit_reason::kill);
  sched.run();
  auto after_death = claims();
  advance(10000); // past its presence window and a sweep
  // Nothing beats for it; the sweeps' claims are not counted here.
  CAF_CHECK_EQUAL(claims(), after_death);
  CAF_CHECK_EQUAL(join("hal", "t-hal").phase, session_phase::queued);
  advance(3000);
  CAF_CHECK_EQUAL(phase_of("hal"), session_phase::queued);
  CAF_CHECK(seen->matches.empty());
}

CAF_TEST_FIXTURE_SCOPE_END()

namespace {

using clk = waiter_roster::time_point;

clk at(int64_t ms) {
  return clk{std::chrono::milliseconds(ms)};
}

waiter_roster::waiter waiter_of(uint64_t gen, std::string rules = {},
                                std::string queue = "q") {
  waiter_roster::waiter w;
  w.gen = gen;
  ticket_spec spec;
  spec.queue = std::move(queue);
  spec.user = "u";
  spec.rules = std::move(rules);
  w.spec = std::make_shared<const ticket_spec>(std::move(spec));
  w.period_ms = 1000;
  w.align_ms = 100;
  return w;
}

claim_result queued(std::string windows = {}, int64_t next_change = -1) {
  claim_result r;
  r.outcome = claim_outcome::queued;
  r.windows = std::move(windows);
  r.next_change_ms = next_change;
  return r;
}

} // namespace

CAF_TEST(a look is due after a period on the grid or at a widening) {
  CAF_CHECK_EQUAL(next_look_ms(1000, 0, -1, 1234), 1000);
  CAF_CHECK_EQUAL(next_look_ms(1000, 100, -1, 1234), 1066);
  CAF_CHECK_EQUAL(next_look_ms(1000, 100, -1, 1200), 1000);
  CAF_CHECK_EQUAL(next_look_ms(1000, 100, 250, 1234), 250);
  CAF_CHECK_EQUAL(next_look_ms(1000, 100, 5000, 1234), 1066);
}

CAF_TEST(the roster re - scans due waiters once and tells only changes) {
  waiter_roster r;
  CAF_CHECK(r.watch(1, waiter_of(7), at(1000)));
  CAF_CHECK(r.watch(2, waiter_of(3, "rules"), at(1000)));
  CAF_CHECK(r.take_due(at(999)).empty());
  auto due = r.take_due(at(1000));
  CAF_REQUIRE_EQUAL(due.size(), 2u);
  CAF_CHECK(r.take_due(at(5000)).empty()); // in flight: not again
  // Still waiting, nothing new: not told, due again on the grid.
  auto q = queued();
  auto v = r.settle(1, 7, &q, at(1000));
  CAF_CHECK(v.keep && !v.tell && !v.session);
  // New windows are told; the widening sets the next look.
  auto w = queued("1=150", 250);
  v = r.settle(2, 3, &w, at(1000));
  CAF_CHECK(v.keep && v.tell);
  CAF_CHECK(r.next_due() == at(1250));
  // An answer of an older generation changes nothing.
  CAF_CHECK(!r.settle(1, 6, &q, at(1000)).keep);
  CAF_CHECK_EQUAL(r.take_due(at(1250)).size(), 1u);
  CAF_CHECK_EQUAL(r.take_due(at(2000)).size(), 1u);
  // Gone from the queue: told, and dropped.
  claim_result gone;
  gone.outcome = claim_outcome::claimed_by_other;
  v = r.settle(1, 7, &gone, at(2000));
  CAF_CHECK(v.tell && !v.keep);
  CAF_CHECK_EQUAL(r.size(), 1u);
  // Held by a claimer: told, still beaten.
  claim_result held = gone;
  held.partner.user = "claimer";
  v = r.settle(2, 3, &held, at(2000));
  CAF_CHECK(v.tell && v.keep);
  // Store trouble: not told, beats on.
  CAF_CHECK_EQUAL(r.take_due(at(3000)).size(), 1u);
  v = r.settle(2, 3, nullptr, at(3000));
  CAF_CHECK(v.keep && !v.tell);
}

CAF_TEST(waiters settled apart within a grid step share one moment) {
  using std::chrono::microseconds;
  waiter_roster r;
  CAF_CHECK(r.watch(1, waiter_of(1), at(1000)));
  CAF_CHECK(r.watch(2, waiter_of(1), at(1000)));
  CAF_CHECK(r.watch(3, waiter_of(1, "rules"), at(1000)));
  CAF_REQUIRE_EQUAL(r.take_due(at(1000)).size(), 3u);
  // Answers come back at instants between milliseconds: each waiter's next
  // look is the grid point itself, not the grid point plus that fraction
  // (one timer and one batch per grid point, not one per waiter).
  auto q = queued();
  r.settle(1, 1, &q, at(1030) + microseconds(300));
  r.settle(2, 1, &q, at(1061) + microseconds(700));
  CAF_CHECK(r.next_due() == at(2100));
  CAF_CHECK_EQUAL(r.take_due(at(2100)).size(), 2u);
  // A widening is exact: the next whole millisecond, never earlier.
  auto w = queued("1=150", 250);
  r.settle(3, 1, &w, at(1000) + microseconds(400));
  CAF_CHECK(r.next_due() == at(1251));
  CAF_CHECK(waiter_roster::look_at(1000, 100, -1, at(1234) + microseconds(999))
            == at(2300));
  CAF_CHECK(waiter_roster::look_at(1000, 0, -1, at(1234)) == at(2234));
}

CAF_TEST(a watch replaces the one before and an unwatch ends it) {
  waiter_roster r;
  CAF_CHECK(r.watch(1, waiter_of(1), at(1000)));
  CAF_CHECK(!r.watch(1, waiter_of(2), at(3000))); // replaced: one waiter
  CAF_CHECK_EQUAL(r.size(), 1u);
  CAF_CHECK(r.next_due() == at(3000)); // its old moment is gone
  CAF_CHECK(r.take_due(at(2000)).empty());
  auto due = r.take_due(at(3000));
  CAF_REQUIRE_EQUAL(due.size(), 1u);
  CAF_CHECK_EQUAL(due.front().gen, 2u);
  // A waiter that leaves takes its moment along: no timer for it.
  CAF_CHECK(r.watch(2, waiter_of(1), at(4000)));
  CAF_CHECK(r.watch(3, waiter_of(1), at(5000)));
  r.unwatch(2);
  CAF_CHECK(r.next_due() == at(5000));
  r.unwatch(3);
  r.unwatch(1);
  CAF_CHECK_EQUAL(r.size(), 0u);
  auto q = queued();
  CAF_CHECK(!r.settle(1, 2, &q, at(3000)).keep); // gone: nothing re-armed
  CAF_CHECK(!r.next_due());
}

CAF_TEST(the waiters due go in calls of one queue each and bounded size) {
  waiter_roster r;
  for (uint64_t id = 1; id <= 5; ++id)
    r.watch(id, waiter_of(1, {}, id % 2 == 0 ? "b" : "a"), at(1000));
  r.watch(6, waiter_of(1, {}, "b"), at(2000)); // not due yet
  auto groups = r.take_due_by_queue(at(1000), 2);
  // a: 1, 3, 5 in two calls; b: 2, 4 in one.
  CAF_REQUIRE_EQUAL(groups.size(), 3u);
  size_t total = 0;
  for (auto& g : groups) {
    CAF_CHECK(!g.empty() && g.size() <= 2u);
    for (auto& s : g)
      CAF_CHECK_EQUAL(s.spec->queue, g.front().spec->queue);
    total += g.size();
  }
  CAF_CHECK_EQUAL(total, 5u);
  CAF_CHECK(r.take_due_by_queue(at(1500), 2).empty()); // in flight
  CAF_CHECK_EQUAL(r.take_due_by_queue(at(2000), 50).size(), 1u);
}
