#pragma once

// `matchctl load`: virtual users that each open their event WebSocket, join
// a queue, sometimes cancel, and wait for their match; then an invariant
// checker over everything the clients observed (docs/api.md).

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "app/http_client.hpp"

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
  std::size_t queues = 1;
  std::size_t concurrency = 4000;
  std::size_t connections = 32; ///< keep-alive connections per URL
  int64_t settle_ms = 10000;
  std::string json_file;
  std::string prefix;
  uint64_t seed = 1;
  bool progress = true;
  unsigned threads = 1;
  /// Finished users drop their TCP connection instead of the WebSocket
  /// close handshake: fewer packets and syscalls on both sides.
  bool abrupt_close = false;
};

/// What the clients saw of one virtual user. Written only by the io thread
/// that owns the user, read by the checker after all threads ended.
struct user_record {
  enum flag : uint32_t {
    started = 1u << 0,
    ws_open = 1u << 1,
    join_sent = 1u << 2,
    join_ok = 1u << 3,       ///< the join was answered 2xx
    join_refused = 1u << 4,  ///< the join was answered non-2xx
    join_error = 1u << 5,    ///< the join got no answer (transport)
    cancel_planned = 1u << 6,
    cancel_sent = 1u << 7,
    cancel_acked = 1u << 8,  ///< DELETE answered "cancelled"
    cancel_late = 1u << 9,   ///< DELETE answered "matched"
    got_event = 1u << 10,    ///< a match.created event arrived
    told_matched = 1u << 11, ///< an HTTP answer said "matched"
    ended = 1u << 12,        ///< told cancelled/failed by the server
    shutdown_notice = 1u << 13,
    ws_failed = 1u << 14,    ///< the WebSocket failed or the server closed it
    done = 1u << 15,
    final_waiting = 1u << 16, ///< the last GET said queued/claiming/finalizing
    final_unreachable = 1u << 17,
    final_unknown = 1u << 18, ///< the last GET said not_found or other
    multi_session = 1u << 19, ///< events named two distinct sessions
    bad_event = 1u << 20,     ///< an event whose users are not {self, other}
  };

  int64_t start_us = -1; ///< WebSocket connect begun, since the run started
  int64_t t0_us = -1;    ///< join sent (the WebSocket is open by then)
  int64_t join_us = -1;  ///< join answered
  int64_t event_us = -1; ///< first match event arrived
  int32_t partner = -1;  ///< from the first event: index, or -2 if foreign
  uint32_t flags = 0;
  std::string session;      ///< from the first match event
  std::string event_id;     ///< of the first match event
  std::string told_session; ///< from an HTTP answer that said matched
  std::string detail;       ///< state and detail when told cancelled/failed

  bool has(uint32_t f) const noexcept { return (flags & f) != 0; }
};

/// A match event beyond a user's first one with another session id: rare,
/// kept aside for the checker.
struct extra_event {
  uint32_t user;
  int32_t partner;
  bool bad;
  std::string session;
};

struct checker_result {
  std::size_t double_bookings = 0;
  std::size_t lost_users = 0;
  std::size_t undelivered_events = 0;
  std::size_t cancelled_but_matched = 0;
  std::size_t unobserved = 0; ///< matches of users whose WebSocket had failed
  /// A few offending users per violation, for the report: (kind, user).
  std::vector<std::pair<std::string, uint32_t>> examples;

  /// "ok" or "violations".
  const char* verdict() const noexcept {
    return double_bookings + lost_users + undelivered_events
               + cancelled_but_matched
             == 0
             ? "ok"
             : "violations";
  }
};

/// The invariant checker, over what the clients observed:
/// - double_bookings: users that some event (theirs or a partner's) or
///   answer puts in two distinct sessions, plus sessions whose observers
///   disagree on its two users (or that name other than two users);
/// - undelivered_events: users of a session (by anyone's event) or told
///   "matched" by an answer who got no match event, though their WebSocket
///   stayed open (else it is only `unobserved`);
/// - cancelled_but_matched: users whose cancel was acknowledged (or who
///   were told cancelled/failed) and who are matched all the same;
/// - lost_users: joined, not told cancelled/failed/shutting down, and at
///   the end neither matched nor waiting (the last GET said so, or failed).
checker_result check_records(const std::vector<user_record>& users,
                             const std::vector<extra_event>& extras);

/// Runs the load and prints the report; returns the process exit code: 0
/// verdict ok, 2 violations, 1 when no request at all succeeded. Not
/// idempotent: it drives real traffic.
int run_load(const load_options& opts);

} // namespace mm
