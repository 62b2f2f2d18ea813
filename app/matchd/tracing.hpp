#pragma once

// Traces of matches (matchd's --otlp-endpoint; docs/matchd.md "Traces"):
// for a sampled user's match, one trace of five spans, exported as OTLP
// over HTTP with the JSON encoding to a collector:
//
//   match     the join's request .. the match.created handed to its sockets
//   ├ join     the join's request .. its answer (queued, or matched)
//   ├ claim    the claim was asked .. the finalizer had the pair
//   ├ commit   .. the match's rows committed (one transaction)
//   └ delivery .. the event handed to the user's sockets
//
// claim and commit come from the finalizer of this node (match_timings);
// a match committed by another node's finalizer has match, join and
// delivery only. Spans wait in a bounded queue; a thread posts them once
// a second or every 512 spans; when the collector is slow or down, the
// oldest are dropped and counted, never a request held up.

#include <cstdint>
#include <memory>
#include <string>

#include "core/match_timings.hpp"

namespace mm {

struct tracing_options {
  std::string endpoint;     ///< e.g. http://127.0.0.1:4318/v1/traces
  std::string ca_file;      ///< https: CA bundle (empty: the system's)
  double sample = 0.01;     ///< share of users' matches traced (0..1)
  std::string node;         ///< service.instance.id
  size_t max_queued = 8192; ///< spans waiting; beyond, the oldest go
};

/// What the tracer did, for /metrics.
struct tracing_counts {
  uint64_t exported = 0; ///< spans the collector took
  uint64_t dropped = 0;  ///< spans dropped (queue full, collector refused)
};

/// The node's tracer: thread-safe; its thread stops with the last owner.
class match_tracer {
 public:
  virtual ~match_tracer();

  /// One user's match: `join_ns` .. `answered_ns` the join's request and
  /// answer, `delivered_ns` the event handed to the sockets (wall clock,
  /// ns since the epoch). Sampled here; non-blocking.
  virtual void record(const std::string& user, const std::string& queue,
                      const std::string& session, int64_t join_ns,
                      int64_t answered_ns, int64_t delivered_ns)
    = 0;

  /// Spans exported and dropped so far.
  virtual tracing_counts counts() const = 0;

  /// Sends what is queued now (waits up to the export's timeout). For a
  /// drain and for tests. Idempotent.
  virtual void flush() = 0;
};

/// Starts the tracer; `timings` (the finalizer's) may be null.
std::shared_ptr<match_tracer>
start_tracer(tracing_options opts, std::shared_ptr<match_timings> timings);

} // namespace mm
