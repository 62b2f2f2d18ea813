#pragma once

// The queue broker's state and its calls to the store, shared by its two
// files: actors/queue_broker.cpp (the behaviour: claims, sweeps,
// heartbeats) and actors/broker_store.cpp (the store workers and the calls
// waiting for one). Internal: include only from those two.

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/queue_broker.hpp"
#include "actors/waiter_roster.hpp"
#include "messages/group_types.hpp"
#include "persistence/queue/queue_store.hpp"

namespace spdlog {
class logger;
} // namespace spdlog

namespace mm::broker_detail {

using reply_fn = std::function<void(store_reply&)>;

/// A pipelined round trip: the calls go to a worker, the replies come back in
/// the same object (no copies), the continuations never leave the broker.
struct batch {
  std::vector<script_call> calls;
  std::vector<store_reply> replies;
  std::vector<reply_fn> then;
};

using batch_ptr = std::shared_ptr<batch>;

} // namespace mm::broker_detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mm::broker_detail::batch_ptr)

namespace mm::broker_detail {

/// A detached worker that owns one blocking queue store connection. Local
/// only (the batch carries continuations), so it needs no type ID.
using store_worker_actor = caf::typed_actor<
  // Runs the batch's calls in one pipelined round trip and answers the same
  // batch with one reply per call, in order. A batch sent twice runs twice:
  // only as idempotent as its calls.
  caf::replies_to<batch_ptr>::with<batch_ptr>>;

/// Answers to proposals of one queue waiting for a worker: they go as one
/// group_answer call (one read of each proposal in the store) when a
/// worker takes them; until then more answers of the queue join them.
struct answer_batch {
  std::vector<proposal_answer> answers;
  std::vector<std::function<void(outcome<proposal_state>)>> outs;
};

/// A call waiting for a worker; `answers` set: made when it is taken.
struct pending_call {
  script_call call;
  reply_fn then;
  std::shared_ptr<answer_batch> answers;
};

/// A queue the broker knows: swept periodically, depth exported.
struct known_queue {
  caf::actor_clock::time_point last_join; ///< last claim, enqueue or rescan
};

/// The broker's state: the store's workers and the calls waiting for one,
/// the queues it knows, the waiting tickets it beats for.
struct broker_state {
  broker_config cfg;
  std::unique_ptr<queue_store> inline_store; // non-blocking stores
  std::vector<store_worker_actor> idle;      // blocking stores: free workers
  std::deque<pending_call> pending;
  std::map<std::string, std::shared_ptr<answer_batch>> open_answers;
  std::map<std::string, known_queue> queues; // bounded, see admit()
  bool warned_full = false; // logged that max_queues refuses joins
  waiter_roster waiters;    // the sessions' waiting tickets: heartbeats
  std::optional<caf::actor_clock::time_point> beat_at; // heartbeat timer
  static inline const char* name = "queue_broker";
};

using broker_ptr = queue_broker_actor::stateful_pointer<broker_state>;

/// The broker's logger ("broker").
std::shared_ptr<spdlog::logger> broker_log();

/// A store worker: connects through `factory` and runs one batch at a time.
store_worker_actor::behavior_type
store_worker(store_worker_actor::pointer,
             std::shared_ptr<queue_store_factory> factory);

/// Runs `call` and hands its reply to `then`: at once on a non-blocking
/// store, else when a worker has run it (calls wait in order, up to
/// `cfg.max_batch` of them go in one round trip). Not idempotent: a call
/// submitted twice runs twice.
void submit(broker_ptr self, script_call call, reply_fn then);

/// Submits the proposal answer `a` with the answers of its queue still
/// waiting for a worker (one group_answer call for up to
/// codec::max_answers), else in a call of its own; `out` hears its state.
void submit_answer(broker_ptr self, proposal_answer a,
                   std::function<void(outcome<proposal_state>)> out);

/// Hands the waiting calls to the idle workers. A worker that fails stops
/// the broker (it is linked: its calls are lost to it, not to the callers).
void dispatch(broker_ptr self);

} // namespace mm::broker_detail
