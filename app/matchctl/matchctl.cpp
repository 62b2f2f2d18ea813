// matchctl: the command-line client and load generator for matchd's
// HTTP/WebSocket API (docs/api.md).
//
//   matchctl [--url URL]... [--secret S] [--token-ttl S] SUBCOMMAND ...
//     token USER [--jwt [--aud A] [--iss I]]
//     join --user U --queue Q --ticket T [--attrs A]
//     cancel|state|heartbeat --user U --ticket T
//     end|leave --user U --session S [--reason R]
//     party create --user U
//     party join --user U --party P --code C
//     party state|cancel|leave --user U --party P
//     party queue --user U --party P --queue Q --ticket T [--attrs JSON]
//     swipe --user U --to V --action LIKE|DISLIKE
//     watch --user U [--count N] [--timeout-ms MS]
//     load [--users N] [--rate R] ... (see `matchctl load --help`)
//
// `load` runs virtual users "<prefix><i>": each opens its event WebSocket,
// joins `default` (--queues 1) or q<i % queues> with ticket
// "t-<prefix><i>", cancels with probability --cancel-rate, and waits for
// its match.created event. With --cycles N it then holds the session for
// up to --hold-ms (the member whose name sorts first ends it), waits for
// session.ended and joins again with ticket "t-<prefix><i>-c<cycle>" (with
// --reuse-tickets every other time with the same ticket), N times over one
// WebSocket. At the end it asks matchd about everyone unfinished, checks
// the invariants (app/matchctl/load.hpp) and prints a report whose last
// two lines are
//   availability=X.XX joins=.. answered=.. min=X.XX
//   verdict=ok users=.. matched=.. cancelled=.. waiting=.. errors=..
//   matches_per_s=.. p50_ms=.. p95_ms=.. p99_ms=.. double_bookings=..
//   lost_users=.. undelivered_events=.. cancelled_but_matched=..
// (one line; --cycles adds cycles=.. sessions_ended=.. cycles_per_s=..
// overlapping_sessions=.. missing_session_ended=.. end_mismatches=..
// in_session_after_end=..), and with --json the same and more as a JSON
// object.
//
// Request subcommands print the status line and the JSON body and exit 0 on
// 2xx, 1 otherwise. `load` exits 0 when the checker finds nothing and the
// availability reaches --min-availability, 2 on violations, 3 when the
// invariants held but too few joins were answered 2xx, 1 on usage errors
// or when nothing answered at all (no server there).

#include <map>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/verb.hpp>
#include <nlohmann/json.hpp>

#include "app/common/http_client.hpp"
#include "app/common/nofile.hpp"
#include "app/common/token.hpp"
#include "app/matchctl/explain.hpp"
#include "app/matchctl/load.hpp"
#include "app/matchctl/load/connections.hpp"
#include "app/matchctl/load/group_load.hpp"

namespace {

using json = nlohmann::json;
using verb = boost::beast::http::verb;

/// One line of JSON; bad UTF-8 from the command line is replaced, not
/// thrown about. Idempotent.
std::string compact(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

struct common_options {
  std::vector<std::string> urls;
  std::string secret;
  int64_t token_ttl_s = 3600;
  std::vector<mm::http_url> parsed;

  /// Fills `parsed` (env MATCHD_URL, then the default, when no --url);
  /// false after printing why not. Idempotent.
  bool resolve_defaults() {
    if (urls.empty()) {
      auto* env = std::getenv("MATCHD_URL");
      urls.emplace_back(
        env != nullptr && *env != '\0' ? env : "http://127.0.0.1:8080");
    }
    parsed.clear();
    for (auto& u : urls) {
      mm::http_url url;
      std::string err;
      if (!mm::parse_http_url(u, url, err)) {
        std::cerr << "matchctl: " << err << "\n";
        return false;
      }
      parsed.push_back(url);
    }
    if (secret.empty()) {
      std::cerr << "matchctl: --secret or MATCHD_SECRET is required\n";
      return false;
    }
    return true;
  }

  std::string bearer(const std::string& user) const {
    return "Bearer " + mm::sign_token(secret, user, unix_now() + token_ttl_s);
  }
};

/// Resolves the first --url into `ep`; prints why not and answers false.
bool resolve_first(mm::asio::io_context& io, const common_options& c,
                   mm::http_endpoint& ep) {
  std::string err;
  if (mm::resolve_endpoint(io, c.parsed.front(), ep, err))
    return true;
  std::cerr << "matchctl: " << err << "\n";
  return false;
}

/// One request to the first URL; prints "HTTP/1.1 <status> <reason>" and
/// the body. Returns the exit code.
int one_request(const common_options& c, verb method, const std::string& user,
                const std::string& target, const std::string& body) {
  mm::asio::io_context io;
  mm::http_endpoint ep;
  if (!resolve_first(io, c, ep))
    return 1;
  mm::http_pool_options po;
  po.max_connections = 1;
  mm::http_pool pool(io, ep, po);
  int rc = 1;
  pool.request(
    method, target, c.bearer(user), body, [&](mm::http_result&& res) {
      if (res.ec) {
        std::cerr << "matchctl: " << ep.url.host_header() << ": "
                  << res.ec.message() << "\n";
        return;
      }
      auto status = static_cast<boost::beast::http::status>(res.status);
      std::cout << "HTTP/1.1 " << res.status << " "
                << boost::beast::http::obsolete_reason(status) << "\n"
                << res.body;
      if (res.body.empty() || res.body.back() != '\n')
        std::cout << "\n";
      std::cout.flush();
      rc = res.ok() ? 0 : 1;
    });
  io.run();
  return rc;
}

std::string tickets_path(const std::string& user) {
  return "/v1/users/" + mm::path_escape(user) + "/tickets";
}

/// `watch`: prints each event as one JSON line until `count` events,
/// `timeout_ms` or the server closes. Exit code 1 only when it could not
/// connect.
int watch(const common_options& c, const std::string& user, int64_t count,
          int64_t timeout_ms) {
  mm::asio::io_context io;
  mm::http_endpoint ep;
  if (!resolve_first(io, c, ep))
    return 1;
  mm::ws_options wo;
  auto ws = std::make_shared<mm::ws_client>(
    io, ep, "/v1/users/" + mm::path_escape(user) + "/events", c.bearer(user),
    wo);
  mm::asio::steady_timer deadline(io);
  mm::asio::steady_timer fallback(io);
  int rc = 0;
  int64_t seen = 0;
  // A graceful close, then a hard one if the server does not answer it.
  auto finish = [&] {
    ws->close();
    fallback.expires_after(std::chrono::seconds(2));
    fallback.async_wait([&](const mm::error_code& ec) {
      if (!ec)
        ws->abort();
    });
  };
  mm::ws_handlers h;
  h.on_open = [&] {
    std::cerr << "connected" << std::endl;
    if (timeout_ms > 0) {
      deadline.expires_after(std::chrono::milliseconds(timeout_ms));
      deadline.async_wait([&](const mm::error_code& ec) {
        if (!ec)
          finish();
      });
    }
  };
  h.on_message = [&](std::string_view text) {
    if (count > 0 && seen >= count)
      return;
    auto j = json::parse(text, nullptr, false);
    if (j.is_discarded())
      std::cout << text << "\n";
    else
      std::cout << compact(j) << "\n";
    std::cout.flush();
    if (count > 0 && ++seen >= count)
      finish();
  };
  h.on_close = [&](const mm::ws_close_info& info) {
    deadline.cancel();
    fallback.cancel();
    if (!info.opened) {
      rc = 1;
      std::cerr << "matchctl: " << ep.url.host_header() << ": ";
      if (info.http_status != 0)
        std::cerr << "HTTP " << info.http_status << " " << info.http_body
                  << "\n";
      else
        std::cerr << info.ec.message() << "\n";
    } else if (!info.by_us) {
      std::cerr << "closed by server";
      if (info.code != 0)
        std::cerr << " (" << info.code << " " << info.reason << ")";
      std::cerr << std::endl;
    }
  };
  ws->start(std::move(h));
  io.run();
  return rc;
}

} // namespace

int main(int argc, char** argv) {
  mm::raise_nofile_limit(); // many WebSockets at once

  CLI::App app{"matchctl: client and load generator for matchd"};
  app.require_subcommand(1);
  app.fallthrough(); // common options may follow the subcommand

  common_options c;
  app.add_option("--url", c.urls,
                 "matchd base URL, http://host:port (repeatable; default "
                 "$MATCHD_URL or http://127.0.0.1:8080)");
  app.add_option("--secret", c.secret, "token secret (default $MATCHD_SECRET)")
    ->envname("MATCHD_SECRET");
  app.add_option("--token-ttl", c.token_ttl_s, "token lifetime in seconds")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);

  // token
  auto* token_cmd = app.add_subcommand("token", "print a bearer token");
  std::string token_user;
  token_cmd->add_option("USER", token_user, "user id")->required();
  bool token_jwt = false;
  std::string token_aud, token_iss;
  token_cmd->add_flag("--jwt", token_jwt,
                      "an HS256 JWT (sub, iat, exp) instead of a v1 token");
  token_cmd->add_option("--aud", token_aud, "the JWT's aud")
    ->needs(token_cmd->get_option("--jwt"));
  token_cmd->add_option("--iss", token_iss, "the JWT's iss")
    ->needs(token_cmd->get_option("--jwt"));

  // join / cancel / state / heartbeat / swipe
  std::string user, queue, ticket, attrs, to, action;
  auto* join_cmd = app.add_subcommand("join", "join a queue");
  join_cmd->add_option("--user", user)->required();
  join_cmd->add_option("--queue", queue)->required();
  join_cmd->add_option("--ticket", ticket)->required();
  auto* attrs_opt = join_cmd->add_option("--attrs", attrs, "opaque attributes");

  auto* cancel_cmd = app.add_subcommand("cancel", "cancel a ticket");
  auto* state_cmd = app.add_subcommand("state", "read a ticket");
  auto* heartbeat_cmd = app.add_subcommand("heartbeat", "heartbeat a ticket");
  for (auto* cmd : {cancel_cmd, state_cmd, heartbeat_cmd}) {
    cmd->add_option("--user", user)->required();
    cmd->add_option("--ticket", ticket)->required();
  }

  std::string session, reason = "ended";
  auto* end_cmd = app.add_subcommand("end", "end a match session");
  end_cmd->add_option("--user", user, "a member of the session")->required();
  end_cmd->add_option("--session", session)->required();
  end_cmd->add_option("--reason", reason)->capture_default_str();

  auto* swipe_cmd = app.add_subcommand("swipe", "swipe on another user");
  swipe_cmd->add_option("--user", user)->required();
  swipe_cmd->add_option("--to", to)->required();
  swipe_cmd->add_option("--action", action)
    ->required()
    ->check(CLI::IsMember({"LIKE", "DISLIKE"}));

  // leave: a member leaves its group session; party: parties
  // (docs/groups.md): create, join, state, queue, cancel, leave.
  auto* leave_cmd = app.add_subcommand("leave", "leave a group session");
  leave_cmd->add_option("--user", user)->required();
  leave_cmd->add_option("--session", session)->required();
  std::string leave_reason = "left";
  leave_cmd->add_option("--reason", leave_reason)->capture_default_str();
  auto* party_cmd = app.add_subcommand("party", "parties of users");
  party_cmd->require_subcommand(1);
  std::string party, code, member_attrs;
  std::map<std::string, CLI::App*> party_cmds;
  for (auto [name, what] : {std::pair{"create", "create a party led by --user"},
                            std::pair{"join", "join --party with its --code"},
                            std::pair{"state", "read a party"},
                            std::pair{"queue", "the leader queues the party"},
                            std::pair{"cancel", "cancel the party's ticket"},
                            std::pair{"leave", "leave the party"}}) {
    auto* cmd = party_cmd->add_subcommand(name, what);
    cmd->add_option("--user", user)->required();
    if (std::string{name} != "create")
      cmd->add_option("--party", party)->required();
    party_cmds[name] = cmd;
  }
  party_cmds["join"]->add_option("--code", code)->required();
  party_cmds["queue"]->add_option("--queue", queue)->required();
  party_cmds["queue"]->add_option("--ticket", ticket)->required();
  party_cmds["queue"]->add_option(
    "--attrs", member_attrs, "each member's attributes: a JSON object by user");

  // explain: a dry run of a queue's rules (app/matchctl/explain.hpp)
  mm::explain_options ex;
  auto* explain_cmd = app.add_subcommand(
    "explain",
    "why two tickets would (not) be paired (a dry run of the rules)");
  explain_cmd->add_option("--rules", ex.rules_file, "the node's rules file")
    ->required();
  explain_cmd->add_option("--queue", ex.queue)->required();
  explain_cmd->add_option("--a", ex.a.attrs, "attributes of ticket a (JSON)")
    ->required();
  explain_cmd->add_option("--b", ex.b.attrs, "attributes of ticket b (JSON)")
    ->required();
  explain_cmd->add_option("--a-waited", ex.a.waited_s, "seconds a has waited");
  explain_cmd->add_option("--b-waited", ex.b.waited_s, "seconds b has waited");
  explain_cmd->add_option("--a-user", ex.a.user);
  explain_cmd->add_option("--b-user", ex.b.user);
  explain_cmd->add_option("--a-avoid", ex.a.avoid, "a's recent partners");
  explain_cmd->add_option("--b-avoid", ex.b.avoid, "b's recent partners");

  // watch
  auto* watch_cmd = app.add_subcommand("watch",
                                       "print a user's events as JSON lines");
  int64_t watch_count = 0, watch_timeout_ms = 0;
  watch_cmd->add_option("--user", user)->required();
  watch_cmd->add_option("--count", watch_count, "stop after N messages")
    ->check(CLI::NonNegativeNumber);
  watch_cmd->add_option("--timeout-ms", watch_timeout_ms, "stop after MS")
    ->check(CLI::NonNegativeNumber);

  // connections (docs/matchd.md, "Many connected users")
  auto* conn_cmd = app.add_subcommand(
    "connections", "hold many users' WebSockets open on one node and join");
  mm::connections_options co;
  co.prefix = "c" + std::to_string(getpid()) + "-";
  conn_cmd->add_option("--users", co.users, "connected users")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);
  conn_cmd
    ->add_option("--waiting", co.waiting,
                 "share of users that wait in --wait-queue, each alone")
    ->capture_default_str()
    ->check(CLI::Range(0.0, 1.0));
  conn_cmd->add_option("--wait-queue", co.wait_queue, "queue the waiters join")
    ->capture_default_str();
  conn_cmd
    ->add_option("--wait-attribute", co.wait_attribute,
                 "its `equal` string attribute (a value per waiter)")
    ->capture_default_str();
  conn_cmd->add_option("--join-queue", co.join_queue, "queue the others join")
    ->capture_default_str();
  conn_cmd->add_option("--open-rate", co.open_rate, "new sockets per second")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);
  conn_cmd->add_option("--idle-s", co.idle_s, "seconds all held, no joins")
    ->capture_default_str()
    ->check(CLI::NonNegativeNumber);
  conn_cmd->add_option("--join-rate", co.join_rate, "joins per second")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);
  conn_cmd->add_option("--join-s", co.join_s, "seconds of joins")
    ->capture_default_str()
    ->check(CLI::NonNegativeNumber);
  conn_cmd->add_option("--sources", co.sources,
                       "local addresses to spread sockets over (repeatable)");
  conn_cmd->add_option("--pid", co.pid, "matchd's pid: measure RSS and CPU");
  conn_cmd->add_flag("--match-all", co.match_all,
                     "every user joins --join-queue once and must be matched");
  conn_cmd->add_option("--settle-s", co.settle_s, "wait for the last answers")
    ->capture_default_str()
    ->check(CLI::NonNegativeNumber);
  conn_cmd->add_option("--prefix", co.prefix, "user id prefix");

  // load
  auto* load_cmd = app.add_subcommand("load", "generate load and check it");
  mm::load_options lo;
  lo.prefix = "u" + std::to_string(getpid()) + "-";
  load_cmd->add_option("--users", lo.users, "virtual users")
    ->capture_default_str();
  load_cmd->add_option("--rate", lo.rate, "new users per second (0: no pacing)")
    ->capture_default_str()
    ->check(CLI::NonNegativeNumber);
  load_cmd
    ->add_option("--cancel-rate", lo.cancel_rate,
                 "fraction of users that cancel")
    ->capture_default_str()
    ->check(CLI::Range(0.0, 1.0));
  load_cmd
    ->add_option("--cancel-delay-ms", lo.cancel_delay_ms,
                 "cancel after a uniform delay in [0, MS]")
    ->capture_default_str()
    ->check(CLI::NonNegativeNumber);
  load_cmd
    ->add_option("--duration", lo.duration_s,
                 "stop starting users after S seconds")
    ->check(CLI::NonNegativeNumber);
  load_cmd
    ->add_option("--queues", lo.queues,
                 "1: the queue 'default'; K > 1: queues q0..q{K-1} "
                 "(matchd --queues q0,...,q{K-1})")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);
  load_cmd->add_option("--queue", lo.queue,
                       "every user joins this queue (instead of --queues)");
  load_cmd
    ->add_option("--concurrency", lo.concurrency, "users in progress at most")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);
  load_cmd
    ->add_option("--connections", lo.connections,
                 "keep-alive HTTP connections per URL")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);
  load_cmd
    ->add_option("--settle-ms", lo.settle_ms,
                 "wait after the last join for outstanding events")
    ->capture_default_str()
    ->check(CLI::NonNegativeNumber);
  load_cmd->add_option("--json", lo.json_file, "write the report here");
  load_cmd
    ->add_option("--min-availability", lo.min_availability,
                 "exit 3 when a smaller share of joins was answered 2xx "
                 "(the report's availability= line; 0: never)")
    ->check(CLI::Range(0.0, 1.0))
    ->capture_default_str();
  load_cmd->add_option("--prefix", lo.prefix,
                       "user id prefix (default u<pid>-)");
  load_cmd->add_option("--seed", lo.seed, "random seed")->capture_default_str();
  bool no_progress = false;
  load_cmd->add_flag("--no-progress", no_progress, "no progress line");
  load_cmd->add_flag("--abrupt-close", lo.abrupt_close,
                     "drop a finished user's TCP connection instead of the "
                     "WebSocket close handshake (cheaper)");
  load_cmd->add_option("--threads", lo.threads, "io threads")
    ->capture_default_str()
    ->check(CLI::Range(1, 64));
  load_cmd
    ->add_option("--cycles", lo.cycles,
                 "join, match, end the session and join again, N times "
                 "(1: join and match only)")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);
  load_cmd
    ->add_option("--hold-ms", lo.hold_ms,
                 "with --cycles: hold a session a uniform time in [0, MS]")
    ->capture_default_str()
    ->check(CLI::NonNegativeNumber);
  load_cmd->add_flag("--reuse-tickets", lo.reuse_tickets,
                     "with --cycles: every other join reuses the ticket id "
                     "of the session that ended");
  // Groups (docs/groups.md): a queue with a shape, parties of a size range.
  std::string players, party_size;
  mm::group_load_options glo;
  load_cmd->add_option("--players", players,
                       "a group queue: N or MIN-MAX players a match (as the "
                       "node's rules declare; with --party-size)");
  load_cmd
    ->add_option("--teams", glo.teams,
                 "with --players: teams a match (0: one lobby)")
    ->check(CLI::Range(0, 32));
  load_cmd->add_option("--party-size", party_size,
                       "with --players: each party's size, N or A-B "
                       "(uniform; default 1)");
  load_cmd
    ->add_option("--accept-rate", glo.accept_rate,
                 "with --players, on a queue with a ready check: each member "
                 "accepts a match.proposed with this probability and "
                 "declines otherwise (default 1)")
    ->check(CLI::Range(0.0, 1.0));
  load_cmd
    ->add_option("--backfill", glo.leave_rate,
                 "with --players, on a queue with \"backfill\": \"auto\": "
                 "each matched member leaves its session with this "
                 "probability; matched members keep listening, and the "
                 "checker counts the fills (default 0)")
    ->check(CLI::Range(0.0, 1.0));
  load_cmd
    ->add_option("--ignore-rate", glo.ignore_rate,
                 "with --players, on a queue with a ready check: each member "
                 "ignores a match.proposed (never answers) with this "
                 "probability; --accept-rate splits the answers of the "
                 "others (default 0)")
    ->check(CLI::Range(0.0, 1.0));
  load_cmd->add_flag("--skill", glo.skill,
                     "with --players: send {\"skill\": 1000..2000} as each "
                     "member's attributes");
  bool over_http = false, over_socket = false;
  auto* http_flag = load_cmd->add_flag(
    "--http", over_http,
    "joins, cancels and ends as HTTP requests (the default without "
    "--cycles)");
  load_cmd
    ->add_flag("--socket", over_socket,
               "joins, cancels and ends as requests on the user's WebSocket "
               "(the default with --cycles)")
    ->excludes(http_flag);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }

  lo.socket = over_socket || (lo.cycles > 1 && !over_http);

  // A dry run of a rules file: no server, no token, so no --secret.
  if (explain_cmd->parsed())
    return mm::run_explain(ex, std::cout);
  if (!c.resolve_defaults())
    return 1;

  if (token_cmd->parsed()) {
    auto now = unix_now();
    if (token_jwt) {
      json claims{
        {"sub", token_user}, {"iat", now}, {"exp", now + c.token_ttl_s}};
      if (!token_aud.empty())
        claims["aud"] = token_aud;
      if (!token_iss.empty())
        claims["iss"] = token_iss;
      std::cout << mm::sign_jwt(c.secret, R"({"alg":"HS256","typ":"JWT"})",
                                compact(claims))
                << "\n";
    } else {
      std::cout << mm::sign_token(c.secret, token_user, now + c.token_ttl_s)
                << "\n";
    }
    return 0;
  }
  if (join_cmd->parsed()) {
    json body{{"queue", queue}, {"ticket", ticket}};
    if (attrs_opt->count() > 0) {
      // A JSON object is sent as typed attributes (queues with rules).
      auto obj = json::parse(attrs, nullptr, false);
      if (!obj.is_discarded() && obj.is_object())
        body["attrs"] = obj;
      else
        body["attrs"] = attrs;
    }
    return one_request(c, verb::post, user, tickets_path(user), compact(body));
  }
  auto ticket_path = [&] {
    return tickets_path(user) + "/" + mm::path_escape(ticket);
  };
  if (cancel_cmd->parsed())
    return one_request(c, verb::delete_, user, ticket_path(), {});
  if (state_cmd->parsed())
    return one_request(c, verb::get, user, ticket_path(), {});
  if (heartbeat_cmd->parsed())
    return one_request(c, verb::post, user, ticket_path() + "/heartbeat", {});
  if (end_cmd->parsed()) {
    json body{{"reason", reason}};
    return one_request(c, verb::post, user,
                       "/v1/users/" + mm::path_escape(user) + "/sessions/"
                         + mm::path_escape(session) + "/end",
                       compact(body));
  }
  if (leave_cmd->parsed()) {
    json body{{"reason", leave_reason}};
    return one_request(c, verb::post, user,
                       "/v1/users/" + mm::path_escape(user) + "/sessions/"
                         + mm::path_escape(session) + "/leave",
                       compact(body));
  }
  if (party_cmd->parsed()) {
    auto base = "/v1/users/" + mm::path_escape(user) + "/parties";
    if (party_cmds["create"]->parsed())
      return one_request(c, verb::post, user, base, "{}");
    base += "/" + mm::path_escape(party);
    if (party_cmds["state"]->parsed())
      return one_request(c, verb::get, user, base, {});
    if (party_cmds["join"]->parsed())
      return one_request(c, verb::post, user, base + "/members",
                         compact(json{{"code", code}}));
    if (party_cmds["cancel"]->parsed())
      return one_request(c, verb::post, user, base + "/cancel", "{}");
    if (party_cmds["leave"]->parsed())
      return one_request(c, verb::post, user, base + "/leave", "{}");
    json body{{"queue", queue}, {"ticket", ticket}};
    if (!member_attrs.empty()) {
      auto obj = json::parse(member_attrs, nullptr, false);
      if (obj.is_discarded() || !obj.is_object()) {
        std::cerr << "matchctl party queue: --attrs must be a JSON object "
                     "of each member's attributes\n";
        return 1;
      }
      body["attrs"] = obj;
    }
    return one_request(c, verb::post, user, base + "/tickets", compact(body));
  }
  if (swipe_cmd->parsed()) {
    json body{{"to", to}, {"action", action}};
    return one_request(c, verb::post, user,
                       "/v1/users/" + mm::path_escape(user) + "/swipes",
                       compact(body));
  }
  if (watch_cmd->parsed())
    return watch(c, user, watch_count, watch_timeout_ms);
  if (conn_cmd->parsed()) {
    if (c.parsed.size() != 1) {
      std::cerr << "matchctl connections: exactly one --url\n";
      return 1;
    }
    co.url = c.parsed.front();
    co.secret = c.secret;
    co.token_ttl_s = c.token_ttl_s;
    return mm::run_connections(co);
  }
  if (load_cmd->parsed()) {
    lo.urls = c.parsed;
    lo.secret = c.secret;
    lo.token_ttl_s = c.token_ttl_s;
    lo.progress = !no_progress;
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0
        && lo.concurrency + lo.connections * lo.urls.size() + 64 > lim.rlim_cur)
      std::cerr << "matchctl load: warning: --concurrency " << lo.concurrency
                << " may exceed the descriptor limit " << lim.rlim_cur << "\n";
    if (!players.empty() || !party_size.empty()) {
      if (!mm::parse_range(players.empty() ? "2" : players, glo.min_players,
                           glo.max_players)
          || glo.min_players < 2
          || !mm::parse_range(party_size.empty() ? "1" : party_size,
                              glo.party_min, glo.party_max)) {
        std::cerr << "matchctl load: --players N or MIN-MAX (2..64), "
                     "--party-size N or A-B (1..64)\n";
        return 1;
      }
      return mm::run_group_load(lo, glo);
    }
    return mm::run_load(lo);
  }
  return 1;
}
