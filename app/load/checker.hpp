#pragma once

// The invariant checker of `matchctl load`: double bookings, lost users,
// undelivered events and late matches of cancelled users, from the records.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "app/load/user_record.hpp"

namespace mm {

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
///
checker_result check_records(const std::vector<user_record>& users,
                             const std::vector<extra_event>& extras);

} // namespace mm
