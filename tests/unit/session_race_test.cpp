// Races between a session and the finalizer that the load test met only
// rarely, made deterministic with the CAF test DSL: the test decides which
// actor runs when (and holds the finalizer back), so the unlucky order
// happens every time. The stores are the embedded queue store and the
// in-memory persistence.
//
// The property checked is the load test's: a user whom the database holds in
// an active session is told `matched` in that session, never `failed`.

#define CAF_SUITE session_race
#define FAIL(msg) CAF_FAIL(msg) // Debian's dsl.hpp calls an undefined FAIL
#include <caf/test/dsl.hpp>

#include <caf/all.hpp>

#include "actors/directory.hpp"
#include "actors/finalizer.hpp"
#include "actors/lifecycle.hpp"
#include "actors/outbox_relay.hpp"
#include "actors/queue_broker.hpp"
#include "actors/session.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "tests/support/caf_config.hpp"
#include "tests/support/store_harness.hpp"

using namespace mm;

namespace {

using mm_config = test::caf_config;

// The phases are checked as std::string{"..."}: to_string(session_phase)
// is a const char*, and CAF_CHECK_EQUAL against a bare literal compares
// the pointers (equal only where the linker merged the two literals; not
// under ASan, whose string literals are separate globals).

/// A queue store whose replies are lost: while `lose` is above 0, each
/// script call runs on the inner store and its reply is replaced by
/// `store_unavailable` (a Redis command that timed out after it ran).
class lossy_store final : public queue_store_factory {
 public:
  explicit lossy_store(std::shared_ptr<queue_store_factory> inner)
    : inner_(std::move(inner)) {}

  std::unique_ptr<queue_store> connect() override {
    return std::make_unique<conn>(inner_->connect(), lose);
  }

  std::string describe() const override {
    return "lossy " + inner_->describe();
  }

  std::shared_ptr<int> lose = std::make_shared<int>(0);

 private:
  class conn final : public queue_store {
   public:
    conn(std::unique_ptr<queue_store> inner, std::shared_ptr<int> lose)
      : inner_(std::move(inner)), lose_(std::move(lose)) {}

    std::vector<store_reply> run(const std::vector<script_call>& c) override {
      auto out = inner_->run(c);
      for (auto& r : out)
        if (*lose_ > 0) {
          --*lose_;
          r = store_reply{
            errc::store_unavailable, "no reply within 5000 ms", {}};
        }
      return out;
    }

    std::vector<store_reply>
    execute(const std::vector<store_command>& cmds) override {
      return inner_->execute(cmds);
    }

    bool blocking() const noexcept override {
      return false;
    }

   private:
    std::unique_ptr<queue_store> inner_;
    std::shared_ptr<int> lose_;
  };

  std::shared_ptr<queue_store_factory> inner_;
};

struct fixture : test_coordinator_fixture<mm_config> {
  std::shared_ptr<queue_store_factory> qstore;
  std::shared_ptr<match_store_factory> mstore;
  std::unique_ptr<test::store_client> raw;
  std::unique_ptr<match_store> db;
  std::shared_ptr<cancel_registry> cancels
    = std::make_shared<cancel_registry>();
  std::shared_ptr<engine_metrics> metrics = std::make_shared<engine_metrics>();
  queue_broker_actor broker;
  finalizer_actor fin;
  directory_actor dir;
  outbox_relay_actor relay;
  lifecycle_actor lifecycle;
  std::function<void(checkpoint, const claim_pair&)> hook;
  session_config scfg;
  std::vector<session_actor> sessions;

  fixture() {
    qstore = make_embedded_store({});
    mstore = make_memory_match_store();
    raw = std::make_unique<test::store_client>(qstore->connect());
    db = mstore->connect();
    CAF_REQUIRE(db->apply_migrations());
    broker = broker_on(qstore);
    finalizer_config fcfg;
    fcfg.batch_delay_ms = 0; // a pair commits when the finalizer reads it
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
    relay = spawn_outbox_relay(sys, mstore, qstore, dir, rcfg);
    lifecycle_config lcfg;
    lcfg.sweep_ms = 0; // no timer
    lifecycle = spawn_lifecycle(sys, mstore, lcfg);
    scfg.idle_release_ms = 0;
    scfg.metrics = metrics;
    sched.run();
  }

  ~fixture() {
    // The hook of a test captures that test's locals by reference, and the
    // finalizer may reach a checkpoint while it stops (here, or in the base
    // fixture's run() after this object's members are gone): disarm it.
    hook = nullptr;
    for (auto h :
         {caf::actor_cast<caf::actor>(broker), caf::actor_cast<caf::actor>(fin),
          caf::actor_cast<caf::actor>(dir), caf::actor_cast<caf::actor>(relay),
          caf::actor_cast<caf::actor>(lifecycle)})
      anon_send_exit(h, caf::exit_reason::user_shutdown);
    for (auto& s : sessions)
      anon_send_exit(s, caf::exit_reason::user_shutdown);
    sched.run();
  }

  /// Another broker on `store` (the fixture's queues).
  queue_broker_actor broker_on(std::shared_ptr<queue_store_factory> store) {
    broker_config bcfg;
    bcfg.sweep_interval_ms = 0;
    bcfg.queues = {"q"};
    return spawn_queue_broker(sys, std::move(store), bcfg);
  }

  session_actor session(const std::string& user, queue_broker_actor via = {}) {
    session_links links;
    links.broker = via ? via : broker;
    links.finalizer = fin;
    links.directory = dir;
    links.lifecycle = lifecycle;
    auto s = spawn_session(sys, user, std::move(links), scfg);
    sessions.push_back(s);
    sched.run();
    return s;
  }

  template <class T, class Handle>
  T answer_of(Handle& rh) {
    T out;
    rh.receive([&](T& x) { out = std::move(x); },
               [&](caf::error& e) { CAF_FAIL(sys.render(e)); });
    return out;
  }

  session_state state_of(const session_actor& s) {
    auto rh = self->request(s, caf::infinite, state_atom_v);
    sched.run();
    return answer_of<session_state>(rh);
  }

  uint32_t flush_relay() {
    auto rh = self->request(relay, caf::infinite, flush_atom_v);
    sched.run();
    return answer_of<uint32_t>(rh);
  }

  /// Runs every actor but `held` until only it has work left.
  template <class Handle>
  void run_all_but(const Handle& held) {
    auto ptr = caf::actor_cast<caf::abstract_actor*>(held);
    sched.run_jobs_filtered([ptr](caf::resumable* job) {
      return dynamic_cast<caf::abstract_actor*>(job) != ptr;
    });
  }

  /// Runs actors one message at a time until the next message of `s` is a
  /// finalize_result (its claim's answer), which stays unread.
  void run_until_finalize_answer(const session_actor& s) {
    auto ptr = caf::actor_cast<caf::abstract_actor*>(s);
    for (;;) {
      auto next = ptr->peek_at_next_mailbox_element();
      if (next != nullptr && next->content().match_elements<finalize_result>())
        return;
      CAF_REQUIRE(sched.try_run_once());
    }
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(session_race_tests, fixture)

// The engine load test's "u8914 matched in the database, session says
// failed". Alice claims bob, bob cancels in the commit: the pair is undone,
// alice's record goes back to her place and she is told `retry`. Before
// alice reads that answer, carol claims alice's record and their pair
// commits. Alice's retry once ran a plain claim: her record gone, it
// enqueued her afresh and claimed dave; the database refused that pair
// (alice is in carol's session) and alice ended `failed` ("already in
// active session"), deaf to the match event that followed.
CAF_TEST(a retried claimer whose record was claimed meanwhile waits for that match) {
  auto a = session("alice");
  auto b = session("bob");
  auto bob_join = self->request(b, caf::infinite, join_atom_v,
                                join_request{"q", "tb", ""});
  sched.run();
  CAF_REQUIRE(answer_of<session_state>(bob_join).phase
              == session_phase::queued);
  std::optional<decltype(self->request(b, caf::infinite, cancel_atom_v))>
    bob_cancel;
  hook = [&](checkpoint cp, const claim_pair& p) {
    if (cp == checkpoint::before_create && p.claimed.user == "bob"
        && !bob_cancel) {
      cancels->add(p.queue, p.claimed.user, p.claimed.ticket);
      bob_cancel.emplace(self->request(b, caf::infinite, cancel_atom_v));
    }
  };
  auto alice_join = self->request(a, caf::infinite, join_atom_v,
                                  join_request{"q", "ta", ""});
  run_until_finalize_answer(a); // `retry`, unread
  CAF_REQUIRE(bob_cancel.has_value());
  auto alice_ticket = raw->user_ticket("q", "alice");
  CAF_REQUIRE(!alice_ticket.empty()); // back in the queue
  // Dave waits behind alice; carol claims alice (the oldest waiter) and the
  // finalizer commits that pair, all while alice's session is not running.
  CAF_REQUIRE(raw->enqueue(test::spec("q", "dave", "td")));
  auto k = raw->claim(test::spec("q", "carol", "tc"));
  CAF_REQUIRE(k && k->outcome == claim_outcome::matched);
  CAF_REQUIRE_EQUAL(k->partner.user, "alice");
  auto carol_fin
    = self->request(fin, caf::infinite, finalize_atom_v,
                    claim_pair{"q", "carol", "tc", "", k->partner});
  run_all_but(a);
  auto committed = answer_of<finalize_result>(carol_fin);
  CAF_REQUIRE(committed.outcome == finalize_outcome::committed);
  // Now alice reads `retry`; she cancels before the match event arrives:
  // too late, she is matched with carol.
  sched.run();
  auto alice_cancel = self->request(a, caf::infinite, cancel_atom_v);
  sched.run();
  auto told = answer_of<session_state>(alice_cancel);
  CAF_MESSAGE("alice's cancel: " << to_string(told.phase) << " (" << told.detail
                                 << ")");
  CAF_CHECK_EQUAL(to_string(told.phase), std::string{"matched"});
  CAF_CHECK_EQUAL(told.session_id, committed.session_id);
  CAF_CHECK_EQUAL(flush_relay(), 1u);
  auto sa = state_of(a);
  CAF_MESSAGE("alice: " << to_string(sa.phase) << " (" << sa.detail << ")");
  CAF_CHECK_EQUAL(to_string(sa.phase), std::string{"matched"}); // once `failed`
  CAF_CHECK_EQUAL(sa.session_id, committed.session_id);
  auto s = db->active_session_of("alice");
  CAF_REQUIRE(s && s->has_value());
  CAF_CHECK_EQUAL((*s)->session_id, committed.session_id);
  // Nobody else was touched: dave still waits, bob's cancel was honoured.
  CAF_CHECK_EQUAL(metrics->conflicts.load(), 0u);
  CAF_CHECK(!db->active_session_of("dave")->has_value());
  CAF_CHECK_EQUAL(raw->waiting("q"), std::vector<std::string>{"td"});
  CAF_CHECK_EQUAL(to_string(answer_of<session_state>(*bob_cancel).phase),
                  std::string{"cancelled"});
  answer_of<session_state>(alice_join);
}

// Bob's cancel asks the local finalizer, which is slow: its verdict comes
// after route_timeout_ms, and meanwhile it commits alice's pair with bob.
// The session once ended `failed` on the timeout while the database matched
// bob; a live finalizer that is slow is asked again.
CAF_TEST(a cancel verdict slower than route_timeout_ms is asked again) {
  scfg.route_timeout_ms = 1000;
  auto a = session("alice");
  auto b = session("bob");
  auto bob_join = self->request(b, caf::infinite, join_atom_v,
                                join_request{"q", "tb", ""});
  sched.run();
  CAF_REQUIRE(answer_of<session_state>(bob_join).phase
              == session_phase::queued);
  // Alice claims bob; her pair waits in the finalizer's mailbox.
  auto alice_join = self->request(a, caf::infinite, join_atom_v,
                                  join_request{"q", "ta", ""});
  run_all_but(fin);
  // Bob cancels: the queue says his ticket is claimed, he asks the
  // finalizer, which does not run within the bound.
  auto bob_cancel = self->request(b, caf::infinite, cancel_atom_v);
  run_all_but(fin);
  advance_time(std::chrono::milliseconds(scfg.route_timeout_ms));
  run_all_but(fin);
  // The finalizer runs: the pair commits (bob's cancel came after it).
  sched.run();
  auto told = answer_of<session_state>(bob_cancel);
  CAF_MESSAGE("bob: " << to_string(told.phase) << " (" << told.detail << ")");
  CAF_CHECK_EQUAL(to_string(told.phase),
                  std::string{"matched"}); // once `failed`
  auto s = db->active_session_of("bob");
  CAF_REQUIRE(s && s->has_value());
  CAF_CHECK_EQUAL(told.session_id, (*s)->session_id);
  CAF_CHECK_EQUAL(flush_relay(), 1u);
  CAF_CHECK_EQUAL(to_string(state_of(b).phase), std::string{"matched"});
  CAF_CHECK_EQUAL(to_string(state_of(a).phase), std::string{"matched"});
  answer_of<session_state>(alice_join);
}

// The bound (every wait is bounded): a finalizer that never answers is asked
// for at most the cancel's rounds; then the database decides (here: no match
// yet, so the join ends `failed` naming why, never `cancelled`).
CAF_TEST(a cancel verdict that never comes ends the join after its rounds) {
  scfg.route_timeout_ms = 1000;
  auto a = session("alice");
  auto b = session("bob");
  auto bob_join = self->request(b, caf::infinite, join_atom_v,
                                join_request{"q", "tb", ""});
  sched.run();
  answer_of<session_state>(bob_join);
  auto alice_join = self->request(a, caf::infinite, join_atom_v,
                                  join_request{"q", "ta", ""});
  run_all_but(fin);
  auto bob_cancel = self->request(b, caf::infinite, cancel_atom_v);
  run_all_but(fin);
  for (int i = 0; i < 25; ++i) {
    advance_time(std::chrono::milliseconds(scfg.route_timeout_ms));
    run_all_but(fin);
  }
  std::string detail;
  bob_cancel.receive(
    [&](session_state& st) {
      CAF_CHECK_EQUAL(to_string(st.phase), std::string{"failed"});
      detail = st.detail;
    },
    [&](caf::error& e) { CAF_FAIL(sys.render(e)); });
  CAF_CHECK(detail.find("no verdict from the finalizer") != std::string::npos);
  CAF_CHECK(detail.find("the database shows no match") != std::string::npos);
  answer_of<session_state>(alice_join);
}

// A finalizer that is gone gives no verdict, but it may have committed the
// pair before it went (here it commits alice's pair, then stops): the answer
// comes from the database at once, without waiting for a timer.
CAF_TEST(
  a cancel asked of a finalizer that is gone is answered from the database) {
  auto a = session("alice");
  auto b = session("bob");
  auto bob_join = self->request(b, caf::infinite, join_atom_v,
                                join_request{"q", "tb", ""});
  sched.run();
  answer_of<session_state>(bob_join);
  auto alice_join = self->request(a, caf::infinite, join_atom_v,
                                  join_request{"q", "ta", ""});
  run_all_but(fin);
  answer_of<session_state>(alice_join);
  anon_send_exit(fin, caf::exit_reason::kill); // after alice's pair
  sched.run();
  auto bob_cancel = self->request(b, caf::infinite, cancel_atom_v);
  sched.run(); // no timer fires
  auto told = answer_of<session_state>(bob_cancel);
  CAF_MESSAGE("bob: " << to_string(told.phase) << " (" << told.detail << ")");
  auto s = db->active_session_of("bob");
  CAF_REQUIRE(s);
  if (s->has_value()) {
    CAF_CHECK_EQUAL(to_string(told.phase),
                    std::string{"matched"}); // once `failed`
    CAF_CHECK_EQUAL(told.session_id, (**s).session_id);
  } else {
    CAF_CHECK_EQUAL(to_string(told.phase), std::string{"failed"});
  }
  CAF_CHECK(s->has_value()); // the kill came after the pair
}

// A claim whose reply was lost (Redis ran it, the answer timed out): bob is
// waiting in the queue. His join is answered store_unavailable (503), and
// the session asks the queue again instead of ending `failed`: alice claims
// bob and bob is told `matched` in that session (once: `failed`, while his
// ticket waited and was matched).
CAF_TEST(
  a claim whose reply was lost is asked again and never reported failed) {
  auto lossy = std::make_shared<lossy_store>(qstore);
  auto b2 = broker_on(lossy);
  auto b = session("bob", b2);
  *lossy->lose = 1;
  auto bob_join = self->request(b, caf::infinite, join_atom_v,
                                join_request{"q", "tb", ""});
  sched.run();
  bob_join.receive(
    [&](session_state& st) {
      CAF_FAIL("bob's join answered " << to_string(st.phase));
    },
    [&](caf::error& e) {
      CAF_CHECK_EQUAL(e.code(), static_cast<uint8_t>(errc::store_unavailable));
    });
  CAF_CHECK_EQUAL(to_string(state_of(b).phase), std::string{"claiming"});
  CAF_REQUIRE_EQUAL(raw->waiting("q").size(), 1u); // the claim did run
  CAF_REQUIRE(sched.trigger_timeout());            // bob's retry: a re-scan
  sched.run();
  CAF_CHECK_EQUAL(to_string(state_of(b).phase), std::string{"queued"});
  CAF_REQUIRE_EQUAL(raw->waiting("q").size(), 1u); // still one ticket
  auto a = session("alice");
  auto alice_join = self->request(a, caf::infinite, join_atom_v,
                                  join_request{"q", "ta", ""});
  sched.run();
  answer_of<session_state>(alice_join);
  flush_relay();
  auto sa = state_of(a);
  auto sb = state_of(b);
  CAF_CHECK_EQUAL(to_string(sa.phase), std::string{"matched"});
  CAF_CHECK_EQUAL(to_string(sb.phase), std::string{"matched"}); // once `failed`
  CAF_CHECK_EQUAL(sb.session_id, sa.session_id);
  auto s = db->active_session_of("bob");
  CAF_REQUIRE(s && s->has_value());
  CAF_CHECK_EQUAL((**s).session_id, sb.session_id);
  anon_send_exit(b2, caf::exit_reason::user_shutdown);
}

// A cancel whose reply was lost (it ran: the ticket is gone) goes again and
// ends `cancelled`, not `failed`.
CAF_TEST(a cancel whose reply was lost is asked again) {
  auto lossy = std::make_shared<lossy_store>(qstore);
  auto b2 = broker_on(lossy);
  auto b = session("bob", b2);
  auto bob_join = self->request(b, caf::infinite, join_atom_v,
                                join_request{"q", "tb", ""});
  sched.run();
  CAF_CHECK_EQUAL(to_string(answer_of<session_state>(bob_join).phase),
                  std::string{"queued"});
  *lossy->lose = 1;
  auto bob_cancel = self->request(b, caf::infinite, cancel_atom_v);
  sched.run();
  CAF_CHECK(self->mailbox().empty()); // not answered from a guess
  while (sched.trigger_timeout())
    sched.run();
  auto told = answer_of<session_state>(bob_cancel);
  CAF_CHECK_EQUAL(to_string(told.phase),
                  std::string{"cancelled"}); // once `failed`
  CAF_CHECK(raw->waiting("q").empty());
  anon_send_exit(b2, caf::exit_reason::user_shutdown);
}

CAF_TEST_FIXTURE_SCOPE_END()
