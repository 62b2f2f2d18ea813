// matchd end to end over real sockets (HTTP/1.1 + WebSocket), on the
// embedded stores and on a private Redis + PostgreSQL: the same cases.

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "app/common/token.hpp"
#include "tests/support/api_e2e_fixture.hpp"

using namespace mm;
using namespace mm::test;
using namespace std::chrono_literals;

namespace {

TEST_P(api_e2e, two_websocket_users_receive_the_same_session) {
  auto alice = unique("alice"), bob = unique("bob");
  ws_conn wa{node_->port(), alice, token(alice)};
  ws_conn wb{node_->port(), bob, token(bob)};
  auto ja = join(alice, "t-a");
  ASSERT_EQ(ja.status, 200u) << ja.body;
  EXPECT_EQ(ja.as_json()["state"], "queued");
  auto jb = join(bob, "t-b");
  ASSERT_EQ(jb.status, 200u) << jb.body;
  auto ea = wa.next_of("match.created", 5s);
  auto eb = wb.next_of("match.created", 5s);
  ASSERT_TRUE(ea && eb);
  EXPECT_EQ((*ea)["session_id"], (*eb)["session_id"]);
  EXPECT_EQ((*ea)["event_id"], (*eb)["event_id"]);
  EXPECT_FALSE((*ea)["event_id"].get<std::string>().empty());
  auto users = (*ea)["users"];
  EXPECT_TRUE((users[0] == alice && users[1] == bob)
              || (users[0] == bob && users[1] == alice));
  // The ticket reads the same session.
  auto st = http_->request(http::verb::get, path(alice, "/tickets/t-a"),
                           token(alice));
  ASSERT_EQ(st.status, 200u);
  EXPECT_EQ(st.as_json()["state"], "matched");
  EXPECT_EQ(st.as_json()["session_id"], (*ea)["session_id"]);
  // A retried join of the same ticket answers the same outcome.
  auto again = join(alice, "t-a");
  ASSERT_EQ(again.status, 200u);
  EXPECT_EQ(again.as_json()["state"], "matched");
  EXPECT_EQ(again.as_json()["session_id"], (*ea)["session_id"]);
  // Nothing more arrives: one event per match.
  EXPECT_FALSE(wa.next_of("match.created", 300ms));
}

TEST_P(api_e2e, a_session_ends_both_hear_it_and_both_match_again) {
  auto alice = unique("alice"), bob = unique("bob"), carol = unique("carol");
  ws_conn wa{node_->port(), alice, token(alice)};
  ws_conn wb{node_->port(), bob, token(bob)};
  ASSERT_EQ(join(alice, "t-1").status, 200u);
  ASSERT_EQ(join(bob, "t-2").status, 200u);
  auto ea = wa.next_of("match.created", 5s);
  ASSERT_TRUE(ea && wb.next_of("match.created", 5s));
  std::string sid = (*ea)["session_id"];
  auto end_path = [&](const std::string& user, const std::string& session) {
    return path(user, "/sessions/" + session + "/end");
  };
  // In a session: a join is refused with 409 in_session naming it.
  auto busy = join(alice, "t-3");
  ASSERT_EQ(busy.status, 409u) << busy.body;
  EXPECT_EQ(busy.as_json()["error"], "in_session");
  EXPECT_EQ(busy.as_json()["session_id"], sid);
  // Only members end it; unknown sessions are 404.
  auto by_carol = http_->request(http::verb::post, end_path(carol, sid),
                                 token(carol), R"({"reason": "x"})");
  EXPECT_EQ(by_carol.status, 403u) << by_carol.body;
  EXPECT_EQ(by_carol.as_json()["error"], "forbidden");
  auto unknown = http_->request(http::verb::post, end_path(alice, "nope"),
                                token(alice), "{}");
  EXPECT_EQ(unknown.status, 404u) << unknown.body;
  // Alice ends it; both WebSockets get session.ended naming her and why.
  auto ended = http_->request(http::verb::post, end_path(alice, sid),
                              token(alice), R"({"reason": "hung up"})");
  ASSERT_EQ(ended.status, 200u) << ended.body;
  EXPECT_EQ(ended.as_json()["state"], "ended");
  EXPECT_EQ(ended.as_json()["ended_by"], alice);
  EXPECT_EQ(ended.as_json()["ended_now"], true);
  for (auto* ws : {&wa, &wb}) {
    auto ev = ws->next_of("session.ended", 5s);
    ASSERT_TRUE(ev);
    EXPECT_EQ((*ev)["session_id"], sid);
    EXPECT_EQ((*ev)["ended_by"], alice);
    EXPECT_EQ((*ev)["reason"], "hung up");
  }
  // Idempotent: bob's end answers the same final state.
  auto again = http_->request(http::verb::post, end_path(bob, sid), token(bob),
                              R"({"reason": "other"})");
  ASSERT_EQ(again.status, 200u) << again.body;
  EXPECT_EQ(again.as_json()["ended_by"], alice);
  EXPECT_EQ(again.as_json()["reason"], "hung up");
  EXPECT_EQ(again.as_json()["ended_now"], false);
  EXPECT_FALSE(wa.next_of("session.ended", 300ms)); // one event per end
  // Both are free at once and match again (their ticket ids of before:
  // new joins).
  auto ra = join(alice, "t-1");
  ASSERT_EQ(ra.status, 200u) << ra.body;
  auto rb = join(bob, "t-2");
  ASSERT_EQ(rb.status, 200u) << rb.body;
  auto ea2 = wa.next_of("match.created", 5s);
  ASSERT_TRUE(ea2) << ra.body << " " << rb.body;
  EXPECT_NE((*ea2)["session_id"], sid);
}

TEST_P(api_e2e, two_users_may_call_their_ticket_by_the_same_id) {
  // Once "invalid_argument: ticket id in use" for the second user.
  auto alice = unique("alice"), bob = unique("bob");
  ws_conn wa{node_->port(), alice, token(alice)};
  auto ra = join(alice, "t-1");
  ASSERT_EQ(ra.status, 200u) << ra.body;
  auto rb = join(bob, "t-1");
  ASSERT_EQ(rb.status, 200u) << rb.body;
  EXPECT_EQ(rb.as_json()["ticket"], "t-1");
  auto ev = wa.next_of("match.created", 5s);
  ASSERT_TRUE(ev);
  // Clients see their own ticket ids, never the engine's.
  EXPECT_EQ((*ev)["tickets"], json::array({"t-1", "t-1"}));
  auto st = http_->request(http::verb::get, path(bob, "/tickets/t-1"),
                           token(bob));
  ASSERT_EQ(st.status, 200u) << st.body;
  EXPECT_EQ(st.as_json()["state"], "matched");
  EXPECT_EQ(st.as_json()["ticket"], "t-1");
}

TEST_P(api_e2e, a_join_that_gives_up_ends_timed_out_with_a_notice) {
  auto erin = unique("erin"), finn = unique("finn");
  ws_conn we{node_->port(), erin, token(erin)};
  json body{{"queue", queue_}, {"ticket", "t-e"}, {"give_up_after_s", 1}};
  auto r = http_->request(http::verb::post, path(erin, "/tickets"), token(erin),
                          body.dump());
  ASSERT_EQ(r.status, 200u) << r.body;
  auto notice = we.next_of("state", 5s);
  ASSERT_TRUE(notice);
  EXPECT_EQ((*notice)["state"], "timed_out");
  EXPECT_EQ((*notice)["ticket"], "t-e");
  auto st = http_->request(http::verb::get, path(erin, "/tickets/t-e"),
                           token(erin));
  EXPECT_EQ(st.as_json()["state"], "timed_out");
  // Gone from the queue: the next user waits instead of claiming erin.
  ws_conn wf{node_->port(), finn, token(finn)};
  ASSERT_EQ(join(finn, "t-f").status, 200u);
  EXPECT_FALSE(wf.next_of("match.created", 1500ms));
  EXPECT_FALSE(we.next_of("match.created", 10ms));
  EXPECT_EQ(
    http_->request(http::verb::get, path(finn, "/tickets/t-f"), token(finn))
      .as_json()["state"],
    "queued");
}

TEST_P(api_e2e, a_cancel_is_acknowledged_and_no_match_follows) {
  auto carol = unique("carol"), dave = unique("dave");
  ws_conn wc{node_->port(), carol, token(carol)};
  ASSERT_EQ(join(carol, "t-c").status, 200u);
  auto c = http_->request(http::verb::delete_, path(carol, "/tickets/t-c"),
                          token(carol));
  ASSERT_EQ(c.status, 200u) << c.body;
  EXPECT_EQ(c.as_json()["state"], "cancelled");
  auto note = wc.next_of("state", 3s);
  ASSERT_TRUE(note);
  EXPECT_EQ((*note)["state"], "cancelled");
  EXPECT_EQ((*note)["ticket"], "t-c");
  // A later arrival does not find carol.
  auto jd = join(dave, "t-d");
  ASSERT_EQ(jd.status, 200u);
  EXPECT_EQ(jd.as_json()["state"], "queued");
  EXPECT_FALSE(wc.next_of("match.created", 1s));
  auto sd = http_->request(http::verb::get, path(dave, "/tickets/t-d"),
                           token(dave));
  EXPECT_EQ(sd.as_json()["state"], "queued");
  // Cancel is idempotent.
  auto c2 = http_->request(http::verb::delete_, path(carol, "/tickets/t-c"),
                           token(carol));
  EXPECT_EQ(c2.status, 200u);
  EXPECT_EQ(c2.as_json()["state"], "cancelled");
}

TEST_P(api_e2e, bad_requests_get_the_documented_4xx_and_change_nothing) {
  auto erin = unique("erin"), frank = unique("frank");
  json good{{"queue", queue_}, {"ticket", "t-e"}};
  auto joins_before = metric(*http_, "mm_joins_total");
  auto post = [&](const std::string& target, const std::string& tok,
                  const std::string& body) {
    return http_->request(http::verb::post, target, tok, body);
  };
  struct bad_case {
    const char* what;
    http_answer ans;
    unsigned status;
    const char* error;
  };
  auto expired = sign_token(secret, erin, now_s() - 10);
  auto forged = sign_token("another-secret-0123456789", erin, now_s() + 3600);
  auto tampered = token(erin);
  // The last base64url character of a 32-byte signature carries 4 bits and
  // two zero bits: swap it for another canonical one ('A' and 'E' both are),
  // or the token is refused as malformed before its signature is checked.
  tampered.back() = tampered.back() == 'A' ? 'E' : 'A';
  std::vector<bad_case> cases{
    {"no token", post(path(erin, "/tickets"), "", good.dump()), 401,
     "missing_token"},
    {"malformed token", post(path(erin, "/tickets"), "garbage", good.dump()),
     401, "malformed_token"},
    {"expired token", post(path(erin, "/tickets"), expired, good.dump()), 401,
     "expired_token"},
    {"forged token", post(path(erin, "/tickets"), forged, good.dump()), 401,
     "bad_signature"},
    {"tampered token", post(path(erin, "/tickets"), tampered, good.dump()), 401,
     "bad_signature"},
    {"another user's token",
     post(path(erin, "/tickets"), token(frank), good.dump()), 403, "forbidden"},
    {"malformed JSON", post(path(erin, "/tickets"), token(erin), "{\"queue\":"),
     400, "malformed_json"},
    {"JSON array", post(path(erin, "/tickets"), token(erin), "[1,2]"), 400,
     "malformed_json"},
    {"missing field",
     post(path(erin, "/tickets"), token(erin), json{{"queue", queue_}}.dump()),
     400, "invalid_argument"},
    {"bad queue name",
     post(path(erin, "/tickets"), token(erin),
          json{{"queue", "a b"}, {"ticket", "t"}}.dump()),
     400, "invalid_argument"},
    {"oversized body",
     post(path(erin, "/tickets"), token(erin),
          json{{"queue", queue_},
               {"ticket", "t-e"},
               {"attrs", std::string(20000, 'x')}}
            .dump()),
     413, "body_too_large"},
    {"unknown route", post("/v1/nothing/here", token(erin), good.dump()), 404,
     "unknown_route"},
    {"unknown route under a user",
     post(path(erin, "/tickets/t-e/x/y"), token(erin), good.dump()), 404,
     "unknown_route"},
    {"wrong method",
     http_->request(http::verb::put, path(erin, "/tickets"), token(erin),
                    good.dump()),
     405, "method_not_allowed"},
    {"self swipe",
     post(path(erin, "/swipes"), token(erin),
          json{{"to", erin}, {"action", "LIKE"}}.dump()),
     400, "invalid_argument"},
    {"bad swipe action",
     post(path(erin, "/swipes"), token(erin),
          json{{"to", frank}, {"action", "MAYBE"}}.dump()),
     400, "invalid_argument"},
  };
  for (auto& c : cases) {
    EXPECT_EQ(c.ans.status, c.status) << c.what << ": " << c.ans.body;
    EXPECT_EQ(c.ans.error(), c.error) << c.what << ": " << c.ans.body;
  }
  // Nothing changed: no join happened, erin has no ticket.
  EXPECT_EQ(metric(*http_, "mm_joins_total"), joins_before);
  auto st = http_->request(http::verb::get, path(erin, "/tickets/t-e"),
                           token(erin));
  EXPECT_EQ(st.status, 404u) << st.body;
  EXPECT_EQ(st.error(), "not_found");
  // Erin joins; frank cannot touch her ticket or her events.
  ASSERT_EQ(join(erin, "t-e").status, 200u);
  auto steal = http_->request(http::verb::delete_, path(erin, "/tickets/t-e"),
                              token(frank));
  EXPECT_EQ(steal.status, 403u);
  EXPECT_EQ(steal.error(), "forbidden");
  auto peek = http_->request(http::verb::get, path(erin, "/tickets/t-e"),
                             token(frank));
  EXPECT_EQ(peek.status, 403u);
  auto beat = http_->request(
    http::verb::post, path(erin, "/tickets/t-e/heartbeat"), token(frank));
  EXPECT_EQ(beat.status, 403u);
  EXPECT_EQ(ws_handshake_status(node_->port(), path(erin, "/events"),
                                token(frank)),
            403u);
  EXPECT_EQ(ws_handshake_status(node_->port(), path(erin, "/events"), ""),
            401u);
  EXPECT_EQ(ws_handshake_status(node_->port(), path(erin, "/events"), forged),
            401u);
  // Her own ticket under another id is not found; she is still waiting.
  auto other = http_->request(http::verb::delete_,
                              path(erin, "/tickets/t-other"), token(erin));
  EXPECT_EQ(other.status, 404u);
  auto mine = http_->request(http::verb::post,
                             path(erin, "/tickets/t-e/heartbeat"), token(erin));
  ASSERT_EQ(mine.status, 200u);
  EXPECT_EQ(mine.as_json()["state"], "queued");
  // A second live join with another ticket is refused, the first stays.
  auto dup = join(erin, "t-e2");
  EXPECT_EQ(dup.status, 409u);
  EXPECT_EQ(dup.error(), "duplicate_ticket");
  EXPECT_EQ(
    http_->request(http::verb::get, path(erin, "/tickets/t-e"), token(erin))
      .as_json()["state"],
    "queued");
}

TEST_P(api_e2e, a_mutual_like_pushes_the_match_to_both) {
  auto gina = unique("gina"), hank = unique("hank");
  ws_conn wg{node_->port(), gina, token(gina)};
  ws_conn wh{node_->port(), hank, token(hank)};
  auto like = [&](const std::string& from, const std::string& to) {
    return http_->request(http::verb::post, path(from, "/swipes"), token(from),
                          json{{"to", to}, {"action", "LIKE"}}.dump());
  };
  auto first = like(gina, hank);
  ASSERT_EQ(first.status, 200u) << first.body;
  EXPECT_EQ(first.as_json()["mutual"], false);
  auto second = like(hank, gina);
  ASSERT_EQ(second.status, 200u) << second.body;
  EXPECT_EQ(second.as_json()["mutual"], true);
  EXPECT_EQ(second.as_json()["created"], true);
  auto eg = wg.next_of("match.created", 5s);
  auto eh = wh.next_of("match.created", 5s);
  ASSERT_TRUE(eg && eh);
  EXPECT_EQ((*eg)["session_id"], second.as_json()["session_id"]);
  EXPECT_EQ((*eh)["session_id"], second.as_json()["session_id"]);
}

TEST_P(api_e2e, a_swipe_creates_nothing_for_its_target) {
  // Neither user has a WebSocket open or asked anything before.
  auto pia = unique("pia"), quinn = unique("quinn");
  auto first = like(pia, quinn);
  ASSERT_EQ(first.status, 200u) << first.body;
  EXPECT_EQ(first.as_json()["mutual"], false);
  // No link and no session for the target (nor for the swiper: a swipe
  // needs none).
  EXPECT_EQ(gauge("mm_client_links"), 0);
  EXPECT_EQ(gauge("mm_sessions_live"), 0);
  EXPECT_EQ(gauge("mm_directory_users"), 0);
  auto second = like(quinn, pia);
  ASSERT_EQ(second.status, 200u) << second.body;
  EXPECT_EQ(second.as_json()["mutual"], true);
  EXPECT_EQ(gauge("mm_client_links"), 0);
  EXPECT_EQ(gauge("mm_sessions_live"), 0);
  // The match's event waits here for both; quinn's WebSocket gets it.
  ws_conn wq{node_->port(), quinn, token(quinn)};
  auto ev = wq.next_of("match.created", 5s);
  ASSERT_TRUE(ev);
  EXPECT_EQ((*ev)["session_id"], second.as_json()["session_id"]);
}

TEST_P(api_e2e, a_waiting_user_whose_client_is_gone_is_cancelled) {
  // --client-ttl 2000: no WebSocket and no request for 2 s.
  auto ivan = unique("ivan");
  ASSERT_EQ(join(ivan, "t-i").status, 200u);
  std::this_thread::sleep_for(4s);
  auto st = http_->request(http::verb::get, path(ivan, "/tickets/t-i"),
                           token(ivan));
  ASSERT_EQ(st.status, 200u);
  EXPECT_EQ(st.as_json()["state"], "cancelled");
  // While the WebSocket is open the user stays.
  auto judy = unique("judy");
  ws_conn wj{node_->port(), judy, token(judy)};
  ASSERT_EQ(join(judy, "t-j").status, 200u);
  std::this_thread::sleep_for(4s);
  EXPECT_EQ(
    http_->request(http::verb::get, path(judy, "/tickets/t-j"), token(judy))
      .as_json()["state"],
    "queued");
  // Every open WebSocket of a user gets the event.
  auto kim = unique("kim");
  ws_conn second{node_->port(), judy, token(judy)};
  ASSERT_EQ(join(kim, "t-k").status, 200u);
  auto e1 = wj.next_of("match.created", 5s);
  auto e2 = second.next_of("match.created", 5s);
  ASSERT_TRUE(e1 && e2);
  EXPECT_EQ((*e1)["event_id"], (*e2)["event_id"]);
}

TEST_P(api_e2e, a_waiting_user_whose_websocket_closes_is_cancelled) {
  // The open WebSocket is the sign of life, and no presence check runs
  // while it is open; its close starts one (--client-ttl 2000).
  auto lena = unique("lena");
  auto state = [&] {
    return http_
      ->request(http::verb::get, path(lena, "/tickets/t-l"), token(lena))
      .as_json()["state"];
  };
  {
    ws_conn wl{node_->port(), lena, token(lena)};
    ASSERT_EQ(join(lena, "t-l").status, 200u);
    std::this_thread::sleep_for(3s);
    EXPECT_EQ(state(), "queued");
  }
  std::this_thread::sleep_for(4s);
  EXPECT_EQ(state(), "cancelled");
}

TEST_P(api_e2e, events_wait_for_a_websocket_that_opens_later) {
  auto nina = unique("nina"), oscar = unique("oscar");
  ASSERT_EQ(join(nina, "t-n").status, 200u);
  ASSERT_EQ(join(oscar, "t-o").status, 200u);
  http_answer st;
  for (int i = 0; i < 50; ++i) {
    st = http_->request(http::verb::get, path(nina, "/tickets/t-n"),
                        token(nina));
    if (st.as_json()["state"] == "matched")
      break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(st.as_json()["state"], "matched");
  std::this_thread::sleep_for(300ms); // the event reaches the backlog
  ws_conn wn{node_->port(), nina, token(nina)};
  auto ev = wn.next_of("match.created", 5s);
  ASSERT_TRUE(ev);
  EXPECT_EQ((*ev)["session_id"], st.as_json()["session_id"]);
}

TEST_P(api_e2e, operations_endpoints_answer) {
  auto h = http_->request(http::verb::get, "/healthz");
  EXPECT_EQ(h.status, 200u);
  EXPECT_EQ(h.as_json()["status"], "ok");
  // Ready once the first probe of both stores answered.
  http_answer r;
  for (int i = 0; i < 50; ++i) {
    r = http_->request(http::verb::get, "/readyz");
    if (r.status == 200)
      break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(r.status, 200u) << r.body;
  auto lisa = unique("lisa");
  ASSERT_EQ(join(lisa, "t-l").status, 200u);
  // The periodic sweep learns the queue's depth within a second or two.
  double depth = -1;
  for (int i = 0; i < 40 && depth != 1; ++i) {
    std::this_thread::sleep_for(100ms);
    auto text = http_->request(http::verb::get, "/metrics").body;
    auto pos = text.find("mm_queue_depth{queue=\"" + queue_ + "\"");
    if (pos != std::string::npos) {
      auto eol = text.find('\n', pos);
      auto line = text.substr(pos, eol - pos);
      depth = std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  EXPECT_EQ(depth, 1);
  auto text = http_->request(http::verb::get, "/metrics").body;
  for (auto name :
       {"mm_joins_total", "mm_claims_total", "mm_matches_total",
        "mm_cancels_total", "mm_requeues_total", "mm_conflicts_total",
        "mm_stale_removed_total", "mm_relay_retries_total",
        "mm_outbox_lag_seconds", "mm_finalize_latency_seconds_bucket",
        "mm_http_requests_total"})
    EXPECT_NE(text.find(name), std::string::npos) << name;
  EXPECT_GE(metric(*http_, "mm_joins_total"), 1);
}

INSTANTIATE_TEST_SUITE_P(stores, api_e2e,
                         ::testing::Values("embedded", "redis_pg"),
                         [](const auto& info) { return info.param; });

/// A node that releases idle users after 1 s (and drops kept events after
/// 1 s).
class api_idle : public api_e2e {
 protected:
  std::vector<std::string> extra_args() const override {
    return {"--idle-release", "1000", "--parked-ttl", "1000"};
  }
};

TEST_P(api_idle, an_idle_user_is_released_and_matches_again) {
  auto alice = unique("alice"), bob = unique("bob");
  std::string sid;
  {
    ws_conn wa{node_->port(), alice, token(alice)};
    ws_conn wb{node_->port(), bob, token(bob)};
    ASSERT_EQ(join(alice, "t-a").status, 200u);
    ASSERT_EQ(join(bob, "t-b").status, 200u);
    auto ea = wa.next_of("match.created", 5s);
    ASSERT_TRUE(ea && wb.next_of("match.created", 5s));
    sid = (*ea)["session_id"];
    auto ended = http_->request(http::verb::post,
                                path(alice, "/sessions/" + sid + "/end"),
                                token(alice), R"({"reason": "bye"})");
    ASSERT_EQ(ended.status, 200u) << ended.body;
    ASSERT_TRUE(wa.next_of("session.ended", 5s));
    ASSERT_TRUE(wb.next_of("session.ended", 5s));
    // Idle, but with open WebSockets: kept, however long.
    std::this_thread::sleep_for(2500ms);
    EXPECT_EQ(gauge("mm_sessions_live"), 2);
    EXPECT_EQ(gauge("mm_client_links"), 2);
  } // both WebSockets close
  // No WebSocket, no request, no ticket: released after the grace.
  EXPECT_TRUE(eventually(
    [&] {
      return gauge("mm_sessions_live") == 0 && gauge("mm_client_links") == 0
             && gauge("mm_directory_users") == 0;
    },
    10s))
    << "sessions " << gauge("mm_sessions_live") << ", links "
    << gauge("mm_client_links") << ", directory "
    << gauge("mm_directory_users");
  EXPECT_EQ(gauge("mm_parked_events"), 0);
  EXPECT_GE(gauge("mm_sessions_released_total"), 2);
  // Forgotten: the finished ticket is unknown now (docs/api.md).
  auto old = http_->request(http::verb::get, path(alice, "/tickets/t-a"),
                            token(alice));
  EXPECT_EQ(old.status, 404u) << old.body;
  // Both join again (no WebSocket) and are matched with each other.
  ASSERT_EQ(join(alice, "t-a2").status, 200u);
  ASSERT_EQ(join(bob, "t-b2").status, 200u);
  http_answer sa, sb;
  EXPECT_TRUE(eventually(
    [&] {
      sa = http_->request(http::verb::get, path(alice, "/tickets/t-a2"),
                          token(alice));
      sb = http_->request(http::verb::get, path(bob, "/tickets/t-b2"),
                          token(bob));
      return sa.as_json()["state"] == "matched"
             && sb.as_json()["state"] == "matched";
    },
    5s))
    << sa.body << " " << sb.body;
  EXPECT_EQ(sa.as_json()["session_id"], sb.as_json()["session_id"]);
  EXPECT_NE(sa.as_json()["session_id"], sid);
}

INSTANTIATE_TEST_SUITE_P(stores, api_idle,
                         ::testing::Values("embedded", "redis_pg"),
                         [](const auto& info) { return info.param; });

/// The node a user's session lives on, as the cluster's map in the private
/// Redis says ("" when none).
std::string route_of(const std::string& user) {
  auto cmd = "redis-cli -p " + std::to_string(redis_port())
             + " HGET 'mm:{cluster}:users' '" + user + "'";
  std::string out;
  if (auto* f = ::popen(cmd.c_str(), "r")) {
    char buf[256];
    while (::fgets(buf, sizeof buf, f))
      out += buf;
    ::pclose(f);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
    out.pop_back();
  return out;
}

/// Two nodes sharing Redis and PostgreSQL: a swipe through one node to a
/// user whose WebSocket is on the other does not claim that user for the
/// swiper's node; the mutual match's event reaches the user's WebSocket.
TEST(api_cluster, a_swipe_leaves_the_targets_route_alone) {
  auto db = pg_conninfo(fresh_database("api_cluster"));
  auto redis = "127.0.0.1:" + std::to_string(redis_port());
  auto tag = unique("e2e");
  auto node = [&](const std::string& id) {
    return matchd_process{
      {"--secret", secret, "--node", tag + id, "--redis", redis, "--postgres",
       db, "--cluster-port", std::to_string(free_tcp_port()), "--cluster-host",
       "127.0.0.1", "--cluster-insecure", "true", "--log-level", "warn"},
      std::string{::testing::TempDir()} + "matchd_cluster_" + id + ".log"};
  };
  auto n1 = node("-n1");
  auto n2 = node("-n2");
  http_conn h1{n1.port()}, h2{n2.port()};
  auto sam = unique("sam"), tom = unique("tom");
  auto like = [&](http_conn& h, const std::string& from,
                  const std::string& to) {
    return h.request(http::verb::post, "/v1/users/" + from + "/swipes",
                     token(from), json{{"to", to}, {"action", "LIKE"}}.dump());
  };
  // Tom is on node 2: WebSocket and a request there.
  ws_conn wt{n2.port(), tom, token(tom)};
  h2.request(http::verb::get, "/v1/users/" + tom + "/tickets/none", token(tom));
  ASSERT_TRUE(eventually([&] { return route_of(tom) == tag + "-n2"; }, 5s))
    << route_of(tom);
  auto first = like(h2, tom, sam);
  ASSERT_EQ(first.status, 200u) << first.body;
  // Sam likes tom through node 1: mutual, committed on node 1.
  auto second = like(h1, sam, tom);
  ASSERT_EQ(second.status, 200u) << second.body;
  EXPECT_EQ(second.as_json()["mutual"], true);
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(route_of(tom), tag + "-n2");
  auto ev = wt.next_of("match.created", 5s);
  ASSERT_TRUE(ev) << "tom's WebSocket on node 2 never got the match";
  EXPECT_EQ((*ev)["session_id"], second.as_json()["session_id"]);
}

/// Limits: a small rate and body bound on their own node.
TEST(api_limits, rate_and_size_limits_refuse_with_named_errors) {
  matchd_process node{{"--secret", secret, "--rate", "5", "--max-body", "1024",
                       "--log-level", "warn"},
                      std::string{::testing::TempDir()} + "matchd_limits.log"};
  http_conn c{node.port()};
  auto user = unique("mike");
  int ok = 0, limited = 0;
  for (int i = 0; i < 30; ++i) {
    auto a = c.request(http::verb::get, "/v1/users/" + user + "/tickets/none",
                       token(user));
    if (a.status == 429) {
      ++limited;
      EXPECT_EQ(a.error(), "rate_limited");
    } else {
      ++ok;
    }
  }
  EXPECT_GE(limited, 10);
  EXPECT_LE(ok, 12); // burst of twice the rate, plus what refilled meanwhile
  http_conn fresh{node.port()};
  auto big = fresh.request(http::verb::post, "/v1/users/" + user + "/tickets",
                           token(user), std::string(2000, ' '));
  EXPECT_EQ(big.status, 413u);
  EXPECT_EQ(big.error(), "body_too_large");
}

} // namespace
