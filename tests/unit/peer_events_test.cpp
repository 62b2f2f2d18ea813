// What a peer node's event may be (actors/peer_events.hpp): a group's
// match.created keeps the roster it was made with even after members left
// or came (backfill), and names members of the session only; a fill's
// session.members_changed reaches a member of its session, also after the
// session ended; so does a member's leave; anything else is refused. The replay of a group's
// match.created names its active members only.

#include <gtest/gtest.h>

#include "actors/peer_events.hpp"
#include "persistence/matchdb/match_store.hpp"

using namespace mm;

namespace {

/// A 2-vs-2 session of a, b, c, d; d left and e came (a fill).
match_record session_after_fill() {
  match_record rec;
  rec.session_id = "s1";
  rec.queue = "q";
  rec.user_a = "a";
  rec.user_b = "b";
  rec.group = "g1";
  rec.min_players = 3;
  for (auto [u, team, active] :
       {std::tuple{"a", 0u, true}, std::tuple{"b", 0u, true},
        std::tuple{"c", 1u, true}, std::tuple{"d", 1u, false},
        std::tuple{"e", 1u, true}})
    rec.members.push_back(
      session_member{u, "t-" + std::string{u}, "{}", team, active});
  return rec;
}

/// The match.created the group was committed with (a, b, c, d).
match_event created_event() {
  group_match_request g;
  g.queue = "q";
  g.group = "g1";
  g.min_players = 3;
  for (auto [u, team] : {std::pair{"a", 0u}, std::pair{"b", 0u},
                         std::pair{"c", 1u}, std::pair{"d", 1u}})
    g.members.push_back(session_member{u, "t-" + std::string{u}, "{}", team});
  match_event ev;
  ev.event_id = match_created_event_id("s1");
  ev.session_id = "s1";
  ev.queue = "q";
  ev.user_a = "a";
  ev.ticket_a = "t-a";
  ev.user_b = "b";
  ev.ticket_b = "t-b";
  ev.others = {"c", "d"};
  ev.payload = group_created_payload("s1", g);
  return ev;
}

TEST(peer_events, a_groups_match_keeps_the_roster_it_was_made_with) {
  auto rec = session_after_fill();
  auto out = as_recorded("c", created_event(), rec);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->others, (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(out->payload, created_event().payload);
}

TEST(peer_events, a_groups_match_naming_a_stranger_is_refused) {
  auto rec = session_after_fill();
  auto forged = created_event();
  forged.others = {"c", "mallory"};
  EXPECT_FALSE(as_recorded("c", forged, rec));
  forged = created_event();
  forged.payload = R"({"users": [{"user": "a"}, {"user": "mallory"}]})";
  EXPECT_FALSE(as_recorded("c", forged, rec));
  EXPECT_FALSE(as_recorded("mallory", created_event(), rec));
}

TEST(peer_events, a_fill_reaches_its_sessions_members_only) {
  auto rec = session_after_fill();
  backfill_request req;
  req.session_id = "s1";
  req.queue = "q";
  req.group = "g7";
  req.max_players = 4;
  req.team_size = 2;
  req.members = {session_member{"e", "t-e", "{}", 1u, true}};
  auto ev = members_changed_event(rec, req);
  EXPECT_EQ(ev.user_a, "a");
  EXPECT_EQ(ev.others, (std::vector<std::string>{"c", "e"}));
  EXPECT_TRUE(as_recorded("e", ev, rec));
  // The session ended since: still its members' news.
  rec.status = session_status::closed;
  EXPECT_TRUE(as_recorded("a", ev, rec));
  EXPECT_FALSE(as_recorded("mallory", ev, rec));
  auto other = ev;
  other.event_id = members_changed_event_id("s2", "g7");
  EXPECT_FALSE(as_recorded("a", other, rec));
}

TEST(peer_events, a_members_leave_reaches_its_sessions_members_only) {
  // d left: every member of the session (d too, on its other sockets)
  // hears it from the node that recorded the leave; nobody else does.
  auto rec = session_after_fill();
  match_event ev;
  ev.type = member_left_type;
  ev.event_id = member_left_event_id("s1", "d");
  ev.session_id = "s1";
  ev.user_a = "a";
  ev.user_b = "b";
  ev.others = {"c", "e"};
  ev.payload = member_left_payload(rec, "d", "left");
  auto out = as_recorded("c", ev, rec);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->queue, "q");
  EXPECT_TRUE(as_recorded("d", ev, rec));
  EXPECT_FALSE(as_recorded("mallory", ev, rec));
  auto other = ev;
  other.event_id = member_left_event_id("s2", "d");
  EXPECT_FALSE(as_recorded("c", other, rec));
}

TEST(peer_events, a_replayed_groups_match_names_its_members_now) {
  // The gateway replays a session's match.created to a member who comes
  // back: d left, so d is not named; e came by a fill, so e is.
  auto ev = event_of(session_after_fill());
  EXPECT_EQ(ev.event_id, match_created_event_id("s1"));
  EXPECT_EQ(ev.user_a, "a");
  EXPECT_EQ(ev.user_b, "b");
  EXPECT_EQ(ev.others, (std::vector<std::string>{"c", "e"}));
  EXPECT_EQ(ev.payload.find("\"d\""), std::string::npos) << ev.payload;
  EXPECT_NE(ev.payload.find("\"t-e\""), std::string::npos) << ev.payload;
}

} // namespace
