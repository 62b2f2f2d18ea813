#pragma once

// The CAF side of messages/: the project's type-ID block, atoms, the error
// category, and the typed actor interfaces. Include this only in translation
// units that talk to actors (every CAF header costs compile time).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/error.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/type_id.hpp>
#include <caf/typed_actor.hpp>

#include "core/errc.hpp"
#include "messages/engine_types.hpp"
#include "messages/group_types.hpp"
#include "messages/party_types.hpp"
#include "messages/queue_types.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(matchmaker, caf::first_custom_type_id)

  CAF_ADD_TYPE_ID(matchmaker, (mm::ticket_spec))
  CAF_ADD_TYPE_ID(matchmaker, (mm::ticket_ref))
  CAF_ADD_TYPE_ID(matchmaker, (mm::partner_info))
  CAF_ADD_TYPE_ID(matchmaker, (mm::enqueue_result))
  CAF_ADD_TYPE_ID(matchmaker, (mm::claim_result))
  CAF_ADD_TYPE_ID(matchmaker, (mm::cancel_result))
  CAF_ADD_TYPE_ID(matchmaker, (mm::heartbeat_result))
  CAF_ADD_TYPE_ID(matchmaker, (mm::requeue_result))
  CAF_ADD_TYPE_ID(matchmaker, (mm::release_result))
  CAF_ADD_TYPE_ID(matchmaker, (mm::sweep_result))
  CAF_ADD_TYPE_ID(matchmaker, (std::vector<mm::claim_result>))
  CAF_ADD_TYPE_ID(matchmaker, (std::vector<mm::ticket_spec>))
  CAF_ADD_TYPE_ID(matchmaker, (mm::join_request))
  CAF_ADD_TYPE_ID(matchmaker, (mm::session_state))
  CAF_ADD_TYPE_ID(matchmaker, (mm::match_event))
  CAF_ADD_TYPE_ID(matchmaker, (mm::claim_pair))
  CAF_ADD_TYPE_ID(matchmaker, (mm::finalize_result))
  CAF_ADD_TYPE_ID(matchmaker, (mm::inflight_cancel))
  CAF_ADD_TYPE_ID(matchmaker, (mm::cancel_verdict))
  CAF_ADD_TYPE_ID(matchmaker, (mm::swipe_request))
  CAF_ADD_TYPE_ID(matchmaker, (mm::swipe_result))
  CAF_ADD_TYPE_ID(matchmaker, (mm::mutual_pair))
  CAF_ADD_TYPE_ID(matchmaker, (mm::delivery_report))
  CAF_ADD_TYPE_ID(matchmaker, (mm::peer_info))
  CAF_ADD_TYPE_ID(matchmaker, (std::vector<mm::peer_info>))
  CAF_ADD_TYPE_ID(matchmaker, (mm::end_result))

  CAF_ADD_ATOM(matchmaker, mm, enqueue_atom, "enqueue")
  CAF_ADD_ATOM(matchmaker, mm, claim_atom, "claim")
  CAF_ADD_ATOM(matchmaker, mm, rescan_atom, "rescan")
  CAF_ADD_ATOM(matchmaker, mm, cancel_atom, "cancel")
  CAF_ADD_ATOM(matchmaker, mm, heartbeat_atom, "heartbeat")
  CAF_ADD_ATOM(matchmaker, mm, requeue_atom, "requeue")
  CAF_ADD_ATOM(matchmaker, mm, release_atom, "release")
  CAF_ADD_ATOM(matchmaker, mm, sweep_atom, "sweep")
  CAF_ADD_ATOM(matchmaker, mm, tick_atom, "tick")
  CAF_ADD_ATOM(matchmaker, mm, join_atom, "join")
  CAF_ADD_ATOM(matchmaker, mm, state_atom, "state")
  CAF_ADD_ATOM(matchmaker, mm, grace_atom, "grace")
  CAF_ADD_ATOM(matchmaker, mm, deliver_atom, "deliver")
  CAF_ADD_ATOM(matchmaker, mm, finalize_atom, "finalize")
  CAF_ADD_ATOM(matchmaker, mm, register_atom, "register")
  CAF_ADD_ATOM(matchmaker, mm, unregister_atom, "unregister")
  CAF_ADD_ATOM(matchmaker, mm, flush_atom, "flush")
  CAF_ADD_ATOM(matchmaker, mm, swipe_atom, "swipe")
  CAF_ADD_ATOM(matchmaker, mm, acquire_atom, "acquire")
  CAF_ADD_ATOM(matchmaker, mm, route_atom, "route")
  CAF_ADD_ATOM(matchmaker, mm, peer_atom, "peer")
  CAF_ADD_ATOM(matchmaker, mm, peers_atom, "peers")
  CAF_ADD_ATOM(matchmaker, mm, hello_atom, "hello")
  CAF_ADD_ATOM(matchmaker, mm, attach_atom, "attach")
  CAF_ADD_ATOM(matchmaker, mm, end_atom, "end")
  CAF_ADD_ATOM(matchmaker, mm, give_up_atom, "give_up")
  CAF_ADD_ATOM(matchmaker, mm, settle_atom, "settle")
  CAF_ADD_ATOM(matchmaker, mm, retry_atom, "retry")
  CAF_ADD_ATOM(matchmaker, mm, watch_atom, "watch")
  CAF_ADD_ATOM(matchmaker, mm, unwatch_atom, "unwatch")
  CAF_ADD_ATOM(matchmaker, mm, detach_atom, "detach")

  CAF_ADD_TYPE_ID(matchmaker, (std::vector<mm::release_result>))
  CAF_ADD_TYPE_ID(matchmaker, (std::vector<mm::match_event>))
  CAF_ADD_TYPE_ID(matchmaker, (std::vector<mm::delivery_report>))

  // Groups (docs/groups.md); appended, so that earlier ids stay put.
  CAF_ADD_TYPE_ID(matchmaker, (mm::group_ticket_spec))
  CAF_ADD_TYPE_ID(matchmaker, (mm::group_claim_result))
  CAF_ADD_TYPE_ID(matchmaker, (mm::group_leave))
  CAF_ADD_TYPE_ID(matchmaker, (mm::group_ref))
  CAF_ADD_TYPE_ID(matchmaker, (mm::group_cancel_result))
  CAF_ADD_TYPE_ID(matchmaker, (mm::group_settle_result))
  CAF_ADD_TYPE_ID(matchmaker, (mm::group_commit))
  CAF_ADD_TYPE_ID(matchmaker, (mm::group_verdict))
  // Parties (docs/groups.md, "Parties"); appended.
  CAF_ADD_TYPE_ID(matchmaker, (mm::party_info))
  CAF_ADD_TYPE_ID(matchmaker, (mm::party_queue_request))
  CAF_ADD_ATOM(matchmaker, mm, create_atom, "create")
  CAF_ADD_ATOM(matchmaker, mm, leave_atom, "leave")
  CAF_ADD_TYPE_ID(matchmaker, (mm::leave_result))
  // Parties across nodes; appended.
  CAF_ADD_TYPE_ID(matchmaker, (mm::party_call))
  CAF_ADD_ATOM(matchmaker, mm, party_atom, "party")
  // The ready check (docs/groups.md); appended.
  CAF_ADD_TYPE_ID(matchmaker, (mm::proposal_answer))
  CAF_ADD_TYPE_ID(matchmaker, (mm::proposal_state))
  CAF_ADD_TYPE_ID(matchmaker, (mm::proposal_decision))
  CAF_ADD_TYPE_ID(matchmaker, (std::vector<mm::proposal_decision>))
  CAF_ADD_ATOM(matchmaker, mm, answer_atom, "answer")
  CAF_ADD_ATOM(matchmaker, mm, decide_atom, "decide")
  // Backfill (docs/groups.md); appended.
  CAF_ADD_TYPE_ID(matchmaker, (mm::backfill_ask))
  CAF_ADD_TYPE_ID(matchmaker, (mm::backfill_info))
  CAF_ADD_TYPE_ID(matchmaker, (mm::backfill_ref))
  CAF_ADD_ATOM(matchmaker, mm, backfill_atom, "backfill")
  // The console's cluster page (docs/console.md); appended.
  CAF_ADD_ATOM(matchmaker, mm, stats_atom, "stats")
  // A session held by a connected client (docs/matchd.md); appended.
  CAF_ADD_ATOM(matchmaker, mm, pin_atom, "pin")

CAF_END_TYPE_ID_BLOCK(matchmaker)

CAF_ERROR_CODE_ENUM(mm::errc, "mm")

namespace mm {

/// The only path from the engine to the queue store (actors/queue_broker.hpp).
/// Every handler answers a named `mm::errc` error on bad input, changing
/// nothing; the store work is done by the atomic scripts in lua/. A store
/// that cannot be reached answers `store_unavailable` (the call may have
/// run: read again before concluding). A join (enqueue, claim) of a queue
/// the broker does not serve answers `unknown_queue` or `too_many_queues`.
using queue_broker_actor = caf::typed_actor<
  // Idempotent per spec.ticket: the same create again answers the same ticket.
  caf::replies_to<enqueue_atom, ticket_spec>::with<enqueue_result>,
  // Claim-or-enqueue; rescans (bounded) while a window held only stale
  // tickets. Idempotent per spec.ticket: a retry answers the same outcome.
  caf::replies_to<claim_atom, ticket_spec>::with<claim_result>,
  // Many claims in one message (load generators, gateways): each as above;
  // answers one result per claim, in order, or the first error when any
  // claim failed (the others still ran).
  caf::replies_to<claim_atom,
                  std::vector<ticket_spec>>::with<std::vector<claim_result>>,
  // Re-scan of a user that is waiting: if its ticket is gone it was claimed,
  // and the answer is claimed_by_other (it never claims a second partner).
  caf::replies_to<rescan_atom, ticket_spec>::with<claim_result>,
  // Compare-and-delete by token. Not idempotent in its answer: a second
  // cancel finds nothing (not_found).
  caf::replies_to<cancel_atom, ticket_ref>::with<cancel_result>,
  // Extends the presence deadline by ttl_ms (current token only). Idempotent.
  caf::replies_to<heartbeat_atom, ticket_ref, uint32_t>::with<heartbeat_result>,
  // (queue, ticket): back at the original score. Idempotent.
  caf::replies_to<requeue_atom, std::string, std::string>::with<requeue_result>,
  // (queue, ticket): drops a claimed/claimer ticket once settled. Idempotent.
  caf::replies_to<release_atom, std::string, std::string>::with<release_result>,
  // (queue, tickets): the same for many tickets of one queue in one store
  // call (a group commit's pairs); one result per ticket, in order.
  // Idempotent.
  caf::replies_to<release_atom, std::string,
                  std::vector<std::string>>::with<std::vector<release_result>>,
  // (queue): removes stale tickets in bounded batches until none is left;
  // answers how many it removed and the queue's depth (waiting tickets
  // left). Idempotent.
  caf::replies_to<sweep_atom, std::string>::with<sweep_result>,
  // Groups (docs/groups.md). A party's claim-or-enqueue on a queue with a
  // shape; rescans (bounded) while a window held only stale tickets.
  // Idempotent per ticket: a retry answers the group its first run made.
  // `duplicate_ticket` when a member is in another live ticket.
  caf::replies_to<claim_atom, group_ticket_spec>::with<group_claim_result>,
  // A member leaves its ticket: removed whole while it waits, or in flight
  // with the group that holds it. Idempotent.
  caf::replies_to<cancel_atom, group_leave>::with<group_cancel_result>,
  // Removes a settled group's tickets (its match committed). Idempotent.
  caf::replies_to<release_atom, group_ref>::with<group_settle_result>,
  // Undoes a group: its tickets back at their places but the leaving ones
  // (removed). Idempotent.
  caf::replies_to<requeue_atom, group_ref,
                  std::vector<std::string>>::with<group_settle_result>,
  // A member's answer to a proposal (lua/group_answer.lua): its first
  // answer stands (idempotent); "" only reads. `not_found` once the
  // proposal ended (or past its deadline), `forbidden` for a user in none
  // of its tickets.
  caf::replies_to<answer_atom, proposal_answer>::with<proposal_state>,
  // (queue, groups): what became of these proposals
  // (lua/group_decide.lua), one decision each, in order; a settled one is
  // settled in the queue by this call. Idempotent.
  caf::replies_to<decide_atom, std::string, std::vector<std::string>>::with<
    std::vector<proposal_decision>>,
  // Ends a session's backfill request (lua/backfill_cancel.lua): removed
  // while it waits, in flight with its group while a claim holds it;
  // `not_found` when there is none. Idempotent.
  caf::replies_to<cancel_atom, backfill_ref>::with<group_cancel_result>,
  // Heartbeats (actors/waiter_roster.hpp): (gen, spec, first_at_ms,
  // period_ms, align_ms) from a session of this node whose ticket waits:
  // re-scans it first at first_at_ms (ms of the actor clock, so that
  // waiters due together share a moment), then every period_ms (on the
  // align_ms grid; on a queue with rules also when its windows widen) and
  // tells the session (rescan_atom, gen, sent_ns, claim_result) when an
  // answer changes something: its windows, a claimer, a match, its record
  // gone. Replaces the sender's earlier watch; the broker monitors it.
  // Idempotent.
  caf::reacts_to<watch_atom, uint64_t, ticket_spec, int64_t, uint32_t,
                 uint32_t>,
  // The sender's ticket no longer waits (it has left the queued state).
  // Idempotent.
  caf::reacts_to<unwatch_atom>,
  // Timers: the due heartbeats; the sweep of every queue seen so far.
  caf::reacts_to<heartbeat_atom>, caf::reacts_to<tick_atom>>;

/// Receives a user's session updates and match events (the host's side).
using subscriber_actor = caf::typed_actor<caf::reacts_to<session_state>,
                                          caf::reacts_to<match_event>>;

/// One per connected user (actors/session.hpp).
using session_actor = caf::typed_actor<
  // Joins a queue (claim-or-enqueue). Answers the state after the first
  // step. Idempotent per (queue, ticket): the same join again answers the
  // current state while the join lasts and its final state once it ended
  // `matched` or `cancelled` (nothing starts again). After `failed`, or
  // with another ticket once the join ended, a new join starts; another
  // ticket while a join lasts is refused (`duplicate_ticket`). Refusals,
  // changing nothing: `in_session` (the user is in an active match
  // session; the detail is its id), `invalid_argument`, `invalid_attribute`,
  // `unknown_queue`, `too_many_queues`. `store_unavailable` (or a
  // timeout): a claim already sent goes on; the same join again answers
  // once its outcome is known.
  caf::replies_to<join_atom, join_request>::with<session_state>,
  // Cancels the current join. Answers only when certain: `cancelled` (never
  // matched) or `matched` (too late); `failed` when neither could be
  // established within its bounds. `not_found` when idle (no join).
  // Idempotent: after the join ended it answers the final state.
  caf::replies_to<cancel_atom>::with<session_state>,
  // The current state.
  caf::replies_to<state_atom>::with<session_state>,
  // A committed match (from the outbox relay; at least once, deduped here).
  caf::reacts_to<deliver_atom, match_event>,
  // (session, reason): ends the user's match session `session` (either
  // member may). Idempotent: every end of one session answers its one final
  // state. `forbidden` for a session the user is not a member of,
  // `not_found` for an unknown one, `shutting_down` on an engine without a
  // lifecycle actor.
  caf::replies_to<end_atom, std::string, std::string>::with<end_result>,
  // (session, reason): the user leaves its group session `session` (the
  // others play on while enough stay). Idempotent. Refusals as for end.
  caf::replies_to<leave_atom, std::string, std::string>::with<leave_result>,
  // (gen, sent_ns, answer): a heartbeat re-scan of the broker's that
  // changed something for the waiting ticket of state generation `gen`,
  // sent at `sent_ns` on the actor clock (queue_broker_actor's watch).
  caf::reacts_to<rescan_atom, uint64_t, int64_t, claim_result>,
  // (held): the sender holds a connection of the user open (true) or no
  // longer (false). A held session is never released when idle and needs
  // no request or timer to stay; from false on, its quiet time counts
  // again. The session monitors the holder: one that dies lets go. The
  // last holder counts. Idempotent.
  caf::reacts_to<pin_atom, bool>,
  // Timers: the grace time after a heartbeat answered gone, the join's
  // give_up_after_s (by join number), the idle release (a session that is
  // not live and had no request for its idle_release_ms stops; otherwise
  // nothing happens), the next look at a cancel whose owner node could
  // not be asked, and the retry of a claim or cancel the queue store did
  // not answer (both by state generation).
  caf::reacts_to<grace_atom, uint64_t>, caf::reacts_to<give_up_atom, uint64_t>,
  caf::reacts_to<release_atom>, caf::reacts_to<settle_atom, uint64_t>,
  caf::reacts_to<retry_atom, uint64_t>>;

/// Commits claimed pairs (actors/finalizer.hpp).
using finalizer_actor = caf::typed_actor<
  // Claimer -> finalizer. Answers `committed`, or, once the pair is undone
  // in the queue, `retry`, `cancelled` or `refused` (finalize_outcome);
  // never an error. Idempotent per (claimer ticket, claimed ticket).
  caf::replies_to<finalize_atom, claim_pair>::with<finalize_result>,
  // A mutual like -> its one match (session, members, mutual_matches row,
  // match.created), in the same group commits. Idempotent per unordered
  // pair: a pair matched before answers that session (detail "existing").
  // `conflict` when a side is in another active session,
  // `store_unavailable` once the pair's attempts are spent.
  caf::replies_to<finalize_atom, mutual_pair>::with<finalize_result>,
  // A cancel of a claimed ticket; answered once the pair is decided (see
  // cancel_verdict). `store_unavailable` when the database had to decide
  // and could not: the cancel is still registered, ask again. Idempotent.
  caf::replies_to<cancel_atom, inflight_cancel>::with<cancel_verdict>,
  // Timer: flushes the current group commit batch.
  caf::reacts_to<tick_atom>,
  // Timer: an in-flight cancel whose pair did not reach this finalizer
  // within `cancel_wait_ms` is answered from the database (matched, or
  // honoured: the registered cancel refuses the pair if it comes later).
  caf::reacts_to<grace_atom, std::string>>;

/// One party (actors/party.hpp); the hub hands it its members' requests.
using party_actor = caf::typed_actor<
  // (user, code): the user joins the open party. Idempotent per member.
  caf::replies_to<join_atom, std::string, std::string>::with<party_info>,
  // (user): the member leaves (a live ticket is cancelled first, truthfully:
  // a match that commits meanwhile is kept). Idempotent.
  caf::replies_to<leave_atom, std::string>::with<party_info>,
  // The leader queues the party. Idempotent per (queue, ticket).
  caf::replies_to<join_atom, party_queue_request>::with<party_info>,
  // (user): a member cancels the party's ticket; answers once certain
  // (open: cancelled; matched: too late). Idempotent.
  caf::replies_to<cancel_atom, std::string>::with<party_info>,
  // (user): the party as a member sees it (`forbidden` for others).
  caf::replies_to<state_atom, std::string>::with<party_info>,
  // A member's match event (match.created, session.ended): the party
  // learns it matched, or that its session ended. Idempotent.
  caf::reacts_to<deliver_atom, match_event>,
  // Timers by state generation: the re-scan (heartbeat), a store retry,
  // the ticket's give-up time; the idle release of an open party.
  caf::reacts_to<tick_atom, uint64_t>, caf::reacts_to<retry_atom, uint64_t>,
  caf::reacts_to<give_up_atom, uint64_t>, caf::reacts_to<release_atom>>;

/// Creates parties and routes their members' requests (actors/party_hub.hpp).
/// Every request names the acting user, who must be the party's member
/// (`forbidden`), and an existing party (`not_found`).
using party_hub_actor = caf::typed_actor<
  // (user): a new party led by `user`; `in_party` when the user is in one,
  // `duplicate_ticket` while the user's own join is live. Not idempotent.
  caf::replies_to<create_atom, std::string>::with<party_info>,
  // (user, party, code): joins with the invite code (`forbidden` for a
  // wrong one, `in_party` when in another party). Idempotent.
  caf::replies_to<join_atom, std::string, std::string,
                  std::string>::with<party_info>,
  // (user, party): leaves. Idempotent.
  caf::replies_to<leave_atom, std::string, std::string>::with<party_info>,
  // The leader queues the party (`party` '': a party of one for this
  // ticket, which ends with it).
  caf::replies_to<join_atom, party_queue_request>::with<party_info>,
  // (user, party): cancels the party's ticket, as party_actor's.
  caf::replies_to<cancel_atom, std::string, std::string>::with<party_info>,
  // (user, party): the party's state.
  caf::replies_to<state_atom, std::string, std::string>::with<party_info>,
  // (party, event): a member's session passes on a match event.
  caf::reacts_to<deliver_atom, std::string, match_event>,
  // A call for a party of this node that came through the gateway (from a
  // member on another node); answers as the call of the same kind above.
  caf::replies_to<party_atom, party_call>::with<party_info>,
  // A member answers a proposal (the ready check, docs/groups.md), as the
  // broker's `answer_atom`; the node holding it is told. Idempotent.
  caf::replies_to<answer_atom, proposal_answer>::with<proposal_state>>;

/// Routes between the nodes of a cluster (actors/node_gateway.hpp). One per
/// node; published by the io middleman (over mutual TLS), so every message
/// below can come from a peer node (all their types are in the block
/// above): those marked "from this node" are ignored when they come from
/// another node or carry no sender.
using node_gateway_actor = caf::typed_actor<
  // Directory -> gateway (from this node): (user, event) for a user without
  // a session on this node: delivered to the user's session on the node it
  // registered on. All counts zero: the user is connected nowhere (the
  // directory keeps the event). `failed`: the user's node is live but could
  // not be reached. Idempotent per event id at the receiving session.
  caf::replies_to<route_atom, std::string, match_event>::with<delivery_report>,
  // Peer -> gateway: (user, event) to the user's session on THIS node, or
  // kept for it here, once the database confirms the event's session with
  // `user` in it (else all counts zero, nothing delivered; `failed` when the
  // database cannot answer). Never routed further. Idempotent per event id.
  caf::replies_to<deliver_atom, std::string,
                  match_event>::with<delivery_report>,
  // Session or peer -> gateway: (node, cancel) to the finalizer of `node`
  // (the node that owns the claimed pair). Idempotent.
  caf::replies_to<cancel_atom, std::string,
                  inflight_cancel>::with<cancel_verdict>,
  // Directory -> gateway (from this node): a session of `user` started /
  // ended on this node (the shared user -> node map; the reconnect replay).
  // Idempotent.
  caf::reacts_to<register_atom, std::string>,
  caf::reacts_to<unregister_atom, std::string>,
  // Peer -> gateway: the sender is the gateway of node `node`. Idempotent.
  caf::reacts_to<hello_atom, std::string>,
  // Host -> gateway (from this node): `gateway` (a node_gateway_actor) is
  // the gateway of node `node`, for hosts and tests that connect nodes
  // themselves. Idempotent.
  caf::reacts_to<peer_atom, std::string, caf::actor>,
  // The peers as this gateway sees them, by node id.
  caf::replies_to<peers_atom>::with<std::vector<peer_info>>,
  // (node, call) for party `call.party`: from this node's party hub, to
  // the gateway of `node`, which holds it (bounded by
  // `forward_timeout_ms`; `store_unavailable` when it cannot be reached,
  // `not_found` when it is not a live node); from a peer, to this node's
  // hub (a `deliver` only once the database confirms its event). As the
  // hub's call of the same kind is idempotent.
  caf::replies_to<party_atom, std::string, party_call>::with<party_info>,
  // Host -> gateway (from this node): the party hub that takes the peers'
  // party calls. Idempotent.
  caf::reacts_to<attach_atom, party_hub_actor>,
  // Peer -> gateway: this node's console counters (JSON text, "{}" when it
  // keeps none). Idempotent, reads only.
  caf::replies_to<stats_atom>::with<std::string>,
  // Host -> gateway (from this node): the console counters of this node
  // and of every live peer, each peer bounded by `forward_timeout_ms`, as
  // JSON text {"node": this, "nodes": [{"node", "stats" | "error"}...]}.
  // Idempotent, reads only.
  caf::replies_to<stats_atom, peers_atom>::with<std::string>>;

/// Maps users to their session actors on this node (actors/directory.hpp).
using directory_actor = caf::typed_actor<
  // Idempotent.
  caf::reacts_to<register_atom, std::string, session_actor>,
  // Only removes the entry if it still points to that actor. Idempotent.
  caf::reacts_to<unregister_atom, std::string, session_actor>,
  // Delivers to both users' sessions: here, or through the gateway on the
  // user's node; kept here for a user connected nowhere (or whose node is
  // unreachable). Answers what became of it. Idempotent per event id at the
  // receiving sessions.
  caf::replies_to<deliver_atom, match_event>::with<delivery_report>,
  // The same for a relay's batch: one report per event, in order.
  caf::replies_to<deliver_atom,
                  std::vector<match_event>>::with<std::vector<delivery_report>>,
  // (user, event): delivers to that user's session HERE only, or keeps it
  // for the user (never routed). Idempotent per event id.
  caf::replies_to<deliver_atom, std::string,
                  match_event>::with<delivery_report>,
  // Routes users without a session here through `gateway` from now on (an
  // invalid handle: routing off). Idempotent.
  caf::reacts_to<attach_atom, node_gateway_actor>,
  // Timer: drops kept events past their time. Idempotent.
  caf::reacts_to<tick_atom>>;

/// Delivers committed outbox events (actors/outbox_relay.hpp).
using outbox_relay_actor = caf::typed_actor<
  // Timer / wake-up: fetch and deliver what is pending.
  caf::reacts_to<tick_atom>,
  // Events this node's finalizer committed with a lease of this relay's
  // (finalizer_config::push_lease_ms): delivered at once, without a fetch;
  // what does not get through is fetched again once the lease lapsed.
  // Local only. Idempotent (at least once, deduped by event id).
  caf::reacts_to<deliver_atom, std::vector<match_event>>,
  // Delivers everything pending now (fetched and pushed); answers how many
  // events it delivered.
  caf::replies_to<flush_atom>::with<uint32_t>>;

/// Commits claimed groups (actors/group_finalizer.hpp).
using group_finalizer_actor = caf::typed_actor<
  // Claimer -> group finalizer: commits the group as one session with the
  // cancel checkpoints, then releases it in the queue; or undoes it there
  // (tickets back at their places, cancelled and busy ones removed). Never
  // an error. Idempotent per group (a committed one answers its session).
  caf::replies_to<finalize_atom, group_commit>::with<group_verdict>>;

/// Holds proposals (actors/ready_check.hpp): a group_finalizer_actor whose
/// groups with `accept_ms` are first proposed to their members.
using ready_check_actor = group_finalizer_actor::extend<
  // (queue, group): a member answered here: look at it now. Idempotent.
  caf::reacts_to<answer_atom, group_ref>,
  // To itself: asks about the answered ones gathered since the first.
  caf::reacts_to<answer_atom>,
  // Timer: looks at every open proposal.
  caf::reacts_to<tick_atom>>;

/// Backfill (actors/backfill.hpp): a group session's requests for players.
using backfill_actor = caf::typed_actor<
  // A member (or the host, user '') asks for players for the session's
  // open seats; answers the request. Idempotent (a session has one
  // request). `not_found` (no such session, or it ended), `forbidden` (not
  // an active member), `invalid_argument` (a pair's session, or a queue
  // without backfill).
  caf::replies_to<backfill_atom, backfill_ask>::with<backfill_info>,
  // (session, queue) from this node: the session started short or a
  // member left; asked for when the queue's backfill is `auto`. (session,
  // ''): the session ended; its request ends.
  caf::reacts_to<backfill_atom, std::string, std::string>,
  // Timer: re-scans every request (presence, and its fill).
  caf::reacts_to<tick_atom>>;

/// Serializes work per unordered pair of users (actors/pair_lock.hpp).
using pair_lock_actor = caf::typed_actor<
  // (a, b): waits, bounded, for the lock of {a, b}; answers the lock token.
  // The requester holds it: if it dies, the lock is released. Fails with
  // `conflict` when the wait bound passes (also while the queue store
  // fails), `invalid_argument` for a == b or a malformed id. Not
  // idempotent.
  caf::replies_to<acquire_atom, std::string, std::string>::with<std::string>,
  // (a, b, token): releases; a stale token releases nothing. Idempotent.
  caf::reacts_to<release_atom, std::string, std::string, std::string>,
  // Timers: wait bounds and lease bounds.
  caf::reacts_to<tick_atom, std::string, uint64_t>>;

/// The session lifecycle (actors/lifecycle.hpp): ends sessions, expires
/// old ones, prunes the database, answers whether a user is in a session.
using lifecycle_actor = caf::typed_actor<
  // (session, user, reason): `user` ends the session; one transaction frees
  // both members and writes the `session.ended` event. Idempotent: a second
  // end (by either member) answers the same final state. `forbidden` for a
  // non-member, `not_found` for an unknown session, `store_unavailable`
  // when the database did not answer (the end may have committed: ask
  // again).
  caf::replies_to<end_atom, std::string, std::string,
                  std::string>::with<end_result>,
  // (session, user, reason): a member leaves a group session (free at
  // once; the session ends when fewer than its min_players stay; a pair's
  // leave ends the pair). Idempotent. Refusals as for `end_atom`.
  caf::replies_to<leave_atom, std::string, std::string,
                  std::string>::with<leave_result>,
  // (user): the user's active session id, "" when the user is free;
  // `store_unavailable` when the database did not answer. Idempotent.
  caf::replies_to<state_atom, std::string>::with<std::string>,
  // Timer (and tests): end expired sessions, prune old rows.
  caf::reacts_to<tick_atom>>;

/// Mutual-like matching (actors/swipe.hpp).
using swipe_actor = caf::typed_actor<
  // Records the swipe and, when it completes a mutual like, creates the
  // pair's one match, all under the pair's lock. Fails with
  // `invalid_argument` (self-swipe, malformed id) or `conflict` (the lock
  // could not be had within the wait bound: retry), writing nothing; with
  // the database's failure (`store_unavailable`, or the finalizer's
  // `conflict`) after the swipe may have been recorded: retry. Idempotent:
  // the same swipe again changes nothing.
  caf::replies_to<swipe_atom, swipe_request>::with<swipe_result>>;

/// The API side of one user inside matchd (app/matchd/client_link.hpp):
/// subscriber of the user's session and forwarder of its events to the
/// user's WebSockets.
using client_link_actor = caf::typed_actor<
  // From the user's session: state changes and match events.
  caf::reacts_to<session_state>, caf::reacts_to<match_event>,
  // Joins through the session; remembers the client's ticket id. Idempotent
  // per ticket (the session is).
  caf::replies_to<join_atom, join_request>::with<session_state>,
  // (ticket): the state of the user's current or last join; `not_found` for
  // another ticket.
  caf::replies_to<state_atom, std::string>::with<session_state>,
  // (): the state of the user's current or last join, whichever ticket (the
  // console's lookup). Changes nothing.
  caf::replies_to<state_atom>::with<session_state>,
  // (ticket, reason): cancels; answers when certain. The reason goes into
  // the WebSocket notice ("" for a client's own cancel). Idempotent.
  caf::replies_to<cancel_atom, std::string, std::string>::with<session_state>,
  // Drain: cancels the live join, if any, with reason "shutting_down";
  // answers true once its outcome is certain. Idempotent.
  caf::replies_to<flush_atom>::with<bool>,
  // (session, reason): ends the user's match session through its session
  // actor. Idempotent (one final state per session).
  caf::replies_to<end_atom, std::string, std::string>::with<end_result>,
  // (session, reason): the user leaves its group session. Idempotent.
  caf::replies_to<leave_atom, std::string, std::string>::with<leave_result>,
  // Timer: presence check (armed only while a join is live and no
  // WebSocket of the user is open).
  caf::reacts_to<tick_atom>,
  // A WebSocket of the user opened (from matchd's bridge): the link holds
  // the user's session (session_actor's pin_atom) while one is open, so
  // that it is not released when idle. Answers true. Idempotent.
  caf::replies_to<attach_atom>::with<bool>,
  // A WebSocket of the user closed (from matchd's bridge): with none left
  // the link lets go of the session, and with a live join the presence
  // check starts. Idempotent.
  caf::reacts_to<detach_atom>>;

/// Registers every type of the block and the error category with `cfg`.
/// Call it on EVERY node before the actor system starts. Idempotent.
void register_types(caf::actor_system_config& cfg);

/// Turns a store-layer failure into a CAF error of category "mm".
caf::error to_error(const failure& f);

/// True for `store_unavailable` and for a request that timed out: the
/// store command may have run, so what it did is read again rather than
/// reported as failed (sessions, parties). Idempotent (a pure function).
bool store_trouble(const caf::error& err);

} // namespace mm
