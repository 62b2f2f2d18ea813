#pragma once

// When each match was claimed and committed, kept a little while for the
// traces of a match (matchd's --otlp-endpoint, docs/matchd.md
// "Traces"): the finalizer writes, the node's client links read when they
// deliver the match. Wall clock, ns since the Unix epoch. No CAF.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace mm {

struct match_timing {
  int64_t claim_start_ns = 0; ///< the claim was asked for
  int64_t claim_end_ns = 0;   ///< the finalizer had the claimed pair
  int64_t commit_end_ns = 0;  ///< the match's rows were committed
};

/// A bounded map session id -> timing: the oldest entries go first, so it
/// never grows with the users served. Thread-safe.
class match_timings {
 public:
  explicit match_timings(size_t capacity = 65536);

  /// Records `t` for `session` (a second record of one session replaces
  /// the first). Idempotent.
  void put(const std::string& session, const match_timing& t);

  /// The timing of `session`, if still kept. Changes nothing.
  std::optional<match_timing> get(const std::string& session) const;

  /// Wall-clock ns of a steady-clock time point given as ns since the
  /// steady clock's epoch (the actors' clock).
  static int64_t wall_ns_of_steady(int64_t steady_ns);

  /// Wall-clock ns now.
  static int64_t now_ns();

 private:
  size_t capacity_;
  mutable std::mutex mtx_;
  std::unordered_map<std::string, match_timing> by_session_;
  std::deque<std::string> order_;
};

} // namespace mm
