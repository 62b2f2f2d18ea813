// The queue broker driven deterministically by the CAF test DSL on the
// embedded store (whose clock the test controls).

#define CAF_SUITE queue_broker
#define FAIL(msg) CAF_FAIL(msg) // Debian's dsl.hpp calls an undefined FAIL
#include <caf/test/dsl.hpp>

#include <caf/all.hpp>

#include <map>
#include <vector>

#include "actors/queue_broker.hpp"
#include "actors/waiter_roster.hpp"
#include "tests/support/caf_config.hpp"
#include "tests/support/store_harness.hpp"

using namespace mm;

namespace {

using mm_config = test::caf_config;

struct fixture : test_coordinator_fixture<mm_config> {
  std::shared_ptr<std::atomic<int64_t>> clock_ms
    = std::make_shared<std::atomic<int64_t>>(1'700'000'000'000);
  std::shared_ptr<queue_store_factory> store;
  std::unique_ptr<test::store_client> raw;
  queue_broker_actor broker;
  std::shared_ptr<engine_metrics> metrics = std::make_shared<engine_metrics>();

  fixture() {
    embedded_options opts;
    auto c = clock_ms;
    opts.clock = [c] { return c->load(); };
    store = make_embedded_store(opts);
    raw = std::make_unique<test::store_client>(store->connect());
    broker_config cfg;
    cfg.scan = 2;
    cfg.sweep_interval_ms = 0; // run() would fire a periodic timer forever
    cfg.metrics = metrics;
    broker = spawn_queue_broker(sys, store, cfg);
    run();
  }

  ~fixture() {
    anon_send_exit(broker, caf::exit_reason::user_shutdown);
    run();
  }

  template <class T, class... Ts>
  T ask(Ts&&... xs) {
    auto rh = self->request(broker, caf::infinite, std::forward<Ts>(xs)...);
    run();
    T out;
    rh.receive([&](T& x) { out = std::move(x); },
               [&](caf::error& e) {
                 CAF_FAIL("unexpected error: " << sys.render(e));
               });
    return out;
  }

  template <class T, class... Ts>
  caf::error ask_error(Ts&&... xs) {
    auto rh = self->request(broker, caf::infinite, std::forward<Ts>(xs)...);
    run();
    caf::error out;
    rh.receive([&](T&) { CAF_FAIL("expected an error"); },
               [&](caf::error& e) { out = std::move(e); });
    return out;
  }
};

bool is(const caf::error& e, errc code) {
  return e.category() == caf::atom("mm")
         && e.code() == static_cast<uint8_t>(code);
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(broker_tests, fixture)

CAF_TEST(claim or enqueue pairs two users through the broker) {
  auto a = ask<claim_result>(claim_atom_v, test::spec("q", "alice", "ta"));
  CAF_CHECK(a.outcome == claim_outcome::queued);
  CAF_CHECK_EQUAL(a.scans, 1u);
  // The request really goes broker -> store -> back to us, in one step.
  self->send(broker, claim_atom_v, test::spec("q", "bob", "tb"));
  expect((claim_atom, ticket_spec), from(self).to(broker));
  auto b = ask<claim_result>(claim_atom_v, test::spec("q", "bob", "tb"));
  CAF_CHECK(b.outcome == claim_outcome::matched);
  CAF_CHECK_EQUAL(b.partner.user, "alice");
}

CAF_TEST(stale only windows are rescanned before reporting queued) {
  // Two ghosts ahead of one live waiter; the scan window is 2.
  CAF_REQUIRE(raw->enqueue(test::spec("q", "ghost1", "tg1", 1000)));
  CAF_REQUIRE(raw->enqueue(test::spec("q", "ghost2", "tg2", 1000)));
  CAF_REQUIRE(raw->enqueue(test::spec("q", "live", "tl", 60000)));
  CAF_REQUIRE(raw->enqueue(test::spec("p", "ghost1", "pg1", 1000)));
  CAF_REQUIRE(raw->enqueue(test::spec("p", "ghost2", "pg2", 1000)));
  CAF_REQUIRE(raw->enqueue(test::spec("p", "live", "pl", 60000)));
  *clock_ms += 5000;
  // The raw script alone sees a stale-only window and says so ...
  auto first = raw->claim(test::spec("p", "carol", "pc"), 2);
  CAF_REQUIRE(first);
  CAF_CHECK(first->outcome == claim_outcome::queued);
  CAF_CHECK(first->more);
  CAF_CHECK_EQUAL(first->stale_removed, 2u);
  // ... while the broker scans on and finds the live waiter.
  auto r = ask<claim_result>(claim_atom_v, test::spec("q", "carol", "tc"));
  CAF_CHECK(r.outcome == claim_outcome::matched);
  CAF_CHECK_EQUAL(r.partner.user, "live");
  CAF_CHECK_EQUAL(r.stale_removed, 2u);
  CAF_CHECK_EQUAL(r.scans, 2u);
  // Counted per script call: two claim scripts, two ghosts (the raw claim
  // above did not go through the broker).
  CAF_CHECK_EQUAL(metrics->claims.load(), 2u);
  CAF_CHECK_EQUAL(metrics->stale_removed.load(), 2u);
}

CAF_TEST(rescans are bounded) {
  for (int i = 0; i < 40; ++i)
    CAF_REQUIRE(raw->enqueue(test::spec("q", "g" + std::to_string(i),
                                        "tg" + std::to_string(i), 1000)));
  *clock_ms += 5000;
  // 40 ghosts, window 2, at most 1 + 8 calls: 18 removed, still queued.
  auto r = ask<claim_result>(claim_atom_v, test::spec("q", "carol", "tc"));
  CAF_CHECK(r.outcome == claim_outcome::queued);
  CAF_CHECK_EQUAL(r.scans, 9u);
  CAF_CHECK_EQUAL(r.stale_removed, 18u);
  CAF_CHECK(r.more);
  CAF_CHECK_EQUAL(metrics->claims.load(), 9u);
  CAF_CHECK_EQUAL(metrics->stale_removed.load(), 18u);
}

CAF_TEST(waiters due together re - scan in one call and each hears its own) {
  // Three waiters of one queue filed without a claim (as waiters put back
  // beside each other, problem 4 of docs/design.md), beaten by the broker
  // at one moment.
  for (auto u : {"a", "b", "c"})
    CAF_REQUIRE(raw->enqueue(test::spec("q", u, std::string{"t"} + u, 60000)));
  auto heard = std::make_shared<std::map<std::string, claim_result>>();
  auto now_ms = waiter_roster::ms_of(sched.clock().now());
  std::vector<caf::actor> waiters;
  for (auto u : {"a", "b", "c"})
    waiters.push_back(sys.spawn([=, b{broker}](caf::event_based_actor* w) {
      w->send(b, watch_atom_v, uint64_t{1},
              test::spec("q", u, std::string{"t"} + u, 60000), now_ms + 1000,
              uint32_t{1000}, uint32_t{0});
      return caf::behavior{
        [=](rescan_atom, uint64_t, int64_t, claim_result& r) {
          (*heard)[u] = std::move(r);
        },
      };
    }));
  sched.run(); // messages only: the fixture's run() would beat forever
  auto before = metrics->claims.load();
  CAF_REQUIRE(sched.trigger_timeout()); // the one beat of all three
  sched.run();
  // a claimed b; b heard it is held by a; c waits on, told nothing.
  CAF_CHECK_EQUAL(metrics->claims.load() - before, 3u);
  CAF_REQUIRE_EQUAL(heard->size(), 2u);
  CAF_CHECK((*heard)["a"].outcome == claim_outcome::matched);
  CAF_CHECK_EQUAL((*heard)["a"].partner.user, "b");
  CAF_CHECK((*heard)["b"].outcome == claim_outcome::claimed_by_other);
  CAF_CHECK_EQUAL((*heard)["b"].partner.user, "a");
  CAF_CHECK_EQUAL(raw->waiting("q"), std::vector<std::string>{"tc"});
  // A stale-only window at c's next look is followed up (problem 3): two
  // ghosts ahead of a live waiter, a window of 2.
  CAF_REQUIRE(raw->enqueue(test::spec("q", "g1", "tg1", 1000)));
  CAF_REQUIRE(raw->enqueue(test::spec("q", "g2", "tg2", 1000)));
  CAF_REQUIRE(raw->enqueue(test::spec("q", "live", "tl", 60000)));
  *clock_ms += 5000;
  CAF_REQUIRE(sched.trigger_timeout()); // the next beat, c's look
  sched.run();
  CAF_CHECK((*heard)["c"].outcome == claim_outcome::matched);
  CAF_CHECK_EQUAL((*heard)["c"].partner.user, "live");
  CAF_CHECK_EQUAL((*heard)["c"].stale_removed, 2u);
  for (auto& w : waiters)
    caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
  sched.run();
}

CAF_TEST(bad input gets a named error and changes nothing) {
  auto e = ask_error<claim_result>(claim_atom_v, test::spec("q", "", "t1"));
  CAF_CHECK(is(e, errc::invalid_argument));
  auto big = test::spec("q", "bob", "t1");
  big.attrs.assign(5000, 'x');
  CAF_CHECK(
    is(ask_error<enqueue_result>(enqueue_atom_v, big), errc::invalid_argument));
  CAF_CHECK(is(ask_error<heartbeat_result>(
                 heartbeat_atom_v, ticket_ref{"q", "bob", "1"}, uint32_t{0}),
               errc::invalid_argument));
  CAF_CHECK(raw->waiting("q").empty());
  CAF_CHECK_EQUAL(raw->records("q"), 0);
  ask<enqueue_result>(enqueue_atom_v, test::spec("q", "bob", "t1"));
  CAF_CHECK(
    is(ask_error<enqueue_result>(enqueue_atom_v, test::spec("q", "bob", "t2")),
       errc::duplicate_ticket));
  CAF_CHECK(
    is(ask_error<cancel_result>(cancel_atom_v, ticket_ref{"q", "nobody", "1"}),
       errc::not_found));
}

CAF_TEST(cancel heartbeat requeue and release go through the broker) {
  auto a = ask<enqueue_result>(enqueue_atom_v, test::spec("q", "alice", "ta"));
  auto hb = ask<heartbeat_result>(
    heartbeat_atom_v, ticket_ref{"q", "alice", a.token}, uint32_t{60000});
  CAF_CHECK(hb.alive);
  auto k = ask<claim_result>(claim_atom_v, test::spec("q", "bob", "tb"));
  CAF_REQUIRE(k.outcome == claim_outcome::matched);
  auto x = ask<cancel_result>(cancel_atom_v, ticket_ref{"q", "alice", a.token});
  CAF_CHECK(x.outcome == cancel_outcome::in_flight);
  auto rq = ask<requeue_result>(requeue_atom_v, std::string{"q"},
                                std::string{"ta"});
  CAF_CHECK(rq.outcome == requeue_outcome::requeued);
  CAF_CHECK_EQUAL(rq.score, a.score);
  CAF_CHECK_EQUAL(metrics->requeues.load(), 1u);
  // Again: it is waiting already, nothing was put back.
  auto rq2 = ask<requeue_result>(requeue_atom_v, std::string{"q"},
                                 std::string{"ta"});
  CAF_CHECK(rq2.outcome == requeue_outcome::waiting);
  CAF_CHECK_EQUAL(metrics->requeues.load(), 1u);
  auto rel = ask<release_result>(release_atom_v, std::string{"q"},
                                 std::string{"tb"});
  CAF_CHECK(rel.outcome == release_outcome::released);
  auto x2 = ask<cancel_result>(cancel_atom_v,
                               ticket_ref{"q", "alice", a.token});
  CAF_CHECK(x2.outcome == cancel_outcome::cancelled);
  CAF_CHECK_EQUAL(raw->records("q"), 0);
}

CAF_TEST(batched claims answer in order) {
  std::vector<ticket_spec> specs;
  for (int i = 0; i < 6; ++i)
    specs.push_back(
      test::spec("q", "u" + std::to_string(i), "t" + std::to_string(i)));
  auto rs = ask<std::vector<claim_result>>(claim_atom_v, specs);
  CAF_REQUIRE_EQUAL(rs.size(), 6u);
  for (size_t i = 0; i < rs.size(); i += 2) {
    CAF_CHECK(rs[i].outcome == claim_outcome::queued);
    CAF_CHECK(rs[i + 1].outcome == claim_outcome::matched);
    CAF_CHECK_EQUAL(rs[i + 1].partner.user, specs[i].user);
  }
}

CAF_TEST(the periodic sweep removes ghosts) {
  broker_config cfg;
  cfg.sweep_interval_ms = 1000;
  auto m = std::make_shared<engine_metrics>();
  cfg.metrics = m;
  auto sweeper = spawn_queue_broker(sys, store, cfg);
  sched.run();
  // The sweeper learns of queue "q" from a request (it sweeps queues it saw).
  self->send(sweeper, enqueue_atom_v, test::spec("q", "ghost", "tg", 500));
  self->send(sweeper, enqueue_atom_v, test::spec("q", "live", "tl", 60000));
  sched.run();
  *clock_ms += 2000;
  CAF_CHECK_EQUAL(raw->records("q"), 2);
  // Only messages run here: run() would also fire the re-armed tick forever.
  CAF_REQUIRE(sched.trigger_timeout());
  sched.run();
  CAF_CHECK_EQUAL(raw->records("q"), 1);
  CAF_CHECK_EQUAL(raw->user_ticket("q", "ghost"), "");
  CAF_CHECK_EQUAL(raw->user_ticket("q", "live"), "tl");
  // It counted the ghost and learnt the queue's depth.
  CAF_CHECK_EQUAL(m->stale_removed.load(), 1u);
  CAF_CHECK_EQUAL(m->queue_depths(),
                  (std::map<std::string, uint64_t>{{"q", 1}}));
  // The tick re-armed itself.
  CAF_CHECK(sched.has_pending_timeout());
  anon_send_exit(sweeper, caf::exit_reason::user_shutdown);
  sched.run();
  sched.trigger_timeouts(); // a dead actor's tick goes nowhere
  sched.run();
}

CAF_TEST(a join outside the allow list is refused and changes nothing) {
  broker_config cfg;
  cfg.sweep_interval_ms = 0;
  cfg.queues = {"voice", "games"};
  cfg.metrics = std::make_shared<engine_metrics>();
  auto b = spawn_queue_broker(sys, store, cfg);
  run();
  auto c = self->request(b, caf::infinite, claim_atom_v,
                         test::spec("chess", "alice", "t1"));
  auto e = self->request(b, caf::infinite, enqueue_atom_v,
                         test::spec("chess", "alice", "t1"));
  run();
  c.receive([](claim_result&) { CAF_FAIL("accepted"); },
            [](caf::error& x) { CAF_CHECK(is(x, errc::unknown_queue)); });
  e.receive([](enqueue_result&) { CAF_FAIL("accepted"); },
            [](caf::error& x) { CAF_CHECK(is(x, errc::unknown_queue)); });
  CAF_CHECK_EQUAL(raw->records("chess"), 0);
  CAF_CHECK_EQUAL(cfg.metrics->queues_known.load(), 0u);
  auto rh = self->request(b, caf::infinite, claim_atom_v,
                          test::spec("voice", "alice", "t1"));
  run();
  rh.receive(
    [](claim_result& r) { CAF_CHECK(r.outcome == claim_outcome::queued); },
    [&](caf::error& e) { CAF_FAIL(sys.render(e)); });
  CAF_CHECK_EQUAL(cfg.metrics->queues_known.load(), 1u);
  anon_send_exit(b, caf::exit_reason::user_shutdown);
  run();
}

CAF_TEST(joins beyond max_queues are refused and change nothing) {
  broker_config cfg;
  cfg.sweep_interval_ms = 0;
  cfg.max_queues = 2;
  auto m = std::make_shared<engine_metrics>();
  cfg.metrics = m;
  auto b = spawn_queue_broker(sys, store, cfg);
  run();
  auto join = [&](const std::string& q, const std::string& user) {
    auto rh = self->request(b, caf::infinite, claim_atom_v,
                            test::spec(q, user, "t-" + user));
    run();
    caf::error err;
    rh.receive([](claim_result&) {}, [&](caf::error& e) { err = e; });
    return err;
  };
  CAF_CHECK(!join("q1", "alice"));
  CAF_CHECK(!join("q2", "bob"));
  CAF_CHECK(is(join("q3", "carol"), errc::too_many_queues));
  // Malformed names never count, and never take a place.
  CAF_CHECK(is(join("a b", "dave"), errc::invalid_argument));
  auto rh = self->request(b, caf::infinite, enqueue_atom_v,
                          test::spec("q4", "erin", "t-erin"));
  run();
  rh.receive([](enqueue_result&) { CAF_FAIL("accepted"); },
             [](caf::error& e) { CAF_CHECK(is(e, errc::too_many_queues)); });
  CAF_CHECK_EQUAL(raw->records("q3"), 0);
  CAF_CHECK_EQUAL(raw->records("q4"), 0);
  CAF_CHECK_EQUAL(raw->user_ticket("q3", "carol"), "");
  CAF_CHECK_EQUAL(m->queues_known.load(), 2u);
  // Known queues still take joins; a re-scan is never refused.
  CAF_CHECK(!join("q1", "frank"));
  auto rs = self->request(b, caf::infinite, rescan_atom_v,
                          test::spec("q5", "gina", "t-gina"));
  run();
  rs.receive([](claim_result&) {},
             [&](caf::error& e) {
               CAF_FAIL("re-scan refused: " << sys.render(e));
             });
  CAF_CHECK_EQUAL(m->queues_known.load(), 2u);
  anon_send_exit(b, caf::exit_reason::user_shutdown);
  run();
}

CAF_TEST(an idle empty queue is forgotten with its metric label) {
  broker_config cfg;
  cfg.sweep_interval_ms = 1000;
  cfg.queue_idle_ms = 5000;
  cfg.max_queues = 2;
  auto m = std::make_shared<engine_metrics>();
  cfg.metrics = m;
  auto b = spawn_queue_broker(sys, store, cfg);
  sched.run();
  // "empty" gets a ghost that the first sweep removes; "busy" a waiter
  // that stays for the whole test.
  self->send(b, enqueue_atom_v, test::spec("empty", "ghost", "tg", 500));
  self->send(b, enqueue_atom_v, test::spec("busy", "live", "tl", 600000));
  sched.run();
  CAF_CHECK_EQUAL(m->queues_known.load(), 2u);
  *clock_ms += 1000;
  // Only messages run here: run() would also fire the re-armed tick forever.
  auto tick = [&] {
    CAF_REQUIRE(sched.trigger_timeout());
    sched.run();
  };
  tick(); // t = 1 s: the ghost is swept, "empty" holds nothing now
  CAF_CHECK_EQUAL(raw->records("empty"), 0);
  CAF_CHECK_EQUAL(m->queue_depths(),
                  (std::map<std::string, uint64_t>{{"busy", 1}, {"empty", 0}}));
  // The bound holds while both are known.
  auto rh = self->request(b, caf::infinite, claim_atom_v,
                          test::spec("new", "nina", "tn"));
  sched.run();
  rh.receive([](claim_result&) { CAF_FAIL("accepted"); },
             [](caf::error& e) { CAF_CHECK(is(e, errc::too_many_queues)); });
  for (int i = 0; i < 3; ++i)
    tick(); // t = 4 s: "empty" has been idle for 4 s, still known
  CAF_CHECK_EQUAL(m->queue_depths().count("empty"), 1u);
  tick(); // t = 5 s: idle for 5 s, forgotten
  CAF_CHECK_EQUAL(m->queue_depths(),
                  (std::map<std::string, uint64_t>{{"busy", 1}}));
  CAF_CHECK_EQUAL(m->queues_known.load(), 1u);
  for (int i = 0; i < 10; ++i)
    tick(); // a queue with a ticket is never forgotten
  CAF_CHECK_EQUAL(m->queue_depths(),
                  (std::map<std::string, uint64_t>{{"busy", 1}}));
  // The freed place takes a new queue.
  auto again = self->request(b, caf::infinite, claim_atom_v,
                             test::spec("new", "nina", "tn"));
  sched.run();
  again.receive(
    [](claim_result& r) { CAF_CHECK(r.outcome == claim_outcome::queued); },
    [&](caf::error& e) { CAF_FAIL(sys.render(e)); });
  CAF_CHECK_EQUAL(m->queues_known.load(), 2u);
  anon_send_exit(b, caf::exit_reason::user_shutdown);
  sched.run();
  sched.trigger_timeouts();
  sched.run();
}

/// A party's ticket on a queue with a shape (docs/groups.md).
group_ticket_spec party(const std::string& queue, const std::string& ticket,
                        std::vector<std::string> users,
                        uint32_t ttl_ms = 30000) {
  group_ticket_spec s;
  s.queue = queue;
  s.ticket = ticket;
  s.node = "n1";
  s.ttl_ms = ttl_ms;
  s.shape = "4,4,2,2,2,0,0"; // 2 teams of 2, parties up to 2
  for (auto& u : users) {
    party_member m;
    m.user = u;
    s.members.push_back(std::move(m));
  }
  return s;
}

CAF_TEST(group claims leaves and settles go through the broker) {
  auto a = ask<group_claim_result>(claim_atom_v,
                                   party("g", "ta", {"a1", "a2"}));
  CAF_CHECK(a.outcome == group_claim_outcome::queued);
  auto dup = ask_error<group_claim_result>(claim_atom_v,
                                           party("g", "tx", {"x", "a2"}));
  CAF_CHECK(is(dup, errc::duplicate_ticket));
  auto b = ask<group_claim_result>(claim_atom_v, party("g", "tb", {"b1"}));
  CAF_CHECK(b.outcome == group_claim_outcome::queued);
  auto c = ask<group_claim_result>(claim_atom_v, party("g", "tc", {"c1"}));
  CAF_REQUIRE(c.outcome == group_claim_outcome::matched);
  CAF_CHECK(c.in_group);
  CAF_REQUIRE_EQUAL(c.tickets.size(), 3u);
  // Two teams of two: the pair alone, the singles together.
  CAF_CHECK_NOT_EQUAL(c.tickets[0].team, c.tickets[1].team);
  CAF_CHECK_EQUAL(c.tickets[1].team, c.tickets[2].team);
  // A member's leave while the group is held: in flight.
  auto leave = ask<group_cancel_result>(cancel_atom_v,
                                        group_leave{"g", "a2", a.token});
  CAF_CHECK(leave.in_flight);
  CAF_CHECK_EQUAL(leave.group, c.group);
  // The claimer undoes it for the leaving party; the singles go back.
  auto undo = ask<group_settle_result>(requeue_atom_v, group_ref{"g", c.group},
                                       std::vector<std::string>{"ta"});
  CAF_CHECK_EQUAL(undo.back, 2u);
  CAF_CHECK_EQUAL(undo.removed, 1u);
  auto gone = ask<group_settle_result>(release_atom_v, group_ref{"g", c.group});
  CAF_CHECK(gone.gone);
  // Bad input is named and changes nothing.
  auto bad = ask_error<group_claim_result>(claim_atom_v,
                                           party("g", "t?", {"y"}));
  CAF_CHECK(is(bad, errc::invalid_argument));
}

CAF_TEST_FIXTURE_SCOPE_END()
