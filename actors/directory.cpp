#include "actors/directory.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/log_limit.hpp"
#include "core/logger.hpp"

namespace mm {

namespace {

std::shared_ptr<spdlog::logger> dir_log() {
  static auto log = logger("directory");
  return log;
}

/// Bound of one routed delivery (the gateway bounds its own peer calls
/// tighter): below the relay's 10 s wait for the directory, so a slow route
/// still comes back as a report.
constexpr auto route_timeout = std::chrono::seconds(8);

using time_point = caf::actor_clock::time_point;

/// An event kept for a user without a session here.
struct parked {
  uint64_t seq; ///< arrival number (one counter for all users)
  match_event ev;
};

/// One kept event in arrival order across users: the expiry sweep and the
/// overall bound drop from the front.
struct parked_ref {
  uint64_t seq;
  time_point due;
  std::string user;
};

struct directory_state {
  directory_config cfg;
  std::unordered_map<std::string, session_actor> sessions; ///< by user
  /// Reverse index: which users point at a session. A session is monitored
  /// while it has at least one entry, so a down message finds its entries
  /// without scanning every user.
  std::map<caf::actor_addr, std::set<std::string>> users_of;
  std::unordered_map<std::string, std::deque<parked>> pending; ///< by user
  /// Every kept event by age. An entry whose event already left (handed
  /// over, or dropped by the per-user bound) is skipped when reached; none
  /// outlives its `due`, so this holds at most the events kept within one
  /// `parked_ttl_ms`.
  std::deque<parked_ref> order;
  size_t parked_count = 0; ///< events in `pending`
  uint64_t next_seq = 0;
  bool sweep_armed = false;
  /// Routes users without a session here to their node (may be invalid).
  node_gateway_actor gateway;
  static inline const char* name = "directory";
};

using directory_ptr = directory_actor::stateful_pointer<directory_state>;

/// Publishes the gauges (if any).
void count(directory_ptr self) {
  auto& st = self->state;
  if (auto& m = st.cfg.metrics) {
    m->directory_users.store(static_cast<int64_t>(st.sessions.size()),
                             std::memory_order_relaxed);
    m->parked_events.store(static_cast<int64_t>(st.parked_count),
                           std::memory_order_relaxed);
  }
}

/// Drops the oldest event kept for `ref.user` if it is the one `ref` names
/// (otherwise it left already). Answers whether one was dropped.
bool drop(directory_ptr self, const parked_ref& ref) {
  auto& st = self->state;
  auto i = st.pending.find(ref.user);
  if (i == st.pending.end() || i->second.front().seq != ref.seq)
    return false;
  i->second.pop_front();
  --st.parked_count;
  if (i->second.empty())
    st.pending.erase(i);
  return true;
}

void arm_sweep(directory_ptr self) {
  auto& st = self->state;
  if (st.sweep_armed || st.order.empty()
      || st.order.front().due == time_point::max())
    return;
  st.sweep_armed = true;
  auto wait = st.order.front().due - self->clock().now();
  self->delayed_send(
    self, std::max(wait, decltype(wait){std::chrono::milliseconds(1)}),
    tick_atom_v);
}

/// Drops the kept events past their time.
void sweep(directory_ptr self) {
  auto& st = self->state;
  st.sweep_armed = false;
  auto now = self->clock().now();
  size_t dropped = 0;
  while (!st.order.empty() && st.order.front().due <= now) {
    if (drop(self, st.order.front()))
      ++dropped;
    st.order.pop_front();
  }
  if (dropped > 0)
    dir_log()->info("directory: {} kept event(s) expired (older than {} ms)",
                    dropped, st.cfg.parked_ttl_ms);
  count(self);
  arm_sweep(self);
}

/// Drops `user` from the reverse index of `session`; stops monitoring a
/// session that no entry points at anymore.
void release(directory_ptr self, const std::string& user,
             const session_actor& session) {
  auto& st = self->state;
  auto addr = session.address();
  auto i = st.users_of.find(addr);
  if (i == st.users_of.end())
    return;
  i->second.erase(user);
  if (i->second.empty()) {
    st.users_of.erase(i);
    self->demonitor(addr);
  }
}

/// Keeps `ev` for `user` until it registers, at most `parked_ttl_ms`: one
/// copy per event id, the oldest dropped beyond the per-user and the overall
/// bounds.
void park(directory_ptr self, const std::string& user, const match_event& ev) {
  auto& st = self->state;
  auto& q = st.pending[user];
  for (auto& kept : q)
    if (kept.ev.event_id == ev.event_id)
      return; // a redelivery: the user gets it once from here
  auto seq = st.next_seq++;
  q.push_back(parked{seq, ev});
  ++st.parked_count;
  auto due = st.cfg.parked_ttl_ms == 0
               ? time_point::max()
               : self->clock().now()
                   + std::chrono::milliseconds(st.cfg.parked_ttl_ms);
  st.order.push_back(parked_ref{seq, due, user});
  if (q.size() > st.cfg.parked_per_user) {
    MM_LOG_LIMITED(dir_log(), warn,
                   "directory: dropping event {} kept for user '{}' "
                   "(more than {} waiting)",
                   q.front().ev.event_id, user, st.cfg.parked_per_user);
    q.pop_front(); // its `order` entry is skipped when reached
    --st.parked_count;
  }
  while (st.parked_count > st.cfg.parked_max && !st.order.empty()) {
    auto ref = std::move(st.order.front());
    st.order.pop_front();
    if (drop(self, ref))
      MM_LOG_LIMITED(dir_log(), warn,
                     "directory: dropping an event kept for user '{}' "
                     "(more than {} kept in all)",
                     ref.user, st.cfg.parked_max);
  }
  arm_sweep(self);
}

/// Hands `ev` to the session of `user` here, or keeps it for the user.
/// Never routes. Returns what happened.
delivery_report deliver_here(directory_ptr self, const std::string& user,
                             const match_event& ev) {
  delivery_report rep;
  auto& st = self->state;
  auto i = st.sessions.find(user);
  if (i != st.sessions.end()) {
    self->send(i->second, deliver_atom_v, ev);
    rep.reached = 1;
  } else {
    park(self, user, ev);
    count(self);
    rep.kept = 1;
  }
  return rep;
}

/// Tells the gateway (if any) that `user` has no session here anymore.
void gone(directory_ptr self, const std::string& user) {
  if (auto& gw = self->state.gateway)
    self->send(gw, unregister_atom_v, user);
}

/// Delivers `ev` to every user it names: to their sessions here, through the gateway
/// to their nodes, or kept here; calls `done` once with the sum (at once
/// when nothing is routed).
void deliver(directory_ptr self, match_event ev,
             std::function<void(const delivery_report&)> done) {
  auto& st = self->state;
  delivery_report rep;
  std::vector<std::string> remote;
  auto to = [&](const std::string& user) {
    if (user.empty())
      return;
    if (st.sessions.count(user) == 0 && st.gateway)
      remote.push_back(user);
    else
      rep += deliver_here(self, user, ev);
  };
  to(ev.user_a);
  if (ev.user_b != ev.user_a)
    to(ev.user_b);
  for (const auto& user : ev.others) // a group session's other members
    to(user);
  if (remote.empty()) {
    done(rep);
    return;
  }
  // Users without a session here: to their node, through the gateway.
  auto acc = std::make_shared<delivery_report>(rep);
  auto open = std::make_shared<size_t>(remote.size());
  auto shared_ev = std::make_shared<match_event>(std::move(ev));
  auto shared_done
    = std::make_shared<std::function<void(const delivery_report&)>>(
      std::move(done));
  for (auto& user : remote) {
    auto one = [self, acc, open, user, shared_ev,
                shared_done](delivery_report r) {
      if (r.reached + r.kept == 0) {
        // Connected nowhere, or its node could not be reached: kept
        // here (or handed over, if the user registered here meanwhile).
        auto here = deliver_here(self, user, *shared_ev);
        if (here.reached > 0) {
          r = here;
        } else if (r.failed == 0) {
          auto unrouted = r.unrouted;
          r = here;
          r.unrouted = unrouted;
        }
      }
      *acc += r;
      if (--*open == 0)
        (*shared_done)(*acc);
    };
    self->request(st.gateway, route_timeout, route_atom_v, user, *shared_ev)
      .then([one](delivery_report& r) { one(r); },
            [self, one, user, shared_ev](caf::error& err) {
              MM_LOG_LIMITED(dir_log(), warn,
                             "directory: event {} for user '{}' not "
                             "routed: {}",
                             shared_ev->event_id, user,
                             self->system().render(err));
              delivery_report r;
              r.failed = 1;
              one(r);
            });
  }
}

directory_actor::behavior_type directory_impl(directory_ptr self,
                                              directory_config cfg) {
  self->state.cfg = std::move(cfg);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    auto i = st.users_of.find(dm.source);
    if (i == st.users_of.end())
      return;
    for (auto& user : i->second) {
      auto j = st.sessions.find(user);
      if (j != st.sessions.end() && j->second.address() == dm.source) {
        st.sessions.erase(j);
        gone(self, user);
      }
    }
    st.users_of.erase(i);
    count(self);
  });
  return {
    [self](register_atom, std::string& user, session_actor& session) {
      if (!session)
        return;
      auto& st = self->state;
      auto& slot = st.sessions[user];
      if (slot != session) {
        if (slot)
          release(self, user, slot);
        slot = session;
        auto& users = st.users_of[session.address()];
        if (users.empty())
          self->monitor(session);
        users.insert(user);
      }
      // A user reconnecting gets what arrived while it had no session here.
      auto p = st.pending.find(user);
      if (p != st.pending.end()) {
        for (auto& kept : p->second)
          self->send(session, deliver_atom_v, std::move(kept.ev));
        st.parked_count -= p->second.size();
        st.pending.erase(p); // their `order` entries are skipped when reached
      }
      count(self);
      // The cluster's user -> node map, and the replay of the user's active
      // match (a reconnect on another node).
      if (st.gateway)
        self->send(st.gateway, register_atom_v, user);
    },
    [self](unregister_atom, std::string& user, session_actor& session) {
      auto& st = self->state;
      auto i = st.sessions.find(user);
      if (i == st.sessions.end() || i->second != session)
        return;
      st.sessions.erase(i);
      release(self, user, session);
      gone(self, user);
      count(self);
    },
    [self](deliver_atom, match_event& ev) {
      auto rp = self->make_response_promise<delivery_report>();
      deliver(self, std::move(ev),
              [rp](const delivery_report& r) mutable { rp.deliver(r); });
      return rp;
    },
    [self](deliver_atom, std::vector<match_event>& evs) {
      // One message for a relay's batch: the reports in the events' order,
      // answered once the last one is known.
      using reports = std::vector<delivery_report>;
      auto rp = self->make_response_promise<reports>();
      if (evs.empty()) {
        rp.deliver(reports{});
        return rp;
      }
      auto acc = std::make_shared<reports>(evs.size());
      auto open = std::make_shared<size_t>(evs.size());
      for (size_t i = 0; i < evs.size(); ++i)
        deliver(self, std::move(evs[i]),
                [rp, acc, open, i](const delivery_report& r) mutable {
                  (*acc)[i] = r;
                  if (--*open == 0)
                    rp.deliver(std::move(*acc));
                });
      return rp;
    },
    [self](deliver_atom, std::string& user, match_event& ev) {
      return deliver_here(self, user, ev);
    },
    [self](attach_atom, node_gateway_actor& gw) {
      self->state.gateway = std::move(gw);
    },
    [self](tick_atom) { sweep(self); },
  };
}

} // namespace

directory_actor spawn_directory(caf::actor_system& sys, directory_config cfg) {
  return sys.spawn(directory_impl, std::move(cfg));
}

} // namespace mm
