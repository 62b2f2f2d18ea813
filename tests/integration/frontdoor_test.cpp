// matchd's front door under abuse (issue 12, item 2), against a real matchd
// process on the embedded stores: bytes a decent client never sends, one
// user opening hundreds of WebSockets, WebSockets that never answer or
// flood, a node at its descriptor limit, a drain with WebSockets that never
// close. Each case was a crash, an unbounded resource or a spin before.

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include "app/common/token.hpp"
#include "tests/support/api_client.hpp"
#include "tests/support/matchd_process.hpp"
#include "tests/support/raw_conn.hpp"

using namespace mm;
using namespace mm::test;
using namespace std::chrono_literals;

namespace {

const std::string secret = "frontdoor-secret-0123456789";

std::string token(const std::string& user) {
  auto now = std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count();
  return sign_token(secret, user, now + 3600);
}

std::string unique(const std::string& prefix) {
  static std::mt19937_64 rng{std::random_device{}()};
  return prefix + std::to_string(rng() % 1000000000);
}

std::string log_path(const std::string& name) {
  return std::string{::testing::TempDir()} + "matchd_frontdoor_" + name
         + ".log";
}

matchd_process node(const std::string& name,
                    std::vector<std::string> extra = {}, rlim_t nofile = 0) {
  std::vector<std::string> args{"--secret", secret};
  if (std::find(extra.begin(), extra.end(), "--log-level") == extra.end())
    extra.insert(extra.end(), {"--log-level", "warn"});
  for (auto& a : extra)
    args.push_back(a);
  return matchd_process{args, log_path(name), nofile};
}

/// A metric's value in the /metrics text of the node on `port`; -1 if absent.
double metric(uint16_t port, const std::string& name) {
  http_conn c{port};
  return mm::test::metric(c, name);
}

/// True while the process runs (not exited, not killed by a signal).
bool alive(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, WNOHANG) == 0;
}

/// The node answers /healthz 200 on a fresh connection.
bool healthy(uint16_t port) {
  try {
    http_conn c{port};
    return c.request(http::verb::get, "/healthz").status == 200;
  } catch (const std::exception&) {
    return false;
  }
}

/// A strict JSON object (valid UTF-8) naming `error`.
::testing::AssertionResult json_error(const raw_response& r,
                                      const std::string& error) {
  if (!json::accept(r.body))
    return ::testing::AssertionFailure() << "not valid JSON: " << r.body;
  auto j = json::parse(r.body);
  if (!j.is_object() || !j.contains("error") || j["error"] != error)
    return ::testing::AssertionFailure()
           << "expected " << error << ": " << r.body;
  return ::testing::AssertionSuccess();
}

/// Opens a WebSocket of `user` by hand: the connection, and the status of
/// the answer to the upgrade (0: no answer). The body of a refusal is in
/// `refusal`.
std::unique_ptr<raw_conn> raw_websocket(uint16_t port, const std::string& user,
                                        unsigned& status,
                                        std::string* refusal = nullptr) {
  auto c = std::make_unique<raw_conn>(port);
  c->send(
    raw_conn::upgrade_request("/v1/users/" + user + "/events", token(user)));
  auto r = c->read_response(5s);
  status = r ? r->status : 0;
  if (r && refusal)
    *refusal = r->body;
  return c;
}

/// CPU seconds (user + system) the process used so far.
double cpu_seconds(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/stat"};
  std::string all{std::istreambuf_iterator<char>{in}, {}};
  std::istringstream rest{all.substr(all.rfind(')') + 2)};
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14)
      utime = std::stod(field);
    if (i == 15)
      stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

size_t line_count(const std::string& file) {
  std::ifstream in{file};
  size_t n = 0;
  std::string line;
  while (std::getline(in, line))
    ++n;
  return n;
}

// -- bytes a decent client never sends -------------------------------------------

/// `GET /\xff HTTP/1.1` aborted matchd: the path went into the JSON error
/// detail and the encoder threw on invalid UTF-8 inside the I/O handler.
TEST(frontdoor, invalid_bytes_in_a_path_are_answered_and_the_node_stays_up) {
  auto n = node("utf8");
  struct probe {
    std::string bytes;
    unsigned status;
    std::string error;
  };
  std::vector<probe> probes{
    // the 22 bytes of the report: 404 (no such route)
    {"GET /\xff HTTP/1.1\r\n\r\n", 404, "unknown_route"},
    {"GET /v1/users/\xff\xfe/tickets/\xc3 HTTP/1.1\r\n\r\n", 401,
     "missing_token"},
    // 405 echoes method and path
    {"PUT /v1/users/\xff/tickets/t HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405,
     "method_not_allowed"},
    {"PATCH /v1/users/a\xe2\x82/events HTTP/1.1\r\n\r\n", 405,
     "method_not_allowed"},
    // a WebSocket upgrade echoes the path too
    {raw_conn::upgrade_request("/\xff", ""), 404, "unknown_route"},
    {raw_conn::upgrade_request("/v1/users/\xff/events/\xff", ""), 404,
     "unknown_route"},
    {raw_conn::upgrade_request("/v1/users/\xff/events", ""), 401,
     "missing_token"},
  };
  for (auto& p : probes) {
    raw_conn c{n.port()};
    ASSERT_TRUE(c.send(p.bytes));
    auto r = c.read_response(5s);
    ASSERT_TRUE(r) << "no answer to " << p.bytes;
    EXPECT_EQ(r->status, p.status) << p.bytes << " -> " << r->body;
    EXPECT_TRUE(json_error(*r, p.error)) << p.bytes;
    ASSERT_TRUE(alive(n.pid())) << "matchd died on " << p.bytes;
  }
  EXPECT_TRUE(healthy(n.port()));
}

/// What does not parse as HTTP gets 400 `malformed_request`, then the close.
TEST(frontdoor, malformed_http_gets_a_400_before_the_close) {
  auto n = node("malformed");
  for (std::string bytes : std::vector<std::string>{
         "GARBAGE\r\n\r\n", "GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
         "GET / HTTP/1.1\r\nno colon here\r\n\r\n", "GET / HTTP/9.7\r\n\r\n",
         std::string{"GET /\0 HTTP/1.1\r\n\r\n", 19}}) {
    raw_conn c{n.port()};
    ASSERT_TRUE(c.send(bytes));
    auto r = c.read_response(5s);
    ASSERT_TRUE(r) << "no answer to " << bytes;
    EXPECT_EQ(r->status, 400u) << bytes << " -> " << r->body;
    EXPECT_TRUE(json_error(*r, "malformed_request")) << bytes;
    EXPECT_TRUE(c.closed_within(5s)) << bytes;
  }
  EXPECT_TRUE(alive(n.pid()));
  EXPECT_TRUE(healthy(n.port()));
}

/// Request smuggling: a body framed by a Transfer-Encoding the front door
/// does not take (unknown, `identity`, listed twice, `chunked` not last,
/// beside Content-Length) is answered with a named error and the
/// connection closed; the request hidden in that body is never served.
/// A body framed by one `chunked` is served as before.
TEST(frontdoor, a_transfer_encoding_it_does_not_take_is_refused_and_closed) {
  auto n = node("smuggle");
  struct probe {
    std::string te;
    unsigned status;
    const char* error;
  };
  const std::vector<probe> probes{
    {"Transfer-Encoding: xchunked\r\n", 501, "unsupported_transfer_encoding"},
    {"Transfer-Encoding: identity\r\n", 501, "unsupported_transfer_encoding"},
    {"Transfer-Encoding: chunked, identity\r\n", 501,
     "unsupported_transfer_encoding"},
    // chunked last: the parser reads the body as chunks and refuses it
    {"Transfer-Encoding: gzip, chunked\r\n", 400, "malformed_request"},
    {"Transfer-Encoding: chunked, chunked\r\n", 400, "malformed_request"},
    {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400,
     "malformed_request"},
    {"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", 400,
     "malformed_request"},
  };
  for (auto& p : probes) {
    auto victim = unique("smuggled-");
    auto body = std::string{"{\"queue\":\"default\",\"ticket\":\"t-1\"}"};
    auto hidden = "POST /v1/users/" + victim
                  + "/tickets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                  + token(victim) + "\r\nContent-Length: "
                  + std::to_string(body.size()) + "\r\n\r\n" + body;
    auto outer = unique("outer-");
    raw_conn c{n.port()};
    ASSERT_TRUE(c.send("POST /v1/users/" + outer
                       + "/tickets HTTP/1.1\r\nHost: x\r\nAuthorization: "
                         "Bearer "
                       + token(outer) + "\r\n" + p.te + "\r\n" + hidden));
    auto r = c.read_response(5s);
    ASSERT_TRUE(r) << "no answer to " << p.te;
    EXPECT_EQ(r->status, p.status) << p.te << " -> " << r->body;
    EXPECT_TRUE(json_error(*r, p.error)) << p.te << " -> " << r->body;
    EXPECT_TRUE(c.closed_within(5s)) << p.te << ": the connection stayed open";
    EXPECT_EQ(c.pending().find("HTTP/1.1"), std::string::npos)
      << p.te << ": a second answer came: " << c.pending();
    // Neither the outer request nor the hidden one created a ticket.
    http_conn api{n.port()};
    for (auto& who : {victim, outer}) {
      auto st = api.request(boost::beast::http::verb::get,
                            "/v1/users/" + who + "/tickets/t-1", token(who));
      EXPECT_EQ(st.status, 404u) << p.te << ": " << who << " -> " << st.body;
    }
    ASSERT_TRUE(alive(n.pid())) << "matchd died on " << p.te;
  }
  // One `chunked` frames a body as it should: served, kept alive.
  auto user = unique("chunked-");
  std::string body = "{\"queue\":\"default\",\"ticket\":\"t-1\"}";
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  raw_conn c{n.port()};
  ASSERT_TRUE(c.send("POST /v1/users/" + user
                     + "/tickets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                     + token(user) + "\r\nTransfer-Encoding: chunked\r\n\r\n"
                     + size + "\r\n" + body + "\r\n0\r\n\r\n"));
  auto r = c.read_response(5s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200u) << r->body;
  EXPECT_FALSE(c.closed_within(300ms));
}

// -- WebSockets ----------------------------------------------------------------------

/// 500 upgrades of one user: --max-websockets-per-user (default 8) are
/// open, the rest refused 429 `too_many_websockets`; all are counted.
TEST(frontdoor, websockets_of_one_user_are_capped_and_counted) {
  auto n = node("ws_cap");
  auto user = unique("ann");
  std::vector<std::unique_ptr<raw_conn>> open;
  size_t refused = 0, other = 0;
  std::string last_refusal;
  for (int i = 0; i < 500; ++i) {
    unsigned status = 0;
    auto c = raw_websocket(n.port(), user, status, &last_refusal);
    if (status == 101) {
      open.push_back(std::move(c));
    } else if (status == 429
               && json_error(raw_response{429, {}, last_refusal},
                             "too_many_websockets")) {
      ++refused;
    } else {
      ++other;
    }
  }
  EXPECT_EQ(open.size(), 8u);
  EXPECT_EQ(refused, 492u) << last_refusal;
  EXPECT_EQ(other, 0u);
  ASSERT_TRUE(alive(n.pid()));
  EXPECT_EQ(metric(n.port(), "mm_websockets"), 8);
  // The 8 WebSockets count as connections (the metrics request is a 9th).
  EXPECT_GE(metric(n.port(), "mm_http_connections"), 9);
  EXPECT_EQ(metric(n.port(), "mm_websockets_refused_total"), 492);
  // Another user is not affected.
  auto bob = unique("bob");
  EXPECT_NO_THROW(ws_conn(n.port(), bob, token(bob)));
  // Once closed, the places are free again.
  open.clear();
  EXPECT_TRUE(
    eventually([&] { return metric(n.port(), "mm_websockets") == 0; }, 5s));
  unsigned status = 0;
  auto again = raw_websocket(n.port(), user, status);
  EXPECT_EQ(status, 101u);
  EXPECT_TRUE(healthy(n.port()));
}

/// An upgraded connection still counts against --max-connections.
TEST(frontdoor, websockets_count_against_max_connections) {
  auto n = node("ws_conns", {"--max-connections", "6"});
  std::vector<std::unique_ptr<raw_conn>> open;
  for (int i = 0; i < 6; ++i) {
    unsigned status = 0;
    open.push_back(raw_websocket(n.port(), unique("u"), status));
    ASSERT_EQ(status, 101u) << i;
  }
  // Six open WebSockets: a seventh connection is closed on accept.
  raw_conn extra{n.port()};
  extra.send("GET /healthz HTTP/1.1\r\n\r\n");
  EXPECT_FALSE(extra.read_response(2s)) << "a 7th connection was served";
  EXPECT_TRUE(extra.closed_within(2s));
  open.pop_back();
  EXPECT_TRUE(eventually([&] { return healthy(n.port()); }, 5s));
}

/// A WebSocket that answers nothing — not even the server's pings — is
/// closed after --ws-idle-timeout; one whose client answers stays open.
TEST(frontdoor, a_websocket_that_answers_nothing_is_closed) {
  auto n = node("ws_idle", {"--ws-idle-timeout", "1000"});
  auto t0 = std::chrono::steady_clock::now();
  unsigned status = 0;
  auto mute = raw_websocket(n.port(), unique("mute"), status);
  ASSERT_EQ(status, 101u);
  auto talker = unique("talker");
  ws_conn live{n.port(), talker, token(talker)}; // answers pings
  EXPECT_TRUE(mute->closed_within(5s));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 900ms);
  EXPECT_NE(mute->pending().find('\x89'), std::string::npos)
    << "the server never pinged";
  EXPECT_FALSE(live.closed(2500ms)) << "a client that answers pings was closed";
  EXPECT_GE(metric(n.port(), "mm_websocket_idle_closed_total"), 1);
  EXPECT_EQ(metric(n.port(), "mm_websockets"), 1);
  // Each pong starts a new silence: the live client was pinged again and
  // again (one ping for the mute one, about one per 0.5 s for this one).
  EXPECT_GE(metric(n.port(), "mm_websocket_pings_total"), 4);
}

/// Only silent clients are pinged: one that sends a frame more often than
/// half of --ws-idle-timeout never is, and stays open.
TEST(frontdoor, a_websocket_that_talks_is_not_pinged) {
  auto n = node("ws_talk", {"--ws-idle-timeout", "1000"});
  unsigned status = 0;
  auto chatty = raw_websocket(n.port(), unique("chatty"), status);
  ASSERT_EQ(status, 101u);
  for (int i = 0; i < 12; ++i) { // 2.4 s, within --ws-rate
    chatty->send(raw_conn::text_frame("hi"));
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_FALSE(chatty->closed_within(100ms));
  EXPECT_EQ(metric(n.port(), "mm_websocket_pings_total"), 0);
  EXPECT_EQ(metric(n.port(), "mm_websocket_idle_closed_total"), 0);
}

/// One masked client frame: `head` is its first byte (FIN, opcode).
std::string client_frame(unsigned char head, const std::string& payload) {
  auto f = raw_conn::text_frame(payload);
  f[0] = static_cast<char>(head);
  return f;
}

/// A message is read whole whatever its size or fragments: a one-byte
/// message, an empty one and one in three fragments are each answered as
/// one request (the read takes a message's first byte apart from the rest).
TEST(frontdoor, websocket_messages_of_any_shape_are_read_whole) {
  auto n = node("ws_shapes");
  unsigned status = 0;
  auto c = raw_websocket(n.port(), unique("shapes"), status);
  ASSERT_EQ(status, 101u);
  c->send(raw_conn::text_frame("x"));
  c->send(raw_conn::text_frame(""));
  c->send(client_frame(0x01, "{\"id\":\"frag\",")); // text, not FIN
  c->send(client_frame(0x00, "\"op\":"));           // continuation
  c->send(client_frame(0x80, "\"teleport\"}"));     // continuation, FIN
  EXPECT_FALSE(c->closed_within(1500ms));
  auto& got = c->pending();
  auto count = [&](const std::string& what) {
    size_t k = 0;
    for (auto at = got.find(what); at != std::string::npos;
         at = got.find(what, at + 1))
      ++k;
    return k;
  };
  EXPECT_EQ(count("malformed_json"), 2u) << got; // "x" and ""
  EXPECT_EQ(count("unknown_op"), 1u) << got;
  EXPECT_NE(got.find("\"frag\""), std::string::npos) << got;
}

/// Inbound messages (and pings) are rate limited per WebSocket: a flood is
/// closed with 1008 (policy violation).
TEST(frontdoor, a_websocket_that_floods_is_closed) {
  auto n = node("ws_flood", {"--ws-rate", "5"});
  for (auto frame : {raw_conn::text_frame("hello"), raw_conn::ping_frame()}) {
    unsigned status = 0;
    auto c = raw_websocket(n.port(), unique("flood"), status);
    ASSERT_EQ(status, 101u);
    for (int i = 0; i < 100; ++i)
      c->send(frame);
    EXPECT_TRUE(c->closed_within(5s));
    // The close frame: 0x88, length, code 1008 (0x03 0xf0).
    EXPECT_NE(c->pending().find("\x88\x02\x03\xf0"), std::string::npos);
  }
  EXPECT_EQ(metric(n.port(), "mm_websocket_rate_closed_total"), 2);
  // A client within the rate is not disturbed.
  unsigned status = 0;
  auto calm = raw_websocket(n.port(), unique("calm"), status);
  ASSERT_EQ(status, 101u);
  for (int i = 0; i < 3; ++i)
    calm->send(raw_conn::text_frame("hi"));
  EXPECT_FALSE(calm->closed_within(1500ms));
}

// -- the descriptor limit --------------------------------------------------------------

/// At the descriptor limit accept fails with EMFILE at once, forever: the
/// accept loop spun (a core) and logged each failure (11 million lines).
TEST(frontdoor, at_the_descriptor_limit_accepts_back_off_and_logs_stay_small) {
  auto n = node("nofile", {"--log-level", "info"}, 64);
  auto cpu0 = cpu_seconds(n.pid());
  auto lines0 = line_count(log_path("nofile"));
  std::vector<std::unique_ptr<raw_conn>> flood;
  for (int i = 0; i < 150; ++i)
    flood.push_back(std::make_unique<raw_conn>(n.port()));
  std::this_thread::sleep_for(5s);
  auto cpu = cpu_seconds(n.pid()) - cpu0;
  auto lines = line_count(log_path("nofile")) - lines0;
  EXPECT_LT(cpu, 1.0) << "CPU seconds in 5 s at the descriptor limit";
  EXPECT_LT(lines, 1000u) << "log lines in 5 s at the descriptor limit";
  ASSERT_TRUE(alive(n.pid()));
  flood.clear();
  EXPECT_TRUE(eventually([&] { return healthy(n.port()); }, 5s))
    << "not serving once the connections closed";
}

// -- shutdown -------------------------------------------------------------------------------

/// A drain whose bound is reached with WebSockets still open (their
/// clients never answer the close) ends in a clean exit 0, not a crash.
TEST(frontdoor, a_drain_with_websockets_that_never_close_exits_0) {
  auto n = node("drain", {"--drain-timeout", "300"});
  std::vector<std::unique_ptr<raw_conn>> mute;
  for (int i = 0; i < 20; ++i) {
    unsigned status = 0;
    mute.push_back(raw_websocket(n.port(), unique("m"), status));
    ASSERT_EQ(status, 101u);
  }
  EXPECT_EQ(n.stop(SIGTERM, 10s), 0);
}

} // namespace
