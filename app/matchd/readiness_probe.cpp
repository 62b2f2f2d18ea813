// matchd's readiness probe (readiness_probe.hpp).

#include "app/matchd/readiness_probe.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "app/matchd/heap.hpp"
#include "core/logger.hpp"

namespace mm {

void readiness_probe::loop() {
  // The hub's backlogs are pruned about every 10 s.
  auto prune_every = std::max<long>(1,
                                    10000 / std::max<long>(1, every_.count()));
  auto countdown = prune_every;
  std::unique_lock<std::mutex> guard{mtx_};
  while (!stop_) {
    cv_.wait_for(guard, every_);
    if (stop_)
      break;
    guard.unlock();
    probe();
    if (--countdown == 0) {
      events_->prune();
      countdown = prune_every;
    }
    if (trim_every_.count() > 0 && clock::now() >= next_trim_) {
      // Users come and go by the million: the heap's free pages go back
      // to the system, so the node's RSS follows what it holds now, not
      // the most it ever held (docs/matchd.md, --trim-interval).
      heap_release();
      next_trim_ = clock::now() + trim_every_;
    }
    guard.lock();
  }
}

void readiness_probe::asking(const char* what) {
  std::lock_guard<std::mutex> guard{mtx_};
  probing_ = what;
  probe_started_ = clock::now();
}

void readiness_probe::probe() {
  std::string why;    // for callers: no addresses
  std::string detail; // for the log
  asking(queue_probe);
  if (!queue_conn_)
    queue_conn_ = qs_->connect();
  if (!queue_conn_) {
    why = queue_unavailable;
    detail = "cannot connect to " + qs_->describe();
  } else {
    auto rep = queue_conn_->execute({{"GET", "mm:readyz"}});
    if (rep.empty() || rep[0].code != errc::none) {
      why = queue_unavailable;
      detail = qs_->describe() + " does not answer"
               + (rep.empty() ? std::string{} : ": " + rep[0].detail);
      queue_conn_.reset(); // a fresh connection next time
    }
  }
  if (why.empty() && on_queue_ && (odd_ = !odd_))
    on_queue_(*queue_conn_);
  if (why.empty()) {
    asking(database_probe);
    if (!match_conn_)
      match_conn_ = ms_->connect();
    if (!match_conn_) {
      why = database_unavailable;
      detail = "cannot connect to " + ms_->describe();
    } else if (auto res = match_conn_->active_session_of("readyz"); !res) {
      why = database_unavailable;
      detail = ms_->describe() + ": " + res.error().detail;
      if (res.error().code == errc::store_unavailable)
        match_conn_.reset();
    }
  }
  std::lock_guard<std::mutex> guard{mtx_};
  probing_.clear();
  database_down_->store(why == database_unavailable, std::memory_order_relaxed);
  if (why != why_) {
    static auto lg = logger("matchd");
    if (why.empty())
      lg->warn("ready again: the stores answer");
    else
      lg->warn("not ready: {} ({})", why, detail);
  }
  why_ = std::move(why);
}

} // namespace mm
