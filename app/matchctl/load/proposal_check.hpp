#pragma once

// The ready check as `matchctl load` sees it (docs/groups.md, "Ready
// check"): the proposals a member heard, how each ended for it, and
// whether it accepted the one that made its session. Pure functions over
// what the group load recorded (app/matchctl/load/group_load.cpp).

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace mm {

/// A proposal a member heard (its match.proposed).
struct heard_proposal {
  std::string holder;          ///< the node its event id names
  std::set<std::string> users; ///< every member
  uint64_t seq = 0;            ///< proposal_seq of its id
  bool accepted = false;       ///< this member sent an accept
};

/// How the proposals of one holder ended for the members who heard them
/// (members of parties that kept listening; see run_group_load).
struct group_holder_tally {
  std::size_t heard = 0, told = 0, removed = 0, later = 0, matched = 0;
  std::size_t queued = 0, leaked = 0;
  int64_t last_removed_ms = 0; ///< Unix ms of the last removal told; 0: none
};

/// The system clock in Unix ms (a proposal's `deadline_ms` is one).
int64_t unix_now_ms();

/// The node a proposal event's id names ("proposal:<node>:<queue>:...",
/// actors/ready_check.cpp), or "?". Idempotent (a pure function).
std::string proposal_holder(const std::string& event_id);

/// The number of group id "g<n>": the queue's sequence, so of two
/// proposals of one ticket the later has the larger (0 if malformed).
/// Idempotent (a pure function).
uint64_t proposal_seq(const std::string& group);

/// True for a ready check's reason of a removal (`declined`, `timed_out`,
/// `removed`), as a proposal's end or its party tells it. Idempotent.
bool removal_reason(const std::string& detail);

/// How proposal `id` (`h`) ended for a member: as `ended` recorded it
/// ("told", "removed", "later"), else "matched" (the member plays),
/// "later" (a proposal after it held the ticket: `h.seq` below the
/// party's `last_seq`), "queued" (`back`: its party back in the queue at
/// the end) or "leaked" (none of these). Idempotent (a pure function).
std::string proposal_end(const std::map<std::string, std::string>& ended,
                         const std::string& id, const heard_proposal& h,
                         bool matched, uint64_t last_seq, bool back);

/// Counts one member-proposal that ended as `how` (proposal_end's names).
/// Not idempotent: it adds.
void tally_end(group_holder_tally& t, const std::string& how);

/// True when the member sent an accept for the proposal that made its
/// session of `roster`: the latest (largest seq) it heard with exactly
/// those users. False when it heard none. Idempotent (a pure function).
bool accepted_session(const std::map<std::string, heard_proposal>& heard,
                      const std::set<std::string>& roster);

} // namespace mm
