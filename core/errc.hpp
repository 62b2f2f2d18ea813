#pragma once

#include <cstdint>
#include <string>

namespace mm {

/// The project's error codes. Every refusal the engine gives names one of
/// these; `to_string` gives the stable wire name used in logs and APIs.
/// (Registered with CAF as an error category in messages/type_ids.hpp.)
enum class errc : uint8_t {
  none = 0,
  invalid_argument,  ///< malformed input; nothing was changed
  duplicate_ticket,  ///< the user already has another live ticket there
  not_found,         ///< no such ticket / user / queue
  stale_token,       ///< the token is not the ticket's current one
  in_flight,         ///< the ticket is being finalized; cancel via finalizer
  store_unavailable, ///< the queue store or database cannot be reached
  conflict,          ///< lost to a competing request (a bounded wait
                     ///< expired, or the user is already in an active
                     ///< session); retrying may succeed
  protocol_error,    ///< a store answered something the engine cannot read
  cancelled,         ///< the operation was given up because a side cancelled
  shutting_down,     ///< the engine no longer accepts new work
  forbidden,         ///< the caller may not act on this resource
  in_session,        ///< the user is in an active match session
  timed_out,         ///< a waiting ticket gave up
  unknown_queue,     ///< the queue is not on the node's allow-list
  too_many_queues,   ///< the node already knows its maximum of queues
  invalid_attribute, ///< a join's attributes break its queue's declarations
                     ///< (docs/rules.md); nothing was changed
  invalid_rules,     ///< a rule configuration cannot be used (at start)
  store_auth_failed, ///< the queue store refused the configured credentials
  in_party,          ///< the user is in another party (docs/groups.md)
  party_too_large,   ///< a party exceeds its queue's party_max or team size
};

/// Returns the stable name of `x`, e.g. "duplicate_ticket"; "unknown" for a
/// value outside the enum.
const char* to_string(errc x) noexcept;

/// Parses a stable name back into a code; `errc::none` if unknown.
errc errc_from_string(const std::string& name) noexcept;

/// An error code with a human-readable detail.
struct failure {
  errc code = errc::none;
  std::string detail;
};

} // namespace mm
