#pragma once

// What the clients of `matchctl load` saw of each virtual user: written by
// the io thread that owns the user, read by the checker and the report.

#include <array>
#include <cstdint>
#include <string>

namespace mm {

/// What the clients saw of one virtual user. Written only by the io thread
/// that owns the user, read by the checker after all threads ended.
///
/// With --cycles N a user lives through N cycles (join, match, end); the
/// flags marked "cycle" and the fields of the match describe the current
/// (at the end: the last) cycle and are cleared when the next one begins.
/// Earlier cycles leave only counters behind (`cycle_counters`), so a
/// record stays the same size however many cycles a user runs.
struct user_record {
  enum flag : uint32_t {
    started = 1u << 0,
    ws_open = 1u << 1,
    join_sent = 1u << 2,      ///< cycle
    join_ok = 1u << 3,        ///< cycle: the join was answered 2xx
    join_refused = 1u << 4,   ///< the join was answered non-2xx
    join_error = 1u << 5,     ///< the join got no answer (transport)
    cancel_planned = 1u << 6, ///< cycle
    cancel_sent = 1u << 7,    ///< cycle
    cancel_acked = 1u << 8,   ///< cycle: DELETE answered "cancelled"
    cancel_late = 1u << 9,    ///< cycle: DELETE answered "matched"
    got_event = 1u << 10,     ///< cycle: a match.created event arrived
    told_matched = 1u << 11,  ///< cycle: an HTTP answer said "matched"
    ended = 1u << 12,         ///< told cancelled/failed by the server
    shutdown_notice = 1u << 13,
    ws_failed = 1u << 14, ///< the WebSocket failed or the server closed it
    done = 1u << 15,
    final_waiting = 1u << 16, ///< the last GET said queued/claiming/finalizing
    final_unreachable = 1u << 17,
    final_unknown = 1u << 18, ///< the last GET said not_found or other
    multi_session = 1u << 19, ///< events named two distinct sessions
    bad_event = 1u << 20,     ///< an event whose users are not {self, other}
    // --cycles only:
    end_sent = 1u << 21,     ///< cycle: this user asked to end the session
    session_over = 1u << 22, ///< cycle: its session.ended event arrived
    lived = 1u << 23,        ///< every cycle is done
    gave_up = 1u << 24,      ///< stopped cycling: the end was refused/failed
    told_stale = 1u << 25,   ///< cycle: an answer said "matched" in a
                             ///< session this user saw end
  };

  /// The flags that describe the current cycle only.
  static constexpr uint32_t cycle_flags = join_sent | join_ok | cancel_planned
                                          | cancel_sent | cancel_acked
                                          | cancel_late | got_event
                                          | told_matched | end_sent
                                          | session_over | told_stale;

  /// What a user did over all its cycles, and what the cycle checks found
  /// about it (app/matchctl/load/checker.hpp).
  struct cycle_counters {
    uint32_t completed = 0; ///< cycles over (session ended, or cancelled)
    uint32_t joins_sent = 0;
    uint32_t joins_refused = 0; ///< answered, but not 2xx
    uint32_t joins_ok = 0;
    uint32_t matches = 0; ///< distinct match.created events
    uint32_t cancels_sent = 0;
    uint32_t cancels_acked = 0;
    uint32_t cancels_late = 0;
    uint32_t ends_seen = 0;   ///< distinct session.ended events
    uint32_t overlapping = 0; ///< a match while another session was on
    uint32_t in_session_after_end = 0;
    uint32_t end_mismatches = 0;
    uint32_t cancelled_but_matched = 0;
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

  std::string ticket; ///< of the current join

  // --cycles only:
  uint32_t cycle = 0;           ///< the current cycle, from 0
  std::string cancelled_ticket; ///< the ticket last told cancelled
  cycle_counters counts;
  /// Hashes of the last sessions seen to end: a late copy of one of their
  /// events is a duplicate, not news.
  std::array<uint64_t, 4> ended_sessions{};
  uint8_t ended_next = 0;

  /// True when any of the flags in `f` is set.
  bool has(uint32_t f) const noexcept {
    return (flags & f) != 0;
  }
};

/// True when `ticket` is `ours` or one matchd derived from it
/// ("<ours>.h1" after a self-heal).
inline bool same_join(const std::string& ticket, const std::string& ours) {
  return ticket == ours
         || (ticket.size() > ours.size()
             && ticket.compare(0, ours.size(), ours) == 0
             && ticket[ours.size()] == '.');
}

/// A match event beyond a user's first one with another session id: rare,
/// kept aside for the checker.
struct extra_event {
  uint32_t user;
  int32_t partner;
  bool bad;
  std::string session;
};

} // namespace mm
