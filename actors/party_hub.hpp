#pragma once

// The party hub (docs/groups.md, "Parties"): makes parties and hands each
// member's request to its party. One per engine; the parties live on the
// node that made them.

#include "actors/party.hpp"
#include "messages/type_ids.hpp"

namespace mm {

/// Spawns the hub. `create` makes a party (an id and an invite code of 10
/// characters from the system's random source) led by the caller; a queue
/// request without a party makes a party of one that ends with its ticket.
/// Requests for a party this node does not hold answer `not_found`. The
/// hub watches its parties and forgets the ones that close. Not
/// idempotent: every call spawns a hub.
party_hub_actor spawn_party_hub(caf::actor_system& sys, party_links links,
                                party_config cfg);

} // namespace mm
