// Groups through matchd's HTTP API and WebSockets (docs/groups.md,
// docs/api.md "Parties"), on the embedded stores and on a private Redis +
// PostgreSQL: a party formed by its invite code and two users alone make a
// 2-vs-2, every member's WebSocket gets the party's events and the one
// match with its teams; a member leaves the session and the others are
// told; bad party requests are named 4xx and change nothing.

#include <chrono>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/api_e2e_fixture.hpp"

using namespace mm;
using namespace mm::test;
using namespace std::chrono_literals;

namespace {

class groups_e2e : public api_e2e {
 protected:
  std::vector<std::string> extra_args() const override {
    // A 2-vs-2 of parties up to 2 on this test's queue (a match short of
    // four waits 10 minutes); a session of 3 goes on when one leaves (min
    // 3) and ends below that.
    auto file = std::string{::testing::TempDir()} + "groups_rules_" + GetParam()
                + ".json";
    std::ofstream out{file};
    out << R"({")" << queue_ << R"(": {
      "attributes": {"skill": {"type": "number", "min": 0, "max": 5000}},
      "rules": [{"kind": "distance", "attribute": "skill", "base": 5000}],
      "shape": {"players": {"min": 3, "max": 4},
                "teams": {"count": 2, "size": 2}, "party_max": 2,
                "fill_after_s": 600, "balance": "skill"}}})";
    return {"--rules", file};
  }

  http_answer post(const std::string& user, const std::string& rest,
                   const json& body = json::object()) {
    return http_->request(http::verb::post, path(user, rest), token(user),
                          body.dump());
  }

  http_answer get(const std::string& user, const std::string& rest) {
    return http_->request(http::verb::get, path(user, rest), token(user), "");
  }

  json skill(int s) {
    return json{{"skill", s}};
  }
};

TEST_P(groups_e2e, a_party_and_two_alone_make_one_match_every_member_told) {
  auto ann = unique("ann"), bob = unique("bob");
  auto cid = unique("cid"), dee = unique("dee");
  ws_conn wa{node_->port(), ann, token(ann)};
  ws_conn wb{node_->port(), bob, token(bob)};
  ws_conn wc{node_->port(), cid, token(cid)};
  ws_conn wd{node_->port(), dee, token(dee)};
  auto made = post(ann, "/parties");
  ASSERT_EQ(made.status, 200u) << made.body;
  auto party = made.as_json()["party"].get<std::string>();
  auto code = made.as_json()["code"].get<std::string>();
  auto joined = post(bob, "/parties/" + party + "/members", {{"code", code}});
  ASSERT_EQ(joined.status, 200u) << joined.body;
  EXPECT_EQ(joined.as_json()["members"], (json{ann, bob}));
  // Both members' sockets hear the party change.
  auto pu = wb.next_of("party.updated", 5s);
  ASSERT_TRUE(pu);
  EXPECT_EQ((*pu)["party"], party);
  auto queued = post(ann, "/parties/" + party + "/tickets",
                     {{"queue", queue_},
                      {"ticket", "pt-1"},
                      {"attrs", {{ann, skill(1000)}, {bob, skill(1200)}}}});
  ASSERT_EQ(queued.status, 200u) << queued.body;
  EXPECT_EQ(queued.as_json()["phase"], "queued");
  auto jc = http_->request(
    http::verb::post, path(cid, "/tickets"), token(cid),
    json{{"queue", queue_}, {"ticket", "t-c"}, {"attrs", skill(1100)}}.dump());
  ASSERT_EQ(jc.status, 200u) << jc.body;
  EXPECT_EQ(jc.as_json()["state"], "queued");
  auto jd = http_->request(
    http::verb::post, path(dee, "/tickets"), token(dee),
    json{{"queue", queue_}, {"ticket", "t-d"}, {"attrs", skill(1100)}}.dump());
  ASSERT_EQ(jd.status, 200u) << jd.body;
  // One match.created on every member's socket, all naming the session.
  std::set<std::string> sessions;
  json teams;
  for (auto* w : {&wa, &wb, &wc, &wd}) {
    auto m = w->next_of("match.created", 10s);
    ASSERT_TRUE(m);
    sessions.insert((*m)["session_id"].get<std::string>());
    EXPECT_EQ((*m)["users"].size(), 4u) << *m;
    teams = (*m)["teams"];
  }
  ASSERT_EQ(sessions.size(), 1u);
  auto session = *sessions.begin();
  // The party in one team, the two alone in the other.
  ASSERT_EQ(teams.size(), 2u) << teams;
  std::set<std::string> t0, t1;
  for (auto& u : teams[0])
    t0.insert(u.get<std::string>());
  for (auto& u : teams[1])
    t1.insert(u.get<std::string>());
  std::set<std::string> party_team{ann, bob}, alone_team{cid, dee};
  EXPECT_TRUE((t0 == party_team && t1 == alone_team)
              || (t1 == party_team && t0 == alone_team))
    << teams;
  // The party and the tickets show the match.
  auto ps = get(bob, "/parties/" + party);
  ASSERT_EQ(ps.status, 200u) << ps.body;
  EXPECT_EQ(ps.as_json()["phase"], "matched");
  EXPECT_EQ(ps.as_json()["session_id"], session);
  auto tc = get(cid, "/tickets/t-c");
  ASSERT_EQ(tc.status, 200u) << tc.body;
  EXPECT_EQ(tc.as_json()["state"], "matched");
  EXPECT_EQ(tc.as_json()["session_id"], session);
  // dee leaves: three stay (min 3), every member hears it; dee is free.
  auto left = post(dee, "/sessions/" + session + "/leave", {{"reason", "bye"}});
  ASSERT_EQ(left.status, 200u) << left.body;
  EXPECT_EQ(left.as_json()["remaining"], 3);
  EXPECT_EQ(left.as_json()["state"], "active");
  for (auto* w : {&wa, &wb, &wc, &wd}) {
    auto m = w->next_of("session.member_left", 10s);
    ASSERT_TRUE(m);
    EXPECT_EQ((*m)["user"], dee);
    EXPECT_EQ((*m)["remaining"], 3);
  }
  auto again = post(dee, "/sessions/" + session + "/leave");
  ASSERT_EQ(again.status, 200u) << again.body;
  EXPECT_EQ(again.as_json()["left_now"], false);
  // cid leaves: two stay, below min: the session ends for everyone.
  auto gone = post(cid, "/sessions/" + session + "/leave");
  ASSERT_EQ(gone.status, 200u) << gone.body;
  EXPECT_EQ(gone.as_json()["state"], "ended");
  for (auto* w : {&wa, &wb})
    ASSERT_TRUE(w->next_of("session.ended", 10s));
  // The party is open again, its members kept.
  EXPECT_TRUE(eventually(
    [&] { return get(ann, "/parties/" + party).as_json()["phase"] == "open"; },
    10s));
}

TEST_P(groups_e2e, bad_party_requests_are_named_and_change_nothing) {
  auto ann = unique("ann"), bob = unique("bob"), eve = unique("eve");
  auto made = post(ann, "/parties").as_json();
  auto party = made["party"].get<std::string>();
  auto code = made["code"].get<std::string>();
  auto other = post(eve, "/parties");
  ASSERT_EQ(other.status, 200u);
  // A user in another party; a wrong code; an unknown party; a
  // non-member's look and leave.
  auto twice = post(eve, "/parties/" + party + "/members", {{"code", code}});
  EXPECT_EQ(twice.status, 409u) << twice.body;
  EXPECT_EQ(twice.error(), "in_party");
  auto wrong = post(bob, "/parties/" + party + "/members",
                    {{"code", "0000000000"}});
  EXPECT_EQ(wrong.status, 403u) << wrong.body;
  auto none = post(bob, "/parties/pnope/members", {{"code", code}});
  EXPECT_EQ(none.status, 404u) << none.body;
  EXPECT_EQ(none.error(), "not_found");
  EXPECT_EQ(get(bob, "/parties/" + party).status, 403u);
  EXPECT_EQ(post(bob, "/parties/" + party + "/leave").status, 403u);
  ASSERT_EQ(
    post(bob, "/parties/" + party + "/members", {{"code", code}}).status, 200u);
  // Attributes missing for one member; of a non-member; not the leader.
  auto missing
    = post(ann, "/parties/" + party + "/tickets",
           {{"queue", queue_}, {"ticket", "t1"}, {"attrs", {{ann, skill(1)}}}});
  EXPECT_EQ(missing.status, 400u) << missing.body;
  EXPECT_EQ(missing.error(), "invalid_attribute");
  auto stranger
    = post(ann, "/parties/" + party + "/tickets",
           {{"queue", queue_},
            {"ticket", "t1"},
            {"attrs", {{ann, skill(1)}, {bob, skill(1)}, {eve, skill(1)}}}});
  EXPECT_EQ(stranger.status, 400u) << stranger.body;
  auto by_member = post(bob, "/parties/" + party + "/tickets",
                        {{"queue", queue_},
                         {"ticket", "t1"},
                         {"attrs", {{ann, skill(1)}, {bob, skill(1)}}}});
  EXPECT_EQ(by_member.status, 403u) << by_member.body;
  // A member's own join while in a party.
  auto own = http_->request(
    http::verb::post, path(bob, "/tickets"), token(bob),
    json{{"queue", queue_}, {"ticket", "t-b"}, {"attrs", skill(1)}}.dump());
  EXPECT_EQ(own.status, 409u) << own.body;
  EXPECT_EQ(own.error(), "in_party");
  // Nothing was queued by any of it.
  auto st = get(ann, "/parties/" + party).as_json();
  EXPECT_EQ(st["phase"], "open");
  EXPECT_EQ(st["members"], (json{ann, bob}));
  // A party of three on a queue whose party_max is 2.
  auto cid = unique("cid");
  ASSERT_EQ(
    post(cid, "/parties/" + party + "/members", {{"code", code}}).status, 200u);
  auto big
    = post(ann, "/parties/" + party + "/tickets",
           {{"queue", queue_},
            {"ticket", "t1"},
            {"attrs", {{ann, skill(1)}, {bob, skill(1)}, {cid, skill(1)}}}});
  EXPECT_EQ(big.status, 400u) << big.body;
  EXPECT_EQ(big.error(), "party_too_large");
  // A leave of a session one is not in.
  auto alien = post(bob, "/sessions/nosuchsession/leave");
  EXPECT_EQ(alien.status, 404u) << alien.body;
}

INSTANTIATE_TEST_SUITE_P(stores, groups_e2e,
                         ::testing::Values("embedded", "redis_pg"),
                         [](const auto& info) { return info.param; });

} // namespace
