// The ready check through matchd's HTTP API and WebSockets (docs/groups.md
// "Ready check", docs/api.md "Proposals"), on the embedded stores and on a
// private Redis + PostgreSQL: a claimed 2-vs-2 is first a proposal every
// member hears; all accept and it commits; a decline removes the decliner
// and the others are matched again; silence past the deadline removes the
// silent; bad answers are named 4xx and change nothing.

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

class ready_check_e2e : public api_e2e {
 protected:
  std::vector<std::string> extra_args() const override {
    // A 2-vs-2 of singles with a ready check of 2 s.
    auto file = std::string{::testing::TempDir()} + "ready_rules_" + GetParam()
                + ".json";
    std::ofstream out{file};
    out << R"({")" << queue_ << R"(": {
      "shape": {"players": {"min": 4, "max": 4},
                "teams": {"count": 2, "size": 2}, "accept_timeout_s": 2}}})";
    return {"--rules", file};
  }

  http_answer join_q(const std::string& user, const std::string& ticket) {
    return http_->request(http::verb::post, path(user, "/tickets"), token(user),
                          json{{"queue", queue_}, {"ticket", ticket}}.dump());
  }

  http_answer answer(const std::string& user, const std::string& proposal,
                     const std::string& what, const std::string& queue) {
    return http_->request(http::verb::post,
                          path(user, "/proposals/" + proposal + "/" + what),
                          token(user), json{{"queue", queue}}.dump());
  }

  /// Four users join; each socket hears one match.proposed naming all
  /// four. Answers the proposal id.
  std::string four_proposed(const std::vector<std::string>& users,
                            std::vector<ws_conn*> ws) {
    for (auto& u : users) {
      auto j = join_q(u, "t-" + u);
      EXPECT_EQ(j.status, 200u) << j.body;
    }
    std::set<std::string> ids;
    for (auto* w : ws) {
      auto p = w->next_of("match.proposed", 10s);
      EXPECT_TRUE(p);
      if (!p)
        return {};
      EXPECT_EQ((*p)["users"].size(), 4u) << *p;
      EXPECT_EQ((*p)["queue"], queue_);
      EXPECT_GT((*p)["deadline_ms"].get<int64_t>(), 0);
      ids.insert((*p)["proposal"].get<std::string>());
    }
    EXPECT_EQ(ids.size(), 1u);
    return ids.empty() ? std::string{} : *ids.begin();
  }
};

TEST_P(ready_check_e2e, every_member_accepts_and_the_match_commits) {
  auto a = unique("a"), b = unique("b"), c = unique("c"), d = unique("d");
  ws_conn wa{node_->port(), a, token(a)}, wb{node_->port(), b, token(b)};
  ws_conn wc{node_->port(), c, token(c)}, wd{node_->port(), d, token(d)};
  auto id = four_proposed({a, b, c, d}, {&wa, &wb, &wc, &wd});
  ASSERT_FALSE(id.empty());
  // Three over HTTP, one as a WebSocket request; the same accept again
  // answers the standing one.
  for (auto& u : {a, b, c}) {
    auto r = answer(u, id, "accept", queue_);
    ASSERT_EQ(r.status, 200u) << r.body;
    EXPECT_EQ(r.as_json()["answer"], "accept");
  }
  EXPECT_EQ(answer(a, id, "accept", queue_).as_json()["answer"], "accept");
  auto ws = wd.request(json{{"id", "x"},
                            {"op", "proposal_accept"},
                            {"proposal", id},
                            {"body", {{"queue", queue_}}}});
  ASSERT_TRUE(ws);
  EXPECT_EQ((*ws)["status"], 200) << *ws;
  EXPECT_EQ((*ws)["body"]["complete"], true) << *ws;
  std::set<std::string> sessions;
  for (auto* w : {&wa, &wb, &wc, &wd}) {
    auto m = w->next_of("match.created", 10s);
    ASSERT_TRUE(m);
    sessions.insert((*m)["session_id"].get<std::string>());
  }
  EXPECT_EQ(sessions.size(), 1u);
  auto t = http_->request(http::verb::get, path(b, "/tickets/t-" + b), token(b),
                          "");
  EXPECT_EQ(t.as_json()["state"], "matched") << t.body;
}

TEST_P(ready_check_e2e, a_decline_removes_the_decliner_and_the_rest_match) {
  auto a = unique("a"), b = unique("b"), c = unique("c"), d = unique("d");
  auto e = unique("e");
  ws_conn wa{node_->port(), a, token(a)}, wb{node_->port(), b, token(b)};
  ws_conn wc{node_->port(), c, token(c)}, wd{node_->port(), d, token(d)};
  ws_conn we{node_->port(), e, token(e)};
  auto id = four_proposed({a, b, c, d}, {&wa, &wb, &wc, &wd});
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(answer(a, id, "accept", queue_).status, 200u);
  auto no = answer(d, id, "decline", queue_);
  ASSERT_EQ(no.status, 200u) << no.body;
  EXPECT_EQ(no.as_json()["declined"], true);
  auto out_d = wd.next_of("match.proposal_ended", 10s);
  ASSERT_TRUE(out_d);
  EXPECT_EQ((*out_d)["outcome"], "declined");
  for (auto* w : {&wa, &wb, &wc}) {
    auto o = w->next_of("match.proposal_ended", 10s);
    ASSERT_TRUE(o);
    EXPECT_EQ((*o)["outcome"], "requeued");
  }
  // The proposal ended: answers are refused, nothing changes.
  auto late = answer(b, id, "accept", queue_);
  EXPECT_EQ(late.status, 404u) << late.body;
  // A newcomer completes the three: a new proposal, all accept, a match
  // without the decliner.
  ASSERT_EQ(join_q(e, "t-" + e).status, 200u);
  std::string id2;
  for (auto* w : {&wa, &wb, &wc, &we}) {
    auto p = w->next_of("match.proposed", 10s);
    ASSERT_TRUE(p);
    id2 = (*p)["proposal"].get<std::string>();
  }
  EXPECT_NE(id2, id);
  for (auto& u : {a, b, c, e})
    ASSERT_EQ(answer(u, id2, "accept", queue_).status, 200u);
  for (auto* w : {&wa, &wb, &wc, &we}) {
    auto m = w->next_of("match.created", 10s);
    ASSERT_TRUE(m);
    for (auto& u : (*m)["users"])
      EXPECT_NE(u, d) << "the decliner is never matched";
  }
  EXPECT_FALSE(wd.next_of("match.created", 500ms));
  auto td = http_->request(http::verb::get, path(d, "/tickets/t-" + d),
                           token(d), "");
  EXPECT_NE(td.as_json()["state"], "matched") << td.body;
}

TEST_P(ready_check_e2e, silence_past_the_deadline_removes_the_silent) {
  auto a = unique("a"), b = unique("b"), c = unique("c"), d = unique("d");
  ws_conn wa{node_->port(), a, token(a)}, wb{node_->port(), b, token(b)};
  ws_conn wc{node_->port(), c, token(c)}, wd{node_->port(), d, token(d)};
  auto id = four_proposed({a, b, c, d}, {&wa, &wb, &wc, &wd});
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(answer(a, id, "accept", queue_).status, 200u);
  ASSERT_EQ(answer(b, id, "accept", queue_).status, 200u);
  for (auto [w, want] :
       {std::pair{&wa, "requeued"}, std::pair{&wb, "requeued"},
        std::pair{&wc, "timed_out"}, std::pair{&wd, "timed_out"}}) {
    auto o = w->next_of("match.proposal_ended", 10s);
    ASSERT_TRUE(o);
    EXPECT_EQ((*o)["outcome"], want);
  }
  EXPECT_EQ(answer(c, id, "accept", queue_).status, 404u);
}

TEST_P(ready_check_e2e, bad_answers_are_named_and_change_nothing) {
  auto a = unique("a"), b = unique("b"), c = unique("c"), d = unique("d");
  auto eve = unique("eve");
  ws_conn wa{node_->port(), a, token(a)}, wb{node_->port(), b, token(b)};
  ws_conn wc{node_->port(), c, token(c)}, wd{node_->port(), d, token(d)};
  auto id = four_proposed({a, b, c, d}, {&wa, &wb, &wc, &wd});
  ASSERT_FALSE(id.empty());
  // Another user's proposal; an unknown one; no queue; a bad id.
  auto other = answer(eve, id, "accept", queue_);
  EXPECT_EQ(other.status, 403u) << other.body;
  EXPECT_EQ(other.error(), "forbidden");
  auto unknown = answer(a, "g99999999", "accept", queue_);
  EXPECT_EQ(unknown.status, 404u) << unknown.body;
  auto no_queue = http_->request(
    http::verb::post, path(a, "/proposals/" + id + "/accept"), token(a), "{}");
  EXPECT_EQ(no_queue.status, 400u) << no_queue.body;
  auto bad = answer(a, "g%20x", "accept", queue_);
  EXPECT_EQ(bad.status / 100, 4u) << bad.body;
  // Nothing was answered by any of it: the proposal still waits on all.
  auto st = answer(a, id, "accept", queue_);
  ASSERT_EQ(st.status, 200u) << st.body;
  EXPECT_EQ(st.as_json()["accepted"], 1);
  EXPECT_EQ(st.as_json()["declined"], false);
}

INSTANTIATE_TEST_SUITE_P(stores, ready_check_e2e,
                         ::testing::Values("embedded", "redis_pg"),
                         [](const auto& info) { return info.param; });

} // namespace
