// The ready check's holder on the embedded queue store and the in-memory
// persistence, driven deterministically by the CAF test DSL (problem 16 of
// docs/design.md, I13): an answer that completes a proposal while the
// holder is asking the store about it is not left to the next poll.

#define CAF_SUITE ready_check
#define FAIL(msg) CAF_FAIL(msg) // Debian's dsl.hpp calls an undefined FAIL
#include <caf/test/dsl.hpp>

#include <caf/all.hpp>

#include "actors/group_finalizer.hpp"
#include "actors/queue_broker.hpp"
#include "actors/ready_check.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "tests/support/caf_config.hpp"
#include "tests/support/store_harness.hpp"

using namespace mm;

namespace {

using mm_config = test::caf_config;

struct fixture : test_coordinator_fixture<mm_config> {
  std::shared_ptr<queue_store_factory> qstore = make_embedded_store({});
  std::shared_ptr<match_store_factory> mstore = make_memory_match_store();
  std::unique_ptr<match_store> db;
  queue_broker_actor broker;
  group_finalizer_actor gfin;
  ready_check_actor rc;

  fixture() {
    db = mstore->connect();
    CAF_REQUIRE(db->apply_migrations());
    broker_config bcfg;
    bcfg.sweep_interval_ms = 0;
    broker = spawn_queue_broker(sys, qstore, bcfg);
    gfin = spawn_group_finalizer(sys, mstore, broker, {});
    ready_check_config rcfg;
    rcfg.node = "n1";
    rcfg.finalizer = gfin;
    rcfg.broker = broker;
    rc = spawn_ready_check(sys, rcfg);
    run();
  }

  ~fixture() {
    for (auto h :
         {caf::actor_cast<caf::actor>(rc), caf::actor_cast<caf::actor>(gfin),
          caf::actor_cast<caf::actor>(broker)})
      anon_send_exit(h, caf::exit_reason::user_shutdown);
    run_jobs();
  }

  /// Runs every job, never a timer: the holder's poll re-arms itself
  /// while a proposal is open (and is not what this test looks at).
  void run_jobs() {
    while (sched.try_run_once()) {
    }
  }

  template <class T, class Dest, class... Ts>
  T ask(const Dest& dest, Ts&&... xs) {
    auto rh = self->request(dest, caf::infinite, std::forward<Ts>(xs)...);
    run_jobs();
    T out;
    rh.receive([&](T& x) { out = std::move(x); },
               [&](caf::error& err) {
                 CAF_FAIL("request failed: " << sys.render(err));
               });
    return out;
  }

  /// User `u` alone on queue "r" (2 teams of 2, a 60 s ready check).
  group_ticket_spec single(const std::string& u) {
    group_ticket_spec s;
    s.queue = "r";
    s.ticket = "t" + u;
    s.node = "n1";
    s.shape = "4,4,2,2,1,0,0";
    s.accept_ms = 60000;
    s.members.push_back(party_member{u, {}, {}, {}, "{}"});
    return s;
  }

  /// Hands the claimed group `c` of queue "r" to the holder (a 60 s ready
  /// check); the proposal is made once the jobs run.
  void propose(const group_claim_result& c) {
    group_commit g;
    g.queue = "r";
    g.group = c.group;
    g.min_players = 4;
    g.max_players = 4;
    g.team_size = 2;
    g.tickets = c.tickets;
    g.accept_ms = 60000;
    self->request(rc, caf::infinite, finalize_atom_v, g);
  }

  proposal_answer accept(const std::string& group, const std::string& u) {
    return proposal_answer{"r", group, u, "accept"};
  }

  bool in_session(const std::string& u) {
    auto a = db->active_session_of(u);
    CAF_REQUIRE(a);
    return a->has_value();
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(ready_check_tests, fixture)

CAF_TEST(an answer during a look at the store is looked at right after) {
  group_claim_result c;
  for (auto u : {"a", "b", "c", "d"})
    c = ask<group_claim_result>(broker, claim_atom_v, single(u));
  CAF_REQUIRE(c.outcome == group_claim_outcome::matched);
  propose(c);
  run_jobs(); // proposed; the poll's timer is never triggered here
  for (auto u : {"a", "b", "c"})
    ask<proposal_state>(broker, answer_atom_v, accept(c.group, u));
  group_ref ref{"r", c.group};
  // A nudge: the holder asks the store (three of four accepted) at its
  // flush, after the nudges already in its mailbox.
  self->send(rc, answer_atom_v, ref);
  expect((answer_atom, group_ref), from(self).to(rc));
  expect((answer_atom), from(rc).to(rc));
  // While that look is under way, the last member accepts and its node
  // nudges the holder again.
  self->send(rc, answer_atom_v, ref);
  expect((answer_atom, group_ref), from(self).to(rc));
  self->send(broker, answer_atom_v, accept(c.group, "d"));
  run_jobs();
  // Committed without waiting for the poll (which never came here).
  for (auto u : {"a", "b", "c", "d"})
    CAF_CHECK(in_session(u));
}

CAF_TEST(the nudges of many answers are asked in one look a queue) {
  std::vector<group_claim_result> cs;
  for (int k = 0; k < 3; ++k) {
    group_claim_result c;
    for (auto u : {"a", "b", "c", "d"})
      c = ask<group_claim_result>(broker, claim_atom_v,
                                  single(u + std::to_string(k)));
    CAF_REQUIRE(c.outcome == group_claim_outcome::matched);
    cs.push_back(c);
  }
  for (auto& c : cs)
    propose(c);
  run_jobs();
  for (int k = 0; k < 3; ++k)
    for (auto u : {"a", "b", "c", "d"})
      ask<proposal_state>(broker, answer_atom_v,
                          accept(cs[k].group, u + std::to_string(k)));
  // Every proposal nudged twice before the holder runs: one flush, one
  // decide of the queue naming each proposal once.
  for (int twice = 0; twice < 2; ++twice)
    for (auto& c : cs)
      self->send(rc, answer_atom_v, group_ref{"r", c.group});
  for (int n = 0; n < 6; ++n)
    expect((answer_atom, group_ref), from(self).to(rc));
  expect((answer_atom), from(rc).to(rc));
  expect((decide_atom, std::string, std::vector<std::string>),
         from(rc).to(broker).with(
           _, std::string{"r"},
           std::vector<std::string>{cs[0].group, cs[1].group, cs[2].group}));
  run_jobs();
  for (int k = 0; k < 3; ++k)
    for (auto u : {"a", "b", "c", "d"})
      CAF_CHECK(in_session(u + std::to_string(k)));
}

CAF_TEST_FIXTURE_SCOPE_END()
