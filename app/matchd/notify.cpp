#include "app/matchd/notify.hpp"

#include <chrono>
#include <cstdlib>

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include "core/logger.hpp"

namespace mm {

service_notifier::~service_notifier() {
  stop();
}

void service_notifier::start(ready_fn ready, alive_fn alive) {
  const char* sock = std::getenv("NOTIFY_SOCKET");
  if (sock == nullptr || *sock == '\0')
    return;
  enabled_ = true;
  uint64_t usec = 0;
  // > 0 only when WATCHDOG_USEC is set (and WATCHDOG_PID, if set, is us).
  if (sd_watchdog_enabled(0, &usec) <= 0)
    usec = 0;
  thread_ = std::thread([this, ready{std::move(ready)}, alive{std::move(alive)},
                         usec] { loop(ready, alive, usec); });
}

void service_notifier::loop(ready_fn ready, alive_fn alive,
                            uint64_t watchdog_us) {
  using clock = std::chrono::steady_clock;
  auto lg = logger("matchd");
  auto tick = std::chrono::microseconds(100000);
  auto ping_every = std::chrono::microseconds(watchdog_us / 2);
  if (watchdog_us > 0 && ping_every < tick)
    tick = ping_every;
  bool ready_sent = false;
  bool was_ready = false;
  std::string last_why = "(none)";
  auto next_ping = clock::now();
  bool warned_dead = false;
  std::unique_lock<std::mutex> guard{mtx_};
  while (!stop_) {
    guard.unlock();
    std::string why;
    bool now_ready = ready(why);
    // Once draining, STATUS stays "draining" (readiness turns false by
    // design then).
    if (!stopping_sent_
        && (now_ready != was_ready || (!now_ready && why != last_why))) {
      std::string msg;
      if (now_ready && !ready_sent) {
        msg = "READY=1\nSTATUS=ready";
        ready_sent = true;
      } else {
        msg = now_ready ? "STATUS=ready" : "STATUS=not ready: " + why;
      }
      sd_notify(0, msg.c_str());
      was_ready = now_ready;
      last_why = why;
    }
    if (watchdog_us > 0 && clock::now() >= next_ping) {
      if (alive()) {
        sd_notify(0, "WATCHDOG=1");
        warned_dead = false;
      } else if (!warned_dead) {
        // systemd kills us at WatchdogSec: say why first.
        lg->error("the actor system does not make progress: no watchdog "
                  "ping (systemd restarts the node at WatchdogSec)");
        warned_dead = true;
      }
      next_ping = clock::now() + ping_every;
    }
    guard.lock();
    cv_.wait_for(guard, tick, [this] { return stop_; });
  }
}

void service_notifier::stopping() {
  if (!enabled_ || stopping_sent_.exchange(true))
    return;
  sd_notify(0, "STOPPING=1\nSTATUS=draining");
}

void service_notifier::stop() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

} // namespace mm
