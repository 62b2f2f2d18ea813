// Match store conformance: group matches (problem 15 of docs/design.md, I1
// and I12). A group commits whole or not at all, keyed by its claim's
// group id; a member leaves and the session goes on until too few stay.

#include <nlohmann/json.hpp>

#include "tests/conformance/match_store_fixture.hpp"
#include "tests/support/race.hpp"

using namespace mm;
using namespace mm::test;
using namespace mm::test::store_conformance;

namespace {

/// A group of `users` in `q`, teams by `teams` (0 for all when shorter).
group_match_request group(const std::string& q, const std::string& id,
                          const std::vector<std::string>& users,
                          const std::vector<uint32_t>& teams = {},
                          uint32_t min_players = 0) {
  group_match_request r;
  r.queue = q;
  r.group = id;
  r.min_players = min_players == 0 ? static_cast<uint32_t>(users.size())
                                   : min_players;
  for (size_t i = 0; i < users.size(); ++i) {
    session_member m;
    m.user = users[i];
    m.ticket = "t-" + users[i];
    m.attrs = "{\"n\":" + std::to_string(i) + "}";
    m.team = i < teams.size() ? teams[i] : 0;
    r.members.push_back(std::move(m));
  }
  return r;
}

/// The events of `evs` of type `type`.
std::vector<nlohmann::json> payloads(const std::vector<outbox_event>& evs,
                                     const std::string& type) {
  std::vector<nlohmann::json> out;
  for (const auto& ev : evs)
    if (ev.type == type)
      out.push_back(nlohmann::json::parse(ev.payload));
  return out;
}

/// The users named in an event's `users`, in order.
std::vector<std::string> users_of(const nlohmann::json& payload) {
  std::vector<std::string> out;
  for (const auto& u : payload.at("users"))
    out.push_back(u.at("user").get<std::string>());
  return out;
}

/// The active session of `user`, "" for none.
std::string active_of(match_store& s, const std::string& user) {
  auto a = s.active_session_of(user);
  if (!a)
    throw std::runtime_error("active_session_of: " + a.error().detail);
  return a->has_value() ? (*a)->session_id : "";
}

TEST_P(match_store_conformance, a_group_commits_whole_with_one_event) {
  auto r = group(q_, "g1", {"a", "b", "c", "d"}, {0, 0, 1, 1});
  auto rec = s().commit_group(r);
  ASSERT_OK(rec);
  EXPECT_TRUE(rec->created);
  EXPECT_EQ(rec->group, "g1");
  EXPECT_EQ(rec->min_players, 4u);
  ASSERT_EQ(rec->members.size(), 4u);
  EXPECT_EQ(rec->user_a, "a");
  EXPECT_EQ(rec->user_b, "b");
  for (auto user : {"a", "b", "c", "d"}) {
    auto a = s().active_session_of(user);
    ASSERT_OK(a);
    ASSERT_TRUE(a->has_value()) << user;
    EXPECT_EQ((*a)->session_id, rec->session_id);
    EXPECT_EQ((*a)->members.size(), 4u) << "a group's session lists all";
  }
  auto found = s().find_session(rec->session_id);
  ASSERT_OK(found);
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->group, "g1");
  ASSERT_EQ((*found)->members.size(), 4u);
  EXPECT_EQ((*found)->members[2].user, "c");
  EXPECT_EQ((*found)->members[2].team, 1u);
  EXPECT_EQ((*found)->members[2].ticket, "t-c");
  auto evs = drain(s());
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].type, match_created_type);
  EXPECT_EQ(evs[0].aggregate_id, rec->session_id);
  auto p = nlohmann::json::parse(evs[0].payload);
  EXPECT_EQ(users_of(p), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(p.at("users").at(3).at("team"), 1);
  EXPECT_EQ(p.at("group"), "g1");
  EXPECT_EQ(p.at("teams"), nlohmann::json::parse(R"([["a","b"],["c","d"]])"));
  if (GetParam() == "postgres") {
    pg_admin db{pg_conninfo(maker_->last_db())};
    EXPECT_EQ(db.count("SELECT count(*) FROM match_sessions"), 1);
    EXPECT_EQ(db.count("SELECT count(*) FROM session_members WHERE active"), 4);
    EXPECT_EQ(db.count("SELECT count(*) FROM outbox"), 1);
  }
}

TEST_P(match_store_conformance, a_group_retry_answers_its_session) {
  auto r = group(q_, "g1", {"a", "b", "c"});
  auto first = s().commit_group(r);
  ASSERT_OK(first);
  auto again = s().commit_group(r);
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->session_id, first->session_id);
  EXPECT_EQ(drain(s()).size(), 1u) << "a retry wrote another event";
  // Another group of the same users is refused: they are busy.
  auto other = s().commit_group(group(q_, "g2", {"a", "b", "c"}));
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, errc::conflict);
}

TEST_P(match_store_conformance, a_busy_member_refuses_the_whole_group) {
  ASSERT_OK(s().commit_matches({req(q_, "alice", "bob")}).at(0));
  drain(s());
  auto g = s().commit_group(group(q_, "g1", {"x", "alice", "y", "bob"}));
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().code, errc::conflict);
  EXPECT_NE(g.error().detail.find("'alice'"), std::string::npos);
  EXPECT_NE(g.error().detail.find("'bob'"), std::string::npos);
  for (auto user : {"x", "y"}) {
    auto a = s().active_session_of(user);
    ASSERT_OK(a);
    EXPECT_FALSE(a->has_value()) << user << " kept a part of a refused group";
  }
  EXPECT_TRUE(drain(s()).empty());
  // The free ones match elsewhere at once.
  ASSERT_OK(s().commit_group(group(q_, "g2", {"x", "y"})));
}

TEST_P(match_store_conformance, a_withdrawn_group_leaves_no_trace) {
  for (auto stage : {after_create, before_commit}) {
    checkpoints cp{{{stage, 0}}};
    auto r = group(q_, std::string{"g-"} + to_string(stage), {"a", "b", "c"});
    auto g = s().commit_group(r, cp.fn());
    EXPECT_WITHDRAWN(g, to_string(stage));
    for (auto user : {"a", "b", "c"}) {
      auto a = s().active_session_of(user);
      ASSERT_OK(a);
      EXPECT_FALSE(a->has_value()) << user;
    }
    EXPECT_TRUE(drain(s()).empty());
    if (GetParam() == "postgres") {
      pg_admin db{pg_conninfo(maker_->last_db())};
      EXPECT_EQ(db.count("SELECT count(*) FROM match_sessions"), 0);
      EXPECT_EQ(db.count("SELECT count(*) FROM session_members"), 0);
    }
  }
  // The same group id commits later: nothing of it stayed.
  checkpoints all;
  auto g = s().commit_group(group(q_, "g-after_create", {"a", "b", "c"}),
                            all.fn());
  ASSERT_OK(g);
  EXPECT_TRUE(g->created);
  EXPECT_EQ(all.calls,
            (std::vector<std::string>{"after_create:0", "before_commit:0"}));
}

TEST_P(match_store_conformance,
       a_malformed_group_is_refused_and_changes_nothing) {
  std::vector<group_match_request> bad;
  bad.push_back(group(q_, "g", {"a"}));
  bad.push_back(group(q_, "g", {"a", "b", "a"}));
  bad.push_back(group(q_, "g", {"a", "b"}, {}, 3));
  bad.push_back(group(q_, "g", {"a", "b"}, {0, 64}));
  bad.push_back(group("", "g", {"a", "b"}));
  bad.push_back(group(q_, "", {"a", "b"}));
  bad.push_back(group(q_, "g", {"a", "b\n"}));
  auto attrs = group(q_, "g", {"a", "b"});
  attrs.members[1].attrs = std::string("x\0y", 3);
  bad.push_back(attrs);
  std::vector<std::string> many;
  for (int i = 0; i < 65; ++i)
    many.push_back("u" + std::to_string(i));
  bad.push_back(group(q_, "g", many));
  for (const auto& r : bad) {
    auto g = s().commit_group(r);
    ASSERT_FALSE(g);
    EXPECT_EQ(g.error().code, errc::invalid_argument) << g.error().detail;
  }
  auto a = s().active_session_of("a");
  ASSERT_OK(a);
  EXPECT_FALSE(a->has_value());
  EXPECT_TRUE(drain(s()).empty());
}

TEST_P(match_store_conformance, members_leave_until_too_few_stay) {
  auto rec = s().commit_group(group(q_, "g1", {"a", "b", "c", "d"}, {}, 3));
  ASSERT_OK(rec);
  const auto sid = rec->session_id;
  drain(s());
  auto c = s().leave_session(sid, "c", "bye");
  ASSERT_OK(c);
  EXPECT_TRUE(c->left_now);
  EXPECT_FALSE(c->ended_now);
  EXPECT_EQ(c->session.status, session_status::active);
  // c is free at once; the others are still in.
  ASSERT_OK(s().commit_group(group(q_, "g2", {"c", "e"})));
  auto a = s().active_session_of("a");
  ASSERT_OK(a);
  ASSERT_TRUE(a->has_value());
  EXPECT_EQ((*a)->session_id, sid);
  auto evs = drain(s());
  auto left = payloads(evs, member_left_type);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].at("user"), "c");
  EXPECT_EQ(left[0].at("remaining"), 3);
  EXPECT_EQ(left[0].at("reason"), "bye");
  EXPECT_EQ(users_of(left[0]), (std::vector<std::string>{"a", "b", "c", "d"}))
    << "every member is told, the leaver too";
  EXPECT_EQ(left[0].at("users").at(2).at("active"), false);
  // A repeat changes nothing.
  auto again = s().leave_session(sid, "c", "bye");
  ASSERT_OK(again);
  EXPECT_FALSE(again->left_now);
  EXPECT_TRUE(drain(s()).empty());
  // The second leave leaves two of a minimum of three: the session ends.
  auto d = s().leave_session(sid, "d", "gone");
  ASSERT_OK(d);
  EXPECT_TRUE(d->left_now);
  EXPECT_TRUE(d->ended_now);
  EXPECT_EQ(d->session.status, session_status::closed);
  evs = drain(s());
  ASSERT_EQ(payloads(evs, member_left_type).size(), 1u);
  auto ended = payloads(evs, session_ended_type);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].at("ended_by"), "d");
  EXPECT_EQ(users_of(ended[0]).size(), 4u);
  for (auto user : {"a", "b", "d"}) {
    auto x = s().active_session_of(user);
    ASSERT_OK(x);
    EXPECT_FALSE(x->has_value()) << user << " still busy after the end";
  }
  // Over: a leave answers the recorded state.
  auto late = s().leave_session(sid, "a", "late");
  ASSERT_OK(late);
  EXPECT_FALSE(late->left_now);
  EXPECT_FALSE(late->ended_now);
  EXPECT_TRUE(drain(s()).empty());
}

TEST_P(match_store_conformance,
       a_leave_by_a_stranger_or_of_nothing_is_refused) {
  auto rec = s().commit_group(group(q_, "g1", {"a", "b", "c"}, {}, 2));
  ASSERT_OK(rec);
  drain(s());
  auto x = s().leave_session(rec->session_id, "stranger", "");
  ASSERT_FALSE(x);
  EXPECT_EQ(x.error().code, errc::forbidden);
  auto none = s().leave_session("no-such-session", "a", "");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, errc::not_found);
  auto bad = s().leave_session(rec->session_id, "", "");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, errc::invalid_argument);
  EXPECT_TRUE(drain(s()).empty());
}

TEST_P(match_store_conformance, a_pair_leave_ends_the_pair) {
  auto rec = s().commit_matches({req(q_, "alice", "bob")}).at(0);
  ASSERT_OK(rec);
  drain(s());
  auto l = s().leave_session(rec->session_id, "bob", "bye");
  ASSERT_OK(l);
  EXPECT_TRUE(l->left_now);
  EXPECT_TRUE(l->ended_now);
  auto evs = drain(s());
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].type, session_ended_type);
}

TEST_P(match_store_conformance, any_member_ends_a_group_for_all) {
  auto rec = s().commit_group(group(q_, "g1", {"a", "b", "c"}, {}, 2));
  ASSERT_OK(rec);
  drain(s());
  auto e = s().end_session(rec->session_id, "c", "done");
  ASSERT_OK(e);
  EXPECT_TRUE(e->ended_now);
  for (auto user : {"a", "b", "c"}) {
    auto x = s().active_session_of(user);
    ASSERT_OK(x);
    EXPECT_FALSE(x->has_value()) << user;
  }
  auto ended = payloads(drain(s()), session_ended_type);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(users_of(ended[0]), (std::vector<std::string>{"a", "b", "c"}));
  // Matched again at once, under a new group.
  ASSERT_OK(s().commit_group(group(q_, "g2", {"a", "b", "c"})));
}

TEST_P(match_store_conformance, expiry_ends_group_sessions_for_all) {
  auto rec = s().commit_group(group(q_, "g1", {"a", "b", "c"}));
  ASSERT_OK(rec);
  drain(s());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto x = s().expire_sessions(1, 100);
  ASSERT_OK(x);
  ASSERT_EQ(x->size(), 1u);
  for (auto user : {"a", "b", "c"}) {
    auto y = s().active_session_of(user);
    ASSERT_OK(y);
    EXPECT_FALSE(y->has_value()) << user;
  }
  auto ended = payloads(drain(s()), session_ended_type);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(users_of(ended[0]).size(), 3u);
}

// Two connections commit overlapping groups at the same instant, round after
// round: exactly one wins each round, the other is refused whole (I1, I12).
TEST_P(match_store_conformance, overlapping_groups_race_and_one_wins_whole) {
  auto other = factory_->connect();
  racer race;
  int violations = 0;
  const int rounds = GetParam() == "postgres" ? 200 : 1000;
  for (int i = 0; i < rounds; ++i) {
    auto tag = std::to_string(i);
    auto g1 = group(q_, "x" + tag, {"a", "b", "c"});
    auto g2 = group(q_, "y" + tag, {"c", "d", "e"});
    std::optional<outcome<match_record>> r1, r2;
    race.run([&] { r1 = s().commit_group(g1); },
             [&] { r2 = other->commit_group(g2); });
    int won = (*r1 ? 1 : 0) + (*r2 ? 1 : 0);
    if (won != 1)
      ++violations;
    for (auto* r : {&*r1, &*r2})
      if (!*r && r->error().code != errc::conflict)
        ++violations;
    // Nobody of the losing group holds a session.
    const auto& lost = *r1 ? g2 : g1;
    for (const auto& m : lost.members) {
      if (m.user == "c")
        continue;
      if (!active_of(s(), m.user).empty())
        ++violations;
    }
    const auto& w = *r1 ? **r1 : **r2;
    if (w.session_id.size() > 0)
      ASSERT_OK(s().end_session(w.session_id, "c", "next"));
  }
  EXPECT_EQ(violations, 0);
}

} // namespace
