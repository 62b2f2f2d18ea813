#pragma once

// /metrics: the engine's counters and the transport's, in the Prometheus
// text format (prometheus-cpp serializes; the values are read at scrape).

#include <functional>
#include <memory>
#include <string>

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

  /// Counts one answered request with `status`. Thread-safe.
  void count_status(unsigned status);

  /// The exposition text, every value read now. Thread-safe.
  std::string render() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace mm
