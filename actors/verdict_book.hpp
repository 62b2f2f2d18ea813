#pragma once

// What the finalizer remembers of tickets' fates, so that a cancel gets the
// answer the ticket's pair got (docs/engine.md, "Cancels"): which tickets
// are in a commit or an undo right now, the final verdicts of the last
// moments, and the tickets an undo put back in the queue a moment ago. No
// actors here: the finalizer owns one and calls it from its own thread.

#include <chrono>
#include <cstddef>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>

#include "messages/engine_types.hpp"

namespace mm {

/// The finalizer's book of tickets' fates (see above). Not thread-safe.
class verdict_book {
 public:
  using steady_time = std::chrono::steady_clock::time_point;

  /// Final verdicts kept at most, whatever their age (the memory bound);
  /// the same bound holds the requeue marks.
  static constexpr size_t max_kept = 100000;

  /// `decided_ttl`: how long a final verdict answers late cancels (later
  /// ones ask the database); `requeued_ttl`: how long a requeue mark lasts.
  verdict_book(std::chrono::milliseconds decided_ttl,
               std::chrono::milliseconds requeued_ttl);

  /// Ticket `key` enters a commit or an undo. `claimed_again`: a new pair
  /// holds it (claimed again after a requeue), so a verdict or requeue mark
  /// kept from before no longer holds and is dropped. Pair with `leave`;
  /// not idempotent (each call counts one entry).
  void enter(const std::string& key, bool claimed_again);

  /// Ticket `key` left the commit or undo it entered (one `enter` undone;
  /// nothing for a key not in flight).
  void leave(const std::string& key);

  /// Whether `key` is in a commit or undo now.
  bool in_flight(const std::string& key) const;

  /// Records `v` for `key`. A final verdict (honoured, or matched in a
  /// session) answers later cancels until it ages out; "back in the queue"
  /// (neither) marks the ticket requeued instead, unless it is in flight
  /// again. Idempotent for the same verdict.
  void record(const std::string& key, const cancel_verdict& v, steady_time now);

  /// The final verdict of `key`, if one is kept; null otherwise. Drops the
  /// verdicts that aged out first.
  const cancel_verdict* final_verdict(const std::string& key, steady_time now);

  /// True when `key` was put back in the queue a moment ago and is not in
  /// flight: the mark is used up by this call. Not idempotent.
  bool take_requeued(const std::string& key, steady_time now);

 private:
  void forget_decided(steady_time now);
  void forget_requeued(steady_time now);

  std::chrono::milliseconds decided_ttl_;
  std::chrono::milliseconds requeued_ttl_;
  std::unordered_map<std::string, int> in_flight_;
  std::unordered_map<std::string, cancel_verdict> decided_;
  std::deque<std::pair<steady_time, std::string>> decided_order_;
  std::unordered_map<std::string, steady_time> requeued_;
  std::deque<std::pair<steady_time, std::string>> requeued_order_;
};

} // namespace mm
