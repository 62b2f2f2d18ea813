#include "app/matchd/client_link.hpp"

#include <functional>

#include <caf/all.hpp>

#include "core/ticket_id.hpp"
#include <nlohmann/json.hpp>

#include "actors/engine.hpp"
#include "app/matchd/console_stats.hpp"
#include "app/matchd/hub.hpp"
#include "app/matchd/tracing.hpp"

namespace mm {

namespace {

using json = nlohmann::json;

/// JSON text that never throws: bytes that are not UTF-8 (a detail from a
/// store, a reason from a payload) become U+FFFD.
std::string text(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

struct link_data {
  std::string user;
  std::shared_ptr<engine> eng;
  std::shared_ptr<hub> events;
  client_link_config cfg;
  session_actor session;
  session_state last;       ///< the session's last published state
  std::string ticket;       ///< the client's ticket of the current/last join
  std::string reason;       ///< why we cancelled, for the WebSocket notice
  size_t joins_pending = 0; ///< joins sent to the session, not answered yet
  size_t asking = 0;        ///< requests to the session not answered yet
  bool ticking = false;
  bool held = false; ///< `session` was told a WebSocket is open (pin_atom)
  // Time to match for the console: from the request of a join to its
  // match.created event, as the user lives it.
  bool timing = false;  ///< a join of `timing_ticket` awaits its match
  bool counted = false; ///< that join was counted in `joins`
  std::string timing_ticket;
  std::chrono::steady_clock::time_point joined_at;
  std::string timing_queue;
  std::shared_ptr<queue_console_stats> q; ///< counters of `q_name`
  std::string q_name;
  std::string last_matched; ///< session of the last match.created (dedupe)
  // The trace of the current join (cfg.tracer): wall clock ns.
  std::string trace_ticket;
  int64_t trace_join_ns = 0;
  int64_t trace_answered_ns = 0;
  std::string last_ended; ///< session of the last session.ended (dedupe)
  static inline const char* name = "client_link";
};

using link_ptr = client_link_actor::stateful_pointer<link_data>;

bool live(session_phase p) {
  return p == session_phase::claiming || p == session_phase::queued
         || p == session_phase::finalizing;
}

/// The session's answer as the client sees it: its own ticket id.
session_state as_client(link_ptr self, session_state st) {
  st.ticket = self->state.ticket;
  return st;
}

/// True when `ticket` is the client's current or last ticket.
bool owns(const link_data& d, const std::string& ticket) {
  return !d.ticket.empty() && ticket == d.ticket;
}

caf::error unknown_ticket() {
  return caf::make_error(errc::not_found, "no such ticket of this user");
}

/// The console's counters of `queue` (cached: one lookup per queue change).
queue_console_stats* console_queue(link_data& d, const std::string& queue) {
  if (!d.cfg.stats)
    return nullptr;
  if (!d.q || d.q_name != queue) {
    d.q = d.cfg.stats->queue(queue);
    d.q_name = queue;
  }
  return d.q.get();
}

/// A join of `ticket` to `queue` was requested: its wait starts now,
/// unless the same join is already waiting (a retry).
void console_join_sent(link_data& d, const std::string& ticket,
                       const std::string& queue) {
  if (!d.cfg.stats || (d.timing && d.timing_ticket == ticket))
    return;
  d.timing = true;
  d.counted = false;
  d.timing_ticket = ticket;
  d.timing_queue = queue;
  d.joined_at = std::chrono::steady_clock::now();
}

/// The session answered that join: it counts once it is accepted; a join
/// that ended without a match, or a retry of one matched already, stops.
void console_join_answered(link_data& d, const std::string& ticket,
                           const session_state* st) {
  if (!d.timing || d.timing_ticket != ticket)
    return;
  bool accepted = st != nullptr
                  && (live(st->phase) || st->phase == session_phase::matched);
  if (accepted && st->phase == session_phase::matched
      && st->session_id == d.last_matched) {
    d.timing = false; // a retry of a join whose match was seen
    return;
  }
  if (!accepted) {
    if (!d.counted)
      d.timing = false;
    return;
  }
  if (!d.counted) {
    d.counted = true;
    if (auto* q = console_queue(d, d.timing_queue))
      q->joins.fetch_add(1, std::memory_order_relaxed);
  }
}

/// A match event reached the user (at least once: duplicates are skipped).
void console_event(link_data& d, const match_event& ev) {
  if (!d.cfg.stats || ev.queue.empty())
    return;
  if (ev.type == session_ended_event) {
    if (ev.session_id == d.last_ended)
      return;
    d.last_ended = ev.session_id;
    if (auto* q = console_queue(d, ev.queue))
      q->ended.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (ev.session_id == d.last_matched)
    return;
  d.last_matched = ev.session_id;
  auto* q = console_queue(d, ev.queue);
  if (q == nullptr)
    return;
  q->matched.fetch_add(1, std::memory_order_relaxed);
  const auto& mine = ev.user_a == d.user ? ev.ticket_a : ev.ticket_b;
  if (d.timing && d.timing_ticket == mine) {
    d.timing = false;
    q->time_to_match.observe(std::chrono::steady_clock::now() - d.joined_at);
  }
}

/// The presence check of a live join: only while no WebSocket of the user
/// is open (an open one is its sign of life, and its close arms this
/// again, `detach_atom`), so that a connected waiting user costs no timer.
void arm_presence(link_ptr self) {
  auto& d = self->state;
  if (d.ticking || d.cfg.client_ttl_ms == 0 || d.events->connected(d.user))
    return;
  d.ticking = true;
  self->delayed_send(
    self, std::chrono::milliseconds(d.cfg.client_ttl_ms / 2 + 1), tick_atom_v);
}

using state_rp = caf::typed_response_promise<session_state>;

/// The session `used` is down (idle release): a fresh one, subscribed to
/// this link, unless that happened already.
void renew(link_ptr self, const session_actor& used) {
  auto& d = self->state;
  if (d.session != used)
    return;
  d.session = d.eng->renew_session(d.user, used,
                                   caf::actor_cast<subscriber_actor>(self));
  d.held = false;
  self->monitor(d.session);
}

/// Asks the user's session. A session that stopped meanwhile (its idle
/// release) never saw the request: the link renews it and asks once more.
template <class T, class... Ts>
void ask_session(link_ptr self, std::function<void(T&)> ok,
                 std::function<void(caf::error&)> bad, Ts... xs) {
  auto& d = self->state;
  auto used = d.session;
  ++d.asking;
  self->request(used, caf::infinite, xs...)
    .then(
      [self, ok](T& x) {
        --self->state.asking;
        ok(x);
      },
      [self, ok, bad, used, xs...](caf::error& err) {
        auto& d = self->state;
        --d.asking;
        if (err != caf::sec::request_receiver_down) {
          bad(err);
          return;
        }
        renew(self, used);
        ++d.asking;
        self->request(d.session, caf::infinite, xs...)
          .then(
            [self, ok](T& x) {
              --self->state.asking;
              ok(x);
            },
            [self, bad](caf::error& err) {
              --self->state.asking;
              bad(err);
            });
      });
}

void ignore_state(session_state&) {
  // a presence cancel's answer: the state reaches us as an update too
}

void ignore_error(caf::error&) {
  // a presence cancel: the next tick tries again
}

/// While a WebSocket of the user is open, the session must not be released
/// (events for the user are routed to it): the link holds it (pin_atom),
/// which costs a connected user no timer and no request, and lets go when
/// the last one closes (its quiet time then counts again).
void hold_session(link_ptr self) {
  auto& d = self->state;
  bool want = d.eng->config().session.idle_release_ms > 0
              && d.events->connected(d.user);
  if (want == d.held)
    return;
  d.held = want;
  self->send(d.session, pin_atom_v, want);
}

void cancel_join(link_ptr self, std::string reason, state_rp rp) {
  self->state.reason = std::move(reason);
  ask_session<session_state>(
    self,
    [self, rp](session_state& st) mutable {
      rp.deliver(as_client(self, std::move(st)));
    },
    [rp](caf::error& err) mutable { rp.deliver(std::move(err)); },
    cancel_atom_v);
}

client_link_actor::behavior_type
link_impl(link_ptr self, std::string user, std::shared_ptr<engine> eng,
          std::shared_ptr<hub> events, client_link_config cfg) {
  auto& d = self->state;
  d.user = user;
  d.eng = eng;
  d.events = std::move(events);
  d.cfg = cfg;
  d.last.user = user;
  d.session = eng->session(user, caf::actor_cast<subscriber_actor>(self));
  // The session stops when the user is idle (engine::session): so does this
  // link, unless a WebSocket opened or a request is on its way meanwhile.
  self->monitor(d.session);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& d = self->state;
    if (dm.source != d.session.address())
      return; // an older session
    if (d.asking > 0 || d.joins_pending > 0 || d.events->connected(d.user)) {
      renew(self, d.session);
      hold_session(self);
      return;
    }
    self->quit();
  });
  hold_session(self);
  return {
    [self](session_state& st) {
      auto& d = self->state;
      d.last = st;
      if (live(st.phase)) {
        arm_presence(self);
        return;
      }
      if (st.phase == session_phase::cancelled
          || st.phase == session_phase::failed
          || st.phase == session_phase::timed_out) {
        d.timing = false; // this join will not be matched
        json j{{"type", "state"},
               {"ticket", d.ticket},
               {"state", to_string(st.phase)}};
        auto detail = !d.reason.empty() ? d.reason : st.detail;
        if (!detail.empty())
          j["detail"] = detail;
        d.events->publish(d.user, text(j));
      }
    },
    [self](match_event& ev) {
      auto& d = self->state;
      bool fresh = ev.type == "match.created"
                   && ev.session_id != d.last_matched;
      console_event(d, ev);
      d.events->publish(d.user, event_json(ev));
      if (fresh && d.cfg.tracer && d.trace_join_ns != 0) {
        d.cfg.tracer->record(d.user, ev.queue, ev.session_id, d.trace_join_ns,
                             d.trace_answered_ns, match_timings::now_ns());
        d.trace_join_ns = 0; // one trace per join
      }
      if (ev.type == "match.created")
        d.last_matched = ev.session_id;
    },
    [self](join_atom, join_request& req) -> caf::result<session_state> {
      auto& d = self->state;
      if (!live(d.last.phase) || req.ticket == d.ticket) {
        if (req.ticket != d.ticket)
          d.reason.clear();
        d.ticket = req.ticket;
      }
      console_join_sent(d, req.ticket, req.queue);
      if (d.cfg.tracer
          && (d.trace_join_ns == 0 || d.trace_ticket != req.ticket)) {
        d.trace_ticket = req.ticket; // a retry keeps the first request's time
        d.trace_join_ns = match_timings::now_ns();
        d.trace_answered_ns = 0;
      }
      auto rp = self->make_response_promise<session_state>();
      ++d.joins_pending;
      // A copy made before the call: `req` is moved into its arguments,
      // in an order the language leaves open.
      auto t = req.ticket;
      ask_session<session_state>(
        self,
        [self, rp, t](session_state& st) mutable {
          auto& d = self->state;
          --d.joins_pending;
          console_join_answered(d, t, &st);
          if (d.trace_ticket == t && d.trace_answered_ns == 0)
            d.trace_answered_ns = match_timings::now_ns();
          rp.deliver(as_client(self, std::move(st)));
        },
        [self, rp, t](caf::error& err) mutable {
          --self->state.joins_pending;
          console_join_answered(self->state, t, nullptr);
          rp.deliver(std::move(err));
        },
        join_atom_v, std::move(req));
      return rp;
    },
    [self](end_atom, std::string& session, std::string& reason) {
      auto rp = self->make_response_promise<end_result>();
      ask_session<end_result>(
        self, [rp](end_result& r) mutable { rp.deliver(std::move(r)); },
        [rp](caf::error& err) mutable { rp.deliver(std::move(err)); },
        end_atom_v, std::move(session), std::move(reason));
      return rp;
    },
    [self](leave_atom, std::string& session, std::string& reason) {
      auto rp = self->make_response_promise<leave_result>();
      ask_session<leave_result>(
        self, [rp](leave_result& r) mutable { rp.deliver(std::move(r)); },
        [rp](caf::error& err) mutable { rp.deliver(std::move(err)); },
        leave_atom_v, std::move(session), std::move(reason));
      return rp;
    },
    [self](state_atom, std::string& ticket) -> caf::result<session_state> {
      auto& d = self->state;
      if (!owns(d, ticket))
        return unknown_ticket();
      auto rp = self->make_response_promise<session_state>();
      ask_session<session_state>(
        self,
        [self, rp](session_state& st) mutable {
          if (st.phase == session_phase::idle)
            rp.deliver(unknown_ticket());
          else
            rp.deliver(as_client(self, std::move(st)));
        },
        [rp](caf::error& err) mutable { rp.deliver(std::move(err)); },
        state_atom_v);
      return rp;
    },
    [self](state_atom) -> caf::result<session_state> {
      auto rp = self->make_response_promise<session_state>();
      ask_session<session_state>(
        self,
        [self, rp](session_state& st) mutable {
          rp.deliver(as_client(self, std::move(st)));
        },
        [rp](caf::error& err) mutable { rp.deliver(std::move(err)); },
        state_atom_v);
      return rp;
    },
    [self](cancel_atom, std::string& ticket,
           std::string& reason) -> caf::result<session_state> {
      auto& d = self->state;
      if (!owns(d, ticket))
        return unknown_ticket();
      auto rp = self->make_response_promise<session_state>();
      cancel_join(self, std::move(reason), rp);
      return rp;
    },
    [self](flush_atom) -> caf::result<bool> {
      auto& d = self->state;
      // A join on its way to the session counts as live: the session takes
      // the join before this cancel (same sender, same order).
      if (!live(d.last.phase) && d.joins_pending == 0)
        return true;
      auto rp = self->make_response_promise<bool>();
      // The outcome is certain once the session answers the cancel.
      d.reason = "shutting_down";
      ask_session<session_state>(
        self, [rp](session_state&) mutable { rp.deliver(true); },
        // not_found: the pending join was refused; nothing is live.
        [rp](caf::error&) mutable { rp.deliver(true); }, cancel_atom_v);
      return rp;
    },
    [self](tick_atom) {
      auto& d = self->state;
      d.ticking = false;
      if (!live(d.last.phase))
        return;
      // Finalizing: the finalizer decides soon; no need to cancel.
      if (d.last.phase != session_phase::finalizing
          && !d.events->connected(d.user)
          && d.events->idle(d.user)
               > std::chrono::milliseconds(d.cfg.client_ttl_ms)) {
        d.reason = "client_gone";
        ask_session<session_state>(self, ignore_state, ignore_error,
                                   cancel_atom_v);
        return;
      }
      arm_presence(self);
    },
    [self](attach_atom) {
      hold_session(self);
      return true;
    },
    [self](detach_atom) {
      hold_session(self);
      if (live(self->state.last.phase))
        arm_presence(self);
    },
  };
}

} // namespace

std::string event_json(const match_event& ev) {
  auto p = json::parse(ev.payload, nullptr, false);
  if (ev.type == party_updated_event && p.is_object()) {
    // The party as its members see it (docs/api.md, "Parties").
    p["type"] = ev.type;
    p["event_id"] = ev.event_id;
    return text(p);
  }
  json j{{"type", ev.type},
         {"event_id", ev.event_id},
         {"session_id", ev.session_id},
         {"queue", ev.queue},
         {"users", {ev.user_a, ev.user_b}},
         {"tickets", {ev.ticket_a, ev.ticket_b}}};
  if (!ev.others.empty() && p.is_object() && p.contains("users")
      && p["users"].is_array()) {
    // A group: every member, its ticket (as its client named it) and team.
    json users = json::array();
    json tickets = json::array();
    for (auto& u : p["users"]) {
      if (!u.is_object())
        continue;
      auto user = u.value("user", std::string{});
      users.push_back(user);
      tickets.push_back(
        client_ticket_of(u.value("ticket", std::string{}), user));
    }
    j["users"] = users;
    j["tickets"] = tickets;
    if (p.contains("teams"))
      j["teams"] = p["teams"];
  }
  if (is_proposal_event(ev.type) && p.is_object()) {
    // A proposal (docs/api.md, "Proposals"): its id, deadline, and for
    // its end this member's outcome.
    j.erase("session_id");
    for (auto key : {"proposal", "deadline_ms", "accept_timeout_s", "outcome"})
      if (p.contains(key))
        j[key] = p[key];
  }
  if (p.is_object() && ev.type == "session.member_left") {
    j["user"] = p.value("user", std::string{});
    j["reason"] = p.value("reason", std::string{});
    j["remaining"] = p.value("remaining", 0);
  }
  if (p.is_object() && ev.type == "session.members_changed") {
    // A fill (backfill): who came, with team and ticket, and the count.
    json added = json::array();
    if (p.contains("added") && p["added"].is_array())
      for (auto& a : p["added"]) {
        if (!a.is_object())
          continue;
        auto user = a.value("user", std::string{});
        added.push_back(
          {{"user", user},
           {"ticket", client_ticket_of(a.value("ticket", std::string{}), user)},
           {"team", a.value("team", 0)}});
      }
    j["added"] = added;
    j["remaining"] = p.value("remaining", 0);
  }
  if (ev.type == session_ended_event && p.is_object()) {
    // Who ended it and why, from the outbox row's payload.
    j["ended_by"] = p.value("ended_by", std::string{});
    j["reason"] = p.value("reason", std::string{});
  }
  return text(j);
}

client_link_actor spawn_client_link(caf::actor_system& sys, std::string user,
                                    std::shared_ptr<engine> eng,
                                    std::shared_ptr<hub> events,
                                    client_link_config cfg) {
  return sys.spawn(link_impl, std::move(user), std::move(eng),
                   std::move(events), cfg);
}

} // namespace mm
