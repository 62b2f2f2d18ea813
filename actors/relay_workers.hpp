#pragma once

// The detached workers of the outbox relay (actors/outbox_relay.cpp): one
// per blocking connection (the match store, the sink), running the relay's
// jobs one at a time, and the LISTEN worker that wakes the relay on commit
// notifications. Internal to the relay.

#include <functional>
#include <memory>

#include <caf/all.hpp>

#include "messages/type_ids.hpp"

namespace mm {

class match_store;
class match_store_factory;
class queue_store;

namespace relay_detail {

/// Work for a detached worker that owns one blocking connection: the closure
/// writes its results into state it captured, the relay continues once the
/// job comes back.
template <class Store>
struct store_job {
  std::function<void(Store&)> work;
};

using match_job_ptr = std::shared_ptr<store_job<match_store>>;
using sink_job_ptr = std::shared_ptr<store_job<queue_store>>;

} // namespace relay_detail

} // namespace mm

// Jobs carry closures, never serialized: they go to this node's workers
// only.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mm::relay_detail::match_job_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mm::relay_detail::sink_job_ptr)

namespace mm::relay_detail {

/// A detached worker that owns one blocking connection (the match store or
/// the sink). Local only (the job carries a closure), so it needs no type ID.
template <class Store>
using store_worker_actor = caf::typed_actor<
  // Runs the job's closure on the connection and answers the same job, its
  // results written where the closure put them. A job sent twice runs twice.
  typename caf::replies_to<std::shared_ptr<store_job<Store>>>::template with<
    std::shared_ptr<store_job<Store>>>>;

using match_worker_actor = store_worker_actor<match_store>;
using sink_worker_actor = store_worker_actor<queue_store>;

/// A detached worker that blocks on the match store's event notifications
/// and wakes the relay; nobody but itself sends it anything.
using listen_worker_actor = caf::typed_actor<
  // One wait of at most `wait_ms`; ticks the relay when notified, then
  // sends itself the next tick.
  caf::reacts_to<tick_atom>>;

/// Runs every job it gets on `store`, one at a time (spawn it detached).
template <class Store>
typename store_worker_actor<Store>::behavior_type
store_worker(typename store_worker_actor<Store>::pointer,
             std::shared_ptr<Store> store) {
  return {
    [store](std::shared_ptr<store_job<Store>>& job) {
      job->work(*store);
      return job;
    },
  };
}

/// Blocks in `wait_for_events` (at most `wait_ms`) round after round, one
/// message per round (so an exit from the linked relay ends it within one
/// wait), and ticks `relay` on every notification. Opens its own
/// connection from `factory` (spawn it detached).
listen_worker_actor::behavior_type
listen_worker(listen_worker_actor::pointer self,
              std::shared_ptr<match_store_factory> factory,
              outbox_relay_actor relay, uint32_t wait_ms);

} // namespace mm::relay_detail
