#include "actors/party.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <set>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/log_limit.hpp"
#include "core/logger.hpp"
#include "core/ticket_id.hpp"

namespace mm {

namespace {

std::shared_ptr<spdlog::logger> party_log() {
  static auto log = logger("party");
  return log;
}

using info_promise = caf::typed_response_promise<party_info>;

struct party_data {
  std::string id;
  std::string code;
  bool solo = false;
  std::vector<std::string> members; // the leader first
  party_links links;
  party_config cfg;
  party_phase phase = party_phase::open;
  // The current or last ticket.
  std::string queue;
  std::string ticket; // the client's
  std::string store_ticket;
  std::string token;
  std::string session_id;
  std::string detail;
  const rule_set* rs = nullptr;
  std::vector<party_member> spec_members;
  uint64_t version = 0;
  uint64_t gen = 0;       // timers of an older state are ignored
  uint64_t ticket_no = 0; // the give-up timer belongs to one ticket
  uint32_t backoff_ms = 0;
  bool rescan = false;     // the pending claim is a re-scan
  bool cancelling = false; // a member's cancel (or the give-up) is on
  std::string cancelled_by;
  bool giving_up = false;
  std::vector<info_promise> queue_waiters;
  std::vector<info_promise> cancel_waiters;
  std::vector<std::pair<std::string, info_promise>> leave_waiters;
  std::set<std::string> seen; // event ids
  std::deque<std::string> seen_order;
  caf::actor_clock::time_point last_touch;
  bool idle_armed = false;
  static inline const char* name = "party";
};

using party_ptr = party_actor::stateful_pointer<party_data>;
using behavior = party_actor::behavior_type;

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

behavior open_b(party_ptr self);
behavior live_b(party_ptr self);
behavior matched_b(party_ptr self);
void claim(party_ptr self, bool rescan);
void cancel_at_queue(party_ptr self);

void touch(party_ptr self) {
  auto& d = self->state;
  d.last_touch = self->clock().now();
  if (d.cfg.idle_close_ms == 0 || d.idle_armed || d.solo)
    return;
  d.idle_armed = true;
  self->delayed_send(self, std::chrono::milliseconds(d.cfg.idle_close_ms),
                     release_atom_v);
}

/// Tells every member (and `also`, e.g. one who just left) the party as it
/// is now: one `party.updated` event, routed like a match's.
void publish(party_ptr self, const std::vector<std::string>& also = {}) {
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
  self
    ->request(d.links.directory,
              std::chrono::milliseconds(d.cfg.request_timeout_ms),
              deliver_atom_v, std::move(ev))
    .then([](delivery_report&) {}, [](caf::error&) {});
}

/// The party closes: every member leaves the registry and is told.
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

/// Enters `phase` (and its behavior) and answers who waited on it.
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

bool store_trouble(const caf::error& err) {
  return err == caf::sec::request_timeout
         || (err.category() == caf::atom("mm")
             && err.code() == static_cast<uint8_t>(errc::store_unavailable));
}

caf::timespan bound(const party_data& d) {
  return std::chrono::milliseconds(d.cfg.request_timeout_ms);
}

void retry_later(party_ptr self) {
  auto& d = self->state;
  d.backoff_ms = d.backoff_ms == 0 ? 100 : std::min(2 * d.backoff_ms, 2000u);
  self->delayed_send(self, std::chrono::milliseconds(d.backoff_ms),
                     retry_atom_v, d.gen);
}

void arm_tick(party_ptr self, uint32_t ms) {
  self->delayed_send(self, std::chrono::milliseconds(ms), tick_atom_v,
                     self->state.gen);
}

/// The whole ticket failed for a reason the store named.
void failed(party_ptr self, const caf::error& err) {
  auto what = self->system().render(err);
  MM_LOG_LIMITED(party_log(), warn, "party {}: ticket {} failed: {}",
                 self->state.id, self->state.ticket, what);
  auto waiters = std::move(self->state.queue_waiters);
  self->state.queue_waiters.clear();
  for (auto& rp : waiters)
    rp.deliver(err);
  enter(self, party_phase::open, "failed: " + what);
}

// -- the ticket's commit ------------------------------------------------------

void on_verdict(party_ptr self, uint64_t gen, group_verdict& v) {
  auto& d = self->state;
  if (gen != d.gen || d.phase != party_phase::finalizing)
    return;
  if (v.committed) {
    d.session_id = v.session_id;
    enter(self, party_phase::matched, {});
    return;
  }
  if (std::find(v.removed.begin(), v.removed.end(), d.store_ticket)
      != v.removed.end()) {
    enter(self, party_phase::open,
          d.cancelling ? "cancelled by " + d.cancelled_by
                       : "removed: " + v.detail);
    return;
  }
  // Back at its place: look again at once (the others may still match).
  d.detail = "requeued";
  claim(self, true);
}

/// Commits a group this party's claim made (with or without its ticket).
void commit(party_ptr self, const group_claim_result& r, bool ours) {
  auto& d = self->state;
  group_commit g;
  g.queue = d.queue;
  g.group = r.group;
  g.min_players = d.rs != nullptr ? d.rs->shape.min_players : 2;
  g.tickets = r.tickets;
  auto gen = d.gen;
  self->request(d.links.finalizer, caf::infinite, finalize_atom_v, std::move(g))
    .then(
      [self, gen, ours](group_verdict& v) {
        if (ours)
          on_verdict(self, gen, v);
      },
      [self, gen, ours](caf::error& err) {
        // The group finalizer is a core actor: the engine stops without it.
        if (ours && gen == self->state.gen)
          failed(self, err);
      });
}

// -- the claim ----------------------------------------------------------------

/// A re-scan found the ticket settled or lapsed: the database says whether
/// the party plays (matched), a member is busy elsewhere (open), or the
/// ticket lapsed and is filed anew (I2).
void after_gone(party_ptr self) {
  auto& d = self->state;
  if (!d.links.lifecycle) {
    claim(self, false);
    return;
  }
  auto gen = d.gen;
  auto leader = d.members.front();
  self->request(d.links.lifecycle, bound(d), state_atom_v, leader)
    .then(
      [self, gen](std::string& session) {
        auto& d = self->state;
        if (gen != d.gen)
          return;
        if (!session.empty()) {
          d.session_id = session;
          enter(self, party_phase::matched, {});
        } else if (d.cancelling) {
          enter(self, party_phase::open, "cancelled by " + d.cancelled_by);
        } else {
          claim(self, false);
        }
      },
      [self, gen](caf::error&) {
        if (gen == self->state.gen)
          retry_later(self);
      });
}

void on_claim(party_ptr self, uint64_t gen, group_claim_result& r) {
  auto& d = self->state;
  if (gen != d.gen || !live(d.phase))
    return;
  d.backoff_ms = 0;
  switch (r.outcome) {
    case group_claim_outcome::gone:
      after_gone(self);
      return;
    case group_claim_outcome::claimed_by_other:
      d.token = r.token;
      enter(self, party_phase::finalizing, "in a group being committed");
      if (d.cancelling)
        d.links.cancels->add(d.queue, d.members.front(), d.store_ticket);
      arm_tick(self, d.cancelling ? d.cfg.recheck_ms : d.cfg.heartbeat_ms);
      return;
    case group_claim_outcome::matched:
      d.token = r.token;
      if (r.in_group) {
        enter(self, party_phase::finalizing, "committing");
        if (d.cancelling) // seen at the commit's first checkpoint
          d.links.cancels->add(d.queue, d.members.front(), d.store_ticket);
        commit(self, r, true);
        return;
      }
      commit(self, r, false); // older tickets matched; ours still waits
      [[fallthrough]];
    case group_claim_outcome::queued:
      d.token = r.token;
      if (d.cancelling) {
        cancel_at_queue(self);
        return;
      }
      if (d.phase != party_phase::queued || !d.queue_waiters.empty())
        enter(self, party_phase::queued, d.detail);
      arm_tick(self, r.more ? 50 : d.cfg.heartbeat_ms);
      return;
  }
}

void claim(party_ptr self, bool rescan) {
  auto& d = self->state;
  if (d.phase != party_phase::claiming && d.phase != party_phase::queued)
    enter(self, party_phase::claiming, d.detail);
  d.rescan = rescan;
  group_ticket_spec s;
  s.queue = d.queue;
  s.ticket = d.store_ticket;
  s.node = d.cfg.node;
  s.ttl_ms = d.cfg.ttl_ms;
  s.rules = d.rs != nullptr ? d.rs->spec : std::string{};
  s.shape = d.rs != nullptr ? d.rs->shape.spec : std::string{};
  s.members = d.spec_members;
  s.rescan = rescan;
  auto gen = d.gen;
  self->request(d.links.broker, bound(d), claim_atom_v, std::move(s))
    .then([self, gen](group_claim_result& r) { on_claim(self, gen, r); },
          [self, gen](caf::error& err) {
            if (gen != self->state.gen)
              return;
            if (store_trouble(err))
              retry_later(self);
            else
              failed(self, err);
          });
}

// -- the cancel ---------------------------------------------------------------

/// Cancels the ticket at the queue: removed while it waits (open); held by
/// a claim, the group's commit honours it at its checkpoints and this
/// looks again every recheck_ms.
void cancel_at_queue(party_ptr self) {
  auto& d = self->state;
  auto gen = d.gen;
  self
    ->request(d.links.broker, bound(d), cancel_atom_v,
              group_leave{d.queue, d.members.front(), d.token})
    .then(
      [self, gen](group_cancel_result& r) {
        auto& d = self->state;
        if (gen != d.gen)
          return;
        if (!r.in_flight) {
          enter(self, party_phase::open,
                d.giving_up ? "timed out" : "cancelled by " + d.cancelled_by);
          return;
        }
        d.links.cancels->add(d.queue, d.members.front(), d.store_ticket);
        if (d.phase != party_phase::finalizing)
          enter(self, party_phase::finalizing, "cancelling");
        arm_tick(self, d.cfg.recheck_ms);
      },
      [self, gen](caf::error& err) {
        if (gen != self->state.gen)
          return;
        if (store_trouble(err))
          retry_later(self);
        else
          after_gone(self); // not_found / stale_token: not waiting any more
      });
}

void start_cancel(party_ptr self, const std::string& by) {
  auto& d = self->state;
  if (d.cancelling)
    return;
  d.cancelling = true;
  d.cancelled_by = by;
  if (d.phase == party_phase::queued)
    cancel_at_queue(self);
  else if (d.phase == party_phase::finalizing)
    // Our own commit decides (its checkpoints see the cancel), or the
    // re-check does for another's.
    d.links.cancels->add(d.queue, d.members.front(), d.store_ticket);
  // claiming: decided when the claim answers
}

// -- queueing the party -------------------------------------------------------

/// Checks the leader's request against the queue's shape and rules; fills
/// the ticket's members. A refusal changes nothing.
caf::error check_request(party_data& d, party_queue_request& r,
                         std::vector<party_member>& out, const rule_set*& rs) {
  if (d.members.empty() || r.user != d.members.front())
    return caf::make_error(errc::forbidden, "only the leader queues the party");
  if (!valid_client_id(r.ticket))
    return caf::make_error(errc::invalid_argument,
                           "ticket must be 1..128 bytes of [A-Za-z0-9._:@-]");
  rs = nullptr;
  if (d.cfg.rules)
    if (auto i = d.cfg.rules->find(r.queue); i != d.cfg.rules->end())
      rs = &i->second;
  if (rs == nullptr || !rs->has_shape)
    return caf::make_error(errc::invalid_argument,
                           "queue '" + r.queue
                             + "' pairs users: a party queues only a queue "
                               "with a shape (docs/groups.md)");
  auto& sh = rs->shape;
  auto size = static_cast<uint32_t>(d.members.size());
  auto room = sh.teams > 0 ? sh.team_size : sh.max_players;
  if (size > sh.party_max || size > room)
    return caf::make_error(errc::party_too_large,
                           "a party of " + std::to_string(size)
                             + " exceeds queue '" + r.queue + "''s party_max "
                             + std::to_string(std::min(sh.party_max, room)));
  for (auto& [user, attrs] : r.attrs)
    if (!is_member(d, user))
      return caf::make_error(errc::invalid_argument,
                             "attributes for " + user
                               + ", who is not in the party");
  out.clear();
  for (auto& user : d.members) {
    auto i = r.attrs.find(user);
    auto text = i == r.attrs.end() ? std::string{"{}"} : i->second;
    auto c = check_attributes(*rs, text);
    if (!c)
      return caf::make_error(c.error().code,
                             "member " + user + ": " + c.error().detail);
    party_member m;
    m.user = user;
    m.attrs = c->json;
    m.rk = c->rk;
    if (!sh.balance.empty()) {
      auto j = nlohmann::json::parse(c->json, nullptr, false);
      if (j.is_object() && j.contains(sh.balance) && j[sh.balance].is_number())
        m.balance
          = std::to_string(static_cast<int64_t>(j[sh.balance].get<double>()));
    }
    out.push_back(std::move(m));
  }
  return {};
}

/// Every member must be free of an active session (I8: a user in a
/// session never waits in a queue); then the ticket is claimed.
/// A refused queue request changes nothing, but a party of one made for it
/// closes.
void refuse(party_ptr self, info_promise& rp, caf::error err) {
  rp.deliver(std::move(err));
  auto& d = self->state;
  if (d.solo && d.phase == party_phase::open)
    close(self, "refused");
}

void queue_party(party_ptr self, party_queue_request& r, info_promise rp) {
  auto& d = self->state;
  std::vector<party_member> members;
  const rule_set* rs = nullptr;
  if (auto err = check_request(d, r, members, rs)) {
    refuse(self, rp, std::move(err));
    return;
  }
  auto roster = d.members;
  auto begin = [self, r, members, rs, rp, roster]() mutable {
    auto& d = self->state;
    if (d.phase != party_phase::open) {
      rp.deliver(
        caf::make_error(errc::duplicate_ticket, "the party queued meanwhile"));
      return;
    }
    if (d.members != roster) { // a member came or left during the checks
      refuse(self, rp,
             caf::make_error(errc::conflict, "the party changed meanwhile"));
      return;
    }
    d.queue = r.queue;
    d.ticket = r.ticket;
    d.rs = rs;
    d.spec_members = std::move(members);
    d.store_ticket = make_store_ticket(make_nonce(), 0, d.members.front(),
                                       r.ticket);
    d.token.clear();
    d.session_id.clear();
    d.cancelling = false;
    d.giving_up = false;
    d.backoff_ms = 0;
    ++d.ticket_no;
    if (r.give_up_after_s > 0)
      self->delayed_send(self, std::chrono::seconds(r.give_up_after_s),
                         give_up_atom_v, d.ticket_no);
    d.queue_waiters.push_back(rp);
    d.detail.clear();
    claim(self, false);
  };
  if (!d.links.lifecycle) {
    begin();
    return;
  }
  // Every member asked at once (the lifecycle actor batches the lookups);
  // a busy member refuses, naming itself.
  struct pending {
    size_t left = 0;
    bool refused = false;
  };
  auto p = std::make_shared<pending>();
  p->left = d.members.size();
  for (auto& user : d.members)
    self->request(d.links.lifecycle, bound(d), state_atom_v, user)
      .then(
        [self, p, user, begin, rp](std::string& session) mutable {
          if (p->refused)
            return;
          if (!session.empty()) {
            p->refused = true;
            refuse(self, rp,
                   caf::make_error(errc::in_session,
                                   user + " is in session " + session));
            return;
          }
          if (--p->left == 0)
            begin();
        },
        [self, p, rp](caf::error& err) mutable {
          if (p->refused)
            return;
          p->refused = true;
          refuse(self, rp, std::move(err));
        });
}

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
  if (!d.seen.insert(ev.event_id).second)
    return;
  d.seen_order.push_back(ev.event_id);
  if (d.seen_order.size() > 256) {
    d.seen.erase(d.seen_order.front());
    d.seen_order.pop_front();
  }
  if (ev.type == session_ended_event) {
    if (d.phase == party_phase::matched && ev.session_id == d.session_id)
      enter(self, party_phase::open, "session ended");
    return;
  }
  if (ev.type != "match.created" || !live(d.phase))
    return;
  auto j = nlohmann::json::parse(ev.payload, nullptr, false);
  if (!j.is_object() || !j.contains("users") || !j["users"].is_array())
    return;
  for (auto& u : j["users"])
    if (u.is_object() && u.value("ticket", "") == d.store_ticket) {
      d.session_id = ev.session_id;
      enter(self, party_phase::matched, {});
      return;
    }
}

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

} // namespace

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
