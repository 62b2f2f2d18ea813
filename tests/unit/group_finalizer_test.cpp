// The group finalizer on the embedded queue store and the in-memory
// persistence, driven deterministically by the CAF test DSL (problem 15 of
// docs/design.md, I12, issue 32): a claimed group commits whole and leaves
// the queue; a member's cancel at each checkpoint undoes the whole group,
// every other ticket back at its original score and the cancelled one never
// matched; a member busy elsewhere takes only its own ticket out.

#define CAF_SUITE group_finalizer
#define FAIL(msg) CAF_FAIL(msg) // Debian's dsl.hpp calls an undefined FAIL
#include <caf/test/dsl.hpp>

#include <caf/all.hpp>

#include "actors/directory.hpp"
#include "actors/group_finalizer.hpp"
#include "actors/queue_broker.hpp"
#include "actors/relay_events.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "persistence/queue/group_codec.hpp"
#include "tests/support/caf_config.hpp"
#include "tests/support/store_harness.hpp"

using namespace mm;

namespace {

using mm_config = test::caf_config;

struct fixture : test_coordinator_fixture<mm_config> {
  std::shared_ptr<queue_store_factory> qstore;
  std::shared_ptr<match_store_factory> mstore;
  std::unique_ptr<test::store_client> raw;
  std::unique_ptr<match_store> db;
  std::shared_ptr<cancel_registry> cancels
    = std::make_shared<cancel_registry>();
  queue_broker_actor broker;
  group_finalizer_actor gfin;
  std::function<void(checkpoint, const group_commit&)> hook;
  std::shared_ptr<engine_metrics> metrics = std::make_shared<engine_metrics>();

  fixture() {
    qstore = make_embedded_store({});
    mstore = make_memory_match_store();
    raw = std::make_unique<test::store_client>(qstore->connect());
    db = mstore->connect();
    CAF_REQUIRE(db->apply_migrations());
    broker_config bcfg;
    bcfg.sweep_interval_ms = 0;
    broker = spawn_queue_broker(sys, qstore, bcfg);
    group_finalizer_config gcfg;
    gcfg.cancels = cancels;
    gcfg.metrics = metrics;
    gcfg.at_checkpoint = [this](checkpoint cp, const group_commit& g) {
      if (hook)
        hook(cp, g);
    };
    gfin = spawn_group_finalizer(sys, mstore, broker, gcfg);
    run();
  }

  ~fixture() {
    anon_send_exit(gfin, caf::exit_reason::user_shutdown);
    anon_send_exit(broker, caf::exit_reason::user_shutdown);
    run();
  }

  template <class T, class Dest, class... Ts>
  T ask(const Dest& dest, Ts&&... xs) {
    auto rh = self->request(dest, caf::infinite, std::forward<Ts>(xs)...);
    run();
    T out;
    rh.receive([&](T& x) { out = std::move(x); },
               [&](caf::error& err) {
                 CAF_FAIL("request failed: " << sys.render(err));
               });
    return out;
  }

  /// A party's ticket on queue "g" (2 teams of 2, parties up to 2).
  group_ticket_spec party(const std::string& ticket,
                          std::vector<std::string> users) {
    group_ticket_spec s;
    s.queue = "g";
    s.ticket = ticket;
    s.node = "n1";
    s.shape = "4,4,2,2,2,0,0";
    for (auto& u : users) {
      party_member m;
      m.user = u;
      m.attrs = "{}";
      s.members.push_back(std::move(m));
    }
    return s;
  }

  group_claim_result claim(const group_ticket_spec& s) {
    return ask<group_claim_result>(broker, claim_atom_v, s);
  }

  /// Three tickets that make one match: "ta" (2 users), "tb", "tc".
  group_claim_result make_group() {
    auto a = claim(party("ta", {"a1", "a2"}));
    CAF_REQUIRE(a.outcome == group_claim_outcome::queued);
    scores["ta"] = a.score;
    auto b = claim(party("tb", {"b1"}));
    CAF_REQUIRE(b.outcome == group_claim_outcome::queued);
    scores["tb"] = b.score;
    auto c = claim(party("tc", {"c1"}));
    CAF_REQUIRE(c.outcome == group_claim_outcome::matched);
    scores["tc"] = c.score;
    return c;
  }

  group_verdict finalize(const group_claim_result& c, uint32_t min = 4) {
    group_commit g;
    g.queue = "g";
    g.group = c.group;
    g.min_players = min;
    g.tickets = c.tickets;
    return ask<group_verdict>(gfin, finalize_atom_v, g);
  }

  int64_t score_of(const std::string& ticket) {
    auto v = raw->command({"ZSCORE", codec::group_keys("g")[0], ticket});
    return v.str.empty() ? -1 : std::stoll(v.str);
  }

  std::string session_of(const std::string& user) {
    auto a = db->active_session_of(user);
    CAF_REQUIRE(a);
    return a->has_value() ? (*a)->session_id : "";
  }

  std::map<std::string, int64_t> scores;
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(group_finalizer_tests, fixture)

CAF_TEST(a claimed group commits whole and leaves the queue) {
  auto c = make_group();
  std::vector<checkpoint> seen;
  hook = [&](checkpoint cp, const group_commit&) { seen.push_back(cp); };
  auto v = finalize(c);
  CAF_REQUIRE(v.committed);
  CAF_CHECK(v.created);
  CAF_CHECK(v.removed.empty());
  CAF_CHECK_EQUAL(seen.size(), 4u); // before_create .. after_commit
  for (auto user : {"a1", "a2", "b1", "c1"})
    CAF_CHECK_EQUAL(session_of(user), v.session_id);
  auto s = db->find_session(v.session_id);
  CAF_REQUIRE(s && s->has_value());
  CAF_REQUIRE_EQUAL((*s)->members.size(), 4u);
  // The party plays in one team, the singles in the other.
  CAF_CHECK_EQUAL((*s)->members[0].team, (*s)->members[1].team);
  CAF_CHECK_NOT_EQUAL((*s)->members[0].team, (*s)->members[2].team);
  CAF_CHECK_EQUAL((*s)->members[2].team, (*s)->members[3].team);
  for (auto t : {"ta", "tb", "tc"})
    CAF_CHECK_EQUAL(score_of(t), -1);
  CAF_CHECK_EQUAL(metrics->matches.load(), 1u);
  // A retry answers the same session.
  auto again = finalize(c);
  CAF_CHECK(again.committed);
  CAF_CHECK(!again.created);
  CAF_CHECK_EQUAL(again.session_id, v.session_id);
}

CAF_TEST(a member cancel at each checkpoint undoes the whole group) {
  const checkpoint points[] = {checkpoint::before_create,
                               checkpoint::after_create,
                               checkpoint::before_answer};
  int round = 0;
  for (auto at : points) {
    CAF_MESSAGE("cancel at checkpoint " << static_cast<int>(at));
    // Fresh users each round: the cancel registry remembers cancels.
    auto tag = std::to_string(round++);
    auto a = claim(party("ta" + tag, {"a1-" + tag, "a2-" + tag}));
    auto b = claim(party("tb" + tag, {"b1-" + tag}));
    auto c = claim(party("tc" + tag, {"c1-" + tag}));
    CAF_REQUIRE(c.outcome == group_claim_outcome::matched);
    // The second member of the party cancels at `at`.
    hook = [&, at, tag](checkpoint cp, const group_commit&) {
      if (cp == at)
        cancels->add("g", "a2-" + tag, "ta" + tag);
    };
    auto v = finalize(c);
    hook = nullptr;
    CAF_CHECK(!v.committed);
    CAF_CHECK_EQUAL(v.removed, std::vector<std::string>{"ta" + tag});
    // Nobody matched; the others back at their original places.
    for (auto user : {"a1-", "a2-", "b1-", "c1-"})
      CAF_CHECK_EQUAL(session_of(user + tag), "");
    CAF_CHECK_EQUAL(score_of("ta" + tag), -1);
    CAF_CHECK_EQUAL(score_of("tb" + tag), b.score);
    CAF_CHECK_EQUAL(score_of("tc" + tag), c.score);
    CAF_CHECK_EQUAL(a.outcome, group_claim_outcome::queued);
    // The two singles are matched later with a new party, the cancelled
    // party never.
    auto d = claim(party("td" + tag, {"d1-" + tag, "d2-" + tag}));
    CAF_REQUIRE(d.outcome == group_claim_outcome::matched);
    auto v2 = finalize(d);
    CAF_REQUIRE(v2.committed);
    CAF_CHECK_EQUAL(session_of("b1-" + tag), v2.session_id);
    CAF_CHECK_EQUAL(session_of("c1-" + tag), v2.session_id);
    CAF_CHECK_EQUAL(session_of("a2-" + tag), "");
  }
}

CAF_TEST(a member busy elsewhere takes out only its own ticket) {
  // b1 is in a session already (matched elsewhere meanwhile).
  group_match_request other;
  other.queue = "elsewhere";
  other.group = "x";
  other.members = {session_member{"b1", "t", "", 0, true},
                   session_member{"zz", "t", "", 0, true}};
  CAF_REQUIRE(db->commit_group(other));
  auto c = make_group();
  auto v = finalize(c);
  CAF_CHECK(!v.committed);
  CAF_CHECK_EQUAL(v.removed, std::vector<std::string>{"tb"});
  CAF_CHECK_EQUAL(session_of("a1"), "");
  CAF_CHECK_EQUAL(score_of("ta"), scores["ta"]);
  CAF_CHECK_EQUAL(score_of("tc"), scores["tc"]);
  CAF_CHECK_EQUAL(score_of("tb"), -1);
  CAF_CHECK_EQUAL(metrics->conflicts.load(), 1u);
}

CAF_TEST(the match event names every member and reaches each) {
  auto c = make_group();
  auto v = finalize(c);
  CAF_REQUIRE(v.committed);
  auto evs = db->fetch_undelivered(10, 60000);
  CAF_REQUIRE(evs);
  CAF_REQUIRE_EQUAL(evs->size(), 1u);
  match_event ev;
  std::string why;
  CAF_REQUIRE(relay_detail::parse_event(evs->at(0), ev, why));
  CAF_CHECK_EQUAL(ev.user_a, "a1");
  CAF_CHECK_EQUAL(ev.user_b, "a2");
  CAF_CHECK_EQUAL(ev.others, (std::vector<std::string>{"b1", "c1"}));
  // Nobody has a session here: the directory keeps it for all four.
  auto dir = spawn_directory(sys);
  auto rep = ask<delivery_report>(dir, deliver_atom_v, ev);
  CAF_CHECK_EQUAL(rep.kept, 4u);
  anon_send_exit(dir, caf::exit_reason::user_shutdown);
}

CAF_TEST_FIXTURE_SCOPE_END()
