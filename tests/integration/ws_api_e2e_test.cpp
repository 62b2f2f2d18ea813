// The requests on a user's WebSocket (docs/api.md "Requests on the
// WebSocket") end to end against matchd, on the embedded stores and on a
// private Redis + PostgreSQL: the cases of api_e2e_test's HTTP routes
// (bad input, another user's ticket, forged tokens, retries) on one socket.

#include <string>

#include <gtest/gtest.h>

#include "tests/support/api_e2e_fixture.hpp"

using namespace mm;
using namespace mm::test;
using namespace std::chrono_literals;

namespace {

class ws_api_e2e : public api_e2e {
 protected:
  json join_msg(const std::string& id, const std::string& ticket) {
    return json{{"id", id},
                {"op", "join"},
                {"body", {{"queue", queue_}, {"ticket", ticket}}}};
  }
};

/// The status and error name of a reply ("" when it is not an error).
std::pair<unsigned, std::string> status_of(const std::optional<json>& r) {
  if (!r)
    return {0, "no reply"};
  auto status = (*r)["status"].get<unsigned>();
  std::string name;
  if ((*r)["body"].is_object() && (*r)["body"].contains("error"))
    name = (*r)["body"]["error"].get<std::string>();
  return {status, name};
}

TEST_P(ws_api_e2e, a_whole_life_on_one_socket) {
  auto alice = unique("alice"), bob = unique("bob");
  ws_conn wa{node_->port(), alice, token(alice)};
  ws_conn wb{node_->port(), bob, token(bob)};
  for (int round = 0; round < 2; ++round) {
    auto ta = "t-a" + std::to_string(round), tb = "t-b" + std::to_string(round);
    auto ja = wa.request(join_msg("j" + std::to_string(round), ta));
    ASSERT_TRUE(ja);
    ASSERT_EQ((*ja)["status"], 200) << ja->dump();
    EXPECT_EQ((*ja)["id"], "j" + std::to_string(round));
    EXPECT_EQ((*ja)["body"]["state"], "queued");
    auto jb = wb.request(json{{"id", 7 + round},
                              {"op", "join"},
                              {"body", {{"queue", queue_}, {"ticket", tb}}}});
    ASSERT_TRUE(jb);
    ASSERT_EQ((*jb)["status"], 200) << jb->dump();
    EXPECT_EQ((*jb)["id"], 7 + round); // integer ids come back as integers
    auto ea = wa.next_of("match.created", 5s);
    auto eb = wb.next_of("match.created", 5s);
    ASSERT_TRUE(ea && eb);
    EXPECT_EQ((*ea)["session_id"], (*eb)["session_id"]);
    auto sid = (*ea)["session_id"].get<std::string>();
    // State and heartbeat by ticket read the match.
    auto st = wa.request(json{{"id", "s"}, {"op", "state"}, {"ticket", ta}});
    ASSERT_TRUE(st);
    EXPECT_EQ((*st)["status"], 200);
    EXPECT_EQ((*st)["body"]["state"], "matched");
    EXPECT_EQ((*st)["body"]["session_id"], sid);
    auto hb
      = wb.request(json{{"id", "h"}, {"op", "heartbeat"}, {"ticket", tb}});
    ASSERT_TRUE(hb);
    EXPECT_EQ((*hb)["status"], 200);
    EXPECT_EQ((*hb)["body"]["session_id"], sid);
    // The end, twice: the same final state, ended_now only the first time.
    json end{{"id", "e"},
             {"op", "end"},
             {"session", sid},
             {"body", {{"reason", "done"}}}};
    auto e1 = wa.request(end);
    ASSERT_TRUE(e1);
    ASSERT_EQ((*e1)["status"], 200) << e1->dump();
    EXPECT_EQ((*e1)["body"]["ended_now"], true);
    auto e2 = wa.request(end);
    ASSERT_TRUE(e2);
    EXPECT_EQ((*e2)["status"], 200);
    EXPECT_EQ((*e2)["body"]["ended_now"], false);
    EXPECT_EQ((*e2)["body"]["reason"], "done");
    ASSERT_TRUE(wa.next_of("session.ended", 5s));
    ASSERT_TRUE(wb.next_of("session.ended", 5s));
  }
  // Every request of both users went over their two sockets: 6 a round.
  EXPECT_EQ(metric(*http_, "mm_websocket_requests_total"), 12);
}

TEST_P(ws_api_e2e, bad_frames_get_the_http_errors_and_change_nothing) {
  auto erin = unique("erin"), frank = unique("frank");
  ws_conn w{node_->port(), erin, token(erin)};
  auto joins_before = metric(*http_, "mm_joins_total");
  // Raw text frames: no id can be read, the reply's id is null.
  struct raw_case {
    const char* what;
    std::string frame;
    unsigned status;
    const char* error;
  };
  std::vector<raw_case> raws{
    {"not JSON", "join please", 400, "malformed_json"},
    {"JSON array", "[1,2]", 400, "malformed_json"},
    {"no id", json{{"op", "join"}}.dump(), 400, "invalid_argument"},
    {"id too long", json{{"id", std::string(65, 'i')}, {"op", "join"}}.dump(),
     400, "invalid_argument"},
    {"negative id", json{{"id", -1}, {"op", "join"}}.dump(), 400,
     "invalid_argument"},
  };
  for (auto& c : raws) {
    ASSERT_TRUE(w.send(c.frame)) << c.what;
    auto r = w.reply_to(nullptr, 5s);
    EXPECT_EQ(status_of(r), std::make_pair(c.status, std::string{c.error}))
      << c.what;
  }
  struct bad_case {
    const char* what;
    json msg;
    unsigned status;
    const char* error;
  };
  std::vector<bad_case> cases{
    {"no op", {{"id", "1"}}, 400, "invalid_argument"},
    {"unknown op", {{"id", "2"}, {"op", "teleport"}}, 400, "unknown_op"},
    {"join without body", {{"id", "3"}, {"op", "join"}}, 400, "malformed_json"},
    {"join body not an object",
     {{"id", "4"}, {"op", "join"}, {"body", "x"}},
     400,
     "malformed_json"},
    {"missing field",
     {{"id", "5"}, {"op", "join"}, {"body", {{"queue", queue_}}}},
     400,
     "invalid_argument"},
    {"bad queue name",
     {{"id", "6"},
      {"op", "join"},
      {"body", {{"queue", "a b"}, {"ticket", "t"}}}},
     400,
     "invalid_argument"},
    {"undeclared queue",
     {{"id", "7"},
      {"op", "join"},
      {"body", {{"queue", "no-such-queue"}, {"ticket", "t"}}}},
     404,
     "unknown_queue"},
    {"oversized attrs",
     {{"id", "8"},
      {"op", "join"},
      {"body",
       {{"queue", queue_},
        {"ticket", "t-e"},
        {"attrs", std::string(5000, 'x')}}}},
     400,
     "invalid_argument"},
    // A ticket is one path segment: it cannot reach another route.
    {"ticket with a slash",
     {{"id", "9"}, {"op", "cancel"}, {"ticket", "t-e/heartbeat"}},
     400,
     "invalid_argument"},
    {"ticket not a string",
     {{"id", "10"}, {"op", "state"}, {"ticket", 5}},
     400,
     "invalid_argument"},
    {"session with a path",
     {{"id", "11"}, {"op", "end"}, {"session", "../tickets"}},
     400,
     "invalid_argument"},
    {"self swipe",
     {{"id", "12"},
      {"op", "swipe"},
      {"body", {{"to", erin}, {"action", "LIKE"}}}},
     400,
     "invalid_argument"},
    {"bad swipe action",
     {{"id", "13"},
      {"op", "swipe"},
      {"body", {{"to", frank}, {"action", "MAYBE"}}}},
     400,
     "invalid_argument"},
    {"auth without token",
     {{"id", "14"}, {"op", "auth"}},
     400,
     "invalid_argument"},
  };
  for (auto& c : cases) {
    auto r = w.request(c.msg);
    EXPECT_EQ(status_of(r), std::make_pair(c.status, std::string{c.error}))
      << c.what << ": " << (r ? r->dump() : "none");
    if (r) {
      EXPECT_EQ((*r)["id"], c.msg["id"]) << c.what;
    }
  }
  // Nothing changed, and the socket still serves.
  EXPECT_EQ(metric(*http_, "mm_joins_total"), joins_before);
  auto st = w.request(json{{"id", "s"}, {"op", "state"}, {"ticket", "t-e"}});
  EXPECT_EQ(status_of(st), std::make_pair(404u, std::string{"not_found"}));
  auto ok = w.request(join_msg("j", "t-e"));
  ASSERT_TRUE(ok);
  EXPECT_EQ((*ok)["status"], 200) << ok->dump();
  // A second live join with another ticket: 409 as over HTTP.
  auto dup = w.request(join_msg("j2", "t-e2"));
  EXPECT_EQ(status_of(dup),
            std::make_pair(409u, std::string{"duplicate_ticket"}));
}

TEST_P(ws_api_e2e, another_users_ticket_is_out_of_reach) {
  auto erin = unique("erin"), frank = unique("frank");
  ASSERT_EQ(join(erin, "t-e").status, 200u);
  ws_conn wf{node_->port(), frank, token(frank)};
  // Frank's socket names tickets in frank's namespace only.
  for (const char* op : {"state", "heartbeat", "cancel"}) {
    auto r = wf.request(json{{"id", op}, {"op", op}, {"ticket", "t-e"}});
    EXPECT_EQ(status_of(r), std::make_pair(404u, std::string{"not_found"}))
      << op;
  }
  // Paths of another user are no field of a request: "user" is ignored.
  auto r = wf.request(
    json{{"id", "x"}, {"op", "cancel"}, {"user", erin}, {"ticket", "t-e"}});
  EXPECT_EQ(status_of(r), std::make_pair(404u, std::string{"not_found"}));
  auto st = http_->request(http::verb::get, path(erin, "/tickets/t-e"),
                           token(erin));
  ASSERT_EQ(st.status, 200u);
  EXPECT_EQ(st.as_json()["state"], "queued");
}

TEST_P(ws_api_e2e, tokens_are_checked_on_every_request) {
  auto gina = unique("gina"), hank = unique("hank");
  // A token that expires in 2 s opens the socket...
  ws_conn w{node_->port(), gina, sign_token(secret, gina, now_s() + 2)};
  auto first = w.request(join_msg("a", "t-g"));
  ASSERT_TRUE(first);
  ASSERT_EQ((*first)["status"], 200) << first->dump();
  std::this_thread::sleep_for(3100ms);
  // ... and its requests are refused once it has expired.
  auto late = w.request(json{{"id", "b"}, {"op", "state"}, {"ticket", "t-g"}});
  EXPECT_EQ(status_of(late),
            std::make_pair(401u, std::string{"expired_token"}));
  // A forged, another user's or an expired token does not replace it.
  auto forged = sign_token("another-secret-0123456789", gina, now_s() + 3600);
  struct auth_case {
    const char* what;
    std::string tok;
    unsigned status;
    const char* error;
  };
  std::vector<auth_case> bad{
    {"forged", forged, 401, "bad_signature"},
    {"garbage", "garbage", 401, "malformed_token"},
    {"another user's", token(hank), 403, "forbidden"},
    {"expired", sign_token(secret, gina, now_s() - 10), 401, "expired_token"},
  };
  for (auto& c : bad) {
    auto r = w.request(json{{"id", c.what}, {"op", "auth"}, {"token", c.tok}});
    EXPECT_EQ(status_of(r), std::make_pair(c.status, std::string{c.error}))
      << c.what;
    auto still
      = w.request(json{{"id", "c"}, {"op", "state"}, {"ticket", "t-g"}});
    EXPECT_EQ(status_of(still),
              std::make_pair(401u, std::string{"expired_token"}))
      << "after the " << c.what << " token";
  }
  // A fresh token of the same user does.
  auto renewed
    = w.request(json{{"id", "d"}, {"op", "auth"}, {"token", token(gina)}});
  EXPECT_EQ(status_of(renewed), std::make_pair(200u, std::string{}));
  auto st = w.request(json{{"id", "e"}, {"op", "state"}, {"ticket", "t-g"}});
  ASSERT_TRUE(st);
  EXPECT_EQ((*st)["status"], 200) << st->dump();
  EXPECT_EQ((*st)["body"]["state"], "queued");
}

TEST_P(ws_api_e2e, a_sockets_token_scope_holds_for_its_requests) {
  // The socket's token is verified once; its queues claim still holds for
  // every join on it, and an `auth` with a wider token widens it.
  auto kim = unique("kim");
  auto scoped = sign_jwt(
    secret, R"({"alg":"HS256","typ":"JWT"})",
    json{{"sub", kim}, {"exp", now_s() + 3600}, {"queues", {"somewhere-else"}}}
      .dump());
  ws_conn w{node_->port(), kim, scoped};
  auto refused = w.request(join_msg("a", "t-k"));
  EXPECT_EQ(status_of(refused), std::make_pair(403u, std::string{"forbidden"}));
  auto st = w.request(json{{"id", "b"}, {"op", "state"}, {"ticket", "t-k"}});
  EXPECT_EQ(status_of(st), std::make_pair(404u, std::string{"not_found"}));
  auto wider
    = w.request(json{{"id", "c"}, {"op", "auth"}, {"token", token(kim)}});
  EXPECT_EQ(status_of(wider), std::make_pair(200u, std::string{}));
  auto joined = w.request(join_msg("d", "t-k"));
  ASSERT_TRUE(joined);
  EXPECT_EQ((*joined)["status"], 200) << joined->dump();
}

TEST_P(ws_api_e2e, retried_requests_answer_the_same) {
  auto ivy = unique("ivy");
  ws_conn w{node_->port(), ivy, token(ivy)};
  auto j1 = w.request(join_msg("1", "t-i"));
  auto j2 = w.request(join_msg("2", "t-i"));
  ASSERT_TRUE(j1 && j2);
  EXPECT_EQ((*j1)["status"], 200);
  EXPECT_EQ((*j2)["status"], 200);
  EXPECT_EQ((*j1)["body"]["state"], "queued");
  EXPECT_EQ((*j2)["body"]["state"], "queued");
  json cancel{{"id", "c"}, {"op", "cancel"}, {"ticket", "t-i"}};
  auto c1 = w.request(cancel);
  auto c2 = w.request(cancel);
  ASSERT_TRUE(c1 && c2);
  EXPECT_EQ((*c1)["status"], 200) << c1->dump();
  EXPECT_EQ((*c1)["body"]["state"], "cancelled");
  EXPECT_EQ((*c2)["status"], 200);
  EXPECT_EQ((*c2)["body"]["state"], "cancelled");
  // Many requests at once: each answered once, under its own id.
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(
      w.send(json{{"id", i}, {"op", "state"}, {"ticket", "t-i"}}.dump()));
  for (int i = 0; i < 10; ++i) {
    auto r = w.reply_to(i, 5s);
    ASSERT_TRUE(r) << i;
    EXPECT_EQ((*r)["body"]["state"], "cancelled");
  }
  EXPECT_FALSE(w.reply_to(3, 300ms)); // no second reply
}

INSTANTIATE_TEST_SUITE_P(stores, ws_api_e2e,
                         ::testing::Values("embedded", "redis_pg"),
                         [](const auto& info) { return info.param; });

} // namespace
