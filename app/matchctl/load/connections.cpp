// `matchctl connections` (connections.hpp): many users, each with its own
// event WebSocket, against one matchd.

#include "app/matchctl/load/connections.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "app/common/token.hpp"

namespace mm {

namespace {

using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

/// What matchd's process uses now, from /proc (zeros when unreadable).
struct proc_sample {
  double rss_kib = 0;
  double cpu_s = 0;
};

proc_sample sample(int pid) {
  proc_sample out;
  if (pid <= 0)
    return out;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0)
      out.rss_kib = std::stod(line.substr(6));
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(stat)),
                  std::istreambuf_iterator<char>());
  // Fields after the command (which may hold spaces): state is field 3,
  // utime and stime are 14 and 15.
  auto close = all.rfind(')');
  if (close == std::string::npos)
    return out;
  std::istringstream rest(all.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int k = 3; k <= 15 && rest >> field; ++k) {
    if (k == 14)
      utime = std::stod(field);
    if (k == 15)
      stime = std::stod(field);
  }
  out.cpu_s = (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  return out;
}

enum class role : uint8_t { waiter, joiner };

struct user {
  std::string name;
  role part = role::joiner;
  std::shared_ptr<ws_client> ws;
  bool open = false;
  bool ended = false; // on_close ran
  bool busy = false;  // a join or a session is on
  bool heard_match = false;
  std::string session; // of the last match.created heard
  uint32_t cycle = 0;
  uint32_t next_id = 0;
  uint32_t join_id = 0; // of the join last sent
  clock_type::time_point sent;
};

struct run {
  const connections_options& opts;
  asio::io_context io;
  http_endpoint ep;
  std::vector<user> users;
  std::deque<size_t> free_joiners;
  asio::steady_timer tick{io};
  size_t started = 0, opened = 0, refused = 0, dropped = 0;
  size_t waits_answered = 0, waits_refused = 0, waiters_lost = 0;
  size_t joins = 0, join_replies = 0, join_errors = 0, matched = 0;
  size_t other_errors = 0;
  std::vector<double> join_ms;
  std::string first_error;
  double open_credit = 0, join_credit = 0;
  bool joining = false;
  size_t next_all = 0; // --match-all: the next user to join

  explicit run(const connections_options& o) : opts(o) {}

  void error(const std::string& what) {
    if (first_error.empty())
      first_error = what;
  }

  /// Sends a request; returns its id.
  uint32_t send(user& u, json req) {
    req["id"] = ++u.next_id;
    u.ws->send(req.dump());
    return u.next_id;
  }

  void join(size_t i, const std::string& queue, json body) {
    auto& u = users[i];
    u.busy = true;
    u.sent = clock_type::now();
    body["queue"] = queue;
    u.join_id = send(u, json{{"op", "join"}, {"body", std::move(body)}});
  }

  void join_pairing(size_t i) {
    auto& u = users[i];
    ++u.cycle;
    ++joins;
    join(i, opts.join_queue,
         json{{"ticket", "j-" + u.name + "-" + std::to_string(u.cycle)}});
  }

  void on_reply(size_t i, const json& j) {
    auto& u = users[i];
    auto status = j.value("status", 0);
    if (u.part == role::waiter && !opts.match_all) {
      ++waits_answered;
      if (status != 200) {
        ++waits_refused;
        error(u.name + " hold join: " + j.dump());
      }
      return;
    }
    if (j.value("id", 0u) != u.join_id) { // the answer to an end
      if (status != 200) {
        ++other_errors;
        error(u.name + " end: " + j.dump());
      }
      return;
    }
    ++join_replies;
    join_ms.push_back(
      std::chrono::duration<double, std::milli>(clock_type::now() - u.sent)
        .count());
    if (status != 200) {
      ++join_errors;
      u.busy = false;
      error(u.name + " join: " + j.dump());
      if (!opts.match_all)
        free_joiners.push_back(i);
    }
  }

  void on_event(size_t i, const json& j) {
    auto& u = users[i];
    auto type = j.value("type", std::string{});
    if (type == "reply") {
      on_reply(i, j);
    } else if (type == "match.created") {
      if (u.part == role::waiter && !opts.match_all) {
        ++waiters_lost; // nobody may match a waiter
        error(u.name + " matched while holding");
        return;
      }
      // At least once: a repeated event of the same session counts once.
      auto session = j.value("session_id", std::string{});
      if (session == u.session)
        return;
      u.session = session;
      ++matched;
      u.heard_match = true;
      if (opts.match_all)
        return;
      // The member whose name sorts first ends the session.
      auto names = j.value("users", json::array());
      std::string first;
      for (auto& n : names)
        if (n.is_string() && (first.empty() || n.get<std::string>() < first))
          first = n.get<std::string>();
      if (first == u.name)
        send(u, json{{"op", "end"}, {"session", session}});
    } else if (type == "session.ended") {
      if (u.part == role::joiner && !opts.match_all && u.busy) {
        u.busy = false;
        free_joiners.push_back(i);
      }
    } else if (type == "state") {
      auto state = j.value("state", std::string{});
      if (u.part == role::waiter && !opts.match_all && state != "queued") {
        ++waiters_lost;
        error(u.name + " left the hold queue: " + j.dump());
      }
    }
  }

  void open(size_t i) {
    auto& u = users[i];
    ws_options wo;
    // The server pings idle sockets; the client answers and does not ping
    // (a ping per socket every few seconds would be most of the load).
    wo.idle_timeout = std::chrono::minutes(30);
    if (!opts.sources.empty())
      wo.local_address = opts.sources[i % opts.sources.size()];
    auto now = std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
    u.ws = std::make_shared<ws_client>(
      io, ep, "/v1/users/" + path_escape(u.name) + "/events",
      "Bearer " + sign_token(opts.secret, u.name, now + opts.token_ttl_s), wo);
    ws_handlers h;
    h.on_open = [this, i] {
      auto& u = users[i];
      u.open = true;
      ++opened;
      if (u.part == role::waiter && !opts.match_all)
        join(i, opts.wait_queue,
             json{{"ticket", "h-" + u.name},
                  {"attrs", {{opts.wait_attribute, "r" + u.name}}}});
      else if (!opts.match_all)
        free_joiners.push_back(i);
    };
    h.on_message = [this, i](std::string_view text) {
      auto j = json::parse(text, nullptr, false);
      if (j.is_object())
        on_event(i, j);
    };
    h.on_close = [this, i](const ws_close_info& info) {
      auto& u = users[i];
      u.ended = true;
      if (info.by_us)
        return;
      if (info.opened) {
        ++dropped;
        u.open = false;
        error(u.name + " dropped: " + std::to_string(info.code) + " "
              + info.reason + " " + info.ec.message());
      } else {
        ++refused;
        error(u.name + " refused: " + std::to_string(info.http_status) + " "
              + info.http_body + " " + info.ec.message());
      }
    };
    u.ws->start(std::move(h));
  }

  /// Every 10 ms: opens sockets at open_rate, then joins at join_rate.
  void on_tick() {
    if (started < users.size()) {
      open_credit += opts.open_rate / 100.0;
      while (open_credit >= 1 && started < users.size()) {
        open_credit -= 1;
        open(started++);
      }
    }
    if (joining) {
      join_credit = std::min(join_credit + opts.join_rate / 100.0,
                             opts.join_rate); // a burst of a second at most
      if (opts.match_all) {
        for (; join_credit >= 1 && next_all < users.size(); join_credit -= 1)
          if (users[next_all].open)
            join_pairing(next_all++);
          else
            ++next_all;
      } else {
        while (join_credit >= 1 && !free_joiners.empty()) {
          join_credit -= 1;
          auto i = free_joiners.front();
          free_joiners.pop_front();
          if (users[i].open)
            join_pairing(i);
        }
      }
    }
    tick.expires_after(std::chrono::milliseconds(10));
    tick.async_wait([this](const error_code& ec) {
      if (!ec)
        on_tick();
    });
  }

  /// Runs the io loop until `done()` or `limit` passed.
  template <class F>
  void run_until(F done, std::chrono::duration<double> limit) {
    auto end = clock_type::now()
               + std::chrono::duration_cast<clock_type::duration>(limit);
    auto last_progress = clock_type::now();
    while (!done() && clock_type::now() < end) {
      io.run_for(std::chrono::milliseconds(50));
      if (clock_type::now() - last_progress > std::chrono::seconds(5)) {
        last_progress = clock_type::now();
        std::fprintf(stderr,
                     "opened %zu/%zu refused %zu dropped %zu holding %zu "
                     "joins %zu answered %zu matched %zu\n",
                     opened, users.size(), refused, dropped, waits_answered,
                     joins, join_replies, matched);
      }
    }
  }
};

double p99(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, v.size() * 99 / 100)];
}

} // namespace

int run_connections(const connections_options& opts) {
  run r{opts};
  std::string err;
  if (!resolve_endpoint(r.io, opts.url, r.ep, err)) {
    std::cerr << "matchctl connections: " << err << "\n";
    return 1;
  }
  r.users.resize(opts.users);
  auto waiters = opts.match_all
                   ? size_t{0}
                   : static_cast<size_t>(std::lround(
                     opts.waiting * static_cast<double>(opts.users)));
  for (size_t i = 0; i < opts.users; ++i) {
    r.users[i].name = opts.prefix + std::to_string(i);
    // Spread: of every ten users, the waiters first.
    r.users[i].part = (i * waiters) / opts.users
                          != ((i + 1) * waiters) / opts.users
                        ? role::waiter
                        : role::joiner;
  }
  size_t n_waiters = 0;
  for (auto& u : r.users)
    n_waiters += u.part == role::waiter ? 1 : 0;
  auto before = sample(opts.pid);
  auto t0 = clock_type::now();
  r.on_tick();
  // 1. Everyone connects; the waiters' joins are answered.
  r.run_until(
    [&] {
      return r.started == opts.users && r.opened + r.refused == opts.users
             && r.waits_answered + r.dropped >= n_waiters;
    },
    std::chrono::duration<double>(opts.users / opts.open_rate + opts.settle_s));
  auto open_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  // For a driver that measures the node itself (bench/connections.sh).
  std::printf("connected=%zu in_s=%.1f\n", r.opened, open_s);
  std::fflush(stdout);
  // 2. All connected, nobody joining.
  auto idle_from = sample(opts.pid);
  auto idle_t0 = clock_type::now();
  r.run_until([] { return false; }, std::chrono::duration<double>(opts.idle_s));
  auto idle_to = sample(opts.pid);
  auto idle_wall
    = std::chrono::duration<double>(clock_type::now() - idle_t0).count();
  // 3. Joins at the paced rate.
  r.joining = true;
  if (opts.match_all) {
    r.run_until(
      [&] {
        return r.next_all == opts.users && r.join_replies >= r.joins
               && r.matched + r.join_errors >= r.joins;
      },
      std::chrono::duration<double>(opts.users / opts.join_rate
                                    + opts.settle_s));
  } else if (opts.join_s > 0) {
    r.run_until([] { return false; },
                std::chrono::duration<double>(opts.join_s));
    r.joining = false;
    r.run_until([&] { return r.join_replies >= r.joins; },
                std::chrono::duration<double>(opts.settle_s));
  }
  r.joining = false;
  size_t held = 0;
  for (auto& u : r.users)
    held += u.open && !u.ended ? 1 : 0;
  size_t missing = 0;
  if (opts.match_all)
    for (auto& u : r.users)
      missing += u.open && !u.heard_match ? 1 : 0;
  size_t unanswered = r.joins - r.join_replies;
  auto end = sample(opts.pid);
  // Close: drop the TCP connections (a close handshake each would be
  // most of the time at this scale).
  r.tick.cancel();
  for (auto& u : r.users)
    if (u.ws)
      u.ws->abort();
  r.io.run_for(std::chrono::seconds(2));

  bool ok = r.refused == 0 && r.dropped == 0 && held == opts.users
            && r.waits_refused == 0 && r.waiters_lost == 0 && r.join_errors == 0
            && unanswered == 0 && missing == 0 && r.other_errors == 0;
  std::printf("users=%zu waiters=%zu opened_in_s=%.1f\n", opts.users, n_waiters,
              open_s);
  if (!r.first_error.empty())
    std::printf("first_error=%s\n", r.first_error.c_str());
  if (opts.pid > 0) {
    std::printf("matchd_rss_kib_before=%.0f held=%.0f end=%.0f\n",
                before.rss_kib, idle_to.rss_kib, end.rss_kib);
    std::printf("connections_rss_kib_per_user=%.2f "
                "connections_idle_cpu_pct=%.2f\n",
                (idle_to.rss_kib - before.rss_kib)
                  / static_cast<double>(std::max<size_t>(opts.users, 1)),
                idle_wall > 0
                  ? 100.0 * (idle_to.cpu_s - idle_from.cpu_s) / idle_wall
                  : 0.0);
  }
  std::printf("connections_join_p99_ms=%.2f joins=%zu answered=%zu "
              "join_errors=%zu matched=%zu missing_events=%zu "
              "waiters_lost=%zu\n",
              p99(r.join_ms), r.joins, r.join_replies, r.join_errors, r.matched,
              missing, r.waiters_lost);
  std::printf("connections_held=%zu of=%zu dropped=%zu refused=%zu\n", held,
              opts.users, r.dropped, r.refused);
  std::printf("verdict=%s\n", ok ? "ok" : "fail");
  std::fflush(stdout);
  return ok ? 0 : 2;
}

} // namespace mm
