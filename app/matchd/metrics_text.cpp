#include "app/matchd/metrics_text.hpp"

#include "app/matchd/heap.hpp"

#include <limits>
#include <mutex>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "app/matchd/depth_lease.hpp"
#include "app/matchd/process_metrics.hpp"
#include "mm_build_info.hpp" // generated: MM_BUILD_VERSION, MM_BUILD_COMMIT

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

/// One histogram sample: per-bucket counts (not cumulative, the last one
/// +Inf) turned into Prometheus' cumulative buckets.
template <size_t N>
ClientMetric histogram_metric(const std::array<double, N>& bounds_s,
                              const uint64_t* per_bucket, double sum_s) {
  ClientMetric hm;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < N; ++i) {
    cumulative += per_bucket[i];
    hm.histogram.bucket.push_back({cumulative, bounds_s[i]});
  }
  cumulative += per_bucket[N];
  hm.histogram.bucket.push_back(
    {cumulative, std::numeric_limits<double>::infinity()});
  hm.histogram.sample_count = cumulative;
  hm.histogram.sample_sum = sum_s;
  return hm;
}

/// A latency histogram's buckets, in seconds.
ClientMetric latency_metric(const latency_histogram& h) {
  constexpr auto n = latency_histogram::bounds_ms.size();
  std::array<double, n> bounds_s{};
  std::array<uint64_t, n + 1> counts{};
  for (size_t i = 0; i < n; ++i)
    bounds_s[i] = latency_histogram::bounds_ms[i] / 1000.0;
  for (size_t i = 0; i <= n; ++i)
    counts[i] = h.bucket(i);
  return histogram_metric(bounds_s, counts.data(),
                          static_cast<double>(h.sum_us()) / 1e6);
}

/// The process's figures under the names of the Prometheus client
/// libraries (process_*).
void process_families(std::vector<MetricFamily>& out) {
  auto p = sample_process();
  if (p.ok) {
    out.push_back(scalar("process_cpu_seconds_total",
                         "Total user and system CPU time spent in seconds",
                         MetricType::Counter, p.cpu_seconds));
    out.push_back(scalar("process_resident_memory_bytes",
                         "Resident memory size in bytes", MetricType::Gauge,
                         p.resident_bytes));
    out.push_back(scalar("process_virtual_memory_bytes",
                         "Virtual memory size in bytes", MetricType::Gauge,
                         p.virtual_bytes));
    out.push_back(scalar("process_start_time_seconds",
                         "Start time of the process since the Unix epoch in "
                         "seconds",
                         MetricType::Gauge, p.start_time_seconds));
  }
  out.push_back(scalar("process_open_fds", "Number of open file descriptors",
                       MetricType::Gauge, p.open_fds));
  out.push_back(scalar("process_max_fds",
                       "Maximum number of open file descriptors (soft limit)",
                       MetricType::Gauge, p.max_fds));
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

  void attach(std::shared_ptr<const depth_lease> lease,
              std::function<bool()> ready) {
    std::lock_guard<std::mutex> guard{mtx_};
    lease_ = std::move(lease);
    ready_ = std::move(ready);
  }

  void attach_traces(std::function<std::pair<uint64_t, uint64_t>()> counts) {
    std::lock_guard<std::mutex> guard{mtx_};
    traces_ = std::move(counts);
  }

  std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> out;
    if (auto traces = [this] {
          std::lock_guard<std::mutex> guard{mtx_};
          return traces_;
        }()) {
      auto [exported, dropped] = traces();
      out.push_back(scalar("mm_trace_spans_exported_total",
                           "Spans of match traces the OTLP collector took",
                           MetricType::Counter, static_cast<double>(exported)));
      out.push_back(scalar("mm_trace_spans_dropped_total",
                           "Spans of match traces dropped (queue full or the "
                           "collector refused or did not answer)",
                           MetricType::Counter, static_cast<double>(dropped)));
    }
    auto c = [&](const char* name, const char* help,
                 const std::atomic<uint64_t>& v) {
      out.push_back(
        scalar(name, help, MetricType::Counter, static_cast<double>(v.load())));
    };
    c("mm_joins_total", "Joins accepted by sessions", m_->joins);
    c("mm_claims_total", "Claim scripts run", m_->claims);
    c("mm_stale_removed_total", "Stale tickets removed", m_->stale_removed);
    c("mm_matches_total", "Matches committed", m_->matches);
    c("mm_sessions_ended_total",
      "Match sessions ended (by a member or expired)", m_->sessions_ended);
    c("mm_pruned_rows_total", "Delivered events and closed sessions deleted",
      m_->rows_pruned);
    c("mm_outbox_partitions_dropped_total",
      "Old outbox partitions dropped whole", m_->partitions_dropped);
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
    c("mm_proposals_made_total", "Ready check proposals made",
      m_->proposals_made);
    c("mm_proposals_accepted_total",
      "Proposals every member accepted (then committed)",
      m_->proposals_accepted);
    c("mm_proposals_declined_total", "Proposals a member declined",
      m_->proposals_declined);
    c("mm_proposals_timed_out_total",
      "Proposals a member left unanswered past the deadline",
      m_->proposals_timed_out);
    c("mm_proposals_lapsed_total",
      "Proposals settled in the queue without their holder (lease lapsed)",
      m_->proposals_lapsed);
    c("mm_backfill_requests_total",
      "Backfill requests made (by members, hosts and automatically)",
      m_->backfill_requests);
    c("mm_backfill_seats_filled_total", "Seats backfill filled",
      m_->backfill_seats_filled);
    auto g = [&](const char* name, const char* help,
                 const std::atomic<int64_t>& v) {
      out.push_back(
        scalar(name, help, MetricType::Gauge, static_cast<double>(v.load())));
    };
    g("mm_sessions_live", "Session actors alive on this node",
      m_->sessions_live);
    g("mm_client_links", "Users with a client link on this node",
      m_->client_links);
    g("mm_directory_users", "Users with a session entry in the directory",
      m_->directory_users);
    g("mm_parked_events", "Events kept for users without a session here",
      m_->parked_events);
    out.push_back(scalar("mm_outbox_lag_seconds",
                         "Age of the oldest event of the last delivered "
                         "batch, in seconds",
                         MetricType::Gauge,
                         static_cast<double>(m_->outbox_lag_ms.load()) / 1e3));
    out.push_back(scalar(
      "mm_queues_known", "Queues the broker sweeps and reports a depth for",
      MetricType::Gauge, static_cast<double>(m_->queues_known.load())));
    std::shared_ptr<const depth_lease> lease;
    std::function<bool()> ready;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      lease = lease_;
      ready = ready_;
    }
    MetricFamily depth;
    depth.name = "mm_queue_depth";
    depth.help = "Tickets waiting in the queue at the last sweep (exported "
                 "by the one node holding the queue's depth lease)";
    depth.type = MetricType::Gauge;
    for (auto& [queue, n] : m_->queue_depths()) {
      if (lease && !lease->holds(queue))
        continue; // another node reports it: sum() stays right
      ClientMetric cm;
      cm.label.push_back({"queue", queue});
      cm.gauge.value = static_cast<double>(n);
      depth.metric.push_back(std::move(cm));
    }
    out.push_back(std::move(depth));
    MetricFamily hist;
    hist.name = "mm_finalize_latency_seconds";
    hist.help = "Claimed pair in to the finalizer's answer, in seconds";
    hist.type = MetricType::Histogram;
    hist.metric.push_back(latency_metric(m_->finalize_latency));
    out.push_back(std::move(hist));
    MetricFamily fill;
    fill.name = "mm_backfill_fill_seconds";
    fill.help = "A backfill request to the commit of its fill, in seconds";
    fill.type = MetricType::Histogram;
    fill.metric.push_back(latency_metric(m_->backfill_fill_latency));
    out.push_back(std::move(fill));
    MetricFamily dist;
    dist.name = "mm_pair_distance";
    dist.help = "Distance of committed pairs on a distance rule's attribute "
                "(docs/rules.md)";
    dist.type = MetricType::Histogram;
    for (auto& [key, dh] : m_->pair_distances()) {
      auto cm = histogram_metric(distance_histogram::bounds, dh.buckets.data(),
                                 dh.sum);
      cm.label.push_back({"queue", key.first});
      cm.label.push_back({"attribute", key.second});
      dist.metric.push_back(std::move(cm));
    }
    out.push_back(std::move(dist)); // no series without rules
    MetricFamily ttm;
    ttm.name = "mm_time_to_match_seconds";
    ttm.help = "Wait of each matched join, from its arrival at its session "
               "to its match, in seconds";
    ttm.type = MetricType::Histogram;
    for (auto& [queue, w] : m_->time_to_match()) {
      auto hm = histogram_metric(wait_histogram::bounds_s, w.buckets.data(),
                                 static_cast<double>(w.sum_us) / 1e6);
      hm.label.push_back({"queue", queue});
      ttm.metric.push_back(std::move(hm));
    }
    out.push_back(std::move(ttm));
    {
      MetricFamily info;
      info.name = "mm_build_info";
      info.help = "Always 1; the labels say which build runs";
      info.type = MetricType::Gauge;
      ClientMetric cm;
      cm.label.push_back({"version", MM_BUILD_VERSION});
      cm.label.push_back({"commit", MM_BUILD_COMMIT});
      cm.gauge.value = 1;
      info.metric.push_back(std::move(cm));
      out.push_back(std::move(info));
    }
    if (ready)
      out.push_back(scalar("mm_ready",
                           "1 while /readyz answers 200 (the stores answer, "
                           "no drain, no core actor down), else 0",
                           MetricType::Gauge, ready() ? 1 : 0));
    process_families(out);
    {
      // The heap as malloc sees it: RSS that grows while `in use` stays
      // flat is free memory the allocator keeps, not something held.
      auto heap = heap_now();
      out.push_back(
        scalar("mm_heap_in_use_bytes", "Heap bytes allocated and not freed",
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
      out.push_back(scalar(
        "mm_http_rate_limited_total", "Requests refused by the rate limit",
        MetricType::Counter, static_cast<double>(s.rate_limited.load())));
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
      out.push_back(scalar("mm_websocket_pings_total",
                           "Pings sent to WebSocket clients silent for half "
                           "of --ws-idle-timeout",
                           MetricType::Counter,
                           static_cast<double>(s.ws_pings.load())));
      out.push_back(scalar("mm_websocket_rate_closed_total",
                           "WebSockets closed for sending over --ws-rate",
                           MetricType::Counter,
                           static_cast<double>(s.ws_rate_closed.load())));
      out.push_back(scalar("mm_websocket_requests_total",
                           "Requests sent on WebSockets (join, cancel, ...)",
                           MetricType::Counter,
                           static_cast<double>(s.ws_requests.load())));
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
  mutable std::mutex mtx_; // guards lease_ and ready_
  std::shared_ptr<const depth_lease> lease_;
  std::function<bool()> ready_;
  std::function<std::pair<uint64_t, uint64_t>()> traces_;
};

} // namespace

struct metrics_exporter::impl {
  std::shared_ptr<prometheus::Registry> registry
    = std::make_shared<prometheus::Registry>();
  std::shared_ptr<engine_collector> engine;
  prometheus::Family<prometheus::Counter>* requests = nullptr;
  prometheus::Family<prometheus::Histogram>* durations = nullptr;
  std::mutex mtx; // guards the lookup of a series
  std::string node;
};

metrics_exporter::metrics_exporter(std::shared_ptr<engine_metrics> engine,
                                   std::string node)
  : impl_(std::make_unique<impl>()) {
  impl_->engine = std::make_shared<engine_collector>(std::move(engine));
  impl_->node = std::move(node);
  impl_->requests = &prometheus::BuildCounter()
                       .Name("mm_http_requests_total")
                       .Help("Answered HTTP requests by route template, "
                             "method and status code")
                       .Register(*impl_->registry);
  impl_->durations
    = &prometheus::BuildHistogram()
         .Name("mm_http_request_duration_seconds")
         .Help("Seconds from an HTTP request's arrival to its answer, by "
               "route template and method")
         .Register(*impl_->registry);
}

metrics_exporter::~metrics_exporter() {
  // nop
}

void metrics_exporter::attach(const http_server* server) {
  impl_->engine->attach(server);
}

void metrics_exporter::attach_traces(
  std::function<std::pair<uint64_t, uint64_t>()> counts) {
  impl_->engine->attach_traces(std::move(counts));
}

void metrics_exporter::attach(std::shared_ptr<const depth_lease> lease,
                              std::function<bool()> ready) {
  impl_->engine->attach(std::move(lease), std::move(ready));
}

void metrics_exporter::count_request(const std::string& route,
                                     const std::string& method, unsigned status,
                                     double seconds) {
  // Bounded label values: the route is a template, the method one of few.
  static const char* const methods[] = {"GET", "POST",  "DELETE", "HEAD",
                                        "PUT", "PATCH", "OPTIONS"};
  std::string m = "other";
  for (auto* k : methods)
    if (method == k)
      m = k;
  static const prometheus::Histogram::BucketBoundaries bounds{
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  std::lock_guard<std::mutex> guard{impl_->mtx};
  impl_->requests
    ->Add({{"route", route}, {"method", m}, {"status", std::to_string(status)}})
    .Increment();
  impl_->durations->Add({{"route", route}, {"method", m}}, bounds)
    .Observe(seconds);
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
