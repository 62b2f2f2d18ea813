#pragma once

// The node gateway's store workers: detached actors that own one blocking
// connection each (Redis, PostgreSQL) and run the gateway's jobs. Private to
// actors/node_gateway.cpp.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/typed_actor.hpp>

#include "core/outcome.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm {

/// Script calls for the queue store worker: run as one pipeline, replies
/// written back in place.
struct gw_queue_job {
  std::vector<script_call> calls;
  std::vector<store_reply> replies;
};

/// One lookup in the match store: a user's active session, or a session by
/// its id.
struct gw_lookup {
  bool by_session = false; ///< `key` is a session id, not a user
  std::string key;
};

/// Lookups for the match store worker, answered in order.
struct gw_match_job {
  std::vector<gw_lookup> lookups;
  std::vector<outcome<std::optional<match_record>>> found;
};

using gw_queue_job_ptr = std::shared_ptr<gw_queue_job>;
using gw_match_job_ptr = std::shared_ptr<gw_match_job>;

} // namespace mm

// Jobs are shared pointers, never serialized: they go to this node's
// workers only.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mm::gw_queue_job_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mm::gw_match_job_ptr)

namespace mm {

/// The gateway's queue store worker: runs a job's calls, answers the job.
using queue_worker_actor
  = caf::typed_actor<caf::replies_to<gw_queue_job_ptr>::with<gw_queue_job_ptr>>;

/// The gateway's match store worker: runs a job's lookups, answers the job.
using match_worker_actor
  = caf::typed_actor<caf::replies_to<gw_match_job_ptr>::with<gw_match_job_ptr>>;

/// Runs one lookup on `conn`: the session `x.key`, or the active session of
/// user `x.key`; empty when there is none, the store's failure otherwise.
outcome<std::optional<match_record>> look_up(match_store& conn,
                                             const gw_lookup& x);

/// The queue store worker: runs each job's calls on `conn` as one pipeline.
/// Spawn it detached (it blocks). A job sent twice runs twice.
queue_worker_actor::behavior_type
queue_worker(queue_worker_actor::pointer, std::shared_ptr<queue_store> conn);

/// The match store worker: runs each job's lookups on `conn`, in order,
/// appending one answer each. Spawn it detached (it blocks). Only reads.
match_worker_actor::behavior_type
match_worker(match_worker_actor::pointer, std::shared_ptr<match_store> conn);

} // namespace mm
