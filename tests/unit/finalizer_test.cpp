// Sessions + finalizer + broker on the embedded queue store and the
// in-memory persistence, driven deterministically by the CAF test DSL:
// cancels at every checkpoint, in both orders, the self-heal of a waiter
// whose ticket vanished, join idempotency, and the engine metrics they count.

#define CAF_SUITE finalizer
#define FAIL(msg) CAF_FAIL(msg) // Debian's dsl.hpp calls an undefined FAIL
#include <caf/test/dsl.hpp>

#include <caf/all.hpp>

#include "actors/directory.hpp"
#include "actors/finalizer.hpp"
#include "actors/outbox_relay.hpp"
#include "actors/queue_broker.hpp"
#include "actors/session.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "tests/support/caf_config.hpp"
#include "tests/support/store_harness.hpp"

using namespace mm;

namespace {

using mm_config = test::caf_config;

struct fixture : test_coordinator_fixture<mm_config> {
  std::shared_ptr<std::atomic<int64_t>> clock_ms
    = std::make_shared<std::atomic<int64_t>>(1'700'000'000'000);
  std::shared_ptr<queue_store_factory> qstore;
  std::shared_ptr<match_store_factory> mstore;
  std::unique_ptr<test::store_client> raw;
  std::unique_ptr<match_store> db;
  std::shared_ptr<cancel_registry> cancels
    = std::make_shared<cancel_registry>();
  queue_broker_actor broker;
  finalizer_actor fin;
  directory_actor dir;
  outbox_relay_actor relay;
  std::function<void(checkpoint, const claim_pair&)> hook;
  session_config scfg;
  std::shared_ptr<engine_metrics> metrics = std::make_shared<engine_metrics>();

  fixture() {
    embedded_options opts;
    auto c = clock_ms;
    opts.clock = [c] { return c->load(); };
    qstore = make_embedded_store(opts);
    mstore = make_memory_match_store();
    raw = std::make_unique<test::store_client>(qstore->connect());
    db = mstore->connect();
    CAF_REQUIRE(db->apply_migrations());
    broker_config bcfg;
    bcfg.sweep_interval_ms = 0;
    bcfg.queues = {"q"};
    bcfg.metrics = metrics;
    broker = spawn_queue_broker(sys, qstore, bcfg);
    finalizer_config fcfg;
    fcfg.batch_delay_ms = 0;
    fcfg.cancels = cancels;
    fcfg.metrics = metrics;
    fcfg.at_checkpoint = [this](checkpoint cp, const claim_pair& p) {
      if (hook)
        hook(cp, p);
    };
    fin = spawn_finalizer(sys, mstore, broker, fcfg);
    dir = spawn_directory(sys);
    relay_config rcfg;
    rcfg.poll_ms = 0; // no timer: the test flushes
    rcfg.metrics = metrics;
    relay = spawn_outbox_relay(sys, mstore, qstore, dir, rcfg);
    scfg.ttl_ms = 30000;
    scfg.heartbeat_ms = 10000;
    scfg.grace_ms = 5000;
    // The tests fire timers one by one (or all): no idle release in between
    // (tests/unit/idle_test.cpp has it).
    scfg.idle_release_ms = 0;
    scfg.metrics = metrics;
    run();
  }

  ~fixture() {
    for (auto h : {caf::actor_cast<caf::actor>(broker),
                   caf::actor_cast<caf::actor>(fin),
                   caf::actor_cast<caf::actor>(dir),
                   caf::actor_cast<caf::actor>(relay)})
      anon_send_exit(h, caf::exit_reason::user_shutdown);
    for (auto& s : sessions)
      anon_send_exit(s, caf::exit_reason::user_shutdown);
    sched.run();
  }

  std::vector<session_actor> sessions;

  session_actor session(const std::string& user) {
    auto s = spawn_session(sys, user, session_links{broker, fin, dir, {}},
                           scfg);
    sessions.push_back(s);
    sched.run();
    return s;
  }

  session_state state_of(const session_actor& s) {
    auto rh = self->request(s, caf::infinite, state_atom_v);
    sched.run();
    session_state out;
    rh.receive([&](session_state& x) { out = std::move(x); },
               [&](caf::error& e) { CAF_FAIL(sys.render(e)); });
    return out;
  }

  session_state join(const session_actor& s, const std::string& ticket) {
    auto rh = self->request(s, caf::infinite, join_atom_v,
                            join_request{"q", ticket, ""});
    sched.run();
    session_state out;
    rh.receive([&](session_state& x) { out = std::move(x); },
               [&](caf::error& e) { CAF_FAIL(sys.render(e)); });
    return out;
  }

  session_state cancel(const session_actor& s) {
    auto rh = self->request(s, caf::infinite, cancel_atom_v);
    sched.run();
    session_state out;
    rh.receive([&](session_state& x) { out = std::move(x); },
               [&](caf::error& e) { CAF_FAIL(sys.render(e)); });
    return out;
  }

  /// Observations in the finalize latency histogram.
  uint64_t finalizations() {
    uint64_t n = 0;
    for (size_t i = 0; i <= latency_histogram::bounds_ms.size(); ++i)
      n += metrics->finalize_latency.bucket(i);
    return n;
  }

  uint32_t flush_relay() {
    auto rh = self->request(relay, caf::infinite, flush_atom_v);
    sched.run();
    uint32_t n = 0;
    rh.receive([&](uint32_t x) { n = x; },
               [&](caf::error& e) { CAF_FAIL(sys.render(e)); });
    return n;
  }

  /// A cancels or B cancels at checkpoint `at`; checks what problem 5 of docs/design.md says.
  void cancel_at(checkpoint at, bool claimer_cancels) {
    auto a = session("alice"); // the claimer
    auto b = session("bob");   // the claimed waiter
    auto jb = join(b, "tb");
    CAF_REQUIRE(jb.phase == session_phase::queued);
    auto bob_score = raw->command({"ZSCORE", codec::queue_keys("q")[0], "tb"});
    // Carol waits behind bob (enqueued directly: a join would claim bob).
    CAF_REQUIRE(raw->enqueue(test::spec("q", "carol", "tc")));
    std::optional<decltype(self->request(a, caf::infinite, cancel_atom_v))>
      cancel_rh;
    int fired = 0;
    hook = [&](checkpoint cp, const claim_pair& p) {
      if (cp != at || fired > 0)
        return; // only the first pair; alice's later retry goes through
      ++fired;
      CAF_CHECK_EQUAL(p.claimed.ticket, "tb");
      // The user's cancel reaches the finalizer at exactly this instant ...
      cancels->add(p.queue, claimer_cancels ? "ta" : "tb");
      // ... and the user's session asks to be acknowledged.
      cancel_rh.emplace(
        self->request(claimer_cancels ? a : b, caf::infinite, cancel_atom_v));
    };
    // Alice claims bob (the oldest waiter); the hook cancels at `at`.
    auto rh = self->request(a, caf::infinite, join_atom_v,
                            join_request{"q", "ta", ""});
    sched.run();
    rh.receive([](session_state&) {},
               [&](caf::error& e) { CAF_FAIL(sys.render(e)); });
    CAF_REQUIRE_EQUAL(fired, 1);
    CAF_REQUIRE(cancel_rh.has_value());
    sched.run();
    // The canceller is acknowledged.
    session_state ack;
    cancel_rh->receive([&](session_state& x) { ack = x; },
                       [&](caf::error& e) { CAF_FAIL(sys.render(e)); });
    CAF_CHECK(ack.phase == session_phase::cancelled);
    CAF_CHECK_EQUAL(metrics->cancels.load(), 1u);
    // No session of alice with bob exists; no event for it is written.
    CAF_CHECK(!db->active_session_of("bob")->has_value());
    auto waiting = raw->waiting("q");
    if (claimer_cancels) {
      CAF_CHECK(!db->active_session_of("alice")->has_value());
      CAF_CHECK_EQUAL(flush_relay(), 0u);
      CAF_CHECK(db->fetch_undelivered(100, 1)->empty());
      // Bob goes on waiting at his original place, ahead of carol.
      CAF_CHECK_EQUAL(state_of(b).phase, session_phase::queued);
      CAF_REQUIRE_EQUAL(waiting.size(), 2u);
      CAF_CHECK_EQUAL(waiting[0], "tb");
      CAF_CHECK_EQUAL(waiting[1], "tc");
      CAF_CHECK_EQUAL(
        raw->command({"ZSCORE", codec::queue_keys("q")[0], "tb"}).str,
        bob_score.str);
      CAF_CHECK_EQUAL(state_of(a).phase, session_phase::cancelled);
      CAF_CHECK_EQUAL(metrics->requeues.load(), 1u); // bob, back in place
      CAF_CHECK_EQUAL(metrics->matches.load(), 0u);
    } else {
      // Alice goes back to claim-or-enqueue as if she had just arrived: she
      // claims carol, the next live waiter, and that match commits.
      CAF_CHECK_EQUAL(state_of(b).phase, session_phase::cancelled);
      CAF_CHECK_EQUAL(state_of(a).phase, session_phase::matched);
      CAF_CHECK(waiting.empty());
      auto s = db->active_session_of("alice");
      CAF_REQUIRE(s && s->has_value());
      CAF_CHECK_EQUAL((*s)->user_b, "carol");
      CAF_CHECK_EQUAL(flush_relay(), 1u); // alice+carol's, and only that
      CAF_CHECK(db->fetch_undelivered(100, 1)->empty());
      CAF_CHECK_EQUAL(state_of(b).phase, session_phase::cancelled);
      CAF_CHECK_EQUAL(metrics->requeues.load(), 0u); // bob's ticket dropped
      CAF_CHECK_EQUAL(metrics->matches.load(), 1u);
      CAF_CHECK_EQUAL(metrics->events_delivered.load(), 1u);
    }
    CAF_CHECK_EQUAL(metrics->cancels.load(), 1u); // one acknowledged cancel
    CAF_CHECK_EQUAL(metrics->joins.load(), 2u);    // carol never joined
    CAF_CHECK_EQUAL(metrics->conflicts.load(), 0u);
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(finalizer_tests, fixture)

CAF_TEST(a committed match reaches both sessions) {
  auto a = session("alice");
  auto b = session("bob");
  CAF_CHECK(join(b, "tb").phase == session_phase::queued);
  CAF_CHECK(join(a, "ta").phase == session_phase::finalizing);
  auto ja = state_of(a);
  CAF_CHECK(ja.phase == session_phase::matched);
  CAF_CHECK(!ja.session_id.empty());
  CAF_CHECK_EQUAL(flush_relay(), 1u);
  auto sb = state_of(b);
  CAF_CHECK(sb.phase == session_phase::matched);
  CAF_CHECK_EQUAL(sb.session_id, ja.session_id);
  CAF_CHECK(raw->waiting("q").empty());
  CAF_CHECK_EQUAL(raw->records("q"), 0); // both claim records released
  // A cancel after the match is answered "matched", never "cancelled" (I3).
  auto rh = self->request(b, caf::infinite, cancel_atom_v);
  sched.run();
  rh.receive(
    [&](session_state& x) { CAF_CHECK(x.phase == session_phase::matched); },
    [&](caf::error& e) { CAF_FAIL(sys.render(e)); });
}

CAF_TEST(claimer cancels before create) {
  cancel_at(checkpoint::before_create, true);
}

CAF_TEST(claimer cancels after create) {
  cancel_at(checkpoint::after_create, true);
}

CAF_TEST(claimer cancels before answer) {
  cancel_at(checkpoint::before_answer, true);
}

CAF_TEST(waiter cancels before create) {
  cancel_at(checkpoint::before_create, false);
}

CAF_TEST(waiter cancels after create) {
  cancel_at(checkpoint::after_create, false);
}

CAF_TEST(waiter cancels before answer) {
  cancel_at(checkpoint::before_answer, false);
}

CAF_TEST(a waiter whose ticket vanished re-enqueues after the grace time) {
  auto b = session("bob");
  CAF_REQUIRE(join(b, "tb").phase == session_phase::queued);
  // A claimer on a node that then dies: it claims bob and never finalizes.
  auto k = raw->claim(test::spec("q", "ghost", "tg"), 10, false, 1000);
  CAF_REQUIRE(k && k->outcome == claim_outcome::matched);
  *clock_ms += 2000; // past the claim hold
  CAF_REQUIRE(sched.trigger_timeout()); // heartbeat: "gone"
  sched.run();
  CAF_CHECK(state_of(b).phase == session_phase::queued);
  CAF_CHECK(raw->waiting("q").empty());
  CAF_REQUIRE(sched.trigger_timeout()); // grace time over, no match came
  sched.run();
  auto sb = state_of(b);
  CAF_CHECK(sb.phase == session_phase::queued);
  CAF_CHECK_EQUAL(sb.ticket, "tb.h1");
  CAF_CHECK_EQUAL(raw->waiting("q"), std::vector<std::string>{"tb.h1"});
}

CAF_TEST(a match inside the grace time stops the re enqueue) {
  auto b = session("bob");
  CAF_REQUIRE(join(b, "tb").phase == session_phase::queued);
  auto k = raw->claim(test::spec("q", "slow", "ts"), 10, false, 1000);
  CAF_REQUIRE(k && k->outcome == claim_outcome::matched);
  *clock_ms += 2000;
  CAF_REQUIRE(sched.trigger_timeout()); // heartbeat: "gone"
  sched.run();
  // The slow claimer's match arrives inside the grace time.
  self->send(b, deliver_atom_v,
             match_event{"match.created:s1", "s1", "q", "slow", "ts", "bob",
                         "tb", "{}"});
  sched.run();
  CAF_CHECK(state_of(b).phase == session_phase::matched);
  while (sched.trigger_timeout()) // the grace timer fires into nothing
    sched.run();
  CAF_CHECK(state_of(b).phase == session_phase::matched);
  CAF_CHECK(raw->waiting("q").empty());
}

CAF_TEST(a database refusal requeues the innocent side) {
  // Bob is already in an active session (committed elsewhere, e.g. by a
  // node that died before it could release his ticket).
  auto prior = db->commit_matches(
    {match_request{"q", "bob", "old-b", "", "zed", "old-z", ""}});
  CAF_REQUIRE(prior.at(0));
  auto a = session("alice");
  auto c = session("carol");
  CAF_REQUIRE(raw->enqueue(test::spec("q", "bob", "tb")));
  CAF_REQUIRE(join(c, "tc").phase == session_phase::finalizing);
  // Carol claimed bob; the database refused (bob is active): carol is
  // innocent and goes back to claim-or-enqueue, bob's ticket is dropped.
  auto sc = state_of(c);
  CAF_CHECK(sc.phase == session_phase::queued);
  CAF_CHECK_EQUAL(raw->waiting("q"), std::vector<std::string>{"tc"});
  CAF_CHECK_EQUAL(raw->user_ticket("q", "bob"), "");
  // The next arrival pairs with carol.
  CAF_CHECK(join(a, "ta").phase == session_phase::finalizing);
  CAF_CHECK(state_of(a).phase == session_phase::matched);
  auto s = db->active_session_of("carol");
  CAF_REQUIRE(s && s->has_value());
  CAF_CHECK_EQUAL((*s)->user_a, "alice");
  // The refusal is one conflict; carol is re-claimed, not requeued.
  CAF_CHECK_EQUAL(metrics->conflicts.load(), 1u);
  CAF_CHECK_EQUAL(metrics->requeues.load(), 0u);
  CAF_CHECK_EQUAL(metrics->matches.load(), 1u);
  CAF_CHECK_EQUAL(metrics->joins.load(), 2u);
}

CAF_TEST(bad input gets a named error and changes nothing) {
  auto a = session("alice");
  auto refused = [&](join_request r, errc code) {
    auto rh = self->request(a, caf::infinite, join_atom_v, std::move(r));
    sched.run();
    rh.receive([&](session_state&) { CAF_FAIL("join accepted"); },
               [&](caf::error& e) {
                 CAF_CHECK_EQUAL(e.category(), caf::atom("mm"));
                 CAF_CHECK_EQUAL(e.code(), static_cast<uint8_t>(code));
               });
    CAF_CHECK(state_of(a).phase == session_phase::idle);
  };
  refused(join_request{"nope", "t1", ""}, errc::not_found); // unknown queue
  refused(join_request{"q", "", ""}, errc::invalid_argument);
  refused(join_request{"q", "t1", std::string(5000, 'x')},
          errc::invalid_argument); // oversized payload
  // Cancel of a user that has no join.
  auto rh = self->request(a, caf::infinite, cancel_atom_v);
  sched.run();
  rh.receive([&](session_state&) { CAF_FAIL("cancel accepted"); },
             [&](caf::error& e) {
               CAF_CHECK_EQUAL(e.code(), static_cast<uint8_t>(errc::not_found));
             });
  CAF_CHECK(raw->waiting("q").empty());
  CAF_CHECK_EQUAL(raw->records("q"), 0);
  CAF_CHECK_EQUAL(raw->records("nope"), 0);
  // The session still works afterwards.
  CAF_CHECK(join(a, "t1").phase == session_phase::queued);
}

// -- join idempotency after the join ended ----------------------------------------

CAF_TEST(a retried join after a match or a cancel answers the final state) {
  auto a = session("alice");
  auto b = session("bob");
  CAF_REQUIRE(join(b, "tb").phase == session_phase::queued);
  CAF_REQUIRE(join(a, "ta").phase == session_phase::finalizing);
  CAF_REQUIRE_EQUAL(flush_relay(), 1u);
  auto sa = state_of(a);
  CAF_REQUIRE(sa.phase == session_phase::matched);
  CAF_REQUIRE(state_of(b).phase == session_phase::matched);
  // The client lost the answer and retries: the final state, nothing new.
  auto again = join(a, "ta");
  CAF_CHECK(again.phase == session_phase::matched);
  CAF_CHECK_EQUAL(again.session_id, sa.session_id);
  CAF_CHECK_EQUAL(again.ticket, "ta");
  auto again_b = join(b, "tb"); // the side that learnt it from the event
  CAF_CHECK(again_b.phase == session_phase::matched);
  CAF_CHECK_EQUAL(again_b.session_id, sa.session_id);
  CAF_CHECK(raw->waiting("q").empty());
  CAF_CHECK_EQUAL(raw->records("q"), 0);
  CAF_CHECK_EQUAL(metrics->joins.load(), 2u);
  CAF_CHECK_EQUAL(metrics->claims.load(), 2u);
  // The same after a cancel.
  auto c = session("carol");
  CAF_REQUIRE(join(c, "tc").phase == session_phase::queued);
  CAF_REQUIRE(cancel(c).phase == session_phase::cancelled);
  auto jc = join(c, "tc");
  CAF_CHECK(jc.phase == session_phase::cancelled);
  CAF_CHECK_EQUAL(jc.ticket, "tc");
  CAF_CHECK(raw->waiting("q").empty());
  CAF_CHECK_EQUAL(raw->records("q"), 0);
  CAF_CHECK_EQUAL(metrics->joins.load(), 3u);
  CAF_CHECK_EQUAL(metrics->claims.load(), 3u);
  // Another ticket is a new join.
  auto jc2 = join(c, "tc2");
  CAF_CHECK(jc2.phase == session_phase::queued);
  CAF_CHECK_EQUAL(jc2.ticket, "tc2");
  CAF_CHECK_EQUAL(raw->waiting("q"), std::vector<std::string>{"tc2"});
  CAF_CHECK_EQUAL(metrics->joins.load(), 4u);
  // While it lasts, it is the one answered; the ended one is refused.
  CAF_CHECK(join(c, "tc2").phase == session_phase::queued);
  auto rh = self->request(c, caf::infinite, join_atom_v,
                          join_request{"q", "tc", ""});
  sched.run();
  rh.receive([&](session_state&) { CAF_FAIL("join of the ended ticket"); },
             [&](caf::error& e) {
               CAF_CHECK_EQUAL(e.code(),
                               static_cast<uint8_t>(errc::duplicate_ticket));
             });
  CAF_CHECK_EQUAL(metrics->joins.load(), 4u);
}

CAF_TEST(a join after a failure starts over also with the same ticket) {
  // Alice is still in an earlier session: the database refuses her match.
  auto prior = db->commit_matches(
    {match_request{"q", "alice", "old-a", "", "zed", "old-z", ""}});
  CAF_REQUIRE(prior.at(0));
  auto a = session("alice");
  auto b = session("bob");
  CAF_REQUIRE(join(b, "tb").phase == session_phase::queued);
  CAF_REQUIRE(join(a, "ta").phase == session_phase::finalizing);
  auto failed = state_of(a);
  CAF_REQUIRE(failed.phase == session_phase::failed);
  CAF_CHECK_EQUAL(raw->waiting("q"), std::vector<std::string>{"tb"});
  CAF_CHECK_EQUAL(metrics->conflicts.load(), 1u);
  CAF_CHECK_EQUAL(metrics->requeues.load(), 1u); // bob, the innocent side
  // Her earlier session ends; the same join again really runs again.
  CAF_REQUIRE(db->close_session(prior.at(0)->session_id, "test"));
  auto retry = join(a, "ta");
  CAF_CHECK(retry.phase == session_phase::finalizing);
  CAF_CHECK(state_of(a).phase == session_phase::matched);
  CAF_CHECK_EQUAL(flush_relay(), 2u); // the earlier session's event too
  CAF_CHECK(state_of(b).phase == session_phase::matched);
  CAF_CHECK_EQUAL(metrics->joins.load(), 3u);
  CAF_CHECK_EQUAL(metrics->matches.load(), 1u);
  CAF_CHECK_EQUAL(metrics->conflicts.load(), 1u);
}

// -- metrics -----------------------------------------------------------------------

CAF_TEST(metrics count joins matches and cancels) {
  auto a = session("alice");
  auto b = session("bob");
  auto c = session("carol");
  CAF_CHECK(join(b, "tb").phase == session_phase::queued);
  CAF_CHECK_EQUAL(metrics->joins.load(), 1u);
  CAF_CHECK_EQUAL(metrics->claims.load(), 1u);
  CAF_CHECK_EQUAL(metrics->matches.load(), 0u);
  CAF_CHECK_EQUAL(finalizations(), 0u);
  CAF_CHECK(join(a, "ta").phase == session_phase::finalizing);
  CAF_CHECK(state_of(a).phase == session_phase::matched);
  CAF_CHECK_EQUAL(metrics->joins.load(), 2u);
  CAF_CHECK_EQUAL(metrics->claims.load(), 2u);
  CAF_CHECK_EQUAL(metrics->matches.load(), 1u);
  CAF_CHECK_EQUAL(finalizations(), 1u); // alice's claim_pair, answered
  CAF_CHECK_EQUAL(metrics->events_delivered.load(), 0u);
  CAF_CHECK_EQUAL(flush_relay(), 1u);
  CAF_CHECK_EQUAL(metrics->events_delivered.load(), 1u);
  CAF_CHECK_EQUAL(metrics->relay_retries.load(), 0u);
  CAF_CHECK_EQUAL(metrics->outbox_lag_ms.load(), 0); // nothing pending now
  // A cancel that comes too late is no cancel.
  CAF_CHECK(cancel(b).phase == session_phase::matched);
  CAF_CHECK_EQUAL(metrics->cancels.load(), 0u);
  // Carol joins and cancels; repeating either changes nothing.
  CAF_CHECK(join(c, "tc").phase == session_phase::queued);
  CAF_CHECK(join(c, "tc").phase == session_phase::queued);
  CAF_CHECK_EQUAL(metrics->joins.load(), 3u);
  CAF_CHECK(cancel(c).phase == session_phase::cancelled);
  CAF_CHECK(cancel(c).phase == session_phase::cancelled);
  CAF_CHECK(join(c, "tc").phase == session_phase::cancelled);
  CAF_CHECK_EQUAL(metrics->cancels.load(), 1u);
  CAF_CHECK_EQUAL(metrics->joins.load(), 3u);
  CAF_CHECK_EQUAL(metrics->claims.load(), 3u);
  CAF_CHECK_EQUAL(metrics->matches.load(), 1u);
  CAF_CHECK_EQUAL(metrics->requeues.load(), 0u);
  CAF_CHECK_EQUAL(metrics->conflicts.load(), 0u);
  CAF_CHECK_EQUAL(metrics->stale_removed.load(), 0u);
  CAF_CHECK(metrics->queue_depths().empty()); // no sweep ran
}

CAF_TEST(metrics count stale tickets and a sweep sets the queue depth) {
  CAF_REQUIRE(raw->enqueue(test::spec("q", "ghost1", "tg1", 1000)));
  CAF_REQUIRE(raw->enqueue(test::spec("q", "w1", "tw1", 60000)));
  CAF_REQUIRE(raw->enqueue(test::spec("q", "ghost2", "tg2", 1000)));
  CAF_REQUIRE(raw->enqueue(test::spec("q", "w2", "tw2", 60000)));
  *clock_ms += 2000; // the ghosts lapse
  // A join scans past ghost1 (removed on the way) and claims w1.
  auto a = session("alice");
  CAF_REQUIRE(join(a, "ta").phase == session_phase::finalizing);
  CAF_CHECK_EQUAL(metrics->stale_removed.load(), 1u);
  CAF_CHECK_EQUAL(metrics->claims.load(), 1u);
  auto sweep = [&] {
    auto rh = self->request(broker, caf::infinite, sweep_atom_v,
                            std::string{"q"});
    sched.run();
    sweep_result out;
    rh.receive([&](sweep_result& r) { out = r; },
               [&](caf::error& e) { CAF_FAIL(sys.render(e)); });
    return out;
  };
  // The sweep removes ghost2 and learns what is left waiting: w2.
  auto first = sweep();
  CAF_CHECK_EQUAL(first.removed, 1u);
  CAF_CHECK_EQUAL(first.depth, 1u);
  CAF_CHECK_EQUAL(metrics->stale_removed.load(), 2u);
  auto depths = metrics->queue_depths();
  CAF_REQUIRE_EQUAL(depths.count("q"), 1u);
  CAF_CHECK_EQUAL(depths["q"], 1u);
  // Bob pairs with w2; the next sweep sees an empty queue.
  auto b = session("bob");
  CAF_REQUIRE(join(b, "tb").phase == session_phase::finalizing);
  CAF_CHECK_EQUAL(sweep().depth, 0u);
  CAF_CHECK_EQUAL(metrics->queue_depths()["q"], 0u);
  CAF_CHECK_EQUAL(metrics->stale_removed.load(), 2u);
  CAF_CHECK_EQUAL(metrics->matches.load(), 2u);
}

CAF_TEST_FIXTURE_SCOPE_END()
