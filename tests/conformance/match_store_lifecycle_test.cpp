// Match store conformance: the session lifecycle after the commit. A
// member ends a session (alone or in batches, raced), expiry ends old
// sessions once, prune removes only what is over.

#include <chrono>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "tests/conformance/match_store_fixture.hpp"
#include "tests/support/race.hpp"

using namespace mm;
using namespace mm::test;
using namespace mm::test::store_conformance;

namespace {

// -- session lifecycle: end, expire, prune ------------------------------------

/// The events of `evs` of type `type`, by aggregate (session) id.
std::map<std::string, outbox_event>
events_of(const std::vector<outbox_event>& evs, const std::string& type) {
  std::map<std::string, outbox_event> out;
  for (const auto& ev : evs)
    if (ev.type == type)
      out.emplace(ev.aggregate_id, ev);
  return out;
}

/// Marks every event of `evs` delivered.
void deliver(match_store& s, const std::vector<outbox_event>& evs) {
  std::vector<std::string> ids;
  for (const auto& ev : evs)
    ids.push_back(ev.event_id);
  auto m = s.mark_delivered(ids);
  if (!m || *m != ids.size())
    throw std::runtime_error("mark delivered failed");
}

/// Commits `reqs`, all of which must create a session; returns their ids.
std::vector<std::string> commit_all(match_store& s,
                                    const std::vector<match_request>& reqs) {
  std::vector<std::string> ids;
  for (auto& r : s.commit_matches(reqs)) {
    if (!r || !r->created)
      throw std::runtime_error("commit failed: "
                               + (r ? "not created" : r.error().detail));
    ids.push_back(r->session_id);
  }
  return ids;
}

/// Commits `n` sessions (a<i>, b<i>) in one batch and takes their
/// match.created events out of the way; returns their ids, by i.
std::vector<std::string> commit_pairs(match_store& s, const std::string& q,
                                      const std::string& a,
                                      const std::string& b, int n) {
  std::vector<match_request> reqs;
  for (int i = 0; i < n; ++i)
    reqs.push_back(req(q, a + std::to_string(i), b + std::to_string(i)));
  auto ids = commit_all(s, reqs);
  drain(s);
  return ids;
}

/// An end that found the session ended before, by `by`, for `why`.
#define EXPECT_ENDED_BEFORE(x, by, why) \
  do {                                  \
    ASSERT_OK(x);                       \
    EXPECT_FALSE((x)->ended_now);       \
    EXPECT_EQ((x)->ended_by, (by));     \
    EXPECT_EQ((x)->reason, (why));      \
  } while (false)

/// The same final state, as a repeated end answers it.
#define EXPECT_SAME_END(x, first)                                   \
  do {                                                              \
    EXPECT_ENDED_BEFORE(x, (first).ended_by, (first).reason);       \
    EXPECT_EQ((x)->session.session_id, (first).session.session_id); \
    EXPECT_EQ((x)->session.status, session_status::closed);         \
    EXPECT_EQ((x)->session.closed_at, (first).session.closed_at);   \
    EXPECT_EQ((x)->session.close_reason, (first).reason);           \
  } while (false)

TEST_P(match_store_conformance, a_member_ends_a_session_with_one_event) {
  auto sid = commit_all(s(), {req(q_, "alice", "bob")}).at(0);
  EXPECT_EQ(drain(s()).size(), 1u); // match.created
  auto relay = factory_->connect();
  ASSERT_OK(relay->wait_for_events(1)); // starts listening
  auto e = s().end_session(sid, "bob", "hung up");
  ASSERT_OK(e);
  EXPECT_TRUE(e->ended_now);
  EXPECT_EQ(e->ended_by, "bob");
  EXPECT_EQ(e->reason, "hung up");
  EXPECT_EQ(e->session.session_id, sid);
  EXPECT_EQ(e->session.status, session_status::closed);
  EXPECT_EQ(e->session.close_reason, "hung up");
  EXPECT_EQ(e->session.user_a, "alice");
  EXPECT_EQ(e->session.ticket_b, "t-bob-1");
  EXPECT_GE(e->session.closed_at, e->session.created_at);
  auto woke = relay->wait_for_events(5000);
  ASSERT_OK(woke);
  EXPECT_TRUE(*woke) << "the end notified nobody";
  // Exactly one event, with the match.created shape plus ended_by, reason.
  auto evs = drain(s());
  ASSERT_EQ(evs.size(), 1u);
  const auto& ev = evs[0];
  EXPECT_EQ(ev.type, session_ended_type);
  EXPECT_EQ(ev.event_id, "session.ended:" + sid);
  EXPECT_EQ(ev.event_id, session_ended_event_id(sid));
  EXPECT_EQ(ev.aggregate_id, sid);
  EXPECT_EQ(ev.created_at, e->session.closed_at);
  auto j = nlohmann::json::parse(ev.payload);
  EXPECT_EQ(j.at("event_id"), ev.event_id);
  EXPECT_EQ(j.at("type"), "session.ended");
  EXPECT_EQ(j.at("session_id"), sid);
  EXPECT_EQ(j.at("queue"), q_);
  EXPECT_EQ(j.at("users"), nlohmann::json::parse(R"([
    {"user": "alice", "ticket": "t-alice-1"},
    {"user": "bob", "ticket": "t-bob-1"}])"));
  EXPECT_EQ(j.at("ended_by"), "bob");
  EXPECT_EQ(j.at("reason"), "hung up");
  EXPECT_EQ(j.size(), 7u);
  // Both are free at once.
  for (auto user : {"alice", "bob"}) {
    auto a = s().active_session_of(user);
    ASSERT_OK(a);
    EXPECT_FALSE(a->has_value()) << user;
  }
  auto next = s().commit_matches(
    {req(q_, "alice", "carol", "2"), req(q_, "bob", "dave", "2")});
  for (auto& r : next) {
    ASSERT_OK(r);
    EXPECT_TRUE(r->created);
  }
  // Ending again — the other member, another reason, another connection —
  // answers the same final state and writes nothing.
  auto again = factory_->connect()->end_session(sid, "alice", "bored");
  EXPECT_SAME_END(again, *e);
  auto third = s().end_session(sid, "bob", "hung up");
  EXPECT_SAME_END(third, *e);
  auto f = s().find_session(sid);
  ASSERT_OK(f);
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->close_reason, "hung up");
  EXPECT_EQ((*f)->closed_at, e->session.closed_at);
  auto rest = drain(s());
  EXPECT_EQ(rest.size(), 2u);
  EXPECT_TRUE(events_of(rest, session_ended_type).empty());
  // A session closed by close_session ends as nobody, with its reason.
  auto sid2 = next.at(0)->session_id;
  ASSERT_OK(s().close_session(sid2, "admin"));
  auto closed = s().end_session(sid2, "carol", "late");
  EXPECT_ENDED_BEFORE(closed, "", "admin");
  EXPECT_TRUE(drain(s()).empty());
}

TEST_P(match_store_conformance, an_end_is_refused_to_strangers_and_bad_input) {
  auto sid = commit_all(s(), {req(q_, "alice", "bob")}).at(0);
  drain(s());
  auto still_active = [&] {
    auto a = s().active_session_of("alice");
    ASSERT_OK(a);
    ASSERT_TRUE(a->has_value());
    EXPECT_EQ((*a)->session_id, sid);
    EXPECT_EQ((*a)->status, session_status::active);
  };
  auto x = s().end_session(sid, "mallory", "r");
  ASSERT_FALSE(x);
  EXPECT_EQ(x.error().code, errc::forbidden);
  EXPECT_NE(x.error().detail.find("mallory"), std::string::npos);
  still_active();
  auto unknown = s().end_session("no-such-session", "alice", "r");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, errc::not_found);
  const std::string nul{"a\0b", 3};
  const std::vector<std::vector<std::string>> bad = {
    {"", "alice", "r"},
    {sid, "", "r"},
    {sid,
     "ali\x01"
     "ce",
     "r"},
    {sid, std::string(129, 's'), "r"},
    {sid, "alice", std::string(257, 'r')},
    {sid, "alice", nul},
    {sid, "alice", "\xff"},
  };
  for (const auto& b : bad) {
    auto r = s().end_session(b[0], b[1], b[2]);
    ASSERT_FALSE(r) << b[1];
    EXPECT_EQ(r.error().code, errc::invalid_argument) << b[1];
  }
  still_active();
  const std::vector<std::pair<uint32_t, uint32_t>> bad_expiry
    = {{0, 10}, {1000, 0}, {1000, 10001}};
  for (auto [age, limit] : bad_expiry) {
    auto r = s().expire_sessions(age, limit);
    ASSERT_FALSE(r) << age << " " << limit;
    EXPECT_EQ(r.error().code, errc::invalid_argument);
  }
  for (uint32_t limit : {0u, 100001u}) {
    auto r = s().prune(1000, limit);
    ASSERT_FALSE(r) << limit;
    EXPECT_EQ(r.error().code, errc::invalid_argument);
  }
  still_active();
  EXPECT_TRUE(drain(s()).empty());
  // A closed session is still no stranger's to end.
  ASSERT_OK(s().end_session(sid, "alice", ""));
  auto late = s().end_session(sid, "mallory", "r");
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, errc::forbidden);
  EXPECT_EQ(drain(s()).size(), 1u);
}

TEST_P(match_store_conformance, a_batch_of_ends_answers_as_one_by_one) {
  auto ids = commit_all(s(), {req(q_, "a0", "b0"), req(q_, "a1", "b1"),
                              req(q_, "a2", "b2"), req(q_, "a3", "b3")});
  ASSERT_OK(s().end_session(ids[2], "a2", "before"));
  ASSERT_OK(s().close_session(ids[3], "admin"));
  drain(s());
  auto r = s().end_sessions({
    {ids[0], "b0", "left"},   // ends it
    {ids[0], "a0", "too"},    // ended earlier in this batch
    {ids[1], "mallory", "r"}, // a stranger: refused alone
    {"no-such-session", "a1", "r"},
    {ids[1], "", "r"},       // malformed
    {ids[1], "a1", "bye"},   // ends it
    {ids[2], "b2", "again"}, // ended before
    {ids[3], "a3", "late"},  // closed by close_session
  });
  ASSERT_EQ(r.size(), 8u);
  ASSERT_OK(r[0]);
  EXPECT_TRUE(r[0]->ended_now);
  EXPECT_EQ(r[0]->ended_by, "b0");
  EXPECT_EQ(r[0]->reason, "left");
  EXPECT_EQ(r[0]->session.status, session_status::closed);
  EXPECT_SAME_END(r[1], *r[0]);
  ASSERT_FALSE(r[2]);
  EXPECT_EQ(r[2].error().code, errc::forbidden);
  ASSERT_FALSE(r[3]);
  EXPECT_EQ(r[3].error().code, errc::not_found);
  ASSERT_FALSE(r[4]);
  EXPECT_EQ(r[4].error().code, errc::invalid_argument);
  ASSERT_OK(r[5]);
  EXPECT_TRUE(r[5]->ended_now);
  EXPECT_EQ(r[5]->ended_by, "a1");
  EXPECT_ENDED_BEFORE(r[6], "a2", "before");
  EXPECT_ENDED_BEFORE(r[7], "", "admin");
  // One event per session this batch ended, with its payload.
  auto evs = events_of(drain(s()), session_ended_type);
  ASSERT_EQ(evs.size(), 2u);
  std::set<std::string> got;
  for (auto& [key, ev] : evs) {
    got.insert(ev.aggregate_id);
    auto j = nlohmann::json::parse(ev.payload);
    EXPECT_EQ(j.at("ended_by"), ev.aggregate_id == ids[0] ? "b0" : "a1");
  }
  EXPECT_EQ(got, (std::set<std::string>{ids[0], ids[1]}));
  for (auto user : {"a0", "b0", "a1", "b1"}) {
    auto a = s().active_session_of(user);
    ASSERT_OK(a);
    EXPECT_FALSE(a->has_value()) << user;
  }
  // Repeated, the batch answers the recorded state and writes nothing.
  auto again = s().end_sessions({{ids[1], "b1", "x"}, {ids[0], "a0", "y"}});
  EXPECT_SAME_END(again.at(0), *r[5]);
  EXPECT_SAME_END(again.at(1), *r[0]);
  EXPECT_TRUE(drain(s()).empty());
  EXPECT_TRUE(s().end_sessions({}).empty());
}

TEST_P(match_store_conformance, crossing_batches_of_ends_end_each_once) {
  // Two connections end the same sessions in opposite orders, many
  // rounds: no deadlock, each session ended exactly once.
  constexpr int rounds = 100;
  constexpr int per_batch = 8;
  auto ids = commit_pairs(s(), q_, "xa", "xb", rounds * per_batch);
  drain(s());
  auto c1 = factory_->connect();
  auto c2 = factory_->connect();
  racer race;
  int violations = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<end_request> fwd, bwd;
    for (int k = 0; k < per_batch; ++k) {
      auto i = round * per_batch + k;
      fwd.push_back({ids[i], "xa" + std::to_string(i), "fwd"});
    }
    for (int k = per_batch - 1; k >= 0; --k) {
      auto i = round * per_batch + k;
      bwd.push_back({ids[i], "xb" + std::to_string(i), "bwd"});
    }
    std::vector<outcome<end_record>> r1, r2;
    race.run([&] { r1 = c1->end_sessions(fwd); },
             [&] { r2 = c2->end_sessions(bwd); });
    for (int k = 0; k < per_batch; ++k) {
      const auto& x = r1.at(k);
      const auto& y = r2.at(per_batch - 1 - k);
      if (!x || !y || (x->ended_now ? 1 : 0) + (y->ended_now ? 1 : 0) != 1
          || x->ended_by != y->ended_by || x->reason != y->reason
          || x->session.closed_at != y->session.closed_at)
        ++violations;
    }
  }
  EXPECT_EQ(violations, 0);
  auto evs = drain(s());
  EXPECT_EQ(events_of(evs, session_ended_type).size(),
            size_t{rounds * per_batch});
}

TEST_P(match_store_conformance, a_mutual_session_ends_like_any_other) {
  auto m = s().commit_matches({mutual_req("alice", "bob")});
  ASSERT_OK(m.at(0));
  auto sid = m[0]->session_id;
  auto live = commit_all(s(), {req(q_, "alice", "carol")}).at(0);
  drain(s());
  auto e = s().end_session(sid, "alice", "unmatched");
  ASSERT_OK(e);
  EXPECT_TRUE(e->ended_now);
  EXPECT_EQ(e->session.queue, "likes");
  // alice's live 1:1 session is not touched.
  auto a = s().active_session_of("alice");
  ASSERT_OK(a);
  ASSERT_TRUE(a->has_value());
  EXPECT_EQ((*a)->session_id, live);
  auto evs = drain(s());
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].event_id, session_ended_event_id(sid));
  // The pair stays matched, once.
  auto of = s().mutual_match_of("bob", "alice");
  ASSERT_OK(of);
  ASSERT_TRUE(of->has_value());
  EXPECT_EQ((*of)->session_id, sid);
  EXPECT_EQ((*of)->status, session_status::closed);
  auto replay = s().commit_matches({mutual_req("bob", "alice", "2")});
  ASSERT_OK(replay.at(0));
  EXPECT_FALSE(replay[0]->created);
  auto again = s().end_session(sid, "bob", "x");
  EXPECT_SAME_END(again, *e);
  EXPECT_TRUE(drain(s()).empty());
}

TEST_P(match_store_conformance, expiry_ends_only_old_sessions_once) {
  std::vector<std::string> old_ids; // o<i>'s session
  for (int i = 0; i < 3; ++i)       // one call each: distinct ages
    old_ids.push_back(commit_all(s(), {req(q_, "o" + std::to_string(i),
                                           "p" + std::to_string(i))})
                        .at(0));
  const std::set<std::string> old(old_ids.begin(), old_ids.end());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto young = commit_all(s(), {req(q_, "y0", "z0"), req(q_, "y1", "z1")});
  drain(s());
  auto first = s().expire_sessions(200, 2);
  ASSERT_OK(first);
  ASSERT_EQ(first->size(), 2u);
  auto second = s().expire_sessions(200, 100);
  ASSERT_OK(second);
  ASSERT_EQ(second->size(), 1u);
  std::set<std::string> ended;
  int64_t last_created = 0;
  for (auto* batch : {&*first, &*second}) {
    for (auto& e : *batch) {
      EXPECT_TRUE(e.ended_now);
      EXPECT_EQ(e.ended_by, "");
      EXPECT_EQ(e.reason, "expired");
      EXPECT_EQ(e.session.status, session_status::closed);
      EXPECT_EQ(e.session.close_reason, "expired");
      EXPECT_GE(e.session.created_at, last_created) << "oldest first";
      last_created = e.session.created_at;
      ended.insert(e.session.session_id);
    }
  }
  EXPECT_EQ(ended, old);
  auto none = s().expire_sessions(200, 100);
  ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
  for (auto& sid : young) {
    auto f = s().find_session(sid);
    ASSERT_OK(f);
    EXPECT_EQ((*f)->status, session_status::active);
  }
  auto o0 = s().active_session_of("o0");
  ASSERT_OK(o0);
  EXPECT_FALSE(o0->has_value());
  auto evs = events_of(drain(s()), session_ended_type);
  ASSERT_EQ(evs.size(), 3u);
  for (auto& sid : old) {
    ASSERT_EQ(evs.count(sid), 1u);
    auto j = nlohmann::json::parse(evs.at(sid).payload);
    EXPECT_EQ(j.at("ended_by"), "");
    EXPECT_EQ(j.at("reason"), "expired");
  }
  // A member ending it later gets the recorded state.
  auto later = s().end_session(old_ids[0], "o0", "bye");
  EXPECT_ENDED_BEFORE(later, "", "expired");
  EXPECT_TRUE(drain(s()).empty());
}

TEST_P(match_store_conformance, racing_expirers_end_each_session_once) {
  constexpr int sessions = 200;
  auto ids = commit_pairs(s(), q_, "ea", "eb", sessions);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto c1 = factory_->connect();
  auto c2 = factory_->connect();
  std::vector<std::string> got[2];
  int failures = 0;
  std::mutex mtx;
  // Each expires in small steps until it finds nothing; one that finds the
  // rest locked by the other stops early, and the other goes on.
  auto expirer = [&](match_store& c, std::vector<std::string>& out) {
    for (;;) {
      auto r = c.expire_sessions(200, 7);
      if (!r) {
        std::lock_guard<std::mutex> guard{mtx};
        ++failures;
        ADD_FAILURE() << r.error().detail;
        return;
      }
      if (r->empty())
        return;
      for (auto& e : *r)
        out.push_back(e.session.session_id);
    }
  };
  racer race;
  race.run([&] { expirer(*c1, got[0]); }, [&] { expirer(*c2, got[1]); });
  EXPECT_EQ(failures, 0);
  std::set<std::string> all(got[0].begin(), got[0].end());
  all.insert(got[1].begin(), got[1].end());
  EXPECT_EQ(got[0].size() + got[1].size(), size_t{sessions})
    << "a session was ended twice";
  EXPECT_EQ(all, std::set<std::string>(ids.begin(), ids.end()));
  auto evs = drain(s());
  EXPECT_EQ(evs.size(), size_t{sessions});
  EXPECT_EQ(events_of(evs, session_ended_type).size(), size_t{sessions});
  std::cout << "[ info     ] " << GetParam() << ": the expirers ended "
            << got[0].size() << " and " << got[1].size() << "\n";
}

TEST_P(match_store_conformance, racing_ends_by_both_members_end_once) {
  constexpr int rounds = 500;
  auto ids = commit_pairs(s(), q_, "ma", "mb", rounds);
  auto c1 = factory_->connect();
  auto c2 = factory_->connect();
  racer race;
  int violations = 0;
  int first_wins = 0;
  for (int i = 0; i < rounds; ++i) {
    const auto& sid = ids[i];
    auto a = "ma" + std::to_string(i);
    auto b = "mb" + std::to_string(i);
    std::optional<outcome<end_record>> r1, r2;
    race.run([&] { r1 = c1->end_session(sid, a, "left-a"); },
             [&] { r2 = c2->end_session(sid, b, "left-b"); });
    if (!*r1 || !*r2) {
      ++violations;
      continue;
    }
    const auto& x = **r1;
    const auto& y = **r2;
    if ((x.ended_now ? 1 : 0) + (y.ended_now ? 1 : 0) != 1
        || x.ended_by != y.ended_by || x.reason != y.reason
        || x.session.closed_at != y.session.closed_at
        || x.reason != (x.ended_by == a ? "left-a" : "left-b"))
      ++violations;
    if (x.ended_now)
      ++first_wins;
  }
  EXPECT_EQ(violations, 0);
  auto evs = drain(s());
  EXPECT_EQ(evs.size(), size_t{rounds});
  EXPECT_EQ(events_of(evs, session_ended_type).size(), size_t{rounds});
  std::cout << "[ info     ] " << GetParam() << ": the first member won "
            << first_wins << " of " << rounds << " rounds\n";
}

TEST_P(match_store_conformance, prune_removes_only_what_is_over) {
  auto db = pg_of(GetParam(), *maker_);
  // Old: ended and delivered; ended, events undelivered; active; mutual,
  // ended; closed without an event.
  auto ids = commit_all(s(),
                        {req(q_, "alice", "bob"), req(q_, "carol", "dave"),
                         req(q_, "erin", "frank"), mutual_req("gina", "hank"),
                         req(q_, "ivan", "judy")});
  const auto& ended = ids[0];
  const auto& pending = ids[1];
  const auto& active = ids[2];
  const auto& mutual = ids[3];
  const auto& closed = ids[4];
  ASSERT_OK(s().end_session(ended, "alice", "done"));
  ASSERT_OK(s().end_session(pending, "carol", "done"));
  ASSERT_OK(s().end_session(mutual, "gina", "done"));
  ASSERT_OK(s().close_session(closed, "admin"));
  auto evs = drain(s()); // 5 created + 3 ended
  ASSERT_EQ(evs.size(), 8u);
  std::vector<outbox_event> held; // pending's, undelivered
  std::vector<outbox_event> sent;
  for (auto& ev : evs)
    (ev.aggregate_id == pending ? held : sent).push_back(ev);
  deliver(s(), sent);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Young: ended and delivered after the sleep.
  auto young = commit_all(s(), {req(q_, "kim", "lee")}).at(0);
  ASSERT_OK(s().end_session(young, "kim", "done"));
  deliver(s(), drain(s()));
  auto one = s().prune(200, 1);
  ASSERT_OK(one);
  EXPECT_EQ(one->outbox, 1u);
  EXPECT_EQ(one->sessions, 1u);
  auto rest = s().prune(200, 100000);
  ASSERT_OK(rest);
  // Delivered and old: ended 2, active 1, mutual 2, closed 1.
  EXPECT_EQ(one->outbox + rest->outbox, 6u);
  // Old, closed, not mutual, all delivered: ended and closed.
  EXPECT_EQ(one->sessions + rest->sessions, 2u);
  for (auto& [sid, kept] :
       std::vector<std::pair<std::string, bool>>{{ended, false},
                                                 {closed, false},
                                                 {pending, true},
                                                 {active, true},
                                                 {mutual, true},
                                                 {young, true}}) {
    auto f = s().find_session(sid);
    ASSERT_OK(f);
    EXPECT_EQ(f->has_value(), kept) << sid;
  }
  auto gone = s().end_session(ended, "alice", "again");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, errc::not_found);
  auto of = s().mutual_match_of("gina", "hank");
  ASSERT_OK(of);
  ASSERT_TRUE(of->has_value());
  EXPECT_EQ((*of)->session_id, mutual);
  auto act = s().active_session_of("erin");
  ASSERT_OK(act);
  ASSERT_TRUE(act->has_value());
  EXPECT_EQ((*act)->session_id, active);
  if (db) {
    EXPECT_EQ(db->count("SELECT count(*) FROM session_members"
                        " WHERE session_id IN ('"
                        + ended + "', '" + closed + "')"),
              0);
    EXPECT_EQ(db->count("SELECT count(*) FROM outbox"),
              2 + 2); // pending's 2 undelivered, young's 2 delivered
  }
  // Idempotent; the undelivered events were kept and deliver as usual.
  auto again = s().prune(200, 100000);
  ASSERT_OK(again);
  EXPECT_EQ(again->outbox, 0u);
  EXPECT_EQ(again->sessions, 0u);
  auto m = s().mark_delivered({held[0].event_id, held[1].event_id});
  ASSERT_OK(m);
  EXPECT_EQ(*m, 2u);
  // Now pending's session may go (closed long ago), and its events, just
  // delivered: the retention counts from an event's creation.
  auto last = s().prune(200, 100000);
  ASSERT_OK(last);
  EXPECT_EQ(last->outbox, 2u);
  EXPECT_EQ(last->sessions, 1u);
  // A replayed commit of a pruned session's request creates a new one.
  auto replay = s().commit_matches({req(q_, "alice", "bob")});
  ASSERT_OK(replay.at(0));
  EXPECT_TRUE(replay[0]->created);
  EXPECT_NE(replay[0]->session_id, ended);
}

TEST_P(match_store_conformance, commits_racing_prune_never_fail) {
  constexpr int rounds = 150;
  constexpr int pairs = 5;
  auto pruner_conn = factory_->connect();
  std::atomic<bool> stop{false};
  std::atomic<int> prune_failures{0};
  prune_counts pruned;
  std::thread pruner([&] {
    while (!stop) {
      auto r = pruner_conn->prune(0, 20);
      if (!r) {
        ++prune_failures;
        continue;
      }
      pruned.outbox += r->outbox;
      pruned.sessions += r->sessions;
    }
  });
  int failed_commits = 0;
  int failed_other = 0;
  // The same users match again every round: their old member rows are what
  // the pruner deletes meanwhile.
  for (int round = 0; round < rounds; ++round) {
    std::vector<match_request> batch;
    for (int i = 0; i < pairs; ++i)
      batch.push_back(req(q_, "ra" + std::to_string(i),
                          "rb" + std::to_string(i), std::to_string(round)));
    std::vector<std::string> ids;
    for (auto& r : s().commit_matches(batch)) {
      if (!r || !r->created) {
        ++failed_commits;
        if (!r)
          ADD_FAILURE() << to_string(r.error().code) << ": "
                        << r.error().detail;
        continue;
      }
      ids.push_back(r->session_id);
    }
    for (size_t i = 0; i < ids.size(); ++i)
      if (!s().end_session(ids[i], "ra" + std::to_string(i), "next"))
        ++failed_other;
    auto evs = s().fetch_undelivered(1000, 60000);
    if (!evs || !s().mark_delivered([&] {
          std::vector<std::string> out;
          for (auto& ev : *evs)
            out.push_back(ev.event_id);
          return out;
        }()))
      ++failed_other;
  }
  stop = true;
  pruner.join();
  EXPECT_EQ(failed_commits, 0);
  EXPECT_EQ(failed_other, 0);
  EXPECT_EQ(prune_failures.load(), 0);
  std::cout << "[ info     ] " << GetParam() << ": the pruner deleted "
            << pruned.sessions << " sessions and " << pruned.outbox
            << " events while the commits ran\n";
  // Whatever the pruner left, a last pass takes: everything is over (after
  // a pause: a retention of 0 still wants the clock to move on).
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto r = s().prune(0, 100000);
    ASSERT_OK(r);
    pruned.outbox += r->outbox;
    pruned.sessions += r->sessions;
    if (r->outbox == 0 && r->sessions == 0)
      break;
  }
  EXPECT_EQ(pruned.sessions, size_t{rounds * pairs});
  EXPECT_EQ(pruned.outbox, size_t{2 * rounds * pairs});
  if (auto db = pg_of(GetParam(), *maker_)) {
    EXPECT_EQ(db->count("SELECT count(*) FROM all_sessions"), 0);
    EXPECT_EQ(db->count("SELECT count(*) FROM session_members"), 0);
    EXPECT_EQ(db->count("SELECT count(*) FROM outbox"), 0);
  }
}

} // namespace
