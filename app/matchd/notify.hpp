#pragma once

// systemd's readiness and watchdog protocol (sd_notify(3)) for a unit with
// Type=notify and WatchdogSec=: READY=1 once the node is ready (it listens
// and both stores answered), STATUS= lines when readiness changes,
// WATCHDOG=1 at half of WATCHDOG_USEC while the node is alive, STOPPING=1
// when a drain starts. Outside systemd (no NOTIFY_SOCKET) it does nothing
// and starts no thread. No CAF.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace mm {

class service_notifier {
 public:
  /// Fills `why` and answers false while the node is not ready.
  using ready_fn = std::function<bool(std::string& why)>;
  /// True while the node's insides make progress (the watchdog's test).
  using alive_fn = std::function<bool()>;

  service_notifier() = default;
  /// Stops the thread (`stop`).
  ~service_notifier();

  service_notifier(const service_notifier&) = delete;
  service_notifier& operator=(const service_notifier&) = delete;

  /// Starts the notifier thread when NOTIFY_SOCKET is set: it sends
  /// READY=1 the first time `ready` holds (checked every 100 ms), a STATUS=
  /// line at every change of readiness, and WATCHDOG=1 every half of
  /// WATCHDOG_USEC (when the unit set WatchdogSec=) as long as `alive`
  /// holds; a node that is not alive stops the pings and systemd kills and
  /// restarts it. Not idempotent: call once.
  void start(ready_fn ready, alive_fn alive);

  /// Sends STOPPING=1 (the drain started; systemd shows "deactivating").
  /// The watchdog keeps pinging until `stop`. Thread-safe; idempotent.
  void stopping();

  /// Stops the thread. Idempotent.
  void stop();

  /// True when NOTIFY_SOCKET was set at `start`.
  bool enabled() const noexcept {
    return enabled_;
  }

 private:
  /// The thread: checks readiness every 100 ms (more often with a short
  /// watchdog) and pings every `watchdog_us` / 2 (0: no watchdog), until
  /// `stop`.
  void loop(ready_fn ready, alive_fn alive, uint64_t watchdog_us);

  bool enabled_ = false;
  std::atomic<bool> stopping_sent_{false};
  std::mutex mtx_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

} // namespace mm
