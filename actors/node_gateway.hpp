#pragma once

// The node gateway: one per node. Routes match events to users whose session
// lives on another node, routes in-flight cancels to the finalizer of the
// node that owns the claimed pair, keeps the cluster's membership, and
// replays a user's active match when its session registers. See
// docs/cluster.md.

#include <functional>
#include <memory>
#include <string>

#include "actors/cluster_config.hpp"
#include "messages/type_ids.hpp"

namespace mm {

class match_store_factory;
class party_registry;
class queue_store_factory;

/// The node-local actors a gateway hands work to.
struct gateway_links {
  directory_actor directory; ///< events for users on this node
  finalizer_actor finalizer; ///< in-flight cancels of pairs this node owns
  /// Who is in which party here: a `party.updated` from a party's node
  /// puts its member in that party here, or takes it out (may be null).
  std::shared_ptr<party_registry> parties;
  /// This node's console counters as JSON text (docs/console.md), for the
  /// peers' cluster pages; empty: "{}". Called on the gateway's thread.
  std::function<std::string()> stats;
};

/// Spawns the gateway of node `node` (interface in messages/type_ids.hpp).
///
/// - `route_atom, user, event` (from this node's directory, for a user
///   without a session here): looks up the user's node in the shared map
///   (`cluster_route.lua`: node, its address, whether its heartbeat is
///   current) and hands the event to that node's gateway (`deliver_atom,
///   user, event`), which gives it to its directory. Answers the peer's
///   `delivery_report`; all zero when the user is connected nowhere (no
///   entry, this node, or a node that is not live: not a static peer and
///   its membership lapsed); `failed = 1` when the node is live but could
///   not be reached within `forward_timeout_ms` (connection included), or
///   the map could not be read. Without a cluster: all zero, no I/O.
/// - `deliver_atom, user, event` (from a peer): checked against the match
///   store (`find_session(event.session_id)` has `user` as a member and the
///   event id is the session's; a `match.created` is rebuilt from the
///   store, a `session.ended` needs the session closed), then delegated to
///   this node's directory (session here, or kept for the user). A refused
///   event answers all zero; a store that cannot answer, `failed = 1`.
/// - `cancel_atom, node, inflight_cancel` (from a session or a peer): to the
///   finalizer of `node` — this node's own (empty id or this node), a live
///   peer's (through its gateway, bounded by `cancel_timeout_ms`; an
///   unreachable one answers `store_unavailable`), or, when `node` is not
///   live (crashed: its pairs can no longer commit), this node's own
///   finalizer, which honours the cancel after its `cancel_wait_ms` as for
///   any pair that never reached it.
/// - `register_atom, user` / `unregister_atom, user` (from this node's
///   directory): with a cluster, records / compare-and-deletes `user ->
///   node` in the shared map (`cluster_user.lua`). With
///   `replay_on_register`, a registration then looks up the user's active
///   match (`active_session_of`) and hands its `match.created` event to the
///   directory (`deliver_atom, user, event`).
/// - `party_atom, node, call` (docs/groups.md, "Parties across nodes"):
///   from this node's party hub, to the gateway of `node`, the live peer
///   that holds the party (`not_found` when `node` is not live,
///   `store_unavailable` when it cannot be reached in time); from a peer,
///   to this node's party hub (attached with `attach_atom, hub`) when the
///   party is ours (`forbidden` otherwise), a `deliver` only once the
///   database has its event's session with the calling member in it.
/// - A `party.updated` event from a peer (`deliver_atom, user, event`) is
///   taken only from the node its party names, as its gateway's handle
///   (the link's) says, and keeps `links.parties` in step.
/// - `hello_atom, node` (from a peer that connected to us): its sender is
///   that node's gateway; kept (and monitored) unless one is known already.
/// - `peer_atom, node, gateway` (from the host): the handle of `node`'s
///   gateway; replaces any other, monitored, greeted with `hello_atom`.
///   `route_atom`, `register_atom`, `unregister_atom` and `peer_atom` are
///   taken from actors of this node only (sender on this node); from
///   another node, or without a sender, they are ignored (logged sparsely).
/// - `peers_atom`: the peers as seen now.
/// - `stats_atom` (from a peer): `links.stats()`; `stats_atom, peers_atom`
///   (from this node): this node's and every live peer's, each bounded by
///   `forward_timeout_ms` (an error named in its place).
///
/// Membership (with a cluster and `cfg.membership`): every `heartbeat_ms`
/// the gateway runs `cluster_beat.lua` (records this node's address with a
/// deadline of `member_ttl_ms` on the store's clock, drops lapsed records,
/// answers the live members) and forgets peers that were members and are
/// not anymore (their handles too). Static peers (`cfg.peers`) are never
/// forgotten. Every known peer has a link actor of its own
/// (actors/peer_link.hpp) that holds its connection: connections are lazy,
/// the first call for a peer without a handle connects (with
/// `cfg.auto_connect`) in a detached worker through
/// `sys.middleman().remote_actor<node_gateway_actor>`, or
/// `caf::openssl::remote_actor` with `cfg.tls()` — the actor system must
/// have loaded the io middleman (and the OpenSSL module for TLS:
/// `use_cluster_tls`, actors/cluster_tls.hpp);
/// a failure backs off for `reconnect_ms`; a peer whose handle goes down
/// (its node died, the connection dropped) is connected again on next use.
/// Every peer reached is greeted with `hello_atom`, so one connection serves
/// both directions.
///
/// Blocking stores (Redis, PostgreSQL) are used from detached workers, one
/// connection each, with concurrent requests pipelined into one round trip;
/// non-blocking ones (embedded, in-memory) inline, which keeps the gateway
/// deterministic under the CAF test coordinator. The first connections are
/// opened by this call: call it at start-up, not from inside an actor.
/// Stop it with an exit message (its workers and links follow). Publishing
/// is the caller's (the engine does it with `cfg.auto_connect`). Not
/// idempotent: every call spawns a new gateway.
node_gateway_actor
spawn_node_gateway(caf::actor_system& sys, std::string node, cluster_config cfg,
                   std::shared_ptr<queue_store_factory> queue,
                   std::shared_ptr<match_store_factory> matches,
                   gateway_links links);

} // namespace mm
