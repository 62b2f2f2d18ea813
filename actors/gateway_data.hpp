#pragma once

// The node gateway's state and the steps its files share
// (actors/node_gateway.cpp holds the behaviour, store access, peers and
// membership; actors/node_gateway_routing.cpp the routing of events and
// cancels and the checks of what peers send). Internal: include only from
// those two.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/gateway_store.hpp"
#include "actors/node_gateway.hpp"
#include "actors/peer_link.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "persistence/queue/queue_store.hpp"

namespace spdlog {
class logger;
} // namespace spdlog

namespace mm::gateway_detail {

/// The gateway's logger ("gateway").
std::shared_ptr<spdlog::logger> gw_log();

/// The gateway's own handle type: the public interface, its heartbeat timer
/// and its links' reports.
using gateway_impl_actor
  = node_gateway_actor::extend<caf::reacts_to<tick_atom>,
                               caf::reacts_to<link_report>>;

/// One peer node. Its connection is its link's (actors/peer_link.hpp):
///
///   unknown --membership / route / hello / peer_atom / static--> known
///      ^          (a link is spawned, monitored; calls go through it)  |
///      +--------- lapsed (not static): the link is dropped ------------+
///
/// A peer known only by a route's address hint is dropped at a heartbeat
/// that does not list it, unless its link is connected, connecting or busy
/// with a call.
struct peer_entry {
  std::string address; ///< host:port; empty when only a handle is known
  peer_link_actor link;
  link_phase phase = link_phase::idle; ///< as the link last reported it
  uint32_t calls = 0; ///< calls handed to the link, not answered yet
  bool static_peer = false;
  bool member = false; ///< live in the last membership answer
  /// The CAF node id of the handle its link holds ('' none): messages
  /// that must come from this node are checked against it.
  std::string peer_id;
};

struct queue_op {
  script_call call;
  std::function<void(const store_reply&)> done;
};

struct match_op {
  gw_lookup lookup;
  std::function<void(outcome<std::optional<match_record>>&)> done;
};

struct gateway_state {
  std::string node;
  std::string address; ///< ours, advertised
  cluster_config cfg;
  gateway_links links;
  std::shared_ptr<queue_store> queue_inline; ///< non-blocking queue store
  queue_worker_actor queue_worker;           ///< blocking queue store
  std::vector<queue_op> queue_pending;
  bool queue_busy = false;
  std::shared_ptr<match_store> match_inline; ///< non-blocking match store
  match_worker_actor match_worker;           ///< blocking match store
  std::vector<match_op> match_pending;
  bool match_busy = false;
  std::map<std::string, peer_entry> peers; ///< by node id
  /// Users whose sessions registered here (mapped to this node in
  /// mm:{cluster}:users): written again when a beat finds this node's
  /// record gone. As many as the node's live sessions.
  std::set<std::string> mapped;
  bool beat_failing = false;
  uint64_t refused = 0; ///< peer messages refused (logged sparsely)
  party_hub_actor hub;  ///< takes the peers' party calls (attach_atom)
  static inline const char* name = "node_gateway";
};

using gw_ptr = gateway_impl_actor::stateful_pointer<gateway_state>;

/// The string fields of a script reply, or why there are none.
outcome<std::vector<std::string>> fields_of(const store_reply& r);

/// Queues a call for the queue store (one pipeline per round).
void call_queue(gw_ptr self, script_call call,
                std::function<void(const store_reply&)> done);

/// Runs what is queued for the match store (`match_pending`).
void pump_matches(gw_ptr self);

/// One heartbeat: records ours, learns the live members, forgets the peers
/// that lapsed; then runs `then` (may be empty).
void beat(gw_ptr self, std::function<void()> then);

/// True when `p` counts as a live node.
bool live(const gateway_state& st, const peer_entry& p);

/// The entry of `node`; a new one gets its link.
peer_entry& peer(gw_ptr self, const std::string& node);

/// Records where the gateway of a peer is published, and tells its link.
void locate(gw_ptr self, peer_entry& p, const std::string& address);

/// An event for `user`, routed by the user map's answer (`node`, its
/// `address`, whether it is a `member`): to the node's link, or answered
/// at once (no node known: `unrouted`; ours or gone: nothing to do).
void route_to(gw_ptr self, caf::typed_response_promise<delivery_report> rp,
              std::string user, std::shared_ptr<match_event> ev,
              const std::string& node, const std::string& address, bool member);

/// Hands the user's active match (if any) to the directory: a session that
/// starts here gets the match it may have missed elsewhere.
void replay(gw_ptr self, const std::string& user);

/// True when the current message comes from an actor of this node (a
/// message from another node, or without a sender, is not).
bool from_here(gw_ptr self);

/// Logs a refused peer message: the first, then every power of two.
void refuse(gw_ptr self, const std::string& what);

/// A peer's (user, event) sent by `src`: to the directory once the
/// database confirms the session and the user's part in it (a
/// `party.updated`: once `src` is the gateway of the party's node);
/// refused (all counts zero, nothing delivered) otherwise; `failed = 1`
/// when the database cannot answer (the sending relay tries again). (The
/// sender is read before the response promise is made: making it takes
/// the sender out of the current message.)
void deliver_checked(gw_ptr self,
                     caf::typed_response_promise<delivery_report> rp,
                     const caf::strong_actor_ptr& src, std::string user,
                     std::shared_ptr<match_event> ev);

/// A party call (`party_atom, node, call`): from this node's hub (`local`)
/// to the gateway of `node`, or from a peer to this node's hub
/// (docs/groups.md, "Parties across nodes").
void party_call_for(gw_ptr self, caf::typed_response_promise<party_info> rp,
                    bool local, const std::string& node, party_call c);

/// Asks the finalizer of `node` (a live peer) for a verdict.
void cancel_at_peer(gw_ptr self, caf::typed_response_promise<cancel_verdict> rp,
                    const std::string& node, inflight_cancel c);

/// The console counters of this node and of every live peer, as JSON text
/// (`stats_atom, peers_atom`; docs/console.md, "The cluster").
void cluster_stats(gw_ptr self, caf::typed_response_promise<std::string> rp);

} // namespace mm::gateway_detail
