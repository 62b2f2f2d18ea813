#include "app/matchd/tracing.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "app/matchd/http_once.hpp"
#include "core/log_limit.hpp"
#include "core/logger.hpp"

namespace mm {

match_tracer::~match_tracer() = default;

namespace {

using json = nlohmann::json;

std::shared_ptr<spdlog::logger> trace_log() {
  static auto log = logger("tracing");
  return log;
}

/// `n` random bytes as lower-case hex (OTLP/JSON's form of ids).
std::string random_hex(size_t n) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  while (out.size() < 2 * n) {
    auto x = rng();
    for (int i = 0; i < 16 && out.size() < 2 * n; ++i, x >>= 4)
      out.push_back(digits[x & 0xf]);
  }
  return out;
}

json attr(const char* key, const std::string& value) {
  return {{"key", key}, {"value", {{"stringValue", value}}}};
}

/// One span; times in ns since the epoch (OTLP/JSON takes them as strings).
json span(const std::string& trace, const std::string& id,
          const std::string& parent, const char* name, int64_t start,
          int64_t end, json attributes = json::array()) {
  json s{{"traceId", trace},
         {"spanId", id},
         {"name", name},
         {"kind", 1}, // SPAN_KIND_INTERNAL
         {"startTimeUnixNano", std::to_string(start)},
         {"endTimeUnixNano", std::to_string(std::max(start, end))},
         {"attributes", std::move(attributes)}};
  if (!parent.empty())
    s["parentSpanId"] = parent;
  return s;
}

class tracer_impl : public match_tracer {
 public:
  tracer_impl(tracing_options opts, std::shared_ptr<match_timings> timings)
    : opts_(std::move(opts)), timings_(std::move(timings)) {
    thread_ = std::thread{[this] { run(); }};
  }

  ~tracer_impl() override {
    {
      std::lock_guard<std::mutex> lk{mtx_};
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void record(const std::string& user, const std::string& queue,
              const std::string& session, int64_t join_ns, int64_t answered_ns,
              int64_t delivered_ns) override {
    if (!sampled())
      return;
    if (answered_ns <= 0 || answered_ns > delivered_ns)
      answered_ns = delivered_ns; // answered after the event came
    auto trace = random_hex(16);
    auto root = random_hex(8);
    std::vector<json> spans;
    spans.push_back(
      span(trace, root, "", "match", join_ns, delivered_ns,
           json::array({attr("mm.queue", queue), attr("mm.session_id", session),
                        attr("enduser.id", user)})));
    spans.push_back(
      span(trace, random_hex(8), root, "join", join_ns, answered_ns));
    auto from = answered_ns;
    if (auto t = timings_ ? timings_->get(session) : std::nullopt) {
      spans.push_back(span(trace, random_hex(8), root, "claim",
                           t->claim_start_ns, t->claim_end_ns));
      spans.push_back(span(trace, random_hex(8), root, "commit",
                           t->claim_end_ns, t->commit_end_ns));
      from = t->commit_end_ns;
    }
    spans.push_back(
      span(trace, random_hex(8), root, "delivery", from, delivered_ns));
    bool wake = false;
    {
      std::lock_guard<std::mutex> lk{mtx_};
      for (auto& s : spans)
        queued_.push_back(std::move(s));
      while (queued_.size() > opts_.max_queued) {
        queued_.pop_front();
        ++counts_.dropped;
      }
      wake = queued_.size() >= batch_spans;
    }
    if (wake)
      cv_.notify_all();
  }

  tracing_counts counts() const override {
    std::lock_guard<std::mutex> lk{mtx_};
    return counts_;
  }

  void flush() override {
    std::unique_lock<std::mutex> lk{mtx_};
    auto want = ++flush_asked_;
    cv_.notify_all();
    cv_.wait_for(lk, std::chrono::seconds(10),
                 [&] { return flush_done_ >= want || stop_; });
  }

 private:
  static constexpr size_t batch_spans = 512;

  bool sampled() {
    if (opts_.sample >= 1)
      return true;
    if (opts_.sample <= 0)
      return false;
    thread_local std::mt19937_64 rng{std::random_device{}()};
    return std::uniform_real_distribution<double>{0, 1}(rng) < opts_.sample;
  }

  void run() {
    std::unique_lock<std::mutex> lk{mtx_};
    while (!stop_) {
      cv_.wait_for(lk, std::chrono::seconds(1), [&] {
        return stop_ || queued_.size() >= batch_spans
               || flush_asked_ > flush_done_;
      });
      auto asked = flush_asked_;
      while (!queued_.empty()) {
        std::vector<json> batch;
        while (!queued_.empty() && batch.size() < batch_spans) {
          batch.push_back(std::move(queued_.front()));
          queued_.pop_front();
        }
        auto n = batch.size(); // post() takes the spans
        lk.unlock();
        auto ok = post(batch);
        lk.lock();
        (ok ? counts_.exported : counts_.dropped) += n;
      }
      flush_done_ = asked;
      cv_.notify_all();
    }
  }

  /// One export request; false when the collector did not take it.
  bool post(std::vector<json>& spans) {
    json body{
      {"resourceSpans",
       json::array(
         {{{"resource",
            {{"attributes",
              json::array({attr("service.name", "matchd"),
                           attr("service.instance.id", opts_.node)})}}},
           {"scopeSpans", json::array({{{"scope", {{"name", "matchmaker"}}},
                                        {"spans", std::move(spans)}}})}}})}};
    http_once_request req;
    req.method = "POST";
    req.url = opts_.endpoint;
    req.ca_file = opts_.ca_file;
    req.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
    req.timeout_ms = 5000;
    auto got = http_once(req);
    if (got.error.empty())
      return true;
    MM_LOG_LIMITED(trace_log(), warn, "traces not exported: {}", got.error);
    return false;
  }

  tracing_options opts_;
  std::shared_ptr<match_timings> timings_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<json> queued_;
  tracing_counts counts_;
  uint64_t flush_asked_ = 0;
  uint64_t flush_done_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

} // namespace

std::shared_ptr<match_tracer>
start_tracer(tracing_options opts, std::shared_ptr<match_timings> timings) {
  return std::make_shared<tracer_impl>(std::move(opts), std::move(timings));
}

} // namespace mm
