#pragma once

// Party messages (docs/groups.md, "Parties"): what a party is, and what its
// leader asks to queue it. Plain structs with an `inspect` overload each.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/engine_types.hpp"

namespace mm {

/// Where a party's ticket stands.
enum class party_phase : uint8_t {
  open,       ///< no ticket: members may join and leave
  claiming,   ///< a claim-or-enqueue is out
  queued,     ///< the ticket waits in its queue
  finalizing, ///< the ticket is in a claimed group that is being committed
  matched,    ///< the party plays in `session_id` (until it ends)
};

/// The stable name of `x`, e.g. "queued" (events, APIs).
const char* to_string(party_phase x) noexcept;

/// A party as its members see it (every change is a `party.updated` event
/// to every member, `version` growing by one each time).
struct party_info {
  std::string party;  ///< the party's id
  std::string code;   ///< the invite code (members only)
  std::string leader; ///< queues the party; members.front()
  std::vector<std::string> members;
  party_phase phase = party_phase::open;
  std::string queue;      ///< the current or last ticket's queue
  std::string ticket;     ///< its client ticket
  std::string session_id; ///< matched: the match session
  /// How the last ticket ended or why it changed: "cancelled by u2",
  /// "requeued", "u3 left", "timed out", ...
  std::string detail;
  uint64_t version = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, party_info& x) {
  return f(caf::meta::type_name("party_info"), x.party, x.code, x.leader,
           x.members, x.phase, x.queue, x.ticket, x.session_id, x.detail,
           x.version);
}

/// The leader's request to queue the party (or, with `party` empty, a user
/// queueing alone on a queue with a shape: a party of one for that ticket).
struct party_queue_request {
  std::string user;  ///< must be the leader
  std::string party; ///< '' : a party of one, made for this ticket
  std::string queue;
  std::string ticket; ///< client-chosen; the idempotency key
  /// Each member's attributes (JSON object text), by user. A queue with
  /// rules needs every member's; without rules a missing one is "{}".
  std::map<std::string, std::string> attrs;
  uint32_t give_up_after_s = 0; ///< as join_request's
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, party_queue_request& x) {
  return f(caf::meta::type_name("party_queue_request"), x.user, x.party,
           x.queue, x.ticket, x.attrs, x.give_up_after_s);
}

/// What a member asks of a party held by another node (the hubs hand it
/// over through the nodes' gateways, docs/groups.md "Parties across
/// nodes").
enum class party_op : uint8_t {
  join,    ///< user joins with `code`
  leave,   ///< user leaves
  queue,   ///< the leader queues the party (`queue`)
  cancel,  ///< user cancels the party's ticket
  state,   ///< the party as user sees it
  deliver, ///< a member's match event (`event`) for the party
};

/// One member's call for party `party` on the node that holds it.
struct party_call {
  party_op op = party_op::state;
  std::string user;
  std::string party;
  std::string code;          ///< join
  party_queue_request queue; ///< queue
  match_event event;         ///< deliver: checked against the database
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, party_call& x) {
  return f(caf::meta::type_name("party_call"), x.op, x.user, x.party, x.code,
           x.queue, x.event);
}

/// A party's id names the node that holds it: "p<16 hex>@<node>".
std::string party_id_on(const std::string& nonce, const std::string& node);

/// The node that holds party `id` ('' for an id without one).
std::string party_node(const std::string& id);

/// The `type` of the event that tells every member how its party changed.
constexpr const char* party_updated_event = "party.updated";

/// The ready check's events (actors/ready_check.hpp): a proposal made,
/// and how it ended for the member told. Neither is in the database: a
/// node takes a peer's only from the node its id names ("proposal:<node>:
/// <queue>:<group>:<tag>").
constexpr const char* proposed_event = "match.proposed";
constexpr const char* proposal_ended_event = "match.proposal_ended";

/// True for the events of a proposal.
inline bool is_proposal_event(const std::string& type) {
  return type == proposed_event || type == proposal_ended_event;
}

} // namespace mm
