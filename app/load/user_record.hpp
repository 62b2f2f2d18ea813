#pragma once

// What the clients of `matchctl load` saw of each virtual user: written by
// the io thread that owns the user, read by the checker and the report.

#include <cstdint>
#include <string>

namespace mm {

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

} // namespace mm
