#pragma once

// The waiting tickets a node's sessions hand to their queue broker, which
// re-scans them on their heartbeats (docs/engine.md, "Heartbeats"): one
// timer per due moment for all of them, and a message to a session only
// when an answer changes something for it, instead of a timer, a timed
// request and two messages per ticket and heartbeat.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/actor_control_block.hpp>

#include "messages/queue_types.hpp"

namespace mm {

/// Milliseconds from `now_ms` until a waiting ticket looks again: after
/// `period_ms`, at the next multiple of `align_ms` (0: exactly), or at
/// `next_change_ms` when that is sooner (> 0: its rule windows widen
/// then, docs/rules.md).
int64_t next_look_ms(uint32_t period_ms, uint32_t align_ms,
                     int64_t next_change_ms, int64_t now_ms);

class waiter_roster {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  /// `now` in whole milliseconds of its clock (the unit of `look_at`).
  static int64_t ms_of(time_point now);

  /// When a ticket looking at `now` looks next (`next_look_ms`), on whole
  /// milliseconds: exactly on the `align_ms` grid (else never earlier than
  /// the look asks), so that all waiters due at one grid point share one
  /// moment, one timer and one batch of calls.
  static time_point look_at(uint32_t period_ms, uint32_t align_ms,
                            int64_t next_change_ms, time_point now);

  /// A session's waiting ticket.
  struct waiter {
    caf::strong_actor_ptr session;
    uint64_t gen = 0; ///< the session's state generation: its answers carry it
    /// What a re-scan sends; shared with the re-scans in flight.
    std::shared_ptr<const ticket_spec> spec;
    uint32_t period_ms = 10000;
    uint32_t align_ms = 0;
    std::string windows; ///< the rule windows the session last heard of
  };

  /// A re-scan to run now.
  struct scan {
    uint64_t id;
    uint64_t gen;
    std::shared_ptr<const ticket_spec> spec;
  };

  /// What a re-scan's answer means for its session.
  struct verdict {
    caf::strong_actor_ptr session; ///< set when told or dropped
    bool tell = false;             ///< the answer goes to the session
    bool keep = false; ///< still waiting here (else dropped: demonitor)
  };

  /// Session `id` waits with `w`, looking first at `due`; replaces what it
  /// had here. True when it was not here before (the caller monitors it).
  /// Idempotent per (id, w.gen) but for the due time.
  bool watch(uint64_t id, waiter w, time_point due);

  /// Session `id` no longer waits here: its handle if it did (the caller
  /// demonitors it), else null. Idempotent.
  caf::strong_actor_ptr unwatch(uint64_t id);

  /// The waiters due at `now`; each is in flight until `settle`.
  std::vector<scan> take_due(time_point now);

  /// `take_due`, in groups of one queue each, of at most `max` (> 0).
  std::vector<std::vector<scan>> take_due_by_queue(time_point now, size_t max);

  /// The answer of `id`'s re-scan of generation `gen` (null: the store
  /// failed it; the deadline bounds the wait, it looks again later). An
  /// answer of an older generation, or of a session gone, changes nothing.
  verdict settle(uint64_t id, uint64_t gen, const claim_result* r,
                 time_point now);

  /// When the next waiter is due (maybe sooner: it may be gone).
  std::optional<time_point> next_due() const;

  /// Waiters here.
  size_t size() const {
    return waiters_.size();
  }

 private:
  struct entry {
    waiter w;
    std::optional<time_point> slot; ///< its due moment, unless in flight
    bool in_flight = false;
  };

  void arm(uint64_t id, entry& e, time_point due);

  /// Takes `id` out of its due moment (a waiter that leaves, or is due at
  /// another time now): nothing stale stays in `due_`, so a node whose
  /// waiters come and go within a heartbeat sets no timer for them.
  void drop_slot(uint64_t id, entry& e);

  std::unordered_map<uint64_t, entry> waiters_;
  /// Due moments, each with the ids of the waiters due then (waiters look
  /// on a shared grid, so few moments hold many waiters).
  std::map<time_point, std::vector<uint64_t>> due_;
};

} // namespace mm
