#pragma once

// /metrics: the engine's counters and the transport's, in the Prometheus
// text format (prometheus-cpp serializes; the values are read at scrape).

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "app/matchd/http_server.hpp"
#include "core/metrics.hpp"

namespace mm {

class depth_lease;

/// The node's /metrics text.
class metrics_exporter {
 public:
  /// Exports `engine`'s counters; every series is labelled node=`node`.
  metrics_exporter(std::shared_ptr<engine_metrics> engine, std::string node);
  ~metrics_exporter();

  /// Points the exporter at the transport's counters (after it started);
  /// `server` must outlive every later `render`.
  void attach(const http_server* server);

  /// From now on `mm_queue_depth` holds only the queues whose depth lease
  /// this node holds (app/matchd/depth_lease.hpp), and `mm_ready` is `ready()`.
  /// Without it every known queue's depth is exported and mm_ready is not.
  void attach(std::shared_ptr<const depth_lease> lease,
              std::function<bool()> ready);

  /// From now on mm_trace_spans_exported_total and _dropped_total are
  /// `counts()` (exported, dropped) of the node's tracer.
  void attach_traces(std::function<std::pair<uint64_t, uint64_t>()> counts);

  /// Counts one answered HTTP request of `route` (a template or
  /// "unmatched") and `method` with `status`, which took `seconds`.
  /// Thread-safe.
  void count_request(const std::string& route, const std::string& method,
                     unsigned status, double seconds);

  /// The exposition text, every value read now. Thread-safe.
  std::string render() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace mm
