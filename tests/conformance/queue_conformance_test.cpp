// One conformance suite for every queue store: the same tests run against the
// embedded store and against a real private redis-server.

#include <gtest/gtest.h>

#include "actors/cluster_config.hpp"
#include "tests/support/race.hpp"
#include "tests/support/store_harness.hpp"

using namespace mm;
using namespace mm::test;

namespace {

class queue_conformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    store_ = make_store_under_test(GetParam());
    client_ = std::make_unique<store_client>(store_.factory->connect());
    q_ = fresh_queue(GetParam());
  }

  store_client& c() {
    return *client_;
  }

  ticket_ref ref(const std::string& user, const std::string& token) {
    return ticket_ref{q_, user, token};
  }

  store_under_test store_;
  std::unique_ptr<store_client> client_;
  std::string q_;
};

/// The cluster keys (header-only constants): nodes, beats, users.
const char* const cluster_test_keys[]
  = {cluster_keys::nodes, cluster_keys::beats, cluster_keys::users};

#define ASSERT_OK(x) \
  ASSERT_TRUE(x) << to_string((x).error().code) << ": " << (x).error().detail

// -- enqueue ------------------------------------------------------------------

TEST_P(queue_conformance, enqueue_creates_once_and_is_idempotent) {
  auto a = c().enqueue(spec(q_, "alice", "t1"));
  ASSERT_OK(a);
  EXPECT_TRUE(a->created);
  EXPECT_EQ(a->ticket, "t1");
  auto again = c().enqueue(spec(q_, "alice", "t1"));
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->token, a->token);
  EXPECT_EQ(again->score, a->score);
  EXPECT_EQ(c().waiting(q_), std::vector<std::string>{"t1"});
  EXPECT_EQ(c().records(q_), 1);
}

TEST_P(queue_conformance, second_live_ticket_of_a_user_is_refused) {
  ASSERT_OK(c().enqueue(spec(q_, "alice", "t1")));
  auto dup = c().enqueue(spec(q_, "alice", "t2"));
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, errc::duplicate_ticket);
  auto dup_claim = c().claim(spec(q_, "alice", "t3"));
  ASSERT_FALSE(dup_claim);
  EXPECT_EQ(dup_claim.error().code, errc::duplicate_ticket);
  EXPECT_EQ(c().waiting(q_), std::vector<std::string>{"t1"});
  EXPECT_EQ(c().records(q_), 1);
}

TEST_P(queue_conformance, a_stale_ticket_of_the_user_makes_room) {
  ASSERT_OK(c().enqueue(spec(q_, "alice", "t1", 30)));
  store_.advance(80);
  auto b = c().enqueue(spec(q_, "alice", "t2"));
  ASSERT_OK(b);
  EXPECT_TRUE(b->created);
  EXPECT_EQ(c().waiting(q_), std::vector<std::string>{"t2"});
  EXPECT_EQ(c().records(q_), 1);
}

TEST_P(queue_conformance, ticket_ids_are_not_shared_between_users) {
  ASSERT_OK(c().enqueue(spec(q_, "alice", "t1")));
  auto r = c().enqueue(spec(q_, "bob", "t1"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, errc::invalid_argument);
  EXPECT_EQ(c().user_ticket(q_, "bob"), "");
}

TEST_P(queue_conformance, malformed_input_is_named_and_changes_nothing) {
  ASSERT_OK(c().enqueue(spec(q_, "alice", "t1")));
  auto before_seq = c().command({"GET", codec::queue_keys(q_)[1]}).str;
  std::vector<ticket_spec> bad;
  bad.push_back(spec(q_, "", "t9"));             // empty user
  bad.push_back(spec(q_, "bo b", "t9"));         // space in user
  bad.push_back(spec(q_, "bob", ""));            // empty ticket
  bad.push_back(spec(q_, "bob", "t9", 0));       // ttl 0
  bad.push_back(spec(q_, "bob", "t9", 3600001)); // ttl too long
  bad.push_back(spec("a{b}", "bob", "t9"));      // hash tag in queue name
  bad.push_back(spec("", "bob", "t9"));          // empty queue
  auto big = spec(q_, "bob", "t9");
  big.attrs.assign(4097, 'x'); // oversized attributes
  bad.push_back(big);
  for (auto& s : bad) {
    auto e = c().enqueue(s);
    ASSERT_FALSE(e) << s.user << "/" << s.ticket;
    EXPECT_EQ(e.error().code, errc::invalid_argument);
    EXPECT_FALSE(e.error().detail.empty());
    auto k = c().claim(s);
    ASSERT_FALSE(k);
    EXPECT_EQ(k.error().code, errc::invalid_argument);
  }
  EXPECT_EQ(c().cancel(ref("alice", "12x")).error().code,
            errc::invalid_argument);
  EXPECT_EQ(c().claim(spec(q_, "bob", "t9"), 0).error().code,
            errc::invalid_argument);
  // The scripts check on their own too: a non-numeric TTL sent raw.
  auto keys = codec::queue_keys(q_);
  std::vector<script_call> raw{
    {script_id::enqueue, keys, {"bob", "t9", "n1", "", "abc"}},
    {script_id::claim, keys, {"bob", "t9", "n1", "", "1000", "x", "10", "0"}},
    {script_id::heartbeat, keys, {"alice", "1", "-5"}},
    {script_id::sweep, keys, {"0"}},
    // A NUL would end a field of the record (lua/lib/common.lua).
    {script_id::claim,
     keys,
     {"bob", "t9", "n1", "", "1000", "10", "10", "0", "", "",
      std::string{"a\0b", 3}}},
    {script_id::enqueue,
     keys,
     {"bob", "t9", "n1", "", "1000", "", "", std::string{"a\0b", 3}}},
  };
  for (auto& r : c().conn().run(raw)) {
    ASSERT_EQ(r.code, errc::none);
    ASSERT_EQ(r.value.type, store_value::kind::array);
    EXPECT_EQ(r.value.elements.at(0).str, "invalid");
  }
  EXPECT_EQ(c().waiting(q_), std::vector<std::string>{"t1"});
  EXPECT_EQ(c().records(q_), 1);
  EXPECT_EQ(c().user_ticket(q_, "bob"), "");
  EXPECT_EQ(c().command({"GET", codec::queue_keys(q_)[1]}).str, before_seq);
}

// -- claim --------------------------------------------------------------------

TEST_P(queue_conformance, claim_takes_the_oldest_live_waiter) {
  auto a = c().enqueue(spec(q_, "alice", "ta", 30000, "node-a"));
  ASSERT_OK(a);
  ASSERT_OK(c().enqueue(spec(q_, "bob", "tb")));
  auto s = spec(q_, "carol", "tc");
  s.attrs = "{\"lang\":\"de\"}";
  auto r = c().claim(s);
  ASSERT_OK(r);
  EXPECT_EQ(r->outcome, claim_outcome::matched);
  EXPECT_EQ(r->partner.user, "alice");
  EXPECT_EQ(r->partner.ticket, "ta");
  EXPECT_EQ(r->partner.node, "node-a");
  EXPECT_EQ(r->partner.score, a->score);
  EXPECT_EQ(r->partner.token, a->token);
  EXPECT_EQ(c().waiting(q_), std::vector<std::string>{"tb"});
  // The claimed side learns who claimed it, with the claimer's attributes
  // kept for the finalizer.
  auto told = c().claim(spec(q_, "alice", "ta"));
  ASSERT_OK(told);
  EXPECT_EQ(told->outcome, claim_outcome::claimed_by_other);
  EXPECT_EQ(told->partner.user, "carol");
  EXPECT_EQ(told->partner.ticket, "tc");
}

TEST_P(queue_conformance, attributes_of_any_byte_survive_the_record) {
  // The record keeps attrs apart from its NUL-separated fields: the
  // separators and length digits of either layout inside attrs.
  const std::string a_attrs{"\x01:7:x|;,\xc3\xa9{}"};
  const std::string c_attrs{"c:\x01"};
  auto a = spec(q_, "alice", "ta");
  a.attrs = a_attrs;
  ASSERT_OK(c().enqueue(a));
  auto s = spec(q_, "carol", "tc");
  s.attrs = c_attrs;
  auto r = c().claim(s);
  ASSERT_OK(r);
  ASSERT_EQ(r->outcome, claim_outcome::matched);
  EXPECT_EQ(r->partner.attrs, a_attrs);
  // A retried claim reads the claimer's record: the partner's copy too.
  auto again = c().claim(s);
  ASSERT_OK(again);
  ASSERT_EQ(again->outcome, claim_outcome::matched);
  EXPECT_EQ(again->partner.attrs, a_attrs);
  EXPECT_EQ(again->partner.token, r->partner.token);
  EXPECT_EQ(again->token, r->token);
  // The engine refuses NUL in attrs (queue_codec); the scripts keep any
  // byte of a raw call all the same.
  auto keys = codec::queue_keys(q_);
  const std::string nul{"x\0y\1", 4};
  std::vector<script_call> raw{
    {script_id::enqueue, keys, {"dave", "td", "n1", nul, "30000"}},
    {script_id::claim,
     keys,
     {"erin", "te", "n1", "", "30000", "10", "10", "0"}},
  };
  auto replies = c().conn().run(raw);
  ASSERT_EQ(replies.size(), 2u);
  ASSERT_EQ(replies[1].code, errc::none);
  ASSERT_GE(replies[1].value.elements.size(), 7u);
  EXPECT_EQ(replies[1].value.elements[0].str, "matched");
  EXPECT_EQ(replies[1].value.elements[6].str, nul);
}

TEST_P(queue_conformance, a_record_of_the_previous_layout_is_still_read) {
  // Written as the build before the NUL-separated layout wrote it (every
  // field length-prefixed): a rolling upgrade finds such waiters in Redis.
  auto t = c().command({"TIME"});
  ASSERT_EQ(t.elements.size(), 2u);
  auto now = std::stoll(t.elements[0].str) * 1000
             + std::stoll(t.elements[1].str) / 1000;
  auto deadline = std::to_string(now + 60000);
  auto since = std::to_string(now);
  std::vector<std::string> fields{"old-user", "t-old", "node-old", "{\"k\":1}",
                                  "7",        "7",     "waiting",  deadline,
                                  "0",        "",      "",         "",
                                  "",         "",      "",         since,
                                  "",         "",      "",         ""};
  std::string rec;
  for (auto& f : fields)
    rec += std::to_string(f.size()) + ":" + f;
  auto keys = codec::queue_keys(q_);
  c().command({"HSET", keys[2], "t-old", rec});
  c().command({"HSET", keys[3], "old-user", "t-old"});
  c().command({"ZADD", keys[0], "7", "t-old"});
  c().command({"ZADD", keys[4], deadline, "t-old"});
  c().command({"SET", keys[1], "7"});
  auto r = c().claim(spec(q_, "bob", "tb"));
  ASSERT_OK(r);
  ASSERT_EQ(r->outcome, claim_outcome::matched);
  EXPECT_EQ(r->partner.user, "old-user");
  EXPECT_EQ(r->partner.node, "node-old");
  EXPECT_EQ(r->partner.attrs, "{\"k\":1}");
  EXPECT_EQ(r->partner.token, "7");
  EXPECT_EQ(r->partner.score, 7);
  // The old waiter's record is rewritten in the new layout and still read.
  auto told = c().claim(spec(q_, "old-user", "t-old"));
  ASSERT_OK(told);
  EXPECT_EQ(told->outcome, claim_outcome::claimed_by_other);
  EXPECT_EQ(told->partner.user, "bob");
}

TEST_P(queue_conformance, claim_into_an_empty_queue_enqueues) {
  auto a = c().claim(spec(q_, "alice", "ta"));
  ASSERT_OK(a);
  EXPECT_EQ(a->outcome, claim_outcome::queued);
  EXPECT_EQ(a->stale_removed, 0u);
  EXPECT_FALSE(a->more);
  auto b = c().claim(spec(q_, "bob", "tb"));
  ASSERT_OK(b);
  EXPECT_EQ(b->outcome, claim_outcome::matched);
  EXPECT_EQ(b->partner.user, "alice");
  EXPECT_TRUE(c().waiting(q_).empty());
}

TEST_P(queue_conformance, a_retried_claim_answers_the_same_match) {
  ASSERT_OK(c().enqueue(spec(q_, "alice", "ta")));
  ASSERT_OK(c().enqueue(spec(q_, "bob", "tb")));
  auto first = c().claim(spec(q_, "carol", "tc"));
  ASSERT_OK(first);
  auto retry = c().claim(spec(q_, "carol", "tc"));
  ASSERT_OK(retry);
  EXPECT_EQ(retry->outcome, claim_outcome::matched);
  EXPECT_EQ(retry->partner.ticket, first->partner.ticket);
  EXPECT_EQ(c().waiting(q_), std::vector<std::string>{"tb"});
}

TEST_P(queue_conformance, a_waiter_that_rescans_keeps_its_place) {
  auto a = c().claim(spec(q_, "alice", "ta"));
  ASSERT_OK(a);
  auto again = c().claim(spec(q_, "alice", "ta"), 10, true);
  ASSERT_OK(again);
  EXPECT_EQ(again->outcome, claim_outcome::queued);
  EXPECT_EQ(again->score, a->score);
  EXPECT_EQ(again->token, a->token);
  EXPECT_EQ(c().waiting(q_), std::vector<std::string>{"ta"});
}

TEST_P(queue_conformance, a_rescan_whose_ticket_is_gone_never_claims) {
  ASSERT_OK(c().enqueue(spec(q_, "bob", "tb")));
  auto r = c().claim(spec(q_, "alice", "ta"), 10, true);
  ASSERT_OK(r);
  EXPECT_EQ(r->outcome, claim_outcome::claimed_by_other);
  EXPECT_EQ(c().waiting(q_), std::vector<std::string>{"tb"});
  EXPECT_EQ(c().user_ticket(q_, "alice"), "");
}

TEST_P(queue_conformance, stale_only_window_is_reported_not_empty) {
  ASSERT_OK(c().enqueue(spec(q_, "s1", "ts1", 30)));
  ASSERT_OK(c().enqueue(spec(q_, "s2", "ts2", 30)));
  ASSERT_OK(c().enqueue(spec(q_, "live", "tl", 60000)));
  store_.advance(80);
  auto first = c().claim(spec(q_, "carol", "tc"), 2);
  ASSERT_OK(first);
  EXPECT_EQ(first->outcome, claim_outcome::queued);
  EXPECT_EQ(first->stale_removed, 2u);
  EXPECT_TRUE(first->more);
  auto second = c().claim(spec(q_, "carol", "tc"), 2, true);
  ASSERT_OK(second);
  EXPECT_EQ(second->outcome, claim_outcome::matched);
  EXPECT_EQ(second->partner.user, "live");
  EXPECT_TRUE(c().waiting(q_).empty());
}

TEST_P(queue_conformance, a_ticket_past_its_deadline_is_never_claimed) {
  auto s = c().enqueue(spec(q_, "ghost", "tg", 30));
  ASSERT_OK(s);
  store_.advance(80);
  auto r = c().claim(spec(q_, "carol", "tc"));
  ASSERT_OK(r);
  EXPECT_EQ(r->outcome, claim_outcome::queued);
  EXPECT_EQ(r->stale_removed, 1u);
  EXPECT_EQ(c().user_ticket(q_, "ghost"), "");
  auto hb = c().heartbeat(ref("ghost", s->token), 30000);
  ASSERT_OK(hb);
  EXPECT_FALSE(hb->alive);
}

// -- cancel -------------------------------------------------------------------

TEST_P(queue_conformance, cancel_with_an_old_token_never_removes_a_newer) {
  auto t1 = c().enqueue(spec(q_, "alice", "t1"));
  ASSERT_OK(t1);
  auto x = c().cancel(ref("alice", t1->token));
  ASSERT_OK(x);
  EXPECT_EQ(x->outcome, cancel_outcome::cancelled);
  auto t2 = c().enqueue(spec(q_, "alice", "t2"));
  ASSERT_OK(t2);
  auto late = c().cancel(ref("alice", t1->token));
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, errc::stale_token);
  EXPECT_EQ(c().waiting(q_), std::vector<std::string>{"t2"});
  auto none = c().cancel(ref("nobody", "1"));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, errc::not_found);
}

TEST_P(queue_conformance, cancel_of_a_claimed_ticket_is_in_flight) {
  auto a = c().enqueue(spec(q_, "alice", "ta"));
  ASSERT_OK(a);
  auto b = c().claim(spec(q_, "bob", "tb", 30000, "n2"));
  ASSERT_OK(b);
  auto x = c().cancel(ref("alice", a->token));
  ASSERT_OK(x);
  EXPECT_EQ(x->outcome, cancel_outcome::in_flight);
  EXPECT_EQ(x->state, "claimed");
  // The claimer's node owns the pair: the verdict is asked there.
  EXPECT_EQ(x->node, "n2");
  EXPECT_EQ(c().user_ticket(q_, "alice"), "ta");
  // The claimer's own cancel names its own node.
  auto y = c().cancel(ref("bob", b->token));
  ASSERT_OK(y);
  EXPECT_EQ(y->outcome, cancel_outcome::in_flight);
  EXPECT_EQ(y->state, "claimer");
  EXPECT_EQ(y->node, "n2");
  // A waiting ticket's cancel names no node.
  auto w = c().enqueue(spec(q_, "carol", "tc"));
  ASSERT_OK(w);
  auto z = c().cancel(ref("carol", w->token));
  ASSERT_OK(z);
  EXPECT_EQ(z->outcome, cancel_outcome::cancelled);
  EXPECT_EQ(z->node, "");
}

// -- heartbeat, requeue, release, sweep -----------------------------------------

TEST_P(queue_conformance, heartbeat_extends_only_the_current_token) {
  auto a = c().enqueue(spec(q_, "alice", "ta", 1000));
  ASSERT_OK(a);
  store_.advance(20);
  auto hb = c().heartbeat(ref("alice", a->token), 60000);
  ASSERT_OK(hb);
  EXPECT_TRUE(hb->alive);
  EXPECT_EQ(hb->state, "waiting");
  EXPECT_GT(hb->deadline, a->deadline + 50000);
  auto wrong = c().heartbeat(ref("alice", a->token + "9"), 60000);
  ASSERT_OK(wrong);
  EXPECT_FALSE(wrong->alive);
  store_.advance(1100); // past the first deadline, within the extended one
  auto r = c().claim(spec(q_, "bob", "tb"));
  ASSERT_OK(r);
  EXPECT_EQ(r->outcome, claim_outcome::matched);
}

TEST_P(queue_conformance, requeue_restores_the_original_place) {
  auto a = c().enqueue(spec(q_, "alice", "ta"));
  ASSERT_OK(a);
  ASSERT_OK(c().enqueue(spec(q_, "bob", "tb")));
  auto k = c().claim(spec(q_, "carol", "tc"));
  ASSERT_OK(k);
  ASSERT_EQ(k->partner.ticket, "ta");
  ASSERT_OK(c().enqueue(spec(q_, "dave", "td")));
  auto r = c().requeue(q_, "ta");
  ASSERT_OK(r);
  EXPECT_EQ(r->outcome, requeue_outcome::requeued);
  EXPECT_EQ(r->score, a->score);
  EXPECT_EQ(c().waiting(q_), (std::vector<std::string>{"ta", "tb", "td"}));
  auto again = c().requeue(q_, "ta");
  ASSERT_OK(again);
  EXPECT_EQ(again->outcome, requeue_outcome::waiting);
  // The claimer goes back as a new arrival once its record is released.
  auto rel = c().release(q_, "tc");
  ASSERT_OK(rel);
  EXPECT_EQ(rel->outcome, release_outcome::released);
  auto fresh = c().claim(spec(q_, "carol", "tc2"));
  ASSERT_OK(fresh);
  EXPECT_EQ(fresh->partner.ticket, "ta");
}

TEST_P(queue_conformance, requeue_of_a_lapsed_waiter_removes_it) {
  auto a = c().enqueue(spec(q_, "alice", "ta", 40));
  ASSERT_OK(a);
  ASSERT_OK(c().claim(spec(q_, "bob", "tb")));
  store_.advance(90);
  auto r = c().requeue(q_, "ta");
  ASSERT_OK(r);
  EXPECT_EQ(r->outcome, requeue_outcome::stale);
  EXPECT_TRUE(c().waiting(q_).empty());
  EXPECT_EQ(c().user_ticket(q_, "alice"), "");
}

TEST_P(queue_conformance, release_settles_claimed_pairs_only) {
  ASSERT_OK(c().enqueue(spec(q_, "alice", "ta")));
  ASSERT_OK(c().claim(spec(q_, "bob", "tb")));
  ASSERT_OK(c().enqueue(spec(q_, "carol", "tc")));
  EXPECT_EQ(c().release(q_, "ta")->outcome, release_outcome::released);
  EXPECT_EQ(c().release(q_, "tb")->outcome, release_outcome::released);
  EXPECT_EQ(c().release(q_, "tb")->outcome, release_outcome::gone);
  EXPECT_EQ(c().release(q_, "tc")->outcome, release_outcome::waiting);
  EXPECT_EQ(c().records(q_), 1);
  EXPECT_EQ(c().waiting(q_), std::vector<std::string>{"tc"});
}

TEST_P(queue_conformance, sweep_removes_stale_tickets_in_bounded_batches) {
  for (int i = 0; i < 7; ++i)
    ASSERT_OK(c().enqueue(
      spec(q_, "s" + std::to_string(i), "ts" + std::to_string(i), 30)));
  ASSERT_OK(c().enqueue(spec(q_, "live", "tl", 60000)));
  store_.advance(80);
  auto first = c().sweep(q_, 3);
  ASSERT_OK(first);
  EXPECT_EQ(first->removed, 3u);
  EXPECT_TRUE(first->more);
  EXPECT_EQ(first->depth, 5u); // what is left, the 4 stale ones included
  uint32_t total = first->removed;
  sweep_result last;
  for (int i = 0; i < 5; ++i) {
    auto r = c().sweep(q_, 3);
    ASSERT_OK(r);
    total += r->removed;
    last = *r;
  }
  EXPECT_EQ(total, 7u);
  EXPECT_FALSE(last.more);
  EXPECT_EQ(last.depth, 1u);
  EXPECT_EQ(c().waiting(q_), std::vector<std::string>{"tl"});
  EXPECT_EQ(c().records(q_), 1);
}

TEST_P(queue_conformance, sweep_reports_the_depth_of_the_waiting_set) {
  auto empty = c().sweep(q_);
  ASSERT_OK(empty);
  EXPECT_EQ(empty->removed, 0u);
  EXPECT_FALSE(empty->more);
  EXPECT_EQ(empty->depth, 0u);
  EXPECT_EQ(empty->tracked, 0u);
  std::vector<enqueue_result> w;
  for (int i = 0; i < 4; ++i) {
    auto e = c().enqueue(
      spec(q_, "w" + std::to_string(i), "tw" + std::to_string(i)));
    ASSERT_OK(e);
    w.push_back(*e);
  }
  auto four = c().sweep(q_);
  ASSERT_OK(four);
  EXPECT_EQ(four->removed, 0u);
  EXPECT_EQ(four->depth, 4u);
  EXPECT_EQ(four->tracked, 4u);
  // A claimed pair has left the waiting set: only waiters count in the
  // depth, every ticket in `tracked`.
  auto k = c().claim(spec(q_, "carol", "tc"));
  ASSERT_OK(k);
  ASSERT_EQ(k->outcome, claim_outcome::matched);
  auto claimed = c().sweep(q_);
  ASSERT_OK(claimed);
  EXPECT_EQ(claimed->depth, 3u);
  EXPECT_EQ(claimed->tracked, 5u);
  // Back at its place: it counts again.
  ASSERT_EQ(c().requeue(q_, k->partner.ticket)->outcome,
            requeue_outcome::requeued);
  EXPECT_EQ(c().sweep(q_)->depth, 4u);
  // A cancelled waiter is gone from it.
  ASSERT_EQ(c().cancel(ref("w3", w[3].token))->outcome,
            cancel_outcome::cancelled);
  EXPECT_EQ(c().sweep(q_)->depth, 3u);
}

TEST_P(queue_conformance, an_unfinalized_claim_lapses_after_its_hold) {
  auto a = c().enqueue(spec(q_, "alice", "ta"));
  ASSERT_OK(a);
  ASSERT_OK(c().claim(spec(q_, "bob", "tb"), 10, false, 50));
  auto alive = c().heartbeat(ref("alice", a->token), 30000);
  ASSERT_OK(alive);
  EXPECT_TRUE(alive->alive);
  EXPECT_EQ(alive->state, "claimed");
  store_.advance(100);
  auto gone = c().heartbeat(ref("alice", a->token), 30000);
  ASSERT_OK(gone);
  EXPECT_FALSE(
    gone
      ->alive); // the waiter finds out and can re-enqueue (I2 of docs/design.md)
  auto swept = c().sweep(q_);
  ASSERT_OK(swept);
  EXPECT_EQ(swept->removed, 1u); // the claimer's record
  EXPECT_EQ(swept->depth, 0u);
  EXPECT_EQ(swept->tracked, 0u); // nothing left: the queue may be forgotten
  EXPECT_EQ(c().records(q_), 0);
}

// -- FIFO -----------------------------------------------------------------------

TEST_P(queue_conformance, same_millisecond_tickets_are_claimed_in_order) {
  constexpr int n = 200;
  // Pipelined in one batch: they share a millisecond (or a few).
  std::vector<script_call> calls;
  for (int i = 0; i < n; ++i)
    calls.push_back(*codec::enqueue_call(
      spec(q_, "w" + std::to_string(i), "tw" + std::to_string(i))));
  auto replies = c().conn().run(calls);
  int64_t first_deadline = 0, last_deadline = 0;
  for (int i = 0; i < n; ++i) {
    auto r = codec::parse_enqueue(replies[i]);
    ASSERT_OK(r);
    (i == 0 ? first_deadline : last_deadline) = r->deadline;
  }
  // A wall-clock bound on the batch (the embedded store runs on the system
  // clock). Under ASan the 200 in-process enqueues take 40-100 ms on a
  // shared 2-core machine (bench/run sanitize), and still share milliseconds.
#ifdef __SANITIZE_ADDRESS__
  constexpr int64_t batch_spread_ms = 250;
#else
  constexpr int64_t batch_spread_ms = 50;
#endif
  EXPECT_LE(last_deadline - first_deadline, batch_spread_ms);
  for (int i = 0; i < n; ++i) {
    auto r
      = c().claim(spec(q_, "c" + std::to_string(i), "tc" + std::to_string(i)));
    ASSERT_OK(r);
    ASSERT_EQ(r->outcome, claim_outcome::matched);
    EXPECT_EQ(r->partner.user, "w" + std::to_string(i));
  }
}

// -- cluster membership and routing (lua/cluster_*.lua) --------------------------

/// The string elements of a script's array reply ({"error: ..."} else).
std::vector<std::string> strings(const store_reply& r) {
  if (r.code != errc::none)
    return {"error: " + r.detail};
  if (r.value.type != store_value::kind::array)
    return {"error: " + r.value.str};
  std::vector<std::string> out;
  for (auto& e : r.value.elements)
    out.push_back(e.str);
  return out;
}

using strs = std::vector<std::string>;

TEST_P(queue_conformance, cluster_membership_routing_and_user_map) {
  // The cluster keys are fixed (one cluster per store): start clean.
  std::vector<store_command> clean{
    {"DEL", cluster_test_keys[0], cluster_test_keys[1], cluster_test_keys[2]}};
  ASSERT_EQ(c().conn().execute(clean).at(0).code, errc::none);
  auto run = [&](script_id id, strs keys, strs args) {
    std::vector<script_call> calls{script_call{id, keys, args}};
    return strings(c().conn().run(calls).at(0));
  };
  strs members_keys{cluster_test_keys[0], cluster_test_keys[1]};
  strs user_keys{cluster_test_keys[2]};
  strs route_keys{cluster_test_keys[2], cluster_test_keys[0],
                  cluster_test_keys[1]};
  auto beat = [&](const std::string& node, const std::string& addr,
                  const std::string& ttl) {
    return run(script_id::cluster_beat, members_keys, {node, addr, ttl});
  };
  // A node's first beat (or one after the store forgot it) says 'joined'.
  EXPECT_EQ(beat("n1", "h1:1", "1000"), (strs{"joined", "n1", "h1:1"}));
  // Live members in deadline order.
  EXPECT_EQ(beat("n2", "h2:2", "100000"),
            (strs{"joined", "n1", "h1:1", "n2", "h2:2"}));
  EXPECT_EQ(beat("n2", "h2:2", "100000"),
            (strs{"members", "n1", "h1:1", "n2", "h2:2"})); // idempotent
  EXPECT_EQ(run(script_id::cluster_user, user_keys, {"set", "u1", "n1"}),
            strs{"set"});
  EXPECT_EQ(run(script_id::cluster_user, user_keys, {"set", "u2", "n2"}),
            strs{"set"});
  EXPECT_EQ(run(script_id::cluster_route, route_keys, {"u1", "u2", "u3"}),
            (strs{"route", "n1", "h1:1", "1", "n2", "h2:2", "1", "", "", "0"}));
  // unset is compare-and-delete: another node's unset keeps the entry.
  EXPECT_EQ(run(script_id::cluster_user, user_keys, {"unset", "u1", "n2"}),
            (strs{"kept", "n1"}));
  EXPECT_EQ(run(script_id::cluster_user, user_keys, {"unset", "u1", "n1"}),
            strs{"unset"});
  EXPECT_EQ(run(script_id::cluster_user, user_keys, {"unset", "u1", "n1"}),
            strs{"unset"});
  EXPECT_EQ(run(script_id::cluster_route, route_keys, {"u1"}),
            (strs{"route", "", "", "0"}));
  // n1 stops beating: past its deadline it is not live, and the next beat
  // of anybody removes its record.
  ASSERT_EQ(run(script_id::cluster_user, user_keys, {"set", "u1", "n1"}),
            strs{"set"});
  store_.advance(1100);
  EXPECT_EQ(run(script_id::cluster_route, route_keys, {"u1"}),
            (strs{"route", "n1", "h1:1", "0"}));
  EXPECT_EQ(beat("n2", "h2:2", "100000"), (strs{"members", "n2", "h2:2"}));
  EXPECT_EQ(run(script_id::cluster_route, route_keys, {"u1", "u2"}),
            (strs{"route", "n1", "", "0", "n2", "h2:2", "1"}));
  // Refusals change nothing.
  EXPECT_EQ(beat("n2", "h2:2", "0"), (strs{"invalid", "ttl"}));
  EXPECT_EQ(beat("bad node", "h2:2", "1000"), (strs{"invalid", "node"}));
  EXPECT_EQ(run(script_id::cluster_user, user_keys, {"move", "u1", "n1"}),
            (strs{"invalid", "op"}));
  EXPECT_EQ(run(script_id::cluster_route, route_keys, {}),
            (strs{"invalid", "users"}));
  ASSERT_EQ(c().conn().execute(clean).at(0).code, errc::none);
}

// -- races over separate connections ---------------------------------------------

constexpr int rounds = 1000;

TEST_P(queue_conformance, two_claimers_one_waiter_exactly_one_wins) {
  auto c1 = std::make_unique<store_client>(store_.factory->connect());
  auto c2 = std::make_unique<store_client>(store_.factory->connect());
  racer race;
  int violations = 0;
  for (int i = 0; i < rounds; ++i) {
    auto q = q_ + "-" + std::to_string(i);
    ASSERT_OK(c().enqueue(spec(q, "w", "tw")));
    outcome<claim_result> r1{errc::none}, r2{errc::none};
    race.run([&] { r1 = c1->claim(spec(q, "a", "ta")); },
             [&] { r2 = c2->claim(spec(q, "b", "tb")); });
    ASSERT_OK(r1);
    ASSERT_OK(r2);
    int wins = (r1->outcome == claim_outcome::matched)
               + (r2->outcome == claim_outcome::matched);
    auto& winner = r1->outcome == claim_outcome::matched ? r1 : r2;
    auto& loser = r1->outcome == claim_outcome::matched ? r2 : r1;
    if (wins != 1 || winner->partner.user != "w"
        || loser->outcome != claim_outcome::queued)
      ++violations;
    // The waiter and the winner are out of the queue; only the loser waits.
    auto w = c().waiting(q);
    if (w != std::vector<std::string>{loser->ticket})
      ++violations;
  }
  EXPECT_EQ(violations, 0);
}

TEST_P(queue_conformance, two_arrivals_into_an_empty_queue_always_pair) {
  auto c1 = std::make_unique<store_client>(store_.factory->connect());
  auto c2 = std::make_unique<store_client>(store_.factory->connect());
  racer race;
  int violations = 0;
  for (int i = 0; i < rounds; ++i) {
    auto q = q_ + "-" + std::to_string(i);
    outcome<claim_result> r1{errc::none}, r2{errc::none};
    race.run([&] { r1 = c1->claim(spec(q, "a", "ta")); },
             [&] { r2 = c2->claim(spec(q, "b", "tb")); });
    ASSERT_OK(r1);
    ASSERT_OK(r2);
    bool a_claimed_b = r1->outcome == claim_outcome::matched
                       && r1->partner.user == "b"
                       && r2->outcome == claim_outcome::queued;
    bool b_claimed_a = r2->outcome == claim_outcome::matched
                       && r2->partner.user == "a"
                       && r1->outcome == claim_outcome::queued;
    if (a_claimed_b == b_claimed_a || !c().waiting(q).empty())
      ++violations;
  }
  EXPECT_EQ(violations, 0);
}

TEST_P(queue_conformance, cancel_and_claim_never_both_succeed) {
  auto c1 = std::make_unique<store_client>(store_.factory->connect());
  auto c2 = std::make_unique<store_client>(store_.factory->connect());
  racer race;
  int violations = 0, cancels = 0, matches = 0;
  for (int i = 0; i < rounds; ++i) {
    auto q = q_ + "-" + std::to_string(i);
    auto w = c().enqueue(spec(q, "w", "tw"));
    ASSERT_OK(w);
    outcome<cancel_result> x{errc::none};
    outcome<claim_result> k{errc::none};
    race.run(
      [&] {
        x = c1->cancel(ticket_ref{q, "w", w->token});
      },
      [&] { k = c2->claim(spec(q, "b", "tb")); });
    ASSERT_OK(x);
    ASSERT_OK(k);
    bool cancelled = x->outcome == cancel_outcome::cancelled;
    bool matched = k->outcome == claim_outcome::matched;
    cancels += cancelled;
    matches += matched;
    if (cancelled == matched) // exactly one of them must hold
      ++violations;
    if (matched && x->outcome != cancel_outcome::in_flight)
      ++violations;
  }
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(cancels + matches, rounds);
}

INSTANTIATE_TEST_SUITE_P(stores, queue_conformance,
                         ::testing::Values("embedded", "redis",
                                           "redis_cluster"),
                         [](const auto& info) { return info.param; });

} // namespace
