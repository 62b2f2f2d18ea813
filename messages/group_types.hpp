#pragma once

// Group messages (problem 15 of docs/design.md, docs/groups.md): a party's
// ticket, and what the group claim answers. Plain structs with an `inspect`
// overload each, so they can cross nodes.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace mm {

/// One user of a ticket of a queue with a shape.
struct party_member {
  std::string user;
  std::string rk;      ///< rule values (core/rules.hpp), '' without rules
  std::string avoid;   ///< recent partners, ','-separated
  std::string balance; ///< the shape's balance attribute's value, '' none
  std::string attrs;   ///< opaque (or canonical JSON on a queue with rules)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, party_member& x) {
  return f(caf::meta::type_name("party_member"), x.user, x.rk, x.avoid,
           x.balance, x.attrs);
}

/// A ticket of 1..party_max users joining a queue with a shape; the first
/// member leads (its user names the ticket's owner).
struct group_ticket_spec {
  std::string queue;
  std::string ticket; ///< the idempotency key of the join
  std::string node;   ///< node of the leader's session
  uint32_t ttl_ms = 30000;
  std::string rules; ///< the queue's rule set spec, '' none
  std::string shape; ///< the queue's shape spec (core/shape.hpp)
  std::vector<party_member> members;
  /// A re-scan of a ticket filed before: answers `gone` rather than filing
  /// it anew when it is neither waiting nor claimed (settled or lapsed).
  bool rescan = false;
  /// The queue's ready check (queue_shape::accept_timeout_ms; 0: none): a
  /// group this claim makes is a proposal every member must accept.
  uint32_t accept_ms = 0;
  /// A backfill request (docs/groups.md "Backfill") when not empty: each
  /// member's team (1-based; 0 without teams). `ticket` is then "~" + the
  /// session id and `members` the session's active members.
  std::vector<uint32_t> teams;
  /// A backfill request's: the session's members that left (a fill never
  /// takes them in again).
  std::vector<std::string> former;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_ticket_spec& x) {
  return f(caf::meta::type_name("group_ticket_spec"), x.queue, x.ticket, x.node,
           x.ttl_ms, x.rules, x.shape, x.members, x.rescan, x.accept_ms,
           x.teams, x.former);
}

/// The ticket id of session `session_id`'s backfill request.
inline std::string backfill_ticket(const std::string& session_id) {
  return "~" + session_id;
}

/// Whether `ticket` is a backfill request's (its session id after '~').
inline bool is_backfill_ticket(const std::string& ticket) {
  return !ticket.empty() && ticket[0] == '~';
}

/// A member of a claimed ticket, as the match needs it.
struct matched_member {
  std::string user;
  std::string attrs;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, matched_member& x) {
  return f(caf::meta::type_name("matched_member"), x.user, x.attrs);
}

/// One ticket of a claimed group.
struct matched_ticket {
  std::string ticket;
  std::string node;
  int64_t score = 0; ///< its original FIFO place (a requeue keeps it)
  std::string token;
  uint32_t team = 0; ///< 1-based; 0: no teams
  std::vector<matched_member> members;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, matched_ticket& x) {
  return f(caf::meta::type_name("matched_ticket"), x.ticket, x.node, x.score,
           x.token, x.team, x.members);
}

enum class group_claim_outcome : uint8_t {
  queued,           ///< no match within the window: the ticket waits
  matched,          ///< the call made `group` (the caller in it or not)
  claimed_by_other, ///< another call put the caller's ticket in `group`
  gone,             ///< a re-scan: the ticket is neither waiting nor claimed
  removed, ///< a re-scan: a ready check removed the ticket (`detail` why)
};

/// What the group claim answers.
struct group_claim_result {
  group_claim_outcome outcome = group_claim_outcome::queued;
  std::string ticket;    ///< the caller's
  std::string token;     ///< the caller's ticket's token
  int64_t score = 0;     ///< the caller's FIFO place
  int64_t deadline = 0;  ///< the caller's presence deadline (store ms)
  bool in_group = false; ///< matched: the caller's ticket is in `group`
  /// matched, not in_group: another claim holds the caller's ticket in a
  /// group of its own (the caller commits `group` and waits for that one).
  bool held = false;
  std::string group;                   ///< matched, claimed_by_other
  std::vector<matched_ticket> tickets; ///< matched: the group, in FIFO order
  uint32_t stale_removed = 0;
  bool more = false;  ///< queued: the whole window was stale: look again
  std::string detail; ///< removed: "declined" or "timed_out"
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_claim_result& x) {
  return f(caf::meta::type_name("group_claim_result"), x.outcome, x.ticket,
           x.token, x.score, x.deadline, x.in_group, x.held, x.group, x.tickets,
           x.stale_removed, x.more, x.detail);
}

/// A member's leave of its queued ticket (compare-and-delete by token).
struct group_leave {
  std::string queue;
  std::string user;  ///< any member of the ticket
  std::string token; ///< the ticket's token
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_leave& x) {
  return f(caf::meta::type_name("group_leave"), x.queue, x.user, x.token);
}

/// A claimed group of a queue.
struct group_ref {
  std::string queue;
  std::string group;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_ref& x) {
  return f(caf::meta::type_name("group_ref"), x.queue, x.group);
}

/// What a member's leave did: the ticket removed (`in_flight` false), or
/// held by a claim (`in_flight` true, `group` the claim's group).
struct group_cancel_result {
  bool in_flight = false;
  std::string ticket;
  std::string group;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_cancel_result& x) {
  return f(caf::meta::type_name("group_cancel_result"), x.in_flight, x.ticket,
           x.group);
}

/// What settling a group did: tickets put back (requeue) and removed;
/// `gone` when it was settled before.
struct group_settle_result {
  bool gone = false;
  uint32_t back = 0;
  uint32_t removed = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_settle_result& x) {
  return f(caf::meta::type_name("group_settle_result"), x.gone, x.back,
           x.removed);
}

/// A claimed group its claimer's node commits (actors/group_finalizer.hpp).
struct group_commit {
  std::string queue;
  std::string group;        ///< the claim's group id
  uint32_t min_players = 2; ///< the session ends when fewer stay
  std::vector<matched_ticket> tickets;
  /// The ready check's time (0: none): the group is a proposal first
  /// (actors/ready_check.hpp).
  uint32_t accept_ms = 0;
  /// A fill of a backfill request (its ticket first): the shape's bounds
  /// the database checks the session against (0 team_size: no teams).
  uint32_t max_players = 0;
  uint32_t team_size = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_commit& x) {
  return f(caf::meta::type_name("group_commit"), x.queue, x.group,
           x.min_players, x.tickets, x.accept_ms, x.max_players, x.team_size);
}

/// How a group's finalization ended: committed as `session_id`, or undone
/// in the queue (every ticket back at its place but the `removed` ones: a
/// member cancelled, or was in another session).
struct group_verdict {
  bool committed = false;
  std::string session_id;
  bool created = false; ///< committed by this call (false: a retry's)
  std::vector<std::string> removed;
  std::string detail;
  /// A proposal's: why each of `removed` left ("declined", "timed_out",
  /// "removed"), in the same order; empty for other groups.
  std::vector<std::string> reasons;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_verdict& x) {
  return f(caf::meta::type_name("group_verdict"), x.committed, x.session_id,
           x.created, x.removed, x.detail, x.reasons);
}

/// A member's answer to a proposal (the ready check, docs/groups.md).
struct proposal_answer {
  std::string queue;
  std::string proposal; ///< the group id
  std::string user;
  std::string answer; ///< "accept", "decline", or "" (only read)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, proposal_answer& x) {
  return f(caf::meta::type_name("proposal_answer"), x.queue, x.proposal, x.user,
           x.answer);
}

/// A proposal as a member sees it after answering.
struct proposal_state {
  std::string queue;
  std::string proposal;
  std::string user;
  std::string answer;   ///< the member's standing answer ("" none yet)
  std::string claimer;  ///< the node that holds the proposal
  int64_t deadline = 0; ///< store ms (unix); 0 once every member accepted
  uint32_t players = 0;
  uint32_t accepted = 0;
  bool declined = false; ///< some member declined: it will not be made
  bool complete = false; ///< every member accepted: it is being committed
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, proposal_state& x) {
  return f(caf::meta::type_name("proposal_state"), x.queue, x.proposal, x.user,
           x.answer, x.claimer, x.deadline, x.players, x.accepted, x.declined,
           x.complete);
}

/// What the queue decided of one proposal (lua/group_decide.lua).
struct proposal_decision {
  std::string group;
  std::string status; ///< accepted, pending, settled, gone
  /// settled: each ticket's outcome (requeued, declined, timed_out,
  /// removed), in the group's order.
  std::vector<std::string> tickets;
  std::vector<std::string> outcomes;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, proposal_decision& x) {
  return f(caf::meta::type_name("proposal_decision"), x.group, x.status,
           x.tickets, x.outcomes);
}

/// Asks for players for a group session's open seats (backfill,
/// docs/groups.md "Backfill").
struct backfill_ask {
  std::string session_id;
  /// The member who asks (an active member of the session); empty: the
  /// host (the embedding application), who may ask for any session.
  std::string user;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, backfill_ask& x) {
  return f(caf::meta::type_name("backfill_ask"), x.session_id, x.user);
}

/// A session's backfill request as its asker sees it.
struct backfill_info {
  std::string session_id;
  std::string queue;
  /// "waiting" (asked: the queue fills its seats as players come), or
  /// "full" (no seat open: nothing asked).
  std::string state;
  uint32_t players = 0;     ///< active members now
  uint32_t max_players = 0; ///< the queue's players.max
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, backfill_info& x) {
  return f(caf::meta::type_name("backfill_info"), x.session_id, x.queue,
           x.state, x.players, x.max_players);
}

/// A session's backfill request in a queue.
struct backfill_ref {
  std::string queue;
  std::string session_id;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, backfill_ref& x) {
  return f(caf::meta::type_name("backfill_ref"), x.queue, x.session_id);
}

} // namespace mm
