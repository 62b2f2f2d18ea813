#pragma once

// The API side of one user inside matchd: subscriber of the user's session,
// forwarder of its events to the user's WebSockets (through the hub), and
// the user's presence check. Its interface, `client_link_actor`, lives in
// messages/type_ids.hpp beside the engine's.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "messages/type_ids.hpp"

namespace mm {

class console_stats;
class engine;
class hub;
class match_tracer;

struct client_link_config {
  /// A waiting user without an open WebSocket and without a request for
  /// this long is cancelled ("client_gone"). 0 turns the check off.
  uint32_t client_ttl_ms = 30000;
  /// Where the link counts its user's joins, matches and time to match
  /// for the web console (docs/console.md); may be null.
  std::shared_ptr<console_stats> stats;
  /// Traces of the user's matches (--otlp-endpoint); may be null.
  std::shared_ptr<match_tracer> tracer;
};

/// Spawns the link of `user` and its session (engine::session). While a
/// WebSocket of the user is open (`events->connected`) the link keeps the
/// session from its idle release (session_config::idle_release_ms); once
/// the session is released anyway, the link stops too, unless a WebSocket
/// or a request of the user is there: then it takes a fresh session
/// (engine::renew_session), as it does for a request that finds its
/// session gone. Not idempotent: one link per user is the caller's job.
client_link_actor spawn_client_link(caf::actor_system& sys, std::string user,
                                    std::shared_ptr<engine> eng,
                                    std::shared_ptr<hub> events,
                                    client_link_config cfg);

/// The WebSocket text of a match event: match.created, or session.ended
/// with `ended_by` and `reason` from the event's payload.
std::string event_json(const match_event& ev);

} // namespace mm
