#pragma once

// The link from a node's gateway to one peer node's gateway: one small actor
// per known peer that owns the connection (lazy `remote_actor`, reconnect
// back-off, calls waiting for it). Private to actors/node_gateway.cpp.

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

#include "actors/cluster_config.hpp"
#include "messages/type_ids.hpp"

namespace mm {

/// Where a peer link stands (the diagram is in actors/peer_link.cpp).
enum class link_phase : uint8_t {
  idle,       ///< no connection; the next call connects
  connecting, ///< a connector is at work; calls wait for it
  backoff,    ///< the last attempt failed; calls fail fast until it ends
  connected,  ///< holds the peer gateway's handle (monitored)
};

/// Link -> gateway: the link to peer `node` is now in `phase` (sent again
/// when the handle changes). Local only:
/// not in the type-ID block, so no peer can send it.
struct link_report {
  std::string node;
  link_phase phase = link_phase::idle;
  /// The CAF node id (to_string) of the peer's gateway handle held now, ''
  /// none: what a message from that node carries as its sender's node.
  std::string peer_id;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, link_report& x) {
  return f(caf::meta::type_name("link_report"), x.node, x.phase, x.peer_id);
}

/// Gateway -> link: the peer's gateway is published at `address`
/// ("host:port") now. Local only.
struct link_address {
  std::string address;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, link_address& x) {
  return f(caf::meta::type_name("link_address"), x.address);
}

/// What a link reports to: its gateway.
using link_owner_actor = caf::typed_actor<caf::reacts_to<link_report>>;

/// The link to one peer. Every message comes from its gateway (the timer
/// from itself); none crosses nodes.
using peer_link_actor = caf::typed_actor<
  // (user, event) for the peer's gateway: its report; `failed = 1` when the
  // peer cannot be reached (no connection within `forward_timeout_ms`, a
  // back-off, no address, no `auto_connect`) or does not answer within
  // `forward_timeout_ms`. Idempotent per event id at the receiving session.
  caf::replies_to<deliver_atom, std::string,
                  match_event>::with<delivery_report>,
  // (node, cancel) for the finalizer of the peer `node`: its verdict
  // (bounded by `cancel_timeout_ms`); `store_unavailable` when the peer
  // cannot be reached. Idempotent.
  caf::replies_to<cancel_atom, std::string,
                  inflight_cancel>::with<cancel_verdict>,
  // (node, call) for the party hub of the peer `node`: its answer (bounded
  // by `forward_timeout_ms`); `store_unavailable` when the peer cannot be
  // reached. As idempotent as the call.
  caf::replies_to<party_atom, std::string, party_call>::with<party_info>,
  // The peer's console counters (JSON text), bounded by
  // `forward_timeout_ms`; `store_unavailable` when the peer cannot be
  // reached. Reads only.
  caf::replies_to<stats_atom>::with<std::string>,
  // The peer greeted us from this handle: kept unless one is held already.
  // Idempotent.
  caf::reacts_to<hello_atom, node_gateway_actor>,
  // The host introduced this handle: replaces any other, greeted in the
  // gateway's name. Idempotent.
  caf::reacts_to<peer_atom, node_gateway_actor>,
  // Where to connect next time. Idempotent.
  caf::reacts_to<link_address>,
  // Timer: the bound of call `id` waiting for a connection.
  caf::reacts_to<tick_atom, uint64_t>>;

/// Spawns the link of gateway `owner` (of node `self_node`) to peer `node`,
/// published at `address` (may be empty: known by its handle only). It
/// reports every change of its phase to `owner` (`link_report`), greets
/// every handle it connects to or is introduced to in `owner`'s name
/// (`hello_atom, self_node`), and quits when `owner` goes down. An exit
/// message answers the calls waiting for a connection as unreachable and
/// ends the link once its calls in flight are answered. Connections are
/// made by a one-shot detached connector (`remote_actor` blocks): the
/// system must have loaded the io middleman when `cfg.auto_connect`. Not
/// idempotent: every call spawns a new link.
peer_link_actor spawn_peer_link(caf::actor_system& sys, link_owner_actor owner,
                                std::string self_node, std::string node,
                                std::string address, const cluster_config& cfg);

} // namespace mm
