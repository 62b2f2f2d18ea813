#include "app/metrics_text.hpp"

#include "app/heap.hpp"

#include <limits>
#include <mutex>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace mm {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily scalar(std::string name, std::string help, MetricType type,
                    double value) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  ClientMetric m;
  if (type == MetricType::Counter)
    m.counter.value = value;
  else
    m.gauge.value = value;
  f.metric.push_back(std::move(m));
  return f;
}

/// Reads the engine's and the transport's atomics at scrape time.
class engine_collector : public prometheus::Collectable {
public:
  engine_collector(std::shared_ptr<engine_metrics> m) : m_(std::move(m)) {
    // nop
  }

  void attach(const http_server* srv) {
    srv_.store(srv);
  }

  std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> out;
    auto c = [&](const char* name, const char* help,
                 const std::atomic<uint64_t>& v) {
      out.push_back(scalar(name, help, MetricType::Counter,
                           static_cast<double>(v.load())));
    };
    c("mm_joins_total", "Joins accepted by sessions", m_->joins);
    c("mm_claims_total", "Claim scripts run", m_->claims);
    c("mm_stale_removed_total", "Stale tickets removed", m_->stale_removed);
    c("mm_matches_total", "Matches committed", m_->matches);
    c("mm_sessions_ended_total", "Match sessions ended (by a member or expired)",
      m_->sessions_ended);
    c("mm_pruned_rows_total", "Delivered events and closed sessions deleted",
      m_->rows_pruned);
    c("mm_cancels_total", "Cancels acknowledged", m_->cancels);
    c("mm_requeues_total", "Waiters put back in their queue", m_->requeues);
    c("mm_conflicts_total", "Refusals and lost races", m_->conflicts);
    c("mm_relay_retries_total", "Outbox deliveries tried again",
      m_->relay_retries);
    c("mm_commit_retries_total",
      "Group commits the database could not take (retried after a backoff)",
      m_->commit_retries);
    c("mm_events_delivered_total", "Outbox events delivered",
      m_->events_delivered);
    c("mm_sessions_released_total", "Idle session actors released",
      m_->sessions_released);
    auto g = [&](const char* name, const char* help,
                 const std::atomic<int64_t>& v) {
      out.push_back(scalar(name, help, MetricType::Gauge,
                           static_cast<double>(v.load())));
    };
    g("mm_sessions_live", "Session actors alive on this node",
      m_->sessions_live);
    g("mm_client_links", "Users with a client link on this node",
      m_->client_links);
    g("mm_directory_users", "Users with a session entry in the directory",
      m_->directory_users);
    g("mm_parked_events", "Events kept for users without a session here",
      m_->parked_events);
    out.push_back(scalar("mm_outbox_lag_ms",
                         "Age of the oldest event of the last delivered batch",
                         MetricType::Gauge,
                         static_cast<double>(m_->outbox_lag_ms.load())));
    out.push_back(scalar("mm_queues_known",
                         "Queues the broker sweeps and reports a depth for",
                         MetricType::Gauge,
                         static_cast<double>(m_->queues_known.load())));
    MetricFamily depth;
    depth.name = "mm_queue_depth";
    depth.help = "Tickets in the queue at the last sweep";
    depth.type = MetricType::Gauge;
    for (auto& [queue, n] : m_->queue_depths()) {
      ClientMetric cm;
      cm.label.push_back({"queue", queue});
      cm.gauge.value = static_cast<double>(n);
      depth.metric.push_back(std::move(cm));
    }
    out.push_back(std::move(depth));
    MetricFamily hist;
    hist.name = "mm_finalize_latency_seconds";
    hist.help = "Claimed pair in to the finalizer's answer";
    hist.type = MetricType::Histogram;
    ClientMetric hm;
    uint64_t cumulative = 0;
    auto& h = m_->finalize_latency;
    for (size_t i = 0; i < latency_histogram::bounds_ms.size(); ++i) {
      cumulative += h.bucket(i);
      hm.histogram.bucket.push_back(
        {cumulative, latency_histogram::bounds_ms[i] / 1000.0});
    }
    cumulative += h.bucket(latency_histogram::bounds_ms.size());
    hm.histogram.bucket.push_back(
      {cumulative, std::numeric_limits<double>::infinity()});
    hm.histogram.sample_count = cumulative;
    hm.histogram.sample_sum = static_cast<double>(h.sum_us()) / 1e6;
    hist.metric.push_back(std::move(hm));
    out.push_back(std::move(hist));
    {
      // The heap as malloc sees it: RSS that grows while `in use` stays
      // flat is free memory the allocator keeps, not something held.
      auto heap = heap_now();
      out.push_back(scalar("mm_heap_in_use_bytes",
                           "Heap bytes allocated and not freed",
                           MetricType::Gauge, static_cast<double>(heap.in_use)));
      out.push_back(scalar("mm_heap_free_bytes",
                           "Heap bytes the allocator keeps beyond those in use",
                           MetricType::Gauge, static_cast<double>(heap.free)));
    }
    if (auto srv = srv_.load()) {
      auto& s = srv->stats();
      out.push_back(scalar("mm_http_connections", "Open connections",
                           MetricType::Gauge,
                           static_cast<double>(s.open_connections.load())));
      out.push_back(scalar("mm_websockets", "Open WebSockets",
                           MetricType::Gauge,
                           static_cast<double>(s.open_websockets.load())));
      out.push_back(scalar("mm_http_connections_refused_total",
                           "Connections closed on accept (limit)",
                           MetricType::Counter,
                           static_cast<double>(s.connections_refused.load())));
      out.push_back(scalar("mm_http_rate_limited_total",
                           "Requests refused by the rate limit",
                           MetricType::Counter,
                           static_cast<double>(s.rate_limited.load())));
      out.push_back(scalar("mm_websocket_overflow_closed_total",
                           "WebSockets closed because the client did not read",
                           MetricType::Counter,
                           static_cast<double>(s.ws_overflow_closed.load())));
      out.push_back(scalar("mm_websockets_refused_total",
                           "Upgrades refused: the user had "
                           "--max-websockets-per-user open",
                           MetricType::Counter,
                           static_cast<double>(s.ws_refused.load())));
      out.push_back(scalar("mm_websocket_idle_closed_total",
                           "WebSockets closed by --ws-idle-timeout",
                           MetricType::Counter,
                           static_cast<double>(s.ws_idle_closed.load())));
      out.push_back(scalar("mm_websocket_rate_closed_total",
                           "WebSockets closed for sending over --ws-rate",
                           MetricType::Counter,
                           static_cast<double>(s.ws_rate_closed.load())));
      out.push_back(scalar("mm_http_accept_paused_total",
                           "Failed accepts (descriptor limit), each followed "
                           "by a pause",
                           MetricType::Counter,
                           static_cast<double>(s.accept_paused.load())));
      out.push_back(scalar("mm_http_handler_errors_total",
                           "Exceptions caught at a handler boundary",
                           MetricType::Counter,
                           static_cast<double>(s.handler_errors.load())));
    }
    return out;
  }

private:
  std::shared_ptr<engine_metrics> m_;
  std::atomic<const http_server*> srv_{nullptr};
};

} // namespace

struct metrics_exporter::impl {
  std::shared_ptr<prometheus::Registry> registry
    = std::make_shared<prometheus::Registry>();
  std::shared_ptr<engine_collector> engine;
  prometheus::Family<prometheus::Counter>* requests = nullptr;
  std::mutex mtx; // guards the lookup of a status's counter
  std::string node;
};

metrics_exporter::metrics_exporter(std::shared_ptr<engine_metrics> engine,
                                   std::string node)
  : impl_(std::make_unique<impl>()) {
  impl_->engine = std::make_shared<engine_collector>(std::move(engine));
  impl_->node = std::move(node);
  impl_->requests = &prometheus::BuildCounter()
                       .Name("mm_http_requests_total")
                       .Help("Answered requests by status")
                       .Register(*impl_->registry);
}

metrics_exporter::~metrics_exporter() {
  // nop
}

void metrics_exporter::attach(const http_server* server) {
  impl_->engine->attach(server);
}

void metrics_exporter::count_status(unsigned status) {
  std::lock_guard<std::mutex> guard{impl_->mtx};
  impl_->requests->Add({{"status", std::to_string(status)}}).Increment();
}

std::string metrics_exporter::render() const {
  auto families = impl_->registry->Collect();
  for (auto& f : impl_->engine->Collect())
    families.push_back(std::move(f));
  for (auto& f : families)
    for (auto& m : f.metric)
      m.label.push_back({"node", impl_->node});
  return prometheus::TextSerializer{}.Serialize(families);
}

} // namespace mm
