#pragma once

// The invariant checker of `matchctl load`: double bookings, lost users,
// undelivered events and late matches of cancelled users, from the records;
// with --cycles also overlapping sessions, missing session.ended events,
// end answers that disagree with the events, and joins still refused
// `in_session` after the user saw its session end.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "app/matchctl/load/session_ledger.hpp"
#include "app/matchctl/load/user_record.hpp"

namespace mm {

struct checker_result {
  std::size_t double_bookings = 0;
  std::size_t lost_users = 0;
  std::size_t undelivered_events = 0;
  std::size_t cancelled_but_matched = 0;
  std::size_t unobserved = 0; ///< matches of users whose WebSocket had failed
  // --cycles only:
  std::size_t overlapping_sessions = 0;
  std::size_t missing_session_ended = 0;
  std::size_t end_mismatches = 0;
  std::size_t in_session_after_end = 0;
  /// A few offending users per violation, for the report: (kind, user).
  std::vector<std::pair<std::string, uint32_t>> examples;
  /// Every lost user (the JSON report lists them: a test that killed a node
  /// checks that only that node's users are lost).
  std::vector<uint32_t> lost;

  /// "ok" or "violations".
  const char* verdict() const noexcept {
    return double_bookings + lost_users + undelivered_events
                 + cancelled_but_matched + overlapping_sessions
                 + missing_session_ended + end_mismatches + in_session_after_end
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
///
checker_result check_records(const std::vector<user_record>& users,
                             const std::vector<extra_event>& extras);

/// The same for a run with --cycles, where a user's record keeps only its
/// current cycle and counters, and the ledger the sessions not settled:
/// - double_bookings: sessions whose observers disagree on its users (or
///   whose events name other than two users), users an answer put in
///   another session than their event, users that a partner's event puts
///   in a session beside the one their own event named;
/// - undelivered_events: a user of a session (by its partner's event) that
///   never got its match.created though its WebSocket stayed open; a
///   current join answered "matched" without the event;
/// - cancelled_but_matched: matches of tickets the user was told cancelled;
/// - lost_users: as above, for the current cycle (a user told "matched"
///   in an ended session is counted below instead);
/// - overlapping_sessions: a match.created while the user's session was on;
/// - missing_session_ended: a user that saw a session's match.created but
///   not its session.ended, though the session ended at least `grace_us`
///   before `end_us` (the run's end) and its WebSocket stayed open;
/// - end_mismatches: end answers and session.ended events that disagree
///   with the user's session (id, who ended it, why);
/// - in_session_after_end: joins refused `in_session`, and cycles with an
///   answer "matched" in an ended session, after the user saw its session
///   end.
checker_result check_cycles(const std::vector<user_record>& users,
                            const session_ledger& ledger, int64_t end_us,
                            int64_t grace_us);

/// How many disjoint full matches of `max_players` in `teams` teams of
/// max_players / teams (0 teams: one lobby), every party whole in one team,
/// the parties of `sizes` players can make, found greedily (the group
/// checker's matches_left). Idempotent (a pure function).
std::size_t full_matches_of(std::vector<uint32_t> sizes, uint32_t teams,
                            uint32_t max_players);

} // namespace mm
