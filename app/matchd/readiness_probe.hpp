#pragma once

// matchd's readiness: both stores asked from a thread of their own, the
// answer read by /readyz, the joins' fast refusal and the lifecycle actor.
// No CAF.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "app/matchd/hub.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm {

/// Asks both stores a cheap question every `every`, from its own thread
/// (never per request: /readyz reads the last answer). A probe that has
/// not come back within `stall` counts as a failure while it hangs: a
/// stalled store (SIGSTOP, a black-holed network) makes the node not ready
/// within `stall` + `every`, whatever the connections' own timeouts. The
/// reason given to callers names no address; the log line does. Every
/// second probe also hands its queue store connection to `on_queue` (the
/// depth leases, app/matchd/depth_lease.hpp) when the store answered.
class readiness_probe {
 public:
  using clock = std::chrono::steady_clock;
  using queue_hook = std::function<void(queue_store&)>;

  readiness_probe(
    std::shared_ptr<queue_store_factory> qs,
    std::shared_ptr<match_store_factory> ms, std::shared_ptr<hub> events,
    std::chrono::milliseconds trim_every, queue_hook on_queue,
    std::chrono::milliseconds every = std::chrono::milliseconds(500),
    std::chrono::milliseconds stall = std::chrono::milliseconds(1000))
    : qs_(std::move(qs)), ms_(std::move(ms)), events_(std::move(events)),
      on_queue_(std::move(on_queue)), trim_every_(trim_every), every_(every),
      stall_(stall) {
    probe();
    thread_ = std::thread([this] { loop(); });
  }

  ~readiness_probe() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  /// The last answer, or "does not answer" when the probe under way has
  /// hung longer than `stall`. Thread-safe; idempotent.
  bool ready(std::string& why) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!probing_.empty() && clock::now() - probe_started_ > stall_) {
      why = probing_ + " does not answer";
      return false;
    }
    why = why_;
    return why_.empty();
  }

  /// True (and why) when the last probe found the queue store unavailable,
  /// or the probe under way has hung on it longer than `stall`: every join
  /// needs it, so a join need not wait to find out. Thread-safe;
  /// idempotent.
  bool queue_store_down(std::string& why) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto hung = !probing_.empty() && clock::now() - probe_started_ > stall_;
    // A probe hung on the database cannot say so itself: the joins that
    // pass here do, before they reach the engine.
    database_down_->store(why_ == database_unavailable
                            || (hung && probing_ == database_probe),
                          std::memory_order_relaxed);
    if (hung && probing_ == queue_probe) {
      why = probing_ + " does not answer";
      return true;
    }
    if (why_ != queue_unavailable)
      return false;
    why = why_;
    return true;
  }

  /// From now on, `flag` is set while the node knows the database is out
  /// (the last probe found it unavailable, or the probe hangs on it longer
  /// than `stall`); the engine's lifecycle actor reads it
  /// (lifecycle_config::database_down). Thread-safe.
  void share_database_down(std::shared_ptr<std::atomic<bool>> flag) {
    std::lock_guard<std::mutex> guard{mtx_};
    database_down_ = std::move(flag);
  }

 private:
  /// Probes every `every`; prunes the hub and trims the heap now and then.
  void loop();
  /// Marks which store the probe is asking now (empty: none).
  void asking(const char* what);
  /// Asks both stores once and keeps the answer.
  void probe();

  std::shared_ptr<queue_store_factory> qs_;
  std::shared_ptr<match_store_factory> ms_;
  std::shared_ptr<hub> events_;
  queue_hook on_queue_;
  bool odd_ = false; // on_queue_ runs every second probe
  std::chrono::milliseconds trim_every_;
  clock::time_point next_trim_ = clock::now() + trim_every_;
  std::chrono::milliseconds every_;
  std::chrono::milliseconds stall_;
  std::unique_ptr<queue_store> queue_conn_;
  std::unique_ptr<match_store> match_conn_;
  std::mutex mtx_;
  std::condition_variable cv_;
  bool stop_ = false;
  static constexpr const char* queue_probe = "queue store";
  static constexpr const char* database_probe = "database";
  static constexpr const char* queue_unavailable = "queue store unavailable";
  static constexpr const char* database_unavailable = "database unavailable";
  std::string why_ = "not probed yet";
  std::shared_ptr<std::atomic<bool>> database_down_
    = std::make_shared<std::atomic<bool>>(false);
  std::string probing_; // the store asked right now, if any
  clock::time_point probe_started_;
  std::thread thread_;
};

} // namespace mm
