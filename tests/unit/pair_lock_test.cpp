// The pair lock driven deterministically by the CAF test DSL on the embedded
// store, whose clock moves together with the test coordinator's: local
// serialization step by step, wait bound, dead holders, lease expiry and
// stale tokens, and a pair held by "another node" (a raw SET NX PX).

#define CAF_SUITE pair_lock
#define FAIL(msg) CAF_FAIL(msg) // Debian's dsl.hpp calls an undefined FAIL
#include <caf/test/dsl.hpp>

#include <caf/all.hpp>

#include "actors/pair_lock.hpp"
#include "tests/support/caf_config.hpp"
#include "tests/support/store_harness.hpp"

using namespace mm;

namespace {

using mm_config = test::caf_config;

/// What one client actor got from the lock.
struct client_log {
  std::vector<std::string> tokens;
  std::vector<caf::error> errors;
};

using log_ptr = std::shared_ptr<client_log>;

/// A requester (a holder, once granted): asks the lock on (acquire_atom, a,
/// b) and records the answer.
caf::behavior client(caf::event_based_actor* self, pair_lock_actor lock,
                     log_ptr log) {
  return {
    [self, lock, log](acquire_atom, std::string& a, std::string& b) {
      self->request(lock, caf::infinite, acquire_atom_v, a, b)
        .then([log](std::string& token) { log->tokens.push_back(token); },
              [log](caf::error& err) { log->errors.push_back(err); });
    },
  };
}

bool is(const caf::error& e, errc code) {
  return e.category() == caf::atom("mm")
         && e.code() == static_cast<uint8_t>(code);
}

struct fixture : test_coordinator_fixture<mm_config> {
  std::shared_ptr<std::atomic<int64_t>> clock_ms
    = std::make_shared<std::atomic<int64_t>>(1'700'000'000'000);
  std::shared_ptr<queue_store_factory> store;
  std::unique_ptr<test::store_client> raw;
  pair_lock_actor lock;
  std::vector<caf::actor> clients;

  fixture() {
    embedded_options opts;
    auto c = clock_ms;
    opts.clock = [c] { return c->load(); };
    store = make_embedded_store(opts);
    raw = std::make_unique<test::store_client>(store->connect());
    lock = spawn_pair_lock(sys, store); // defaults: wait 4 s, lease 3 s
    sched.run();
  }

  ~fixture() {
    for (auto& c : clients)
      anon_send_exit(c, caf::exit_reason::user_shutdown);
    anon_send_exit(lock, caf::exit_reason::user_shutdown);
    run(); // also fires what is left of the timers, into nothing
  }

  std::pair<caf::actor, log_ptr> make_client(pair_lock_actor target) {
    auto log = std::make_shared<client_log>();
    auto c = sys.spawn(client, target, log);
    clients.push_back(c);
    sched.run();
    return {c, log};
  }

  std::pair<caf::actor, log_ptr> make_client() {
    return make_client(lock);
  }

  /// Lets `ms` pass for the store and the actors alike; delivers only the
  /// timers that fall due (the test then steps through them).
  void pass(int64_t ms) {
    *clock_ms += ms;
    advance_time(std::chrono::milliseconds(ms));
  }

  static std::string key(const std::string& a, const std::string& b) {
    return "mm:lock:{" + pair_lock_key(a, b) + "}";
  }

  /// The token in the pair's Redis key; empty when there is none.
  std::string stored(const std::string& a, const std::string& b) {
    auto v = raw->command({"GET", key(a, b)});
    return v.type == store_value::kind::string ? v.str : std::string{};
  }

  std::string unlock_raw(const std::string& a, const std::string& b,
                         const std::string& token) {
    std::vector<script_call> calls{
      script_call{script_id::unlock, {key(a, b)}, {token}}};
    auto r = raw->conn().run(calls).at(0);
    CAF_REQUIRE(r.code == errc::none);
    CAF_REQUIRE(r.value.type == store_value::kind::array);
    return r.value.elements.at(0).str;
  }

  caf::error ask_error(const std::string& a, const std::string& b) {
    auto rh = self->request(lock, caf::infinite, acquire_atom_v, a, b);
    sched.run();
    caf::error out;
    rh.receive([&](std::string&) { CAF_FAIL("expected an error"); },
               [&](caf::error& e) { out = std::move(e); });
    return out;
  }
};

using ss = std::string;

} // namespace

CAF_TEST_FIXTURE_SCOPE(pair_lock_tests, fixture)

CAF_TEST(the second acquire of a pair waits for the release of the first) {
  auto [c1, l1] = make_client();
  auto [c2, l2] = make_client();
  auto [c3, l3] = make_client();
  // c1 locks {alice, bob}: granted in one step, the key holds its token.
  self->send(c1, acquire_atom_v, ss{"alice"}, ss{"bob"});
  expect((acquire_atom, ss, ss), from(self).to(c1));
  expect((acquire_atom, ss, ss), from(c1).to(lock));
  expect((ss), from(lock).to(c1));
  CAF_REQUIRE_EQUAL(l1->tokens.size(), 1u);
  auto t1 = l1->tokens[0];
  CAF_CHECK_EQUAL(t1.size(), 32u);
  CAF_CHECK_EQUAL(stored("alice", "bob"), t1);
  // c2 asks for the same pair the other way round: it waits in the lock.
  self->send(c2, acquire_atom_v, ss{"bob"}, ss{"alice"});
  expect((acquire_atom, ss, ss), from(self).to(c2));
  expect((acquire_atom, ss, ss), from(c2).to(lock));
  disallow((ss), from(lock).to(c2));
  CAF_CHECK(!sched.has_job());
  CAF_CHECK(l2->tokens.empty() && l2->errors.empty());
  // Another pair is granted meanwhile, independently.
  self->send(c3, acquire_atom_v, ss{"carol"}, ss{"alice"});
  expect((acquire_atom, ss, ss), from(self).to(c3));
  expect((acquire_atom, ss, ss), from(c3).to(lock));
  expect((ss), from(lock).to(c3));
  CAF_REQUIRE_EQUAL(l3->tokens.size(), 1u);
  CAF_CHECK(l2->tokens.empty());
  // A release with a token that is not the current one releases nothing.
  self->send(lock, release_atom_v, ss{"alice"}, ss{"bob"}, ss{"0123"});
  expect((release_atom, ss, ss, ss), from(self).to(lock));
  disallow((ss), from(lock).to(c2));
  CAF_CHECK_EQUAL(stored("alice", "bob"), t1);
  // c1 releases (in either order of the ids): now c2 gets the pair.
  self->send(lock, release_atom_v, ss{"bob"}, ss{"alice"}, t1);
  expect((release_atom, ss, ss, ss), from(self).to(lock));
  expect((ss), from(lock).to(c2));
  CAF_REQUIRE_EQUAL(l2->tokens.size(), 1u);
  auto t2 = l2->tokens[0];
  CAF_CHECK_NOT_EQUAL(t2, t1);
  CAF_CHECK_EQUAL(stored("alice", "bob"), t2);
  // Idempotent: c1's release again changes nothing.
  self->send(lock, release_atom_v, ss{"alice"}, ss{"bob"}, t1);
  sched.run();
  CAF_CHECK_EQUAL(stored("alice", "bob"), t2);
  self->send(lock, release_atom_v, ss{"alice"}, ss{"bob"}, t2);
  self->send(lock, release_atom_v, ss{"alice"}, ss{"carol"}, l3->tokens[0]);
  sched.run();
  CAF_CHECK_EQUAL(stored("alice", "bob"), "");
  CAF_CHECK_EQUAL(stored("alice", "carol"), "");
}

CAF_TEST(local waiters are granted in arrival order) {
  auto [c1, l1] = make_client();
  auto [c2, l2] = make_client();
  auto [c3, l3] = make_client();
  self->send(c1, acquire_atom_v, ss{"a"}, ss{"b"});
  sched.run();
  self->send(c2, acquire_atom_v, ss{"b"}, ss{"a"});
  sched.run();
  self->send(c3, acquire_atom_v, ss{"a"}, ss{"b"});
  sched.run();
  CAF_REQUIRE_EQUAL(l1->tokens.size(), 1u);
  CAF_CHECK(l2->tokens.empty() && l3->tokens.empty());
  self->send(lock, release_atom_v, ss{"a"}, ss{"b"}, l1->tokens[0]);
  expect((release_atom, ss, ss, ss), from(self).to(lock));
  expect((ss), from(lock).to(c2));
  CAF_CHECK(l3->tokens.empty());
  self->send(lock, release_atom_v, ss{"a"}, ss{"b"}, l2->tokens.at(0));
  expect((release_atom, ss, ss, ss), from(self).to(lock));
  expect((ss), from(lock).to(c3));
  CAF_CHECK_EQUAL(stored("a", "b"), l3->tokens.at(0));
}

CAF_TEST(a waiter past its wait bound gets conflict and never the lock) {
  pair_lock_config cfg;
  cfg.wait_ms = 1000;
  cfg.lease_ms = 3000;
  auto short_wait = spawn_pair_lock(sys, store, cfg);
  sched.run();
  auto [c1, l1] = make_client(short_wait);
  auto [c2, l2] = make_client(short_wait);
  auto [c3, l3] = make_client(short_wait);
  self->send(c1, acquire_atom_v, ss{"alice"}, ss{"bob"});
  sched.run();
  CAF_REQUIRE_EQUAL(l1->tokens.size(), 1u);
  pass(100);
  sched.run();
  self->send(c2, acquire_atom_v, ss{"alice"}, ss{"bob"}); // waits until 1100
  sched.run();
  pass(400);
  sched.run();
  self->send(c3, acquire_atom_v, ss{"bob"}, ss{"alice"}); // waits until 1500
  sched.run();
  pass(599);
  sched.run(); // c1's own (moot) wait bound at 1000
  CAF_CHECK(l2->tokens.empty() && l2->errors.empty());
  // c2's bound passes: conflict, and it leaves the queue.
  pass(1);
  expect((tick_atom, ss, uint64_t), from(short_wait).to(short_wait));
  expect((caf::error), from(short_wait).to(c2));
  CAF_REQUIRE_EQUAL(l2->errors.size(), 1u);
  CAF_CHECK(is(l2->errors[0], errc::conflict));
  CAF_MESSAGE("conflict: " << sys.render(l2->errors[0]));
  // c1 releases: c3, behind c2, gets the pair; c2 never does.
  self->send(short_wait, release_atom_v, ss{"alice"}, ss{"bob"}, l1->tokens[0]);
  expect((release_atom, ss, ss, ss), from(self).to(short_wait));
  expect((ss), from(short_wait).to(c3));
  CAF_CHECK_EQUAL(stored("alice", "bob"), l3->tokens.at(0));
  self->send(short_wait, release_atom_v, ss{"alice"}, ss{"bob"}, l3->tokens[0]);
  sched.run();
  pass(10000);
  sched.run();
  CAF_CHECK(l2->tokens.empty());
  CAF_CHECK_EQUAL(l2->errors.size(), 1u);
  CAF_CHECK_EQUAL(stored("alice", "bob"), "");
  anon_send_exit(short_wait, caf::exit_reason::user_shutdown);
}

CAF_TEST(a holder that dies releases the pair to the next waiter) {
  auto [c1, l1] = make_client();
  auto [c2, l2] = make_client();
  self->send(c1, acquire_atom_v, ss{"alice"}, ss{"bob"});
  sched.run();
  self->send(c2, acquire_atom_v, ss{"bob"}, ss{"alice"});
  sched.run();
  CAF_REQUIRE_EQUAL(l1->tokens.size(), 1u);
  CAF_REQUIRE(l2->tokens.empty());
  anon_send_exit(c1, caf::exit_reason::kill);
  expect((caf::exit_msg), to(c1));
  expect((caf::down_msg), to(lock));
  expect((ss), from(lock).to(c2));
  CAF_REQUIRE_EQUAL(l2->tokens.size(), 1u);
  CAF_CHECK_EQUAL(stored("alice", "bob"), l2->tokens[0]);
  // The dead holder's token is worthless now.
  self->send(lock, release_atom_v, ss{"alice"}, ss{"bob"}, l1->tokens[0]);
  sched.run();
  CAF_CHECK_EQUAL(stored("alice", "bob"), l2->tokens[0]);
}

CAF_TEST(a waiter that dies before its turn does not keep the pair) {
  auto [c1, l1] = make_client();
  auto [c2, l2] = make_client();
  auto [c3, l3] = make_client();
  self->send(c1, acquire_atom_v, ss{"alice"}, ss{"bob"});
  sched.run();
  self->send(c2, acquire_atom_v, ss{"alice"}, ss{"bob"});
  sched.run();
  self->send(c3, acquire_atom_v, ss{"alice"}, ss{"bob"});
  sched.run();
  anon_send_exit(c2, caf::exit_reason::kill);
  sched.run();
  // c2's turn comes: it is granted, seen dead at once, and passed over.
  self->send(lock, release_atom_v, ss{"alice"}, ss{"bob"}, l1->tokens.at(0));
  expect((release_atom, ss, ss, ss), from(self).to(lock));
  expect((caf::down_msg), to(lock));
  expect((ss), from(lock).to(c3));
  CAF_CHECK(l2->tokens.empty());
  CAF_CHECK_EQUAL(stored("alice", "bob"), l3->tokens.at(0));
}

CAF_TEST(lease expiry passes the pair on and the old token releases nothing) {
  auto [c1, l1] = make_client();
  auto [c2, l2] = make_client();
  auto [c3, l3] = make_client();
  self->send(c1, acquire_atom_v, ss{"alice"}, ss{"bob"});
  sched.run();
  self->send(c2, acquire_atom_v, ss{"bob"}, ss{"alice"});
  sched.run();
  CAF_REQUIRE_EQUAL(l1->tokens.size(), 1u);
  auto t1 = l1->tokens[0];
  pass(2999);
  sched.run();
  CAF_CHECK(l2->tokens.empty());
  // c1 neither releases nor dies: after lease_ms the pair moves on.
  pass(1);
  expect((tick_atom, ss, uint64_t), from(lock).to(lock));
  expect((ss), from(lock).to(c2));
  CAF_REQUIRE_EQUAL(l2->tokens.size(), 1u);
  auto t2 = l2->tokens[0];
  CAF_CHECK_EQUAL(stored("alice", "bob"), t2);
  self->send(c3, acquire_atom_v, ss{"alice"}, ss{"bob"});
  sched.run();
  // c1's late release (old token) frees nothing: c3 keeps waiting, and the
  // key keeps c2's token.
  self->send(lock, release_atom_v, ss{"alice"}, ss{"bob"}, t1);
  expect((release_atom, ss, ss, ss), from(self).to(lock));
  disallow((ss), from(lock).to(c3));
  CAF_CHECK(!sched.has_job());
  CAF_CHECK(l3->tokens.empty());
  CAF_CHECK_EQUAL(stored("alice", "bob"), t2);
  // Nor does the old token free the key in the store directly.
  CAF_CHECK_EQUAL(unlock_raw("alice", "bob", t1), "not_owner");
  CAF_CHECK_EQUAL(stored("alice", "bob"), t2);
  // c2's release does.
  self->send(lock, release_atom_v, ss{"alice"}, ss{"bob"}, t2);
  expect((release_atom, ss, ss, ss), from(self).to(lock));
  expect((ss), from(lock).to(c3));
  CAF_CHECK_EQUAL(stored("alice", "bob"), l3->tokens.at(0));
}

CAF_TEST(a pair held by another node is retried until free or the bound) {
  auto [c1, l1] = make_client();
  auto [c2, l2] = make_client();
  // "Another node" holds {alice, bob}.
  auto set = raw->command(
    {"SET", key("alice", "bob"), "other-node-token", "NX", "PX", "60000"});
  CAF_REQUIRE_EQUAL(set.str, "OK");
  self->send(c1, acquire_atom_v, ss{"alice"}, ss{"bob"});
  sched.run();
  CAF_CHECK(l1->tokens.empty());
  // Retries every retry_ms; each finds the key still taken.
  for (int i = 0; i < 3; ++i) {
    pass(20);
    expect((tick_atom, ss, uint64_t), from(lock).to(lock));
    CAF_CHECK(l1->tokens.empty());
  }
  // The other node releases: the next retry gets it.
  CAF_CHECK_EQUAL(unlock_raw("alice", "bob", "other-node-token"), "released");
  pass(20);
  expect((tick_atom, ss, uint64_t), from(lock).to(lock));
  expect((ss), from(lock).to(c1));
  CAF_CHECK_EQUAL(stored("alice", "bob"), l1->tokens.at(0));
  self->send(lock, release_atom_v, ss{"alice"}, ss{"bob"}, l1->tokens[0]);
  sched.run();
  // The other node takes it again and keeps it: c2 gets conflict at 4 s,
  // and the other node's key is untouched.
  set = raw->command(
    {"SET", key("alice", "bob"), "other-node-token", "NX", "PX", "60000"});
  CAF_REQUIRE_EQUAL(set.str, "OK");
  self->send(c2, acquire_atom_v, ss{"bob"}, ss{"alice"});
  sched.run();
  for (int i = 0; i < 199; ++i) {
    pass(20);
    sched.run();
  }
  CAF_CHECK(l2->errors.empty());
  pass(20);
  sched.run();
  CAF_REQUIRE_EQUAL(l2->errors.size(), 1u);
  CAF_CHECK(is(l2->errors[0], errc::conflict));
  CAF_CHECK(l2->tokens.empty());
  CAF_CHECK_EQUAL(stored("alice", "bob"), "other-node-token");
  // Nothing is left trying for the pair: once the other node lets go, the
  // key stays free.
  CAF_CHECK_EQUAL(unlock_raw("alice", "bob", "other-node-token"), "released");
  pass(100);
  sched.run();
  CAF_CHECK_EQUAL(stored("alice", "bob"), "");
  CAF_CHECK(l2->tokens.empty());
}

CAF_TEST(self locks and malformed ids are refused) {
  CAF_CHECK(is(ask_error("alice", "alice"), errc::invalid_argument));
  CAF_CHECK(is(ask_error("", "bob"), errc::invalid_argument));
  CAF_CHECK(is(ask_error("alice", ""), errc::invalid_argument));
  CAF_CHECK(is(ask_error("al ice", "bob"), errc::invalid_argument));
  CAF_CHECK(is(ask_error("a{b}", "bob"), errc::invalid_argument));
  CAF_CHECK(
    is(ask_error(std::string(129, 'x'), "bob"), errc::invalid_argument));
  CAF_MESSAGE("self lock: " << sys.render(ask_error("alice", "alice")));
  // 128 bytes and every allowed character are fine.
  auto [c1, l1] = make_client();
  self->send(c1, acquire_atom_v, std::string(128, 'x'), ss{"Az09._:@-user"});
  sched.run();
  CAF_CHECK_EQUAL(l1->tokens.size(), 1u);
  CAF_CHECK(l1->errors.empty());
  // A release of a malformed pair is ignored.
  self->send(lock, release_atom_v, ss{"x"}, ss{"x"}, ss{"t"});
  sched.run();
}

CAF_TEST_FIXTURE_SCOPE_END()
