// The lazy clock and the coordinator that runs it (actors/lazy_clock.hpp).

#include "actors/lazy_clock.hpp"

#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/detail/set_thread_name.hpp>
#include <caf/detail/thread_safe_actor_clock.hpp>
#include <caf/policy/work_sharing.hpp>
#include <caf/policy/work_stealing.hpp>
#include <caf/scheduler/coordinator.hpp>

namespace mm {

std::chrono::steady_clock::time_point
request_timeout_due(std::chrono::steady_clock::time_point t,
                    std::chrono::steady_clock::time_point now) {
  using duration = std::chrono::steady_clock::duration;
  if (t - now < std::chrono::seconds(1))
    return t;
  // Not coarser: at tens of thousands of requests a second, a 1 s grid
  // ships a second's worth of stale timeouts into the actors in one burst.
  duration grid = std::chrono::milliseconds(125);
  auto off = t.time_since_epoch() % grid;
  return off == duration::zero() ? t : t + (grid - off);
}

namespace {

using base_clock = caf::detail::thread_safe_actor_clock;

/// CAF's clock logic (simple_actor_clock: the schedule, cancellation,
/// shipping) behind a queue that wakes its thread only when it must.
/// Derives from thread_safe_actor_clock because the coordinator's clock()
/// returns one; none of that class's own queue or loop is used.
class lazy_clock final : public base_clock {
 public:
  /// More queued events than this wake the thread (bounds the queue).
  static constexpr size_t max_queued = 4096;

  void set_ordinary_timeout(time_point t, caf::abstract_actor* self,
                            caf::atom_value type, uint64_t id) override {
    push(std::make_unique<ordinary_timeout>(t, self->ctrl(), type, id), t);
  }

  void set_request_timeout(time_point t, caf::abstract_actor* self,
                           caf::message_id id) override {
    t = request_timeout_due(t, now());
    push(std::make_unique<request_timeout>(t, self->ctrl(), id), t);
  }

  void set_multi_timeout(time_point t, caf::abstract_actor* self,
                         caf::atom_value type, uint64_t id) override {
    push(std::make_unique<multi_timeout>(t, self->ctrl(), type, id), t);
  }

  // A cancellation only has to be applied before the next event is shipped,
  // which the loop does: it never wakes the thread.
  void cancel_ordinary_timeout(caf::abstract_actor* self,
                               caf::atom_value type) override {
    push(std::make_unique<ordinary_timeout_cancellation>(self->id(), type),
         never);
  }

  void cancel_request_timeout(caf::abstract_actor* self,
                              caf::message_id id) override {
    push(std::make_unique<request_timeout_cancellation>(self->id(), id), never);
  }

  void cancel_timeouts(caf::abstract_actor* self) override {
    push(std::make_unique<timeouts_cancellation>(self->id()), never);
  }

  void schedule_message(time_point t, caf::strong_actor_ptr receiver,
                        caf::mailbox_element_ptr content) override {
    push(std::make_unique<actor_msg>(t, std::move(receiver),
                                     std::move(content)),
         t);
  }

  void schedule_message(time_point t, caf::group target,
                        caf::strong_actor_ptr sender,
                        caf::message content) override {
    push(std::make_unique<group_msg>(t, std::move(target), std::move(sender),
                                     std::move(content)),
         t);
  }

  void cancel_all() override {
    push(std::make_unique<drop_all>(), time_point::min());
  }

  /// The dispatch loop; returns after `stop`.
  void run() {
    std::vector<unique_event_ptr> batch;
    std::unique_lock<std::mutex> guard{mtx_};
    for (;;) {
      batch.swap(queue_);
      guard.unlock();
      for (auto& ev : batch)
        if (!apply(std::move(ev)))
          return;
      batch.clear();
      trigger_expired_timeouts();
      auto next = schedule_.empty() ? never : schedule_.begin()->first;
      guard.lock();
      if (!queue_.empty())
        continue; // came in meanwhile, perhaps due earlier
      wake_at_ = next;
      woken_ = false;
      if (next == never)
        cv_.wait(guard, [this] { return woken_; });
      else
        cv_.wait_until(guard, next, [this] { return woken_; });
      wake_at_ = time_point::min(); // awake: nobody needs to wake us
    }
  }

  /// Ends `run` (what is still scheduled is dropped, not shipped).
  void stop() {
    push(std::make_unique<shutdown>(), time_point::min());
  }

 private:
  static constexpr time_point never = time_point::max();

  void push(unique_event_ptr ev, time_point due) {
    std::lock_guard<std::mutex> guard{mtx_};
    queue_.emplace_back(std::move(ev));
    if (due < wake_at_ || queue_.size() >= max_queued) {
      wake_at_ = time_point::min();
      woken_ = true;
      cv_.notify_one();
    }
  }

  /// Applies one queued event to the schedule; false on shutdown.
  bool apply(unique_event_ptr ev) {
    switch (ev->subtype) {
      case ordinary_timeout_cancellation_type:
        handle(static_cast<ordinary_timeout_cancellation&>(*ev));
        break;
      case request_timeout_cancellation_type:
        handle(static_cast<request_timeout_cancellation&>(*ev));
        break;
      case timeouts_cancellation_type:
        handle(static_cast<timeouts_cancellation&>(*ev));
        break;
      case drop_all_type:
        schedule_.clear();
        actor_lookup_.clear();
        break;
      case shutdown_type:
        schedule_.clear();
        actor_lookup_.clear();
        return false;
      case ordinary_timeout_type:
        add(static_cast<ordinary_timeout*>(ev.release()));
        break;
      case multi_timeout_type:
        add(static_cast<multi_timeout*>(ev.release()));
        break;
      case request_timeout_type:
        add(static_cast<request_timeout*>(ev.release()));
        break;
      case actor_msg_type:
        add(static_cast<actor_msg*>(ev.release()));
        break;
      case group_msg_type:
        add(static_cast<group_msg*>(ev.release()));
        break;
      default:
        break;
    }
    return true;
  }

  template <class T>
  void add(T* x) {
    auto due = x->due;
    add_schedule_entry(due, std::unique_ptr<T>{x});
  }

  std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<unique_event_ptr> queue_; ///< guarded by mtx_
  /// When the sleeping loop wakes by itself; min() while it is awake (no
  /// push needs to wake it). Guarded by mtx_.
  time_point wake_at_ = time_point::min();
  bool woken_ = false; ///< guarded by mtx_
};

/// CAF's coordinator with the lazy clock: its own clock thread stays idle.
template <class Policy>
class lazy_clock_coordinator final
  : public caf::scheduler::coordinator<Policy> {
 public:
  using super = caf::scheduler::coordinator<Policy>;

  explicit lazy_clock_coordinator(caf::actor_system& sys) : super(sys) {
    // nop
  }

  base_clock& clock() noexcept override {
    return clock_;
  }

 protected:
  void start() override {
    thread_ = std::thread{[this] {
      caf::detail::set_thread_name("mm.clock");
      this->system().thread_started();
      clock_.run();
      this->system().thread_terminates();
    }};
    super::start();
  }

  void stop() override {
    super::stop(); // the workers first, as CAF stops its own clock last
    clock_.stop();
    thread_.join();
  }

 private:
  lazy_clock clock_;
  std::thread thread_;
};

} // namespace

void use_lazy_clock(caf::actor_system_config& cfg) {
  auto policy = caf::get_or(cfg, "scheduler.policy", caf::atom("stealing"));
  if (policy == caf::atom("testing")
      || caf::get_or(cfg, "scheduler.enable-profiling", false))
    return;
  if (policy == caf::atom("sharing"))
    cfg.module_factories.emplace_back(
      [](caf::actor_system& sys) -> caf::actor_system::module* {
        return new lazy_clock_coordinator<caf::policy::work_sharing>(sys);
      });
  else
    cfg.module_factories.emplace_back(
      [](caf::actor_system& sys) -> caf::actor_system::module* {
        return new lazy_clock_coordinator<caf::policy::work_stealing>(sys);
      });
}

} // namespace mm
