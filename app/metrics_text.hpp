#pragma once

// /metrics: the engine's counters and the transport's, in the Prometheus
// text format (prometheus-cpp serializes; the values are read at scrape).

#include <memory>
#include <string>

#include "app/http_server.hpp"
#include "core/metrics.hpp"

namespace mm {

class metrics_exporter {
public:
  metrics_exporter(std::shared_ptr<engine_metrics> engine, std::string node);
  ~metrics_exporter();

  /// Points the exporter at the transport's counters (after it started).
  void attach(const http_server* server);

  /// Counts one answered request with `status`. Thread-safe.
  void count_status(unsigned status);

  /// The exposition text.
  std::string render() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace mm
