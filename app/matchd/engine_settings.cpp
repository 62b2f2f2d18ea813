// matchd's options as the engine's settings (engine_settings.hpp).

#include "app/matchd/engine_settings.hpp"

#include "actors/engine.hpp"
#include "app/matchd/matchd_config.hpp"

namespace mm {

void engine_settings_of(const matchd_config& mc, engine_config& ec) {
  ec.node = mc.node;
  ec.session.ttl_ms = mc.ticket_ttl_ms;
  ec.session.heartbeat_ms = mc.heartbeat_ms;
  // Heartbeats batched (docs/matchd.md); a coarser grid (250 ms) made the
  // joins that land in a burst wait longer (docs/benchmarks.md).
  ec.session.heartbeat_align_ms = 100;
  ec.broker.rescan_batch = mc.rescan_batch;
  ec.session.idle_release_ms = mc.idle_release_ms;
  ec.directory.parked_ttl_ms = mc.parked_ttl_ms;
  ec.lifecycle.max_session_s = mc.max_session_s;
  ec.lifecycle.retention_s = mc.retention_s;
  ec.lifecycle.partition_s = mc.outbox_partition_s;
  // Declared queues are the broker's allow-list; open mode ('*') is its
  // empty list, bounded by max_queues.
  if (!mc.open_queues)
    ec.broker.queues = mc.queues;
  ec.broker.max_queues = mc.max_queues;
  ec.rules = mc.rules;
  ec.broker.queue_idle_ms = mc.queue_idle_ms;
  ec.relay.stream_maxlen = mc.stream_maxlen;
  ec.relay.lease_ms = mc.outbox_lease_ms;
  ec.broker.workers = mc.redis_workers;
  ec.finalizer.workers = mc.pg_workers;
  ec.worker_timeout_ms = mc.worker_timeout_ms;
}

} // namespace mm
