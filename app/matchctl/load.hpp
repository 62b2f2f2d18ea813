#pragma once

// `matchctl load`: virtual users open their event WebSocket, join a queue,
// sometimes cancel and wait for their match; with --cycles N they also end
// their session and join again, N times. Then an invariant checker over
// what they observed (docs/api.md). The parts live in app/matchctl/load/.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "app/common/http_client.hpp"
#include "app/matchctl/load/checker.hpp"

namespace mm {

struct load_options {
  std::vector<http_url> urls; ///< user i talks to urls[i % size]
  std::string secret;
  int64_t token_ttl_s = 3600;
  std::size_t users = 1000;
  double rate = 1000;        ///< new users per second; 0: no pacing
  double cancel_rate = 0.05; ///< fraction of users that cancel
  int64_t cancel_delay_ms = 20;
  double duration_s = 0; ///< stop starting users after this; 0: no limit
  /// How many queues the users join (see `queue_name`).
  std::size_t queues = 1;
  std::size_t concurrency = 4000;
  std::size_t connections = 32; ///< keep-alive connections per URL
  int64_t settle_ms = 10000;
  std::string json_file;
  /// The exit status is 3 when fewer joins than this share were answered
  /// 2xx (`availability`): a run the stores refused is not a success.
  double min_availability = 0.5;
  std::string prefix;
  uint64_t seed = 1;
  bool progress = true;
  unsigned threads = 1;
  /// Finished users drop their TCP connection instead of the WebSocket
  /// close handshake: fewer packets and syscalls on both sides.
  bool abrupt_close = false;
  /// Each user joins, is matched, holds the session, ends it and joins
  /// again, this many times (1: join and match only, no end).
  std::size_t cycles = 1;
  /// The session is held for a uniform time in [0, hold_ms] before its end.
  int64_t hold_ms = 200;
  /// With --cycles: every other cycle joins again with the ticket id of the
  /// session that ended (each join is filed under a store ticket of its
  /// own: docs/queue.md, "Ticket ids"). Off by default.
  bool reuse_tickets = false;
  /// Joins, cancels and ends go as requests on the user's WebSocket
  /// (docs/api.md "Requests on the WebSocket") instead of HTTP requests;
  /// HTTP while the socket is not open. matchctl: on with --cycles unless
  /// --http, or with --socket.
  bool socket = false;

  /// The name of virtual user `i`: the prefix and the number.
  std::string user_name(std::size_t i) const {
    return prefix + std::to_string(i);
  }

  /// The queue virtual user `i` joins: `queue` when set, else with one
  /// queue `default` (the queue
  /// a matchd serves when its configuration names none), else
  /// q{i % queues} (that matchd needs --queues q0,...,q{queues-1}).
  std::string queue_name(std::size_t i) const {
    if (!queue.empty())
      return queue;
    return queues <= 1 ? std::string{"default"}
                       : "q" + std::to_string(i % queues);
  }

  /// Every user joins this queue (`--queue`); empty: as `queues` says.
  std::string queue;
};

/// Resolves every URL of `urls` into `out` (in order); false, and the
/// reason on stderr, when one does not resolve. Not idempotent (DNS).
bool resolve_urls(const std::vector<http_url>& urls,
                  std::vector<http_endpoint>& out);

/// Runs the load and prints the report; returns the process exit code: 0
/// verdict ok and availability at least `min_availability`, 2 violations,
/// 3 availability below it, 1 when nothing answered at all. Not
/// idempotent: it drives real traffic.
int run_load(const load_options& opts);

} // namespace mm
