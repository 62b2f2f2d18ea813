#pragma once

// The queue store on a Redis Cluster (internal to persistence/queue; users
// call make_redis_store with redis_options::cluster).

#include <memory>

#include "persistence/queue/queue_store.hpp"
#include "persistence/queue/redis_link.hpp"

namespace mm {

/// A factory whose stores route every call to the primary of its first
/// key's slot: one link per primary, the calls of a batch pipelined per
/// primary, MOVED (the map is read again) and ASK (ASKING + the call) followed,
/// a failed-over primary's slots retried until the new primary answers or
/// `failover_wait_ms` passes. Thread-safe; each store is used by one thread.
/// Never fails: a store without a slot map reads it again on first use.
std::shared_ptr<queue_store_factory>
make_redis_cluster_store(redis_options opts);

/// probe_redis for a cluster: AUTH and a complete slot map from a seed
/// (`host:port`, then `seeds`, in order). The first seed with a complete map
/// answers its primaries (`protocol_error` when it has no FUNCTION);
/// `store_auth_failed` as soon as a seed refuses the credentials; else the
/// last seed's failure (`store_unavailable`, or `protocol_error` for an
/// incomplete map). Idempotent; opens and closes its own connections.
outcome<redis_probe> probe_redis_cluster(const redis_options& opts);

/// The link settings of `o` for the node `host:port`: timeouts, attempts
/// and credentials (redis_queue_store.cpp).
redis_link_options link_options(const redis_options& o, std::string host,
                                uint16_t port);

} // namespace mm
