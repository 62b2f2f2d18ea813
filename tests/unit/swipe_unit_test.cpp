// Mutual likes on the embedded stores, deterministic (CAF test DSL through
// the simulation kit): dislikes, withdrawn likes, bad input, and a swipe
// that cannot get the pair's lock in time, and what the engine counts.

#define CAF_SUITE swipe
#define FAIL(msg) CAF_FAIL(msg) // Debian's dsl.hpp calls an undefined FAIL
#include <caf/test/dsl.hpp>

#include "actors/simulation.hpp"

using namespace mm;

namespace {

engine_config swipe_config() {
  auto cfg = sim::default_engine_config();
  cfg.lock.wait_ms = 1000; // shorter than the lease: a held lock outlasts it
  cfg.lock.lease_ms = 3000;
  cfg.finalizer.batch_delay_ms = 0; // commit at once: no timer to drive
  return cfg;
}

struct fixture : sim::engine_fixture<> {
  fixture() : sim::engine_fixture<>(swipe_config()) {}

  caf::expected<swipe_result> swipe(std::string from, std::string to,
                                    bool like = true) {
    auto rh = self->request(eng->swipes(), caf::infinite, swipe_atom_v,
                            swipe_request{from, to, like});
    sched.run();
    caf::expected<swipe_result> out{caf::error{}};
    rh.receive([&](swipe_result& r) { out = r; },
               [&](caf::error& e) { out = e; });
    return out;
  }

  bool matched(const std::string& a, const std::string& b) {
    auto db = eng->match_store()->connect();
    auto m = db->mutual_match_of(a, b);
    CAF_REQUIRE(m);
    return m->has_value();
  }
};

bool is(const caf::expected<swipe_result>& r, errc code) {
  return !r && r.error().category() == caf::atom("mm")
         && r.error().code() == static_cast<uint8_t>(code);
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(swipe_tests, fixture)

CAF_TEST(a mutual like creates one match) {
  auto first = swipe("ann", "ben");
  CAF_REQUIRE(first);
  CAF_CHECK(!first->mutual);
  auto second = swipe("ben", "ann");
  CAF_REQUIRE(second);
  CAF_CHECK(second->mutual);
  CAF_CHECK(second->created);
  CAF_CHECK(matched("ann", "ben"));
  // The same swipe again changes nothing: the pair keeps its one match.
  auto again = swipe("ann", "ben");
  CAF_REQUIRE(again);
  CAF_CHECK(again->mutual);
  CAF_CHECK(!again->created);
  CAF_CHECK_EQUAL(again->session_id, second->session_id);
  // The engine's metrics: one match, counted once; no conflict.
  CAF_CHECK_EQUAL(eng->metrics()->matches.load(), 1u);
  CAF_CHECK_EQUAL(eng->metrics()->conflicts.load(), 0u);
}

CAF_TEST(dislike never creates a match) {
  CAF_REQUIRE(swipe("ann", "ben"));
  auto r = swipe("ben", "ann", false);
  CAF_REQUIRE(r);
  CAF_CHECK(!r->mutual);
  CAF_CHECK(!matched("ann", "ben"));
}

CAF_TEST(a like after a withdrawn like is a fresh like) {
  CAF_REQUIRE(swipe("ann", "ben"));
  CAF_REQUIRE(swipe("ann", "ben", false)); // withdrawn
  auto r = swipe("ben", "ann");
  CAF_REQUIRE(r);
  CAF_CHECK(!r->mutual);
  CAF_CHECK(!matched("ann", "ben"));
  auto fresh = swipe("ann", "ben");
  CAF_REQUIRE(fresh);
  CAF_CHECK(fresh->mutual);
  CAF_CHECK(fresh->created);
}

CAF_TEST(self swipes and malformed ids are refused) {
  CAF_CHECK(is(swipe("ann", "ann"), errc::invalid_argument));
  CAF_CHECK(is(swipe("ann b", "ben"), errc::invalid_argument));
  CAF_CHECK(is(swipe("", "ben"), errc::invalid_argument));
  CAF_CHECK(is(swipe("ann", std::string(200, 'x')), errc::invalid_argument));
}

CAF_TEST(a swipe that cannot get the lock in time writes nothing) {
  // Somebody holds the pair's lock and does not let go.
  auto rh = self->request(eng->pair_lock(), caf::infinite, acquire_atom_v,
                          std::string{"ann"}, std::string{"ben"});
  sched.run();
  std::string token;
  rh.receive([&](std::string& t) { token = t; },
             [&](caf::error& e) { CAF_FAIL(sys.render(e)); });
  auto sw = self->request(eng->swipes(), caf::infinite, swipe_atom_v,
                          swipe_request{"ann", "ben", true});
  sched.run();
  advance(eng->config().lock.wait_ms + 10); // the wait bound passes
  caf::expected<swipe_result> out{caf::error{}};
  sw.receive([&](swipe_result& r) { out = r; },
             [&](caf::error& e) { out = e; });
  CAF_CHECK(is(out, errc::conflict));
  CAF_CHECK_EQUAL(eng->metrics()->conflicts.load(), 1u); // the wait bound
  self->send(eng->pair_lock(), release_atom_v, std::string{"ann"},
             std::string{"ben"}, token);
  sched.run();
  // Ann's like was never written: Ben's like does not complete a pair.
  auto r = swipe("ben", "ann");
  CAF_REQUIRE(r);
  CAF_CHECK(!r->mutual);
  CAF_CHECK(!matched("ann", "ben"));
  CAF_CHECK_EQUAL(eng->metrics()->conflicts.load(), 1u);
  CAF_CHECK_EQUAL(eng->metrics()->matches.load(), 0u);
}

CAF_TEST_FIXTURE_SCOPE_END()
