#pragma once

// Backfill (problem 16 of docs/design.md, docs/groups.md "Backfill"): a
// group session with open seats asks the queue for players. Its request is
// a ticket of the queue ('~' + the session id, lua/lib/groups.lua) that
// holds the session's active members with their teams; the claim fills its
// seats with compatible waiting tickets, and the group finalizer adds them
// to the session in one transaction (match_store::add_members), which tells
// every member `session.members_changed`. This actor keeps the requests
// this node made: it files each, re-scans it every heartbeat (its presence,
// and its own fill), reads the session again every few heartbeats, and
// ends the request when the session ended or has no seat left.

#include <cstdint>
#include <memory>
#include <string>

#include "core/metrics.hpp"
#include "core/rules.hpp"
#include "messages/type_ids.hpp"

namespace mm {

class match_store_factory;

/// Settings of the backfill actor.
struct backfill_config {
  std::string node = "node-1";  ///< the requests' claimer
  uint32_t ttl_ms = 30000;      ///< a request's presence window in the queue
  uint32_t heartbeat_ms = 5000; ///< re-scan period (below ttl_ms)
  /// A waiting request's session is read again every this many heartbeats
  /// (the session ended or filled up elsewhere: the request ends).
  uint32_t read_every = 3;
  uint32_t request_timeout_ms = 10000; ///< bound of a broker call
  /// The most requests one node keeps (one per session); more are refused
  /// (`conflict`).
  size_t max_requests = 100000;
  /// The queues' shapes (`backfill`) and rules.
  std::shared_ptr<const rule_book> rules;
  std::shared_ptr<engine_metrics> metrics; ///< may be null
};

/// Spawns the backfill actor (interface `backfill_actor`,
/// messages/type_ids.hpp). Reads sessions through its own connection of
/// `store` (a detached worker when the store blocks); claims through
/// `broker`; commits the fills its own claims make through `finalizer`.
/// Not idempotent: every call spawns an actor.
backfill_actor spawn_backfill(caf::actor_system& sys,
                              std::shared_ptr<match_store_factory> store,
                              queue_broker_actor broker,
                              group_finalizer_actor finalizer,
                              backfill_config cfg);

} // namespace mm
