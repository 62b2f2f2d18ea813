// Match store conformance: swipes and mutual matches. Likes report the
// opposite like, malformed swipes write nothing, a mutual commit writes
// session, event and pair once (also when repeated, withdrawn or raced),
// and crossing likes see each other once.

#include <iostream>
#include <optional>

#include "tests/conformance/match_store_fixture.hpp"
#include "tests/support/race.hpp"

using namespace mm;
using namespace mm::test;
using namespace mm::test::store_conformance;

namespace {

// -- mutual likes (problem 6 of docs/design.md, invariant I4) -----------------------------------

#define EXPECT_SWIPE(x, opposite, is_matched)  \
  do {                                         \
    ASSERT_OK(x);                              \
    EXPECT_EQ((x)->opposite_like, (opposite)); \
    EXPECT_EQ((x)->matched, (is_matched));     \
  } while (false)

TEST_P(match_store_conformance, swipes_report_the_opposite_like) {
  auto db = pg_of(GetParam(), *maker_);
  auto updated = [&](const std::string& from, const std::string& to) {
    return db
      ->query("SELECT kind, updated_at::text, created_at::text"
              " FROM likes WHERE from_user = '"
              + from + "' AND to_user = '" + to + "'")
      .at(0);
  };
  auto a1 = s().record_swipe("alice", "bob", true);
  EXPECT_SWIPE(a1, false, false);
  EXPECT_TRUE(a1->session_id.empty());
  std::vector<std::string> first_like;
  if (db)
    first_like = updated("alice", "bob");
  // LIKE / LIKE: the second sees the first, and so does a repeat.
  EXPECT_SWIPE(s().record_swipe("bob", "alice", true), true, false);
  EXPECT_SWIPE(s().record_swipe("bob", "alice", true), true, false);
  EXPECT_SWIPE(s().record_swipe("alice", "bob", true), true, false);
  if (db) { // repeating the current kind changes nothing
    EXPECT_EQ(updated("alice", "bob"), first_like);
  }
  // DISLIKE after LIKE withdraws alice's like: bob no longer sees one.
  EXPECT_SWIPE(s().record_swipe("alice", "bob", false), true, false);
  EXPECT_SWIPE(s().record_swipe("bob", "alice", true), false, false);
  if (db) {
    auto row = updated("alice", "bob");
    EXPECT_EQ(row.at(0), "DISLIKE");
    EXPECT_GT(row.at(1), first_like.at(1));
    EXPECT_EQ(row.at(2), first_like.at(2)); // the row's first swipe
  }
  // LIKE after DISLIKE: a fresh like, seen by bob again.
  EXPECT_SWIPE(s().record_swipe("alice", "bob", true), true, false);
  EXPECT_SWIPE(s().record_swipe("bob", "alice", true), true, false);
  if (db) {
    auto row = updated("alice", "bob");
    EXPECT_EQ(row.at(0), "LIKE");
    EXPECT_GT(row.at(1), first_like.at(1));
  }
  // Bob withdraws; alice sees it; a third user is independent.
  EXPECT_SWIPE(s().record_swipe("bob", "alice", false), true, false);
  EXPECT_SWIPE(s().record_swipe("alice", "bob", true), false, false);
  EXPECT_SWIPE(s().record_swipe("carol", "alice", true), false, false);
  EXPECT_SWIPE(s().record_swipe("alice", "carol", false), true, false);
  EXPECT_SWIPE(s().record_swipe("carol", "alice", true), false, false);
  // Swipes create no match.
  auto m = s().mutual_match_of("alice", "bob");
  ASSERT_OK(m);
  EXPECT_FALSE(m->has_value());
  EXPECT_TRUE(drain(s()).empty());
  if (db) {
    EXPECT_EQ(db->count("SELECT count(*) FROM likes"), 4);
    EXPECT_EQ(db->count("SELECT count(*) FROM mutual_matches"), 0);
  }
}

TEST_P(match_store_conformance,
       malformed_swipes_are_refused_and_write_nothing) {
  auto self = s().record_swipe("alice", "alice", true);
  ASSERT_FALSE(self);
  EXPECT_EQ(self.error().code, errc::invalid_argument);
  EXPECT_EQ(self.error().detail, "a user cannot swipe on itself");
  const std::vector<std::pair<std::string, std::string>> bad{
    {"", "bob"},
    {"alice", ""},
    {"al\nice", "bob"},
    {"alice", "b\x7f"},
    {"bad\xff", "bob"},
    {"alice", "\xc3\x28"},
    {std::string(129, 'x'), "bob"},
    {"alice", std::string(129, 'y')},
  };
  for (auto& [from, to] : bad) {
    for (bool like : {true, false}) {
      auto r = s().record_swipe(from, to, like);
      ASSERT_FALSE(r) << from << " -> " << to;
      EXPECT_EQ(r.error().code, errc::invalid_argument);
      EXPECT_FALSE(r.error().detail.empty());
    }
    auto m = s().mutual_match_of(from, to);
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error().code, errc::invalid_argument);
  }
  auto m = s().mutual_match_of("alice", "alice");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, errc::invalid_argument);
  // Nothing was written: the other side sees no like.
  EXPECT_SWIPE(s().record_swipe("bob", "alice", true), false, false);
  if (auto db = pg_of(GetParam(), *maker_)) {
    EXPECT_EQ(db->count("SELECT count(*) FROM likes"), 1);
  }
}

TEST_P(match_store_conformance, a_mutual_commit_writes_session_event_and_pair) {
  auto db = pg_of(GetParam(), *maker_);
  ASSERT_OK(s().record_swipe("alice", "bob", true));
  auto seen = s().record_swipe("bob", "alice", true);
  EXPECT_SWIPE(seen, true, false);
  auto r = s().commit_matches({mutual_req("bob", "alice")});
  ASSERT_OK(r.at(0));
  const auto sid = r[0]->session_id;
  EXPECT_TRUE(r[0]->created);
  EXPECT_EQ(r[0]->queue, "likes");
  EXPECT_EQ(r[0]->user_a, "bob");
  EXPECT_EQ(r[0]->status, session_status::active);
  // Exactly one event, for that session.
  auto evs = drain(s());
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].aggregate_id, sid);
  EXPECT_EQ(evs[0].type, "match.created");
  // The pair's match, in either order; swipes now report it.
  for (auto [x, y] : {std::pair{"alice", "bob"}, std::pair{"bob", "alice"}}) {
    auto m = s().mutual_match_of(x, y);
    ASSERT_OK(m);
    ASSERT_TRUE(m->has_value());
    EXPECT_EQ((*m)->session_id, sid);
    EXPECT_FALSE((*m)->created);
    auto sw = s().record_swipe(x, y, true);
    EXPECT_SWIPE(sw, true, true);
    EXPECT_EQ(sw->session_id, sid);
  }
  auto none = s().mutual_match_of("alice", "carol");
  ASSERT_OK(none);
  EXPECT_FALSE(none->has_value());
  if (db) {
    auto row = db->query("SELECT pair_min, pair_max, session_id"
                         " FROM mutual_matches");
    ASSERT_EQ(row.size(), 1u);
    EXPECT_EQ(row[0], (std::vector<std::string>{"alice", "bob", sid}));
    EXPECT_EQ(db->count("SELECT count(*) FROM session_members"
                        " WHERE session_id = '"
                        + sid + "' AND NOT active"),
              2);
  }
  // It takes neither user's one active session: both can still be matched
  // 1:1, and a mutual match is not reported as the active session.
  for (auto user : {"alice", "bob"}) {
    auto a = s().active_session_of(user);
    ASSERT_OK(a);
    EXPECT_FALSE(a->has_value()) << user;
  }
  auto call
    = s().commit_matches({req(q_, "alice", "carol"), req(q_, "dave", "bob")});
  ASSERT_OK(call.at(0));
  ASSERT_OK(call.at(1));
  EXPECT_TRUE(call[0]->created);
  EXPECT_TRUE(call[1]->created);
  auto a = s().active_session_of("alice");
  ASSERT_OK(a);
  ASSERT_TRUE(a->has_value());
  EXPECT_EQ((*a)->session_id, call[0]->session_id);
  // ... and a user in a live call can still get more mutual matches.
  auto more = s().commit_matches(
    {mutual_req("alice", "erin"), mutual_req("frank", "alice")});
  ASSERT_OK(more.at(0));
  ASSERT_OK(more.at(1));
  EXPECT_TRUE(more[0]->created);
  EXPECT_TRUE(more[1]->created);
  EXPECT_NE(more[0]->session_id, more[1]->session_id);
  auto still = s().active_session_of("alice");
  ASSERT_OK(still);
  ASSERT_TRUE(still->has_value());
  EXPECT_EQ((*still)->session_id, call[0]->session_id);
  // A closed mutual match stays the pair's match: a pair is matched once.
  auto c = s().close_session(sid, "unmatched");
  ASSERT_OK(c);
  EXPECT_TRUE(*c);
  auto again = s().commit_matches({mutual_req("alice", "bob", "2")});
  ASSERT_OK(again.at(0));
  EXPECT_FALSE(again[0]->created);
  EXPECT_EQ(again[0]->session_id, sid);
  EXPECT_EQ(again[0]->status, session_status::closed);
  EXPECT_EQ(drain(s()).size(), 4u); // 2 calls + 2 mutual, none for `again`
  expect_rows(5);
  // Pairs are ordered by bytes, as the engine's pair key.
  auto ordered = s().commit_matches(
    {mutual_req("adam", "Zed"), mutual_req("zoe", "\xc3\xa9mile")});
  ASSERT_OK(ordered.at(0));
  ASSERT_OK(ordered.at(1));
  EXPECT_EQ(pair_bounds("adam", "Zed"),
            std::make_pair(std::string{"Zed"}, std::string{"adam"}));
  EXPECT_EQ(pair_bounds("zoe", "\xc3\xa9mile").first, "zoe");
  for (auto [x, y] :
       {std::pair{"Zed", "adam"}, std::pair{"\xc3\xa9mile", "zoe"}}) {
    auto m = s().mutual_match_of(x, y);
    ASSERT_OK(m);
    EXPECT_TRUE(m->has_value()) << x;
  }
  if (db) {
    EXPECT_EQ(db->count("SELECT count(*) FROM mutual_matches"
                        " WHERE (pair_min, pair_max) IN"
                        " (('Zed', 'adam'), ('zoe', '\xc3\xa9mile'))"),
              2);
  }
}

TEST_P(match_store_conformance, a_second_mutual_commit_answers_the_same_match) {
  auto first = s().commit_matches({mutual_req("alice", "bob", "1")});
  ASSERT_OK(first.at(0));
  EXPECT_TRUE(first[0]->created);
  // The other side, other tickets, another queue: the same match.
  auto second_req = mutual_req("bob", "alice", "2");
  second_req.queue = "likes-eu";
  auto second = factory_->connect()->commit_matches({second_req});
  ASSERT_OK(second.at(0));
  EXPECT_FALSE(second[0]->created);
  EXPECT_EQ(second[0]->session_id, first[0]->session_id);
  EXPECT_EQ(second[0]->user_a, "alice");
  EXPECT_EQ(second[0]->ticket_a, "t-alice-1");
  // Retried with the same tickets: the same.
  auto retry = s().commit_matches({mutual_req("alice", "bob", "1")});
  ASSERT_OK(retry.at(0));
  EXPECT_FALSE(retry[0]->created);
  EXPECT_EQ(retry[0]->session_id, first[0]->session_id);
  // Twice in one batch: the first creates, the second answers it.
  auto batch = s().commit_matches({mutual_req("carol", "dave", "1"),
                                   req(q_, "carol", "erin"),
                                   mutual_req("dave", "carol", "2")});
  ASSERT_EQ(batch.size(), 3u);
  ASSERT_OK(batch[0]);
  ASSERT_OK(batch[1]);
  ASSERT_OK(batch[2]);
  EXPECT_TRUE(batch[0]->created);
  EXPECT_TRUE(batch[1]->created);
  EXPECT_FALSE(batch[2]->created);
  EXPECT_EQ(batch[2]->session_id, batch[0]->session_id);
  // The same in a batch that a refused request makes commit one by one.
  ASSERT_OK(s().commit_matches({req(q_, "busy", "zoe")}).at(0));
  auto mixed = s().commit_matches(
    {req(q_, "busy", "yan"), mutual_req("gina", "hank", "1"),
     mutual_req("hank", "gina", "2"), mutual_req("bob", "alice", "3")});
  ASSERT_EQ(mixed.size(), 4u);
  ASSERT_FALSE(mixed[0]);
  EXPECT_EQ(mixed[0].error().code, errc::conflict);
  ASSERT_OK(mixed[1]);
  ASSERT_OK(mixed[2]);
  ASSERT_OK(mixed[3]);
  EXPECT_TRUE(mixed[1]->created);
  EXPECT_FALSE(mixed[2]->created);
  EXPECT_EQ(mixed[2]->session_id, mixed[1]->session_id);
  EXPECT_FALSE(mixed[3]->created);
  EXPECT_EQ(mixed[3]->session_id, first[0]->session_id);
  auto evs = drain(s());
  EXPECT_EQ(evs.size(), 5u);
  std::set<std::string> sessions;
  for (auto& ev : evs)
    sessions.insert(ev.aggregate_id);
  EXPECT_EQ(sessions.size(), 5u);
  expect_rows(5);
  if (auto db = pg_of(GetParam(), *maker_)) {
    EXPECT_EQ(db->count("SELECT count(*) FROM mutual_matches"), 3);
  }
}

TEST_P(match_store_conformance, a_withdrawn_mutual_match_leaves_the_pair_free) {
  // Both requests of the pair share the fate of the first, which is
  // withdrawn right after its rows were written.
  std::vector<match_request> batch{mutual_req("alice", "bob", "1"),
                                   mutual_req("bob", "alice", "2"),
                                   mutual_req("carol", "dave")};
  std::vector<std::pair<commit_stage, size_t>> asked;
  auto res = s().commit_matches(batch, [&](commit_stage st, size_t i) {
    asked.emplace_back(st, i);
    return i != 0;
  });
  ASSERT_EQ(res.size(), 3u);
  EXPECT_WITHDRAWN(res[0], "after_create");
  EXPECT_WITHDRAWN(res[1], "after_create");
  ASSERT_OK(res[2]);
  EXPECT_TRUE(res[2]->created);
  for (auto& [st, i] : asked)
    EXPECT_NE(i, 1u) << "a duplicate was asked";
  auto m = s().mutual_match_of("alice", "bob");
  ASSERT_OK(m);
  EXPECT_FALSE(m->has_value());
  expect_no_trace_of(batch[0]);
  expect_no_trace_of(batch[1]);
  expect_rows(1);
  if (auto db = pg_of(GetParam(), *maker_)) {
    EXPECT_EQ(db->count("SELECT count(*) FROM mutual_matches"), 1);
  }
  // Withdrawn before commit: the pair stays free as well.
  auto late = s().commit_matches({mutual_req("alice", "bob", "3")},
                                 [](commit_stage st, size_t) {
                                   return st != commit_stage::before_commit;
                                 });
  EXPECT_WITHDRAWN(late.at(0), "before_commit");
  // Then the pair can be matched.
  auto ok = s().commit_matches({mutual_req("bob", "alice", "4")});
  ASSERT_OK(ok.at(0));
  EXPECT_TRUE(ok[0]->created);
  auto evs = drain(s());
  EXPECT_EQ(evs.size(), 2u);
  expect_rows(2);
}

// Two connections commit the same pair at the same time (other order, other
// tickets), as two nodes finalizing the two likes of one mutual match would.
TEST_P(match_store_conformance, racing_mutual_commits_create_one_match) {
  constexpr int rounds = 500;
  auto c1 = factory_->connect();
  auto c2 = factory_->connect();
  racer race;
  int violations = 0;
  int first_wins = 0;
  std::set<std::string> winners;
  for (int i = 0; i < rounds; ++i) {
    auto k = std::to_string(i);
    auto a = "ma" + k;
    auto b = "mb" + k;
    std::vector<outcome<match_record>> r1, r2;
    race.run([&] { r1 = c1->commit_matches({mutual_req(a, b, "1")}); },
             [&] { r2 = c2->commit_matches({mutual_req(b, a, "2")}); });
    if (r1.size() != 1 || r2.size() != 1 || !r1[0] || !r2[0]) {
      ++violations;
      if (r1.size() == 1 && !r1[0])
        ADD_FAILURE() << to_string(r1[0].error().code) << ": "
                      << r1[0].error().detail;
      if (r2.size() == 1 && !r2[0])
        ADD_FAILURE() << to_string(r2[0].error().code) << ": "
                      << r2[0].error().detail;
      continue;
    }
    if ((r1[0]->created ? 1 : 0) + (r2[0]->created ? 1 : 0) != 1)
      ++violations; // two creators, or none
    if (r1[0]->session_id != r2[0]->session_id)
      ++violations;
    if (r1[0]->created)
      ++first_wins;
    winners.insert(r1[0]->session_id);
  }
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(winners.size(), size_t{rounds});
  // One event per pair, for the pair's session.
  event_index evs{drain(s())};
  EXPECT_EQ(evs.per_session.size(), size_t{rounds});
  for (auto& [sid, n] : evs.per_session) {
    EXPECT_EQ(n, 1) << sid;
    EXPECT_EQ(winners.count(sid), 1u) << sid;
  }
  expect_rows(rounds);
  if (auto db = pg_of(GetParam(), *maker_)) {
    EXPECT_EQ(db->count("SELECT count(*) FROM mutual_matches"), rounds);
  }
  std::cout << "[ info     ] " << GetParam() << ": the first connection won "
            << first_wins << " of " << rounds << " rounds\n";
}

// A likes B while B likes A: exactly one of the two sees the other's like, so
// the mutual like is neither missed by both nor acted on by both.
TEST_P(match_store_conformance, crossing_likes_see_each_other_once) {
  constexpr int rounds = 300;
  auto c1 = factory_->connect();
  auto c2 = factory_->connect();
  racer race;
  int violations = 0;
  for (int i = 0; i < rounds; ++i) {
    auto k = std::to_string(i);
    auto a = "la" + k;
    auto b = "lb" + k;
    std::optional<outcome<swipe_record>> r1, r2;
    race.run([&] { r1 = c1->record_swipe(a, b, true); },
             [&] { r2 = c2->record_swipe(b, a, true); });
    if (!*r1 || !*r2) {
      ++violations;
      continue;
    }
    if (((*r1)->opposite_like ? 1 : 0) + ((*r2)->opposite_like ? 1 : 0) != 1)
      ++violations;
  }
  EXPECT_EQ(violations, 0);
}

} // namespace
