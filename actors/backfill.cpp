// Backfill (actors/backfill.hpp). One request's life:
//
//   ask --read--> [seats open?] --no--> answered "full" (no request)
//                      | yes
//                      v
//                    filed --heartbeat--> re-scan --matched--> fill committed
//                      ^  \                  | gone (filled, or lapsed)   |
//                      |   \--every few ----+--> read --seats open--> filed
//                      |      heartbeats         \--ended / full--> dropped
//                      \-- a member left (refresh): cancelled, filed anew
//
// The request in the queue is the truth of who may fill it; this actor
// only keeps it present and reads the session for its roster.

#include "actors/backfill.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/member_spec.hpp"
#include "actors/worker_bound.hpp"
#include "core/log_limit.hpp"
#include "core/logger.hpp"
#include "persistence/matchdb/match_store.hpp"

namespace mm {

namespace {

std::shared_ptr<spdlog::logger> bf_log() {
  static auto log = logger("backfill");
  return log;
}

/// A session read by the worker.
struct session_read {
  std::string session_id;
  outcome<std::optional<match_record>> result{errc::store_unavailable,
                                              "not read"};
};

using session_read_ptr = std::shared_ptr<session_read>;

} // namespace

} // namespace mm

// Local only: the read goes to this node's worker and back.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mm::session_read_ptr)

namespace mm {

namespace {

using read_worker_actor
  = caf::typed_actor<caf::replies_to<session_read_ptr>::with<session_read_ptr>>;

read_worker_actor::behavior_type
read_worker(read_worker_actor::pointer,
            std::shared_ptr<match_store_factory> factory) {
  std::shared_ptr<match_store> store = factory->connect();
  return {
    [store](session_read_ptr& r) {
      r->result = store->find_session(r->session_id);
      return r;
    },
  };
}

using clock_type = std::chrono::steady_clock;
using info_promise = caf::typed_response_promise<backfill_info>;

/// One session's request.
struct request {
  std::string queue;
  const rule_set* rs = nullptr;
  group_ticket_spec spec;       ///< as filed (empty ticket: not filed)
  bool busy = false;            ///< a read or a claim is under way
  bool refresh = false;         ///< the roster changed: filed anew
  uint32_t ticks = 0;           ///< heartbeats since the session was read
  clock_type::time_point since; ///< filed (the fill's latency)
};

struct backfill_state {
  backfill_config cfg;
  queue_broker_actor broker;
  group_finalizer_actor finalizer;
  std::unique_ptr<match_store> inline_store; ///< non-blocking store
  read_worker_actor worker;                  ///< blocking store
  std::map<std::string, request> requests;   ///< by session id
  static inline const char* name = "mm.backfill";
};

using bf_ptr = backfill_actor::stateful_pointer<backfill_state>;

caf::timespan bound(const backfill_state& st) {
  return std::chrono::milliseconds(st.cfg.request_timeout_ms);
}

/// Reads session `id`, then calls `k` with what the store answered.
template <class K>
void read(bf_ptr self, const std::string& id, K k) {
  auto& st = self->state;
  auto r = std::make_shared<session_read>();
  r->session_id = id;
  if (st.inline_store) {
    r->result = st.inline_store->find_session(id);
    k(r->result);
    return;
  }
  self->request(st.worker, worker_bound(st.cfg.request_timeout_ms), r)
    .then([k](session_read_ptr& done) mutable { k(done->result); },
          [k](caf::error& err) mutable {
            outcome<std::optional<match_record>> f{
              errc::store_unavailable, "session not read: " + to_string(err)};
            k(f);
          });
}

uint32_t active_count(const match_record& rec) {
  uint32_t n = 0;
  for (auto& m : rec.members)
    n += m.active ? 1 : 0;
  return n;
}

/// The queue's rules when it has a shape with backfill, else null.
const rule_set* backfill_rules(const backfill_state& st,
                               const std::string& queue) {
  if (!st.cfg.rules)
    return nullptr;
  auto i = st.cfg.rules->find(queue);
  if (i == st.cfg.rules->end() || !i->second.has_shape
      || i->second.shape.backfill == queue_shape::backfill_mode::off)
    return nullptr;
  return &i->second;
}

/// Why `user` may not ask for players for `rec` (none: it may).
caf::error refusal(const backfill_state& st, const std::string& id,
                   const std::optional<match_record>& rec,
                   const std::string& user) {
  if (!rec)
    return caf::make_error(errc::not_found, "no session " + id);
  if (rec->status != session_status::active)
    return caf::make_error(errc::not_found, "session " + id + " ended");
  if (!user.empty()) {
    const session_member* m = nullptr;
    for (auto& x : rec->members)
      if (x.user == user)
        m = &x;
    // (A pair's session lists no members: its two users.)
    bool pair_member = rec->members.empty()
                       && (rec->user_a == user || rec->user_b == user);
    if (m == nullptr && !pair_member)
      return caf::make_error(errc::forbidden,
                             user + " is not in session " + id);
    if (m != nullptr && !m->active)
      return caf::make_error(errc::forbidden,
                             user + " is no longer in session " + id);
  }
  if (rec->group.empty())
    return caf::make_error(errc::invalid_argument,
                           "session " + id + " is a pair's: no seat to fill");
  if (!backfill_rules(st, rec->queue))
    return caf::make_error(errc::invalid_argument,
                           "queue '" + rec->queue
                             + "' has no backfill (its shape's \"backfill\")");
  return {};
}

backfill_info info_of(const match_record& rec, const rule_set& rs,
                      const char* state) {
  return backfill_info{rec.session_id, rec.queue, state, active_count(rec),
                       rs.shape.max_players};
}

/// The request of `rec` as the claim reads it: the active members with
/// their teams, the ones that left as former members.
group_ticket_spec spec_of(const backfill_state& st, const match_record& rec,
                          const rule_set& rs) {
  group_ticket_spec s;
  s.queue = rec.queue;
  s.ticket = backfill_ticket(rec.session_id);
  s.node = st.cfg.node;
  s.ttl_ms = st.cfg.ttl_ms;
  s.rules = rs.spec;
  s.shape = rs.shape.spec;
  for (auto& m : rec.members) {
    if (!m.active) {
      s.former.push_back(m.user);
      continue;
    }
    auto pm = member_of(rs, m.user, m.attrs.empty() ? "{}" : m.attrs);
    // A member whose attributes no longer pass (the rules changed) is
    // still a member: it takes its seat, and constrains nobody.
    s.members.push_back(pm ? std::move(*pm)
                           : party_member{m.user, {}, {}, {}, m.attrs});
    s.teams.push_back(rs.shape.teams > 0 ? m.team + 1 : 0);
  }
  // The latest that left (a fill never takes them in; the database
  // refuses the older ones too, with the request filed anew).
  if (s.former.size() > 64)
    s.former.erase(s.former.begin(), s.former.end() - 64);
  return s;
}

void claim(bf_ptr self, const std::string& id);
void look(bf_ptr self, const std::string& id);

/// Ends the request of `id` here, and in the queue when it was filed.
void drop(bf_ptr self, const std::string& id) {
  auto& st = self->state;
  auto i = st.requests.find(id);
  if (i == st.requests.end())
    return;
  if (!i->second.spec.ticket.empty())
    self
      ->request(st.broker, bound(st), cancel_atom_v,
                backfill_ref{i->second.queue, id})
      .then([](group_cancel_result&) {}, [](caf::error&) {});
  st.requests.erase(i);
}

/// What the session's read says of its request: ended or full, it ends;
/// else it is filed (anew, with the roster read) or re-scanned.
void on_read(bf_ptr self, const std::string& id,
             outcome<std::optional<match_record>>& res) {
  auto& st = self->state;
  auto i = st.requests.find(id);
  if (i == st.requests.end())
    return;
  auto& r = i->second;
  r.busy = false;
  r.ticks = 0;
  if (!res)
    return; // asked again at the next heartbeat
  auto& rec = *res;
  if (!rec || rec->status != session_status::active
      || active_count(*rec) >= r.rs->shape.max_players) {
    drop(self, id);
    return;
  }
  if (!r.spec.ticket.empty() && !r.refresh) {
    claim(self, id);
    return;
  }
  if (r.refresh && !r.spec.ticket.empty()) {
    // The roster changed: the request goes and comes back with it (a
    // claimed one is settled by its claimer first: then it is gone).
    r.refresh = false;
    r.busy = true;
    self
      ->request(st.broker, bound(st), cancel_atom_v, backfill_ref{r.queue, id})
      .then(
        [self, id](group_cancel_result& c) {
          auto j = self->state.requests.find(id);
          if (j == self->state.requests.end())
            return;
          j->second.busy = false;
          if (c.in_flight)
            j->second.refresh = true; // once it is gone
          else
            j->second.spec.ticket.clear();
          look(self, id);
        },
        [self, id](caf::error&) {
          auto j = self->state.requests.find(id);
          if (j != self->state.requests.end()) {
            j->second.busy = false;
            j->second.spec.ticket.clear();
            look(self, id);
          }
        });
    return;
  }
  r.refresh = false;
  r.spec = spec_of(st, *rec, *r.rs);
  r.since = clock_type::now();
  claim(self, id);
}

void look(bf_ptr self, const std::string& id) {
  auto i = self->state.requests.find(id);
  if (i == self->state.requests.end() || i->second.busy)
    return;
  i->second.busy = true;
  read(self, id, [self, id](outcome<std::optional<match_record>>& res) {
    on_read(self, id, res);
  });
}

/// Commits a fill this request's own claim made.
void commit(bf_ptr self, const std::string& id, group_claim_result& res) {
  auto& st = self->state;
  auto i = st.requests.find(id);
  if (i == st.requests.end())
    return;
  auto& r = i->second;
  group_commit g;
  g.queue = r.queue;
  g.group = res.group;
  g.min_players = r.rs->shape.min_players;
  g.max_players = r.rs->shape.max_players;
  g.team_size = r.rs->shape.team_size;
  g.tickets = std::move(res.tickets);
  auto since = r.since;
  self->request(st.finalizer, caf::infinite, finalize_atom_v, std::move(g))
    .then(
      [self, id, since](group_verdict& v) {
        auto& st = self->state;
        if (v.committed && v.created && st.cfg.metrics) {
          auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      clock_type::now() - since)
                      .count();
          st.cfg.metrics->backfill_fill_latency.observe_us(
            static_cast<uint64_t>(us));
        }
        auto j = st.requests.find(id);
        if (j == st.requests.end())
          return;
        j->second.busy = false;
        j->second.spec.ticket.clear(); // released or removed: read anew
        look(self, id);
      },
      [self, id](caf::error&) {
        // The group finalizer is a core actor: the engine stops without it.
        auto j = self->state.requests.find(id);
        if (j != self->state.requests.end())
          j->second.busy = false;
      });
}

void on_claim(bf_ptr self, const std::string& id,
              outcome<group_claim_result> res) {
  auto& st = self->state;
  auto i = st.requests.find(id);
  if (i == st.requests.end())
    return;
  auto& r = i->second;
  r.busy = false;
  if (!res) {
    MM_LOG_LIMITED(bf_log(), warn, "backfill of session {}: {}", id,
                   res.error().detail);
    return; // again at the next heartbeat
  }
  switch (res->outcome) {
    case group_claim_outcome::matched:
      if (res->in_group) {
        r.busy = true;
        commit(self, id, *res);
      }
      return;
    case group_claim_outcome::gone:
    case group_claim_outcome::removed:
      // Filled by another node's claim (then settled), or lapsed: the
      // session says which, and whether seats are still open.
      r.spec.ticket.clear();
      look(self, id);
      return;
    case group_claim_outcome::queued:
    case group_claim_outcome::claimed_by_other:
      r.spec.rescan = true;
      return;
  }
}

void claim(bf_ptr self, const std::string& id) {
  auto& st = self->state;
  auto i = st.requests.find(id);
  if (i == st.requests.end())
    return;
  auto& r = i->second;
  r.busy = true;
  self->request(st.broker, bound(st), claim_atom_v, r.spec)
    .then(
      [self, id](group_claim_result& res) { on_claim(self, id, res); },
      [self, id](caf::error& err) {
        on_claim(self, id, failure{errc::store_unavailable, to_string(err)});
      });
}

/// A new request for `rec` (checked), filed now.
void start(bf_ptr self, const match_record& rec, const rule_set& rs) {
  auto& st = self->state;
  auto& r = st.requests[rec.session_id];
  r.queue = rec.queue;
  r.rs = &rs;
  r.spec = spec_of(st, rec, rs);
  r.since = clock_type::now();
  if (auto& m = st.cfg.metrics)
    m->backfill_requests.fetch_add(1, std::memory_order_relaxed);
  claim(self, rec.session_id);
}

void arm(bf_ptr self) {
  self->delayed_send(
    self, std::chrono::milliseconds(self->state.cfg.heartbeat_ms), tick_atom_v);
}

backfill_actor::behavior_type
backfill_impl(bf_ptr self, std::shared_ptr<match_store_factory> factory,
              queue_broker_actor broker, group_finalizer_actor finalizer,
              backfill_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.broker = std::move(broker);
  st.finalizer = std::move(finalizer);
  auto probe = factory->connect();
  if (probe->blocking())
    st.worker = self->spawn<caf::detached + caf::linked>(read_worker, factory);
  else
    st.inline_store = std::move(probe);
  arm(self);
  return {
    [self](backfill_atom, backfill_ask& ask) -> caf::result<backfill_info> {
      auto rp = self->make_response_promise<backfill_info>();
      auto id = ask.session_id;
      if (auto f = check_id("session", id); f.code != errc::none) {
        rp.deliver(caf::make_error(errc::invalid_argument, f.detail));
        return rp;
      }
      read(self, id,
           [self, rp, ask](outcome<std::optional<match_record>>& res) mutable {
             auto& st = self->state;
             if (!res) {
               rp.deliver(
                 caf::make_error(res.error().code, res.error().detail));
               return;
             }
             auto& rec = *res;
             if (auto err = refusal(st, ask.session_id, rec, ask.user)) {
               rp.deliver(std::move(err));
               return;
             }
             auto& rs = *backfill_rules(st, rec->queue);
             if (active_count(*rec) >= rs.shape.max_players) {
               rp.deliver(info_of(*rec, rs, "full"));
               return;
             }
             if (!st.requests.count(ask.session_id)) {
               if (st.requests.size() >= st.cfg.max_requests) {
                 rp.deliver(caf::make_error(errc::conflict,
                                            "too many backfill requests on "
                                            "this node"));
                 return;
               }
               start(self, *rec, rs);
             }
             rp.deliver(info_of(*rec, rs, "waiting"));
           });
      return rp;
    },
    [self](backfill_atom, std::string& id, std::string& queue) {
      auto& st = self->state;
      if (auto i = st.requests.find(id); i != st.requests.end()) {
        i->second.refresh = !queue.empty(); // the roster changed
        look(self, id); // ('' : it ended, and so does its request)
        return;
      }
      if (queue.empty())
        return;
      auto* rs = backfill_rules(st, queue);
      if (rs == nullptr
          || rs->shape.backfill != queue_shape::backfill_mode::automatic
          || st.requests.size() >= st.cfg.max_requests)
        return;
      read(self, id,
           [self, id](outcome<std::optional<match_record>>& res) mutable {
             auto& st = self->state;
             if (!res || !*res || st.requests.count(id))
               return;
             auto& rec = **res;
             if (refusal(st, id, rec, {}))
               return;
             auto& rs = *backfill_rules(st, rec.queue);
             if (rs.shape.backfill == queue_shape::backfill_mode::automatic
                 && active_count(rec) < rs.shape.max_players)
               start(self, rec, rs);
           });
    },
    [self](tick_atom) {
      auto& st = self->state;
      std::vector<std::string> todo;
      for (auto& [id, r] : st.requests)
        if (!r.busy)
          todo.push_back(id);
      for (auto& id : todo) {
        auto i = st.requests.find(id);
        if (i == st.requests.end())
          continue;
        auto& r = i->second;
        if (r.spec.ticket.empty() || r.refresh
            || ++r.ticks >= st.cfg.read_every)
          look(self, id);
        else
          claim(self, id);
      }
      arm(self);
    },
  };
}

} // namespace

backfill_actor spawn_backfill(caf::actor_system& sys,
                              std::shared_ptr<match_store_factory> store,
                              queue_broker_actor broker,
                              group_finalizer_actor finalizer,
                              backfill_config cfg) {
  return sys.spawn(backfill_impl, std::move(store), std::move(broker),
                   std::move(finalizer), std::move(cfg));
}

} // namespace mm
