#pragma once

// The API side of one user inside matchd: subscriber of the user's session,
// forwarder of its events to the user's WebSockets (through the hub), and
// the user's presence check.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "messages/type_ids.hpp"

namespace mm {

class engine;
class hub;

using client_link_actor = caf::typed_actor<
  // From the user's session: state changes and match events.
  caf::reacts_to<session_state>, caf::reacts_to<match_event>,
  // Joins through the session; remembers the client's ticket id. Idempotent
  // per ticket (the session is).
  caf::replies_to<join_atom, join_request>::with<session_state>,
  // (ticket): the state of the user's current or last join; `not_found` for
  // another ticket. Idempotent.
  caf::replies_to<state_atom, std::string>::with<session_state>,
  // (ticket, reason): cancels; answers when certain. The reason goes into
  // the WebSocket notice ("" for a client's own cancel). Idempotent.
  caf::replies_to<cancel_atom, std::string, std::string>::with<session_state>,
  // Drain: cancels the live join, if any, with reason "shutting_down";
  // answers true once its outcome is certain. Idempotent.
  caf::replies_to<flush_atom>::with<bool>,
  // Timer: presence check.
  caf::reacts_to<tick_atom>>;

struct client_link_config {
  /// A waiting user without an open WebSocket and without a request for
  /// this long is cancelled ("client_gone"). 0 turns the check off.
  uint32_t client_ttl_ms = 30000;
};

/// Spawns the link of `user` and its session (engine::session). Not
/// idempotent: one link per user is the caller's job.
client_link_actor spawn_client_link(caf::actor_system& sys, std::string user,
                                    std::shared_ptr<engine> eng,
                                    std::shared_ptr<hub> events,
                                    client_link_config cfg);

/// The WebSocket text of a match event. Idempotent.
std::string event_json(const match_event& ev);

} // namespace mm
