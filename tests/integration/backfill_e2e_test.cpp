// Backfill through matchd's HTTP API and WebSockets (docs/groups.md
// "Backfill", docs/api.md "Backfill"), on the embedded stores and on a
// private Redis + PostgreSQL: a 2-vs-2 that goes on with three after a
// member left asks for a player by itself (`"backfill": "auto"`); the next
// user to queue fills the seat, in the leaver's team, and every member,
// old and new, hears `session.members_changed`; asking answers the request
// (or `full`); bad requests are named 4xx and change nothing.

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/api_e2e_fixture.hpp"

using namespace mm;
using namespace mm::test;
using namespace std::chrono_literals;

namespace {

class backfill_e2e : public api_e2e {
 protected:
  virtual std::string mode() const {
    return "auto";
  }

  std::vector<std::string> extra_args() const override {
    // A 2-vs-2 of singles that goes on with three.
    auto file = std::string{::testing::TempDir()} + "backfill_rules_"
                + GetParam() + mode() + ".json";
    std::ofstream out{file};
    out << R"({")" << queue_ << R"(": {
      "shape": {"players": {"min": 3, "max": 4},
                "teams": {"count": 2, "size": 2}, "fill_after_s": 600,
                "backfill": ")"
        << mode() << R"("}}})";
    return {"--rules", file};
  }

  http_answer join_q(const std::string& user) {
    return http_->request(
      http::verb::post, path(user, "/tickets"), token(user),
      json{{"queue", queue_}, {"ticket", "t-" + user}}.dump());
  }

  http_answer post(const std::string& user, const std::string& rest,
                   const json& body = json::object()) {
    return http_->request(http::verb::post, path(user, rest), token(user),
                          body.dump());
  }

  /// Four users join and are matched: the session id, and each user's team
  /// (the index of its list in the event's `teams`).
  std::string four_matched(const std::vector<std::string>& users,
                           const std::vector<ws_conn*>& ws,
                           std::map<std::string, int>& team) {
    for (auto& u : users) {
      auto j = join_q(u);
      EXPECT_EQ(j.status, 200u) << j.body;
    }
    std::set<std::string> ids;
    for (auto* w : ws) {
      auto m = w->next_of("match.created", 10s);
      EXPECT_TRUE(m);
      if (!m)
        return {};
      ids.insert((*m)["session_id"].get<std::string>());
      auto& teams = (*m)["teams"];
      for (size_t k = 0; k < teams.size(); ++k)
        for (auto& u : teams[k])
          team[u.get<std::string>()] = static_cast<int>(k);
    }
    EXPECT_EQ(ids.size(), 1u);
    return ids.empty() ? std::string{} : *ids.begin();
  }
};

class backfill_off_e2e : public backfill_e2e {
 protected:
  std::string mode() const override {
    return "off";
  }
};

/// A plain pair queue (no rules, no shape).
class backfill_pair_e2e : public api_e2e {};

TEST_P(backfill_pair_e2e, a_pairs_session_has_no_seat_to_fill) {
  auto a = unique("a"), b = unique("b");
  ws_conn wa{node_->port(), a, token(a)};
  ASSERT_EQ(join(a, "t-" + a).status, 200u);
  ASSERT_EQ(join(b, "t-" + b).status, 200u);
  auto m = wa.next_of("match.created", 10s);
  ASSERT_TRUE(m);
  auto s = (*m)["session_id"].get<std::string>();
  auto r = http_->request(
    http::verb::post, path(a, "/sessions/" + s + "/backfill"), token(a), "{}");
  EXPECT_EQ(r.status, 400u) << r.body;
  EXPECT_EQ(r.error(), "invalid_argument");
  auto stranger = unique("eve");
  auto f = http_->request(http::verb::post,
                          path(stranger, "/sessions/" + s + "/backfill"),
                          token(stranger), "{}");
  EXPECT_EQ(f.status, 403u) << f.body;
}

TEST_P(backfill_e2e, a_left_seat_is_filled_and_every_member_told) {
  auto a = unique("a"), b = unique("b"), c = unique("c"), d = unique("d");
  auto e = unique("e");
  ws_conn wa{node_->port(), a, token(a)}, wb{node_->port(), b, token(b)};
  ws_conn wc{node_->port(), c, token(c)}, wd{node_->port(), d, token(d)};
  ws_conn we{node_->port(), e, token(e)};
  std::map<std::string, int> team;
  auto s = four_matched({a, b, c, d}, {&wa, &wb, &wc, &wd}, team);
  ASSERT_FALSE(s.empty());
  auto left = post(d, "/sessions/" + s + "/leave");
  ASSERT_EQ(left.status, 200u) << left.body;
  // The queue's backfill asks by itself; the next player fills the seat.
  ASSERT_EQ(join_q(e).status, 200u);
  for (auto* w : {&wa, &wb, &wc, &we}) {
    auto m = w->next_of("session.members_changed", 15s);
    ASSERT_TRUE(m);
    EXPECT_EQ((*m)["session_id"], s) << *m;
    ASSERT_EQ((*m)["added"].size(), 1u) << *m;
    EXPECT_EQ((*m)["added"][0]["user"], e);
    EXPECT_EQ((*m)["added"][0]["team"], team[d]) << "the leaver's seat";
    EXPECT_EQ((*m)["remaining"], 4);
    std::set<std::string> users;
    for (auto& u : (*m)["users"])
      users.insert(u.get<std::string>());
    EXPECT_EQ(users, (std::set<std::string>{a, b, c, e}));
  }
  EXPECT_FALSE(wd.next_of("session.members_changed", 300ms));
  auto t = http_->request(http::verb::get, path(e, "/tickets/t-" + e), token(e),
                          "");
  EXPECT_EQ(t.as_json()["state"], "matched") << t.body;
  EXPECT_EQ(t.as_json()["session_id"], s) << t.body;
  // Full again: asking asks nothing.
  auto full = post(a, "/sessions/" + s + "/backfill");
  ASSERT_EQ(full.status, 200u) << full.body;
  EXPECT_EQ(full.as_json()["state"], "full");
  EXPECT_EQ(full.as_json()["players"], 4);
  // The new member plays: it may leave as any member.
  EXPECT_EQ(post(e, "/sessions/" + s + "/leave").status, 200u);
}

TEST_P(backfill_e2e, a_member_asks_over_http_and_the_websocket) {
  auto a = unique("a"), b = unique("b"), c = unique("c"), d = unique("d");
  ws_conn wa{node_->port(), a, token(a)}, wb{node_->port(), b, token(b)};
  ws_conn wc{node_->port(), c, token(c)}, wd{node_->port(), d, token(d)};
  std::map<std::string, int> team;
  auto s = four_matched({a, b, c, d}, {&wa, &wb, &wc, &wd}, team);
  ASSERT_FALSE(s.empty());
  ASSERT_EQ(post(d, "/sessions/" + s + "/leave").status, 200u);
  auto asked = post(a, "/sessions/" + s + "/backfill");
  ASSERT_EQ(asked.status, 200u) << asked.body;
  EXPECT_EQ(asked.as_json()["state"], "waiting");
  EXPECT_EQ(asked.as_json()["players"], 3);
  EXPECT_EQ(asked.as_json()["max_players"], 4);
  EXPECT_EQ(asked.as_json()["queue"], queue_);
  // Again, on the socket: the same request (idempotent).
  auto ws = wb.request(json{{"id", "x"}, {"op", "backfill"}, {"session", s}});
  ASSERT_TRUE(ws);
  EXPECT_EQ((*ws)["status"], 200) << *ws;
  EXPECT_EQ((*ws)["body"]["state"], "waiting") << *ws;
}

TEST_P(backfill_e2e, bad_requests_are_named_and_change_nothing) {
  auto a = unique("a"), b = unique("b"), c = unique("c"), d = unique("d");
  auto eve = unique("eve"), f = unique("f");
  ws_conn wa{node_->port(), a, token(a)}, wb{node_->port(), b, token(b)};
  ws_conn wc{node_->port(), c, token(c)}, wd{node_->port(), d, token(d)};
  ws_conn wf{node_->port(), f, token(f)};
  std::map<std::string, int> team;
  auto s = four_matched({a, b, c, d}, {&wa, &wb, &wc, &wd}, team);
  ASSERT_FALSE(s.empty());
  // Not a member; a member no more; no such session; a bad id.
  auto other = post(eve, "/sessions/" + s + "/backfill");
  EXPECT_EQ(other.status, 403u) << other.body;
  EXPECT_EQ(other.error(), "forbidden");
  ASSERT_EQ(post(d, "/sessions/" + s + "/leave").status, 200u);
  auto gone = post(d, "/sessions/" + s + "/backfill");
  EXPECT_EQ(gone.status, 403u) << gone.body;
  auto unknown
    = post(a, "/sessions/00000000-0000-4000-8000-000000000000/backfill");
  EXPECT_EQ(unknown.status, 404u) << unknown.body;
  auto bad = post(a, "/sessions/a%20b/backfill");
  EXPECT_EQ(bad.status / 100, 4u) << bad.body;
  // The session ends: its request ends with it; a player who queues
  // afterwards is not put in it.
  ASSERT_EQ(post(a, "/sessions/" + s + "/end").status, 200u);
  auto ended = post(b, "/sessions/" + s + "/backfill");
  EXPECT_EQ(ended.status, 404u) << ended.body;
  ASSERT_EQ(join_q(f).status, 200u);
  EXPECT_FALSE(wf.next_of("session.members_changed", 2s));
  auto t = http_->request(http::verb::get, path(f, "/tickets/t-" + f), token(f),
                          "");
  EXPECT_NE(t.as_json()["state"], "matched") << t.body;
}

TEST_P(backfill_off_e2e, a_queue_without_backfill_refuses_it) {
  auto a = unique("a"), b = unique("b"), c = unique("c"), d = unique("d");
  auto e = unique("e");
  ws_conn wa{node_->port(), a, token(a)}, wb{node_->port(), b, token(b)};
  ws_conn wc{node_->port(), c, token(c)}, wd{node_->port(), d, token(d)};
  ws_conn we{node_->port(), e, token(e)};
  std::map<std::string, int> team;
  auto s = four_matched({a, b, c, d}, {&wa, &wb, &wc, &wd}, team);
  ASSERT_FALSE(s.empty());
  ASSERT_EQ(post(d, "/sessions/" + s + "/leave").status, 200u);
  auto r = post(a, "/sessions/" + s + "/backfill");
  EXPECT_EQ(r.status, 400u) << r.body;
  EXPECT_EQ(r.error(), "invalid_argument");
  ASSERT_EQ(join_q(e).status, 200u);
  EXPECT_FALSE(we.next_of("session.members_changed", 2s));
}

INSTANTIATE_TEST_SUITE_P(stores, backfill_e2e,
                         ::testing::Values("embedded", "redis_pg"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(stores, backfill_pair_e2e,
                         ::testing::Values("embedded", "redis_pg"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(stores, backfill_off_e2e,
                         ::testing::Values("embedded", "redis_pg"),
                         [](const auto& info) { return info.param; });

} // namespace
