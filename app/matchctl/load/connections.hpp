#pragma once

// `matchctl connections`: many users connected to one matchd at once, each
// with its own event WebSocket (docs/matchd.md, "Many connected users").
// Most of them wait in a queue where nobody matches them; the rest join a
// pairing queue, are matched, end the session and join again at a paced
// rate. It reports what a node holding them costs: descriptors, memory per
// user, CPU while nobody joins, the joins' answer time, and whether every
// socket stayed open and heard its events.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "app/common/http_client.hpp"

namespace mm {

struct connections_options {
  http_url url;
  std::string secret;
  int64_t token_ttl_s = 3600;
  std::size_t users = 1000;
  std::string prefix = "c";
  /// Share of the users that join `wait_queue` and wait there: each with
  /// its own value of the queue's `equal` attribute `wait_attribute`, so
  /// that nobody is matched with them.
  double waiting = 0.9;
  std::string wait_queue = "hold";
  std::string wait_attribute = "room";
  /// The others join this pairing queue again and again (the join phase).
  std::string join_queue = "default";
  double open_rate = 2000; ///< new sockets per second
  double idle_s = 10;      ///< all connected, nobody joining
  double join_rate = 1000; ///< joins per second in the join phase
  double join_s = 60;      ///< how long the join phase lasts; 0: none
  /// Local addresses the sockets are spread over (bound before connect:
  /// each has its own ~28,000 ephemeral ports). Empty: the kernel's choice.
  std::vector<std::string> sources;
  /// The pid of the matchd under test (0: not measured): its RSS and CPU
  /// are read from /proc.
  int pid = 0;
  /// Every user joins `join_queue` once, after all are connected, and must
  /// hear its match.created (the CI test; `waiting` and the join phase are
  /// not used).
  bool match_all = false;
  /// Seconds to wait for the last answers and events.
  double settle_s = 20;
};

/// Runs the users and prints a report whose last lines are
///   connections_held=N (of M) dropped=N refused=N
///   connections_rss_kib_per_user=X connections_idle_cpu_pct=X
///   connections_join_p99_ms=X joins=N matched=N missing_events=N
///   verdict=ok|fail
/// Exit 0 when every socket opened and stayed open and every expected
/// answer and event came; 2 otherwise; 1 on a usage or resolve error.
/// Not idempotent (it joins and matches users).
int run_connections(const connections_options& opts);

} // namespace mm
