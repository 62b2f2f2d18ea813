// The driver actors of e2e_bench (see e2e_driver.hpp): joins with an
// in-flight bound and pacing, the user records filled from the session_state
// changes and match_events each user's session sends its subscriber.

#include "bench/e2e_driver.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <unordered_map>

#include "actors/engine.hpp"
#include "bench/bench_caf.hpp"
#include "bench/bench_common.hpp"

namespace mm::e2e_bench {

using namespace mm::bench;

namespace {

struct driver_state {
  std::shared_ptr<engine> eng;
  std::shared_ptr<shared_counts> sh;
  subscriber_actor me;
  std::string prefix;
  std::vector<std::string> queue_names;
  size_t first = 0, step = 1; ///< users first, first + step, ...
  size_t limit = 1;           ///< users in flight
  double rate = 0;            ///< joins/s of this driver; 0: no pacing
  uint64_t start_ns = 0;
  bool tick_armed = false;
  size_t next = 0, outstanding = 0;
  std::unordered_map<caf::actor_id, uint32_t> by_actor; ///< session -> k
  driver_report rep;
  static inline const char* name = "e2e_driver";
};

using driver_ptr = caf::stateful_actor<driver_state>*;

/// The record of the user whose session sent the current message; null
/// (counted) when no session of ours sent it.
user_rec* sender_rec(driver_ptr self) {
  auto& st = self->state;
  auto& from = self->current_sender();
  if (from) {
    auto i = st.by_actor.find(from->id());
    if (i != st.by_actor.end())
      return &st.rep.users[i->second];
  }
  ++st.rep.unknown_senders;
  return nullptr;
}

size_t queue_of(const driver_state& st, const user_rec& r) {
  auto k = static_cast<size_t>(&r - st.rep.users.data());
  return (st.first + k * st.step) % st.queue_names.size();
}

void pump(driver_ptr self);

/// The user will not be matched any more (matched or failed): frees its
/// in-flight slot.
void settle(driver_ptr self, user_rec& r) {
  auto& st = self->state;
  if (r.settled)
    return;
  r.settled = true;
  --st.outstanding;
  st.sh->settled_q[queue_of(st, r)].fetch_add(1, std::memory_order_relaxed);
  pump(self);
}

void join(driver_ptr self, size_t k) {
  auto& st = self->state;
  auto i = st.first + k * st.step;
  auto q = i % st.queue_names.size();
  auto session = st.eng->session(user_name(st.prefix, i), st.me);
  st.by_actor.emplace(session.id(), static_cast<uint32_t>(k));
  ++st.outstanding;
  st.sh->joined.fetch_add(1, std::memory_order_relaxed);
  st.sh->joined_q[q].fetch_add(1, std::memory_order_relaxed);
  st.rep.users[k].join_ns = steady_ns();
  self
    ->request(session, caf::infinite, join_atom_v,
              join_request{st.queue_names[q], "t" + std::to_string(i), "{}"})
    .then(
      [](session_state&) {
        // The state after the first step; the subscriber hears it too.
      },
      [self, k](caf::error& err) {
        auto& st = self->state;
        if (st.rep.join_errors++ == 0)
          st.rep.first_error = "join: " + self->system().render(err);
        settle(self, st.rep.users[k]);
      });
}

/// Joins users while the in-flight bound and the pacing allow.
void pump(driver_ptr self) {
  auto& st = self->state;
  if (st.sh->stop.load(std::memory_order_relaxed))
    return;
  auto n = st.rep.users.size();
  auto due = n;
  if (st.rate > 0) {
    auto elapsed = static_cast<double>(steady_ns() - st.start_ns) / 1e9;
    due = std::min(n, static_cast<size_t>(st.rate * elapsed) + 1);
  }
  while (st.next < due && st.outstanding < st.limit)
    join(self, st.next++);
  if (st.next < n && st.next >= due && !st.tick_armed) {
    // Paced: come back when the next join is due (the timer's resolution
    // is about a millisecond; a late tick joins what fell due meanwhile).
    st.tick_armed = true;
    self->delayed_send(self, std::chrono::milliseconds(1), tick_atom_v);
  }
}

caf::behavior driver(driver_ptr self, std::shared_ptr<engine> eng,
                     std::shared_ptr<shared_counts> sh, std::string prefix,
                     std::vector<std::string> queue_names, size_t first,
                     size_t step, size_t count, size_t limit, double rate,
                     driver_report* out) {
  auto& st = self->state;
  st.eng = std::move(eng);
  st.sh = std::move(sh);
  st.me = caf::actor_cast<subscriber_actor>(self);
  st.prefix = std::move(prefix);
  st.queue_names = std::move(queue_names);
  st.first = first;
  st.step = step;
  st.limit = std::max<size_t>(1, limit);
  st.rate = rate;
  st.rep.users.resize(count);
  st.by_actor.reserve(count);
  st.start_ns = steady_ns();
  pump(self);
  return {
    [self](session_state& s) {
      auto* r = sender_rec(self);
      if (r == nullptr)
        return;
      r->phase = s.phase;
      if (s.phase == session_phase::matched && r->state_ns == 0) {
        r->state_ns = steady_ns();
        r->state_session = s.session_id;
      } else if (s.phase == session_phase::failed) {
        auto& rep = self->state.rep;
        if (rep.failed++ == 0 && rep.first_error.empty())
          rep.first_error = "failed: " + s.detail;
        r->detail = s.detail;
        if (r->events == 0)
          settle(self, *r);
      }
    },
    [self](match_event& ev) {
      auto* r = sender_rec(self);
      if (r == nullptr)
        return;
      if (r->events++ > 0)
        return; // a second event (a violation, counted at the end)
      r->event_ns = steady_ns();
      r->event_id = std::move(ev.event_id);
      r->session_id = std::move(ev.session_id);
      r->queue = std::move(ev.queue);
      r->user_a = std::move(ev.user_a);
      r->user_b = std::move(ev.user_b);
      self->state.sh->matched.fetch_add(1, std::memory_order_relaxed);
      settle(self, *r);
    },
    [self](tick_atom) {
      self->state.tick_armed = false;
      pump(self);
    },
    [self, out](flush_atom) {
      // The report: everything this driver saw, handed over by move; the
      // answer orders it before the main thread reads it.
      *out = std::move(self->state.rep);
      self->quit();
      return uint32_t{1};
    },
  };
}

} // namespace

std::string user_name(const std::string& prefix, size_t i) {
  return prefix + "u" + std::to_string(i);
}

std::vector<caf::actor>
spawn_drivers(caf::actor_system& sys, const std::shared_ptr<engine>& eng,
              const std::shared_ptr<shared_counts>& sh,
              const std::string& prefix,
              const std::vector<std::string>& queue_names, size_t users,
              size_t in_flight, double rate,
              std::vector<driver_report>& reports) {
  auto drivers = reports.size();
  std::vector<caf::actor> drvs;
  for (size_t d = 0; d < drivers; ++d) {
    auto count = (users - d + drivers - 1) / drivers;
    auto limit = (in_flight + drivers - 1 - d) / drivers;
    drvs.push_back(sys.spawn(driver, eng, sh, prefix, queue_names, d, drivers,
                             count, limit, rate / static_cast<double>(drivers),
                             &reports[d]));
  }
  return drvs;
}

void collect_reports(caf::scoped_actor& self,
                     const std::vector<caf::actor>& drvs) {
  for (auto& d : drvs)
    self->request(d, std::chrono::seconds(30), flush_atom_v)
      .receive([](uint32_t) {},
               [&](caf::error& err) {
                 throw std::runtime_error("driver report: "
                                          + self->system().render(err));
               });
}

} // namespace mm::e2e_bench
