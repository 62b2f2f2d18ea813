#include "actors/directory.hpp"

#include <deque>
#include <map>
#include <set>
#include <unordered_map>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "persistence/logger.hpp"

namespace mm {

namespace {

std::shared_ptr<spdlog::logger> relay_log() {
  static auto log = logger("directory");
  return log;
}

struct directory_state {
  std::unordered_map<std::string, session_actor> sessions; ///< by user
  /// Reverse index: which users point at a session. A session is monitored
  /// while it has at least one entry, so a down message finds its entries
  /// without scanning every user.
  std::map<caf::actor_addr, std::set<std::string>> users_of;
  std::unordered_map<std::string, std::deque<match_event>> pending; ///< by user
  static inline const char* name = "directory";
};

using directory_ptr = directory_actor::stateful_pointer<directory_state>;

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

/// Keeps `ev` for `user` until it registers: one copy per event id, the
/// oldest dropped beyond the limit.
void park(directory_ptr self, const std::string& user, const match_event& ev) {
  auto& q = self->state.pending[user];
  for (auto& kept : q)
    if (kept.event_id == ev.event_id)
      return; // a redelivery: the user gets it once from here
  q.push_back(ev);
  if (q.size() > directory_pending_limit) {
    relay_log()->warn("directory: dropping event {} kept for user '{}' "
                      "(more than {} waiting)",
                      q.front().event_id, user, directory_pending_limit);
    q.pop_front();
  }
}

directory_actor::behavior_type directory_impl(directory_ptr self) {
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    auto i = st.users_of.find(dm.source);
    if (i == st.users_of.end())
      return;
    for (auto& user : i->second) {
      auto j = st.sessions.find(user);
      if (j != st.sessions.end() && j->second.address() == dm.source)
        st.sessions.erase(j);
    }
    st.users_of.erase(i);
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
        for (auto& ev : p->second)
          self->send(session, deliver_atom_v, std::move(ev));
        st.pending.erase(p);
      }
    },
    [self](unregister_atom, std::string& user, session_actor& session) {
      auto& st = self->state;
      auto i = st.sessions.find(user);
      if (i == st.sessions.end() || i->second != session)
        return;
      st.sessions.erase(i);
      release(self, user, session);
    },
    [self](deliver_atom, match_event& ev) -> uint32_t {
      auto& st = self->state;
      uint32_t reached = 0;
      auto to = [&](const std::string& user) {
        if (user.empty())
          return;
        auto i = st.sessions.find(user);
        if (i != st.sessions.end()) {
          self->send(i->second, deliver_atom_v, ev);
          ++reached;
        } else {
          park(self, user, ev);
        }
      };
      to(ev.user_a);
      if (ev.user_b != ev.user_a)
        to(ev.user_b);
      return reached;
    },
  };
}

} // namespace

directory_actor spawn_directory(caf::actor_system& sys) {
  return sys.spawn(directory_impl);
}

} // namespace mm
