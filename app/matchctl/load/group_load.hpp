#pragma once

// `matchctl load --players ... [--teams N] [--party-size A-B]`: virtual
// parties on a queue with a shape (docs/groups.md), and the checker of
// group matches. Each party's members open their event WebSockets; a party
// of one joins with its ticket, a larger one is created by its leader, its
// members join with the invite code (each through its own node: member k
// on the node after its leader's by k) and the leader queues it, all as
// requests on the WebSockets (docs/api.md "Requests on the WebSocket").
// Every member waits for its match.created. At the end the parties still
// unmatched are asked about; then the checker counts, over what the
// members observed:
// - double_bookings: a user told of two sessions, or a session whose
//   members' events disagree on its users or teams;
// - partial_matches: a session of fewer than --players' min or more than
//   its max users, or (with --teams) teams of unequal size;
// - split_parties: a party whose members are in different sessions or
//   teams, or only some of whom are matched;
// - undelivered_events: a user of a session (by anyone's event) whose open
//   WebSocket never got its match.created;
// - lost_users: a member of a party that was queued, is not matched and
//   is not waiting any more.
// A party given up before all its members heard their match (a member's
// socket ended, a call failed) stopped listening: what it did not hear
// is counted as unobserved, outside the verdict (a killed node's users).
// Besides, matches_left: how many full matches the parties still waiting
// at the end could make by their sizes alone (a missed match when the
// queue has no rules and the run settled; not in the verdict, as rules
// the checker does not know may keep those parties apart).

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "app/matchctl/load.hpp"
#include "app/matchctl/load/proposal_check.hpp"

namespace mm {

/// The shape `matchctl load` drives (what the node's rules declare).
struct group_load_options {
  uint32_t min_players = 2;
  uint32_t max_players = 2;
  uint32_t teams = 0;     ///< 0: one lobby
  uint32_t party_min = 1; ///< each party's size: uniform in [min, max]
  uint32_t party_max = 1;
  /// Send {"skill": uniform 1000..2000} as each member's attributes.
  bool skill = false;
  /// A queue with a ready check: each member ignores a proposal (never
  /// answers) with probability `ignore_rate`; a member who answers accepts
  /// with probability `accept_rate` and declines otherwise.
  double accept_rate = 1.0;
  /// A queue with backfill (`--backfill R`): each matched member leaves its
  /// session with this probability; the others keep listening for the
  /// fills of the seats (session.members_changed).
  double leave_rate = 0;
  double ignore_rate = 0.0;
};

/// The counters of the group checker.
struct group_check {
  std::size_t users = 0, parties = 0, matched_users = 0, sessions = 0;
  std::size_t waiting = 0, errors = 0;
  std::size_t double_bookings = 0, partial_matches = 0, split_parties = 0;
  std::size_t undelivered_events = 0, lost_users = 0;
  /// Events and outcomes of parties that had stopped listening (above).
  std::size_t unobserved = 0;
  /// Sessions whose members came through more than one node (not a
  /// violation: shows that the run crossed nodes).
  std::size_t cross_node_sessions = 0;
  /// Parties whose members came through more than one node (the same).
  std::size_t cross_node_parties = 0;
  /// Full matches the waiting parties could make by size (see above).
  std::size_t matches_left = 0;
  // The ready check: proposals heard, answers given (declines), proposals
  // ignored (never answered), parties removed by it (told declined /
  // timed_out, by match.proposal_ended or, when the holder died and the
  // lease settled it, by the party's own update: not lost), and its
  // violations:
  // proposals_leaked, a proposal a listening member heard that never
  // ended for it: no match.proposal_ended, no removal told, no later
  // proposal of its ticket, no match.created, and at the end its party is
  // not back in the queue (the final look finds it still `finalizing`, or
  // gone);
  // requeued_lost, a member whose proposal ended without removing it
  // (told `requeued`, or silently by a lapsed lease) whose party in the
  // end is neither matched nor waiting nor removed;
  // over_capacity, a session of more users than --players' max;
  // unaccepted_sessions, a member of a session (match.created) who never
  // sent an accept for the proposal that made it (the latest it heard
  // with the session's users), or heard none, on a ready-check queue.
  std::size_t proposals = 0, declines = 0, ignores = 0, removed_parties = 0;
  std::size_t proposals_leaked = 0, requeued_lost = 0, over_capacity = 0;
  // Backfill: members who left, fills heard and the seats they filled; a
  // fill past the maximum counts in over_capacity, a fill a listening
  // member never heard in undelivered_events (fill_check.hpp).
  std::size_t leaves = 0, fills = 0, seats_filled = 0;
  std::size_t unaccepted_sessions = 0;
  /// By holder (the node a proposal's event id names); not in the verdict.
  std::map<std::string, group_holder_tally> holders;
  /// A few leaked proposals, for the report: "USER PROPOSAL HOLDER PHASE"
  /// (the party's phase at the final look).
  std::vector<std::string> leaked_examples;
  /// A few requeued members lost: "USER PHASE heard N, PROPOSAL:OUTCOME
  /// ..." (the party's phase at the final look; each proposal's end as
  /// the member heard it, "-" for none).
  std::vector<std::string> lost_examples;
  /// A few events a member never heard: "USER EVENT-OR-SESSION WHY".
  std::vector<std::string> undelivered_examples;

  /// "ok" or "violations".
  const char* verdict() const noexcept {
    return double_bookings + partial_matches + split_parties
                 + undelivered_events + lost_users + proposals_leaked
                 + requeued_lost + over_capacity + unaccepted_sessions
               == 0
             ? "ok"
             : "violations";
  }
};

/// Parses "N" or "A-B" into [lo, hi] (1 <= lo <= hi <= 64). False when
/// malformed. Idempotent (a pure function).
bool parse_range(const std::string& text, uint32_t& lo, uint32_t& hi);

/// Runs `opts.users` users in parties on queue `opts.queue_name(0)` (party
/// p's member k on node `opts.urls[(p + k) % urls]`) and prints the report;
/// on a ready-check queue a line per proposal holder (the node named in
/// the proposal's event id) over the members of parties that kept
/// listening:
///   holder=NODE heard=.. told=.. removed=.. later=.. matched=.. queued=..
///   leaked=.. last_removed_ms=..
/// (member-proposals heard, then how each ended for the member: its
/// match.proposal_ended, a removal its party told, a later proposal of its
/// ticket, its match, back in the queue at the final look, or never; the
/// Unix ms of the last removal told, 0 if none), and up to five
///   leaked: USER PROPOSAL HOLDER PHASE
/// (PROPOSAL and HOLDER `-` for a member held at the end in a proposal it
/// never heard; PHASE its party's at the final look); the last line is
///   verdict=ok users=.. parties=.. matched=.. sessions=.. waiting=..
///   errors=.. users_per_s=.. double_bookings=.. partial_matches=..
///   split_parties=.. undelivered_events=.. lost_users=.. unobserved=..
///   cross_node_sessions=.. cross_node_parties=.. matches_left=..
///   proposals=.. declines=.. removed_parties=.. proposals_leaked=..
///   requeued_lost=.. over_capacity=.. ignores=.. unaccepted_sessions=..
///   leaves=.. fills=.. seats_filled=..
/// Returns 0 (ok), 2 (violations) or 1 (nothing answered). Not idempotent:
/// it drives real traffic.
int run_group_load(const load_options& opts, const group_load_options& g);

} // namespace mm
