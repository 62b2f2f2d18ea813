// The party actor (actors/party.hpp): its members, its events and its
// states; the ticket's claim, commit and cancel are in party_ticket.cpp.

#include "actors/party.hpp"

#include <algorithm>
#include <chrono>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/party_data.hpp"
#include "core/logger.hpp"

namespace mm::party_detail {

std::shared_ptr<spdlog::logger> party_log() {
  static auto log = logger("party");
  return log;
}

bool live(party_phase p) {
  return p == party_phase::claiming || p == party_phase::queued
         || p == party_phase::finalizing;
}

bool is_member(const party_data& d, const std::string& user) {
  return std::find(d.members.begin(), d.members.end(), user) != d.members.end();
}

party_info info_of(const party_data& d) {
  party_info x;
  x.party = d.id;
  x.code = d.code;
  x.leader = d.members.empty() ? std::string{} : d.members.front();
  x.members = d.members;
  x.phase = d.phase;
  x.queue = d.queue;
  x.ticket = d.ticket;
  x.session_id = d.session_id;
  x.detail = d.detail;
  x.version = d.version;
  return x;
}

namespace {

std::string payload_of(const party_info& x) {
  nlohmann::json j{{"party", x.party},
                   {"code", x.code},
                   {"leader", x.leader},
                   {"members", x.members},
                   {"phase", to_string(x.phase)},
                   {"queue", x.queue},
                   {"ticket", x.ticket},
                   {"session_id", x.session_id},
                   {"detail", x.detail},
                   {"version", x.version}};
  return j.dump();
}

} // namespace

void touch(party_ptr self) {
  auto& d = self->state;
  d.last_touch = self->clock().now();
  if (d.cfg.idle_close_ms == 0 || d.idle_armed || d.solo)
    return;
  d.idle_armed = true;
  self->delayed_send(self, std::chrono::milliseconds(d.cfg.idle_close_ms),
                     release_atom_v);
}

void publish(party_ptr self, const std::vector<std::string>& also) {
  auto& d = self->state;
  ++d.version;
  touch(self);
  if (!d.links.directory)
    return;
  auto x = info_of(d);
  std::vector<std::string> to = d.members;
  for (auto& u : also)
    if (!is_member(d, u))
      to.push_back(u);
  if (to.empty())
    return;
  match_event ev;
  ev.event_id = "party:" + d.id + ":" + std::to_string(d.version);
  ev.queue = d.queue;
  ev.type = party_updated_event;
  ev.payload = payload_of(x);
  ev.user_a = to.front();
  ev.others.assign(to.begin() + 1, to.end());
  // One way: the party has no use for the delivery report, and a request
  // would cost a timer and a reply per change (a member who was not
  // reached asks for the party's state).
  caf::anon_send(d.links.directory, deliver_atom_v, std::move(ev));
}

void close(party_ptr self, const std::string& why) {
  auto& d = self->state;
  auto was = d.members;
  for (auto& u : d.members)
    d.links.registry->leave(u, d.id);
  d.members.clear();
  if (!why.empty())
    d.detail = why;
  publish(self, was); // the last phase: a party of one's final word

  auto x = info_of(d);
  for (auto& rp : d.queue_waiters)
    rp.deliver(x);
  for (auto& rp : d.cancel_waiters)
    rp.deliver(x);
  for (auto& [u, rp] : d.leave_waiters)
    rp.deliver(x);
  d.queue_waiters.clear();
  d.cancel_waiters.clear();
  d.leave_waiters.clear();
  self->quit();
}

/// Removes `user` from the party (the leader's place passes on); an empty
/// party closes.
void remove_member(party_ptr self, const std::string& user) {
  auto& d = self->state;
  d.members.erase(std::remove(d.members.begin(), d.members.end(), user),
                  d.members.end());
  d.links.registry->leave(user, d.id);
  if (d.members.empty()) {
    close(self, user + " left");
    return;
  }
  d.detail = user + " left";
  publish(self, {user});
}

void enter(party_ptr self, party_phase phase, std::string detail) {
  auto& d = self->state;
  d.phase = phase;
  d.detail = std::move(detail);
  ++d.gen;
  if (phase == party_phase::open || phase == party_phase::matched) {
    d.cancelling = false;
    d.giving_up = false;
  }
  switch (phase) {
    case party_phase::open:
      self->become(open_b(self));
      break;
    case party_phase::matched:
      self->become(matched_b(self));
      break;
    default:
      self->become(live_b(self));
  }
  if (d.solo && !live(phase)) {
    close(self, d.detail); // a party of one ends with its ticket
    return;
  }
  publish(self);
  auto x = info_of(d);
  if (phase != party_phase::claiming) {
    for (auto& rp : d.queue_waiters)
      rp.deliver(x);
    d.queue_waiters.clear();
  }
  if (!live(phase)) {
    for (auto& rp : d.cancel_waiters)
      rp.deliver(x);
    d.cancel_waiters.clear();
    auto leaving = std::move(d.leave_waiters);
    d.leave_waiters.clear();
    for (auto& [u, rp] : leaving) {
      if (is_member(d, u))
        remove_member(self, u);
      rp.deliver(info_of(d));
    }
  }
}

namespace {

// -- members ------------------------------------------------------------------

/// `user`, who showed the right invite code, joins the open party.
void join_member(party_ptr self, const std::string& user, info_promise rp) {
  auto& d = self->state;
  if (d.members.size() >= max_match_players) {
    rp.deliver(caf::make_error(errc::party_too_large,
                               "a party holds at most "
                                 + std::to_string(max_match_players)));
    return;
  }
  if (!d.links.registry->enter(user, d.id)) {
    rp.deliver(
      caf::make_error(errc::in_party, user + " is in party "
                                        + d.links.registry->party_of(user)));
    return;
  }
  // In the registry first, then the user's own join is looked at: a join
  // that starts later sees the registry and is refused (in_party).
  auto add = [self, user, rp]() mutable {
    auto& d = self->state;
    if (d.phase != party_phase::open) {
      d.links.registry->leave(user, d.id);
      rp.deliver(
        caf::make_error(errc::in_flight, "the party queued meanwhile"));
      return;
    }
    if (!is_member(d, user))
      d.members.push_back(user);
    d.detail = user + " joined";
    publish(self);
    rp.deliver(info_of(d));
  };
  auto s = d.links.session_of ? d.links.session_of(user) : session_actor{};
  if (!s) {
    add();
    return;
  }
  self->request(s, bound(d), state_atom_v)
    .then(
      [self, user, rp, add](session_state& st) mutable {
        if (st.phase == session_phase::claiming
            || st.phase == session_phase::queued
            || st.phase == session_phase::finalizing) {
          self->state.links.registry->leave(user, self->state.id);
          rp.deliver(
            caf::make_error(errc::duplicate_ticket,
                            user + " is in a join (ticket " + st.ticket + ")"));
          return;
        }
        add();
      },
      [add](caf::error&) mutable { add(); }); // gone: not in a join
}

/// A match event of a member: ours when it names our ticket.
void on_event(party_ptr self, match_event& ev) {
  auto& d = self->state;
  if (!d.seen.insert(ev.event_id))
    return;
  if (is_proposal_event(ev.type)) {
    // A proposal of our ticket ended: look at the ticket now rather than
    // at the next heartbeat (back at its place, or removed). Matched: its
    // match.created follows, and a look would be a claim for nothing.
    if (ev.type == proposal_ended_event && live(d.phase)
        && d.phase != party_phase::claiming) {
      auto j = nlohmann::json::parse(ev.payload, nullptr, false);
      if (!j.is_object() || j.value("outcome", std::string{}) != "matched")
        claim(self, true);
    }
    return;
  }
  if (ev.type == session_ended_event) {
    if (d.phase == party_phase::matched && ev.session_id == d.session_id)
      enter(self, party_phase::open, "session ended");
    return;
  }
  // A match, or a fill of a session (backfill) that took our ticket.
  const char* list = ev.type == "match.created"             ? "users"
                     : ev.type == "session.members_changed" ? "added"
                                                            : nullptr;
  if (list == nullptr || !live(d.phase))
    return;
  auto j = nlohmann::json::parse(ev.payload, nullptr, false);
  if (!j.is_object() || !j.contains(list) || !j[list].is_array())
    return;
  for (auto& u : j[list])
    if (u.is_object() && u.value("ticket", "") == d.store_ticket) {
      d.session_id = ev.session_id;
      enter(self, party_phase::matched, {});
      return;
    }
}

} // namespace

// -- states -------------------------------------------------------------------

using queue_fn = std::function<void(party_queue_request&, info_promise)>;
using user_fn = std::function<void(const std::string&, info_promise)>;
using timer_fn = std::function<void(uint64_t)>;

void ignore_timer(uint64_t) {
  // a timer of a state that is gone
}

behavior make(party_ptr self, queue_fn on_queue, user_fn on_join,
              user_fn on_leave, user_fn on_cancel, timer_fn on_tick) {
  auto member_only = [self](const std::string& user, info_promise& rp) {
    if (is_member(self->state, user))
      return true;
    rp.deliver(caf::make_error(errc::forbidden,
                               user + " is not in party " + self->state.id));
    return false;
  };
  return {
    [self, on_join](join_atom, std::string& user, std::string& code) {
      touch(self);
      auto rp = self->make_response_promise<party_info>();
      if (is_member(self->state, user))
        rp.deliver(info_of(self->state));
      else if (code != self->state.code)
        rp.deliver(caf::make_error(errc::forbidden, "wrong invite code"));
      else
        on_join(user, rp);
      return rp;
    },
    [self, member_only, on_leave](leave_atom, std::string& user) {
      touch(self);
      auto rp = self->make_response_promise<party_info>();
      if (member_only(user, rp))
        on_leave(user, rp);
      return rp;
    },
    [self, on_queue](join_atom, party_queue_request& r) {
      touch(self);
      auto rp = self->make_response_promise<party_info>();
      on_queue(r, rp);
      return rp;
    },
    [self, member_only, on_cancel](cancel_atom, std::string& user) {
      touch(self);
      auto rp = self->make_response_promise<party_info>();
      if (member_only(user, rp))
        on_cancel(user, rp);
      return rp;
    },
    [self](state_atom, std::string& user) -> caf::result<party_info> {
      if (!is_member(self->state, user))
        return caf::make_error(errc::forbidden,
                               user + " is not in party " + self->state.id);
      return info_of(self->state);
    },
    [self](deliver_atom, match_event& ev) { on_event(self, ev); },
    [on_tick](tick_atom, uint64_t gen) { on_tick(gen); },
    [self](retry_atom, uint64_t gen) {
      auto& d = self->state;
      if (gen != d.gen || !live(d.phase))
        return;
      if (d.cancelling && d.phase != party_phase::claiming)
        cancel_at_queue(self);
      else
        claim(self, d.rescan);
    },
    [self](give_up_atom, uint64_t no) {
      auto& d = self->state;
      if (no != d.ticket_no || !live(d.phase))
        return;
      d.giving_up = true;
      start_cancel(self, d.members.front());
    },
    [self](release_atom) {
      auto& d = self->state;
      d.idle_armed = false;
      auto quiet = self->clock().now() - d.last_touch;
      if (d.phase != party_phase::open
          || quiet < std::chrono::milliseconds(d.cfg.idle_close_ms)) {
        touch(self);
        return;
      }
      close(self, "closed after " + std::to_string(d.cfg.idle_close_ms / 1000)
                    + " s without a request");
    },
  };
}

//  open: members join and leave; the leader queues.
behavior open_b(party_ptr self) {
  return make(
    self,
    [self](party_queue_request& r, info_promise rp) {
      queue_party(self, r, rp);
    },
    [self](const std::string& user, info_promise rp) {
      join_member(self, user, rp);
    },
    [self](const std::string& user, info_promise rp) {
      remove_member(self, user);
      rp.deliver(info_of(self->state));
    },
    [](const std::string&, info_promise rp) {
      rp.deliver(caf::make_error(errc::not_found, "the party has no ticket"));
    },
    ignore_timer);
}

/// The same queue request again answers the party (idempotent); another
/// one is refused while a ticket lives (`refusal`).
queue_fn repeat_or(party_ptr self, errc refusal) {
  return [self, refusal](party_queue_request& r, info_promise rp) {
    auto& d = self->state;
    if (r.queue == d.queue && r.ticket == d.ticket && is_member(d, r.user)) {
      if (d.phase == party_phase::claiming)
        d.queue_waiters.push_back(rp);
      else
        rp.deliver(info_of(d));
      return;
    }
    rp.deliver(caf::make_error(refusal, "the party is in ticket " + d.ticket
                                          + " of " + d.queue));
  };
}

//  claiming, queued, finalizing: the ticket lives.
behavior live_b(party_ptr self) {
  auto cancel = [self](const std::string& user, info_promise rp) {
    self->state.cancel_waiters.push_back(rp);
    start_cancel(self, user);
  };
  return make(
    self, repeat_or(self, errc::duplicate_ticket),
    [](const std::string&, info_promise rp) {
      rp.deliver(caf::make_error(errc::in_flight,
                                 "the party is queued: members join while "
                                 "it is open"));
    },
    [self](const std::string& user, info_promise rp) {
      // The ticket goes first (truthfully), then the member.
      self->state.leave_waiters.emplace_back(user, rp);
      start_cancel(self, user);
    },
    cancel,
    [self](uint64_t gen) {
      auto& d = self->state;
      if (gen != d.gen)
        return;
      if (d.cancelling) {
        cancel_at_queue(self);
        return;
      }
      claim(self, true); // the heartbeat: a re-scan, never a new ticket
    });
}

//  matched: the party plays until its session ends.
behavior matched_b(party_ptr self) {
  return make(
    self, repeat_or(self, errc::in_session),
    [](const std::string&, info_promise rp) {
      rp.deliver(
        caf::make_error(errc::in_session, "the party is in a match session"));
    },
    [self](const std::string& user, info_promise rp) {
      remove_member(self, user); // still in the match session
      rp.deliver(info_of(self->state));
    },
    [self](const std::string&, info_promise rp) {
      rp.deliver(info_of(self->state)); // too late: matched
    },
    ignore_timer);
}

} // namespace mm::party_detail

namespace mm {

using namespace party_detail;

party_actor spawn_party(caf::actor_system& sys, std::string id,
                        std::string leader, std::string code, bool solo,
                        party_links links, party_config cfg) {
  return sys.spawn([id, leader, code, solo, links, cfg](party_ptr self) {
    auto& d = self->state;
    d.id = id;
    d.code = code;
    d.solo = solo;
    d.members = {leader};
    d.links = links;
    d.cfg = cfg;
    touch(self);
    return open_b(self);
  });
}

} // namespace mm
