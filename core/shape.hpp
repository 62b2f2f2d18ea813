#pragma once

// The shape of a queue's matches (problem 15 of docs/design.md,
// docs/groups.md): how many players a match takes, in how many teams, how
// large a party may be, and when a match short of full is made. A queue
// without a shape pairs two users, as it always did. No CAF, no JSON types
// in this header.

#include <cstdint>
#include <string>
#include <vector>

#include "core/outcome.hpp"

namespace mm {

/// A queue's match shape.
struct queue_shape {
  uint32_t min_players = 2; ///< a match is made with at least this many
  uint32_t max_players = 2; ///< and at most this many
  uint32_t teams = 0;       ///< 0: one lobby; else teams of `team_size`
  uint32_t team_size = 0;
  uint32_t party_max = 1; ///< the most users one ticket may carry
  /// The oldest ticket of a match short of `max_players` waits this long
  /// for the rest before a match of at least `min_players` is made. Only
  /// when min < max; 0: at once.
  uint32_t fill_after_ms = 0;
  /// The ready check (docs/groups.md): every member of a claimed match
  /// accepts within this long or the match is not made. 0: off.
  uint32_t accept_timeout_ms = 0;
  /// Backfill (docs/groups.md "Backfill"): whether a session with open
  /// seats may ask for players (`manual`: a member or the host asks),
  /// and whether it asks by itself when it starts short or a member
  /// leaves (`automatic`).
  enum class backfill_mode : uint8_t { off, manual, automatic };
  backfill_mode backfill = backfill_mode::off;
  /// A number attribute of the queue whose team sums the claim keeps as
  /// equal as it can (empty: teams filled in FIFO order).
  std::string balance;
  /// The compact form the group claim reads (lua/lib/groups.lua):
  /// "min,max,teams,team_size,party_max,fill_after_ms,balanced" (balanced:
  /// 1 or 0).
  std::string spec;

  /// True when this shape is a plain pair (2 players, parties of one, no
  /// teams): such a queue takes the pair claim.
  bool is_pair() const noexcept {
    return min_players == 2 && max_players == 2 && teams == 0 && party_max == 1;
  }
};

/// The most players one match may take (a claim's work grows with it).
constexpr uint32_t max_match_players = 64;

/// Parses and checks a shape (JSON object text):
///   {"players": {"min": N, "max": N}, "teams": {"count": N, "size": N},
///    "party_max": N, "fill_after_s": N, "balance": "ATTRIBUTE",
///    "accept_timeout_s": N, "backfill": "off"|"manual"|"auto"}
/// `players` is required (2 <= min <= max <= max_match_players); `teams`
/// optional (count >= 2, count x size = max, min >= count); `party_max`
/// defaults to 1 and is at most a team's size (or max); `fill_after_s`
/// (0..3600) only when min < max; `accept_timeout_s` 0..300 (0: no ready
/// check; not on a plain pair shape); `backfill` (default off; not on a
/// plain pair shape, whose session ends with its first leave); `balance` names one of
/// `number_attributes` (the queue's declared number attributes) and needs
/// teams. Refuses anything else with `invalid_rules` naming `where` and the
/// field. Idempotent (a pure function).
outcome<queue_shape>
parse_shape(const std::string& where, const std::string& json_text,
            const std::vector<std::string>& number_attributes);

} // namespace mm
