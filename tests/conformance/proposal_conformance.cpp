// The ready check on every queue store (problem 16, I13 of
// docs/design.md; docs/groups.md "Ready check"): a claimed group of a
// queue with an accept time is a proposal; every member accepting makes it
// commit, a decline or the deadline settles it (the decliners and the
// silent removed and told, every other ticket back at its original
// place), and a lapsed lease settles it by the same rule.

#include <map>
#include <random>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "tests/conformance/group_fixture.hpp"
#include "tests/support/race.hpp"

using namespace mm;
using namespace mm::test;

namespace {

class proposal_conformance : public group_fixture {
 protected:
  /// A 2-vs-2 of singles with a ready check.
  std::string sh_ = shape_of(
    R"({"players": {"min": 4, "max": 4}, "teams": {"count": 2, "size": 2}})");

  group_ticket_spec pspec(const std::string& ticket, const std::string& user,
                          uint32_t accept_ms = 60000) {
    auto s = gspec(ticket, {user}, sh_);
    s.accept_ms = accept_ms;
    return s;
  }

  outcome<group_claim_result> pclaim(store_client& c,
                                     const group_ticket_spec& s,
                                     uint32_t hold_ms = 10000) {
    return c.call(codec::group_claim_call(s, 20, hold_ms),
                  codec::parse_group_claim);
  }

  outcome<proposal_state> answer(store_client& c, const std::string& group,
                                 const std::string& user,
                                 const std::string& what) {
    proposal_answer a{q_, group, user, what};
    return c.call_with<proposal_state>(codec::group_answer_call(a),
                                       [&a](const store_reply& r) {
                                         return codec::parse_group_answer(a, r);
                                       });
  }

  outcome<proposal_state> answer(const std::string& group,
                                 const std::string& user,
                                 const std::string& what) {
    return answer(*client_, group, user, what);
  }

  outcome<proposal_decision> decide(store_client& c, const std::string& g) {
    std::vector<std::string> gs{g};
    auto r = c.call_with<std::vector<proposal_decision>>(
      codec::group_decide_call(q_, gs),
      [&gs](const store_reply& x) { return codec::parse_group_decide(gs, x); });
    if (!r)
      return r.error();
    return (*r)[0];
  }

  outcome<proposal_decision> decide(const std::string& g) {
    return decide(*client_, g);
  }

  /// Files tickets t<prefix>1..4 of users <prefix>1..4; the fourth claim
  /// makes the proposal. Answers it, with each ticket's original score.
  group_claim_result
  four(const std::string& prefix, std::map<std::string, int64_t>& scores,
       uint32_t accept_ms = 60000, uint32_t hold_ms = 10000) {
    group_claim_result last;
    for (int i = 1; i <= 4; ++i) {
      auto u = prefix + std::to_string(i);
      auto r = pclaim(*client_, pspec("t" + u, u, accept_ms), hold_ms);
      EXPECT_TRUE(r) << (r ? "" : r.error().detail);
      if (!r)
        return {};
      if (i < 4)
        scores["t" + u] = r->score;
      last = *r;
    }
    EXPECT_EQ(last.outcome, group_claim_outcome::matched);
    for (auto& t : last.tickets)
      scores[t.ticket] = t.score;
    return last;
  }

  outcome<group_claim_result> rescan(const std::string& user) {
    auto s = pspec("t" + user, user);
    s.rescan = true;
    return pclaim(*client_, s);
  }
};

std::map<std::string, std::string> outcomes_of(const proposal_decision& d) {
  std::map<std::string, std::string> out;
  for (size_t i = 0; i < d.tickets.size(); ++i)
    out[d.tickets[i]] = d.outcomes[i];
  return out;
}

TEST_P(proposal_conformance, every_member_accepting_makes_it_commit) {
  std::map<std::string, int64_t> scores;
  auto g = four("a", scores);
  ASSERT_EQ(g.tickets.size(), 4u);
  auto d = decide(g.group);
  ASSERT_OK(d);
  EXPECT_EQ(d->status, "pending");
  for (int i = 1; i <= 3; ++i) {
    auto st = answer(g.group, "a" + std::to_string(i), "accept");
    ASSERT_OK(st);
    EXPECT_EQ(st->answer, "accept");
    EXPECT_EQ(st->accepted, static_cast<uint32_t>(i));
    EXPECT_EQ(st->players, 4u);
    EXPECT_EQ(st->claimer, "n1");
    EXPECT_FALSE(st->complete);
  }
  auto again = answer(g.group, "a1", "decline"); // the first answer stands
  ASSERT_OK(again);
  EXPECT_EQ(again->answer, "accept");
  EXPECT_FALSE(again->declined);
  auto last = answer(g.group, "a4", "accept");
  ASSERT_OK(last);
  EXPECT_TRUE(last->complete);
  d = decide(g.group);
  ASSERT_OK(d);
  EXPECT_EQ(d->status, "accepted");
  d = decide(g.group); // idempotent
  ASSERT_OK(d);
  EXPECT_EQ(d->status, "accepted");
  // The claimer commits it as any group: released, it is gone.
  ASSERT_OK(client_->call(codec::group_release_call(q_, g.group),
                          codec::parse_group_settle));
  auto ended = answer(g.group, "a1", "accept");
  ASSERT_FALSE(ended);
  EXPECT_EQ(ended.error().code, errc::not_found);
  d = decide(g.group);
  ASSERT_OK(d);
  EXPECT_EQ(d->status, "gone");
  EXPECT_TRUE(waiting().empty());
}

TEST_P(proposal_conformance, a_decline_removes_the_decliner_and_no_one_else) {
  std::map<std::string, int64_t> scores;
  auto g = four("b", scores);
  ASSERT_OK(answer(g.group, "b1", "accept"));
  auto no = answer(g.group, "b2", "decline");
  ASSERT_OK(no);
  EXPECT_TRUE(no->declined);
  auto d = decide(g.group);
  ASSERT_OK(d);
  ASSERT_EQ(d->status, "settled");
  auto out = outcomes_of(*d);
  EXPECT_EQ(out["tb1"], "requeued");
  EXPECT_EQ(out["tb2"], "declined");
  EXPECT_EQ(out["tb3"], "requeued"); // silent, but the deadline is far
  EXPECT_EQ(out["tb4"], "requeued");
  for (auto t : {"tb1", "tb3", "tb4"})
    EXPECT_EQ(score_of(t), scores[t]) << t << " is back at its place";
  EXPECT_EQ(score_of("tb2"), -1);
  // The decliner's party reads why, once; then the ticket is gone.
  auto r = rescan("b2");
  ASSERT_OK(r);
  EXPECT_EQ(r->outcome, group_claim_outcome::removed);
  EXPECT_EQ(r->detail, "declined");
  r = rescan("b2");
  ASSERT_OK(r);
  EXPECT_EQ(r->outcome, group_claim_outcome::gone);
  // The others' re-scans find them waiting; answers are refused now.
  r = rescan("b3");
  ASSERT_OK(r);
  EXPECT_EQ(r->outcome, group_claim_outcome::queued);
  EXPECT_EQ(r->score, scores["tb3"]);
  auto late = answer(g.group, "b3", "accept");
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, errc::not_found);
  // The decliner may queue again (a new ticket; nothing holds the user).
  auto back = pclaim(*client_, pspec("tb2-again", "b2"));
  ASSERT_OK(back);
  EXPECT_EQ(back->outcome, group_claim_outcome::matched);
}

TEST_P(proposal_conformance, the_deadline_removes_the_silent) {
  std::map<std::string, int64_t> scores;
  auto g = four("c", scores, 1000);
  ASSERT_OK(answer(g.group, "c1", "accept"));
  ASSERT_OK(answer(g.group, "c3", "accept"));
  store_.advance(1100);
  auto late = answer(g.group, "c2", "accept");
  ASSERT_FALSE(late) << "past the deadline nobody answers";
  EXPECT_EQ(late.error().code, errc::not_found);
  auto d = decide(g.group);
  ASSERT_OK(d);
  ASSERT_EQ(d->status, "settled");
  auto out = outcomes_of(*d);
  EXPECT_EQ(out["tc1"], "requeued");
  EXPECT_EQ(out["tc2"], "timed_out");
  EXPECT_EQ(out["tc3"], "requeued");
  EXPECT_EQ(out["tc4"], "timed_out");
  EXPECT_EQ(score_of("tc1"), scores["tc1"]);
  EXPECT_EQ(score_of("tc3"), scores["tc3"]);
  auto r = rescan("c4");
  ASSERT_OK(r);
  EXPECT_EQ(r->outcome, group_claim_outcome::removed);
  EXPECT_EQ(r->detail, "timed_out");
}

TEST_P(proposal_conformance, a_lapsed_lease_settles_by_the_same_rule) {
  // The holder dies: nobody decides. A member's re-scan past the lease
  // (deadline + hold) settles it; so does any claim of the queue (its
  // sweep), for members that never look again.
  std::map<std::string, int64_t> scores;
  auto g = four("d", scores, 1000, 100);
  ASSERT_OK(answer(g.group, "d1", "accept"));
  ASSERT_OK(answer(g.group, "d2", "accept"));
  store_.advance(1200);
  auto r = rescan("d3");
  ASSERT_OK(r);
  EXPECT_EQ(r->outcome, group_claim_outcome::removed);
  EXPECT_EQ(r->detail, "timed_out");
  EXPECT_EQ(score_of("td1"), scores["td1"]);
  EXPECT_EQ(score_of("td2"), scores["td2"]);
  EXPECT_EQ(decide(g.group)->status, "gone");

  q_ = fresh_queue(GetParam() + "-lapse");
  std::map<std::string, int64_t> s2;
  auto g2 = four("e", s2, 1000, 100);
  ASSERT_OK(answer(g2.group, "e4", "decline"));
  ASSERT_OK(answer(g2.group, "e1", "accept"));
  store_.advance(1200);
  // An unrelated arrival's claim sweeps the lapsed proposal.
  ASSERT_OK(pclaim(*client_, pspec("tz", "z")));
  EXPECT_EQ(score_of("te1"), s2["te1"]);
  EXPECT_EQ(score_of("te2"), -1);
  auto r4 = rescan("e4");
  ASSERT_OK(r4);
  EXPECT_EQ(r4->outcome, group_claim_outcome::removed);
  EXPECT_EQ(r4->detail, "declined");
}

TEST_P(proposal_conformance, a_cancel_is_a_decline) {
  std::map<std::string, int64_t> scores;
  auto g = four("f", scores);
  ASSERT_OK(answer(g.group, "f2", "accept"));
  auto c = client_->call(codec::group_cancel_call(q_, "f2", g.tickets[1].token),
                         codec::parse_group_cancel);
  ASSERT_OK(c);
  EXPECT_TRUE(c->in_flight);
  auto st = answer(g.group, "f1", "");
  ASSERT_OK(st);
  EXPECT_TRUE(st->declined) << "a cancel after an accept is a decline";
  auto d = decide(g.group);
  ASSERT_OK(d);
  EXPECT_EQ(outcomes_of(*d)["tf2"], "declined");
}

TEST_P(proposal_conformance, bad_answers_are_named_and_change_nothing) {
  std::map<std::string, int64_t> scores;
  auto g = four("h", scores);
  auto other = answer(g.group, "stranger", "accept");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, errc::forbidden);
  auto unknown = answer("g999999", "h1", "accept");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, errc::not_found);
  proposal_answer bad{q_, g.group, "h1", "maybe"};
  EXPECT_FALSE(codec::group_answer_call(bad));
  bad.answer = "accept";
  bad.proposal = "g 1";
  EXPECT_FALSE(codec::group_answer_call(bad));
  auto st = answer(g.group, "h1", "");
  ASSERT_OK(st);
  EXPECT_EQ(st->accepted, 0u);
  EXPECT_FALSE(st->declined);
  EXPECT_EQ(decide(g.group)->status, "pending");
}

// A node's broker sends the answers it holds for a queue in one call:
// each is applied in order as if it were its own call.
TEST_P(proposal_conformance, answers_in_one_call_are_each_their_own) {
  std::map<std::string, int64_t> s1, s2;
  auto g = four("k", s1);
  auto h = four("m", s2);
  std::vector<proposal_answer> as{
    {q_, g.group, "k1", "accept"},       {q_, h.group, "m1", "accept"},
    {q_, g.group, "k2", "accept"},       {q_, g.group, "k1", "decline"},
    {q_, g.group, "stranger", "accept"}, {q_, "g999999", "k3", "accept"},
    {q_, h.group, "m2", "decline"},      {q_, g.group, "k3", "accept"},
    {q_, g.group, "k4", "accept"},       {q_, h.group, "m3", ""}};
  auto all = client_->call_with<std::vector<outcome<proposal_state>>>(
    codec::group_answers_call(as),
    [&as](const store_reply& r) { return codec::parse_group_answers(as, r); });
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), as.size());
  auto& x = *all;
  ASSERT_OK(x[0]);
  EXPECT_EQ(x[0]->accepted, 1u);
  ASSERT_OK(x[2]);
  EXPECT_EQ(x[2]->accepted, 2u) << "sees the answer before it";
  ASSERT_OK(x[3]);
  EXPECT_EQ(x[3]->answer, "accept") << "the first answer stands";
  ASSERT_FALSE(x[4]);
  EXPECT_EQ(x[4].error().code, errc::forbidden);
  ASSERT_FALSE(x[5]);
  EXPECT_EQ(x[5].error().code, errc::not_found);
  ASSERT_OK(x[6]);
  EXPECT_TRUE(x[6]->declined);
  EXPECT_EQ(x[6]->accepted, 1u);
  ASSERT_OK(x[8]);
  EXPECT_TRUE(x[8]->complete);
  ASSERT_OK(x[9]);
  EXPECT_EQ(x[9]->answer, "") << "an empty answer only reads";
  EXPECT_TRUE(x[9]->declined);
  // What the call wrote stands: g is accepted, h settles with m2 out.
  auto d = decide(g.group);
  ASSERT_OK(d);
  EXPECT_EQ(d->status, "accepted");
  d = decide(h.group);
  ASSERT_OK(d);
  ASSERT_EQ(d->status, "settled");
  EXPECT_EQ(outcomes_of(*d)["tm2"], "declined");
  EXPECT_EQ(outcomes_of(*d)["tm3"], "requeued");
  // Answers of two queues, or none, are refused before any call.
  EXPECT_FALSE(codec::group_answers_call({}));
  auto other = as;
  other[1].queue = q_ + "x";
  EXPECT_FALSE(codec::group_answers_call(other));
}

TEST_P(proposal_conformance,
       a_claim_that_made_a_group_without_it_then_taken_by_another) {
  // A party's claim makes a proposal of older tickets without it, and
  // another claim then takes the party into a second one while the first
  // is open. The party's next re-scan must name the group it is in, not
  // answer the first as if it were (it would commit that group as its own
  // and believe itself matched in a session without it).
  sh_ = shape_of(R"({"players": {"min": 4, "max": 4}, "party_max": 2,
                     "teams": {"count": 2, "size": 2}})");
  std::map<std::string, int64_t> scores;
  auto p0 = four("m", scores); // m1..m4 in a proposal
  auto party = gspec("tp", {"p1", "p2"}, sh_);
  party.accept_ms = 60000;
  auto r = pclaim(*client_, party);
  ASSERT_OK(r);
  ASSERT_EQ(r->outcome, group_claim_outcome::queued);
  auto c = pclaim(*client_, pspec("tc1", "c1"));
  ASSERT_OK(c);
  ASSERT_EQ(c->outcome, group_claim_outcome::queued);
  // m4 declines: m1..m3 go back ahead of the party and c1.
  ASSERT_OK(answer(p0.group, "m4", "decline"));
  ASSERT_EQ(decide(p0.group)->status, "settled");
  // The party's re-scan makes {m1, m2} vs {m3, c1}: it does not fit.
  party.rescan = true;
  auto g1 = pclaim(*client_, party);
  ASSERT_OK(g1);
  ASSERT_EQ(g1->outcome, group_claim_outcome::matched);
  ASSERT_FALSE(g1->in_group);
  // Two singles arrive; the second's claim takes the party into a match.
  ASSERT_OK(pclaim(*other_, pspec("td1", "d1")));
  auto g2 = pclaim(*other_, pspec("td2", "d2"));
  ASSERT_OK(g2);
  ASSERT_EQ(g2->outcome, group_claim_outcome::matched);
  ASSERT_NE(g2->group, g1->group);
  std::set<std::string> in2;
  for (auto& t : g2->tickets)
    in2.insert(t.ticket);
  ASSERT_EQ(in2.count("tp"), 1u);
  // The party looks again while both proposals are open.
  auto again = pclaim(*client_, party);
  ASSERT_OK(again);
  // The group it made (its retry would commit it, were the first answer
  // lost), not as its own: it is held elsewhere.
  EXPECT_EQ(again->outcome, group_claim_outcome::matched);
  EXPECT_EQ(again->group, g1->group);
  EXPECT_FALSE(again->in_group)
    << "answered " << g1->group << " (without the party) as its own";
  EXPECT_TRUE(again->held);
  // Once that one settles, the look names the group the party is in.
  ASSERT_OK(client_->call(codec::group_release_call(q_, g1->group),
                          codec::parse_group_settle));
  auto then = pclaim(*client_, party);
  ASSERT_OK(then);
  EXPECT_EQ(then->outcome, group_claim_outcome::claimed_by_other);
  EXPECT_EQ(then->group, g2->group);
}

TEST_P(proposal_conformance, a_decline_racing_another_nodes_claim) {
  // 1000 rounds (problem 16): a member declines at a random moment while
  // another node's claims race for the same tickets (arrivals filing, a
  // member's re-scan). The others always end back at their original
  // places (waiting, or in a later group at that score), the decliner is
  // never matched, no ticket is in two groups at once.
  const int rounds = GetParam() == "redis_cluster" ? 200 : 1000;
  std::mt19937 rng(7);
  racer race;
  int violations = 0;
  for (int round = 0; round < rounds; ++round) {
    q_ = fresh_queue(GetParam() + "-race");
    auto p = "r" + std::to_string(round) + "-";
    std::map<std::string, int64_t> scores;
    auto g = four(p, scores);
    if (g.tickets.size() != 4) {
      ++violations;
      continue;
    }
    auto decliner = p + std::to_string(1 + rng() % 4);
    auto delay = std::chrono::microseconds(rng() % 300);
    auto racer_user = p + std::to_string(1 + rng() % 4);
    std::vector<group_claim_result> made;
    std::optional<proposal_decision> settled;
    race.run(
      [&] {
        std::this_thread::sleep_for(delay);
        answer(*client_, g.group, decliner, "decline");
        if (auto d = decide(*client_, g.group); d && d->status == "settled")
          settled = *d;
      },
      [&] {
        for (int k = 0; k < 4; ++k) {
          auto u = p + "x" + std::to_string(k);
          auto s = pspec("t" + u, u);
          s.node = "n2";
          if (auto r = pclaim(*other_, s);
              r && r->outcome == group_claim_outcome::matched)
            made.push_back(*r);
        }
        auto s = pspec("t" + racer_user, racer_user);
        s.node = "n2";
        s.rescan = true;
        // (A re-scan of the ticket whose claim made the proposal answers
        // the proposal while it is open: a retry's answer, not a group.)
        if (auto r = pclaim(*other_, s);
            r && r->outcome == group_claim_outcome::matched
            && r->group != g.group)
          made.push_back(*r);
      });
    if (!settled) {
      auto d = decide(g.group);
      if (!d || d->status != "settled") {
        ++violations;
        continue;
      }
      settled = *d;
    }
    auto out = outcomes_of(*settled);
    for (auto& [t, o] : out)
      if ((t == "t" + decliner) != (o == "declined")) {
        ++violations;
      }
    // Every group the racer made: no decliner, every proposal ticket at
    // its original score, and only after the proposal let it go.
    std::set<std::string> in_groups;
    for (auto& m : made)
      for (auto& t : m.tickets) {
        if (!in_groups.insert(t.ticket).second)
          ++violations; // in two groups
        if (t.ticket == "t" + decliner)
          ++violations;
        if (scores.count(t.ticket) && t.score != scores[t.ticket])
          ++violations;
      }
    for (auto& [t, s] : scores) {
      if (t == "t" + decliner) {
        if (score_of(t) != -1)
          ++violations;
        continue;
      }
      if (!in_groups.count(t) && score_of(t) != s)
        ++violations; // not in a later group: waiting at its place
    }
  }
  EXPECT_EQ(violations, 0);
}

INSTANTIATE_TEST_SUITE_P(stores, proposal_conformance,
                         ::testing::Values("embedded", "redis",
                                           "redis_cluster"),
                         [](const auto& info) { return info.param; });

} // namespace
