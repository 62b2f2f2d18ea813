#include "actors/node_gateway.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <spdlog/spdlog.h>

#include "core/logger.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm {

namespace {

/// Script calls for a detached worker that owns one blocking queue store
/// connection: run as one pipeline, replies written back in place.
struct gw_queue_job {
  std::vector<script_call> calls;
  std::vector<store_reply> replies;
};

/// Active-match lookups for a detached worker that owns one blocking match
/// store connection.
struct gw_match_job {
  std::vector<std::string> users;
  std::vector<outcome<std::optional<match_record>>> found;
};

using gw_queue_job_ptr = std::shared_ptr<gw_queue_job>;
using gw_match_job_ptr = std::shared_ptr<gw_match_job>;

} // namespace

} // namespace mm

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mm::gw_queue_job_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mm::gw_match_job_ptr)

namespace mm {

namespace {

std::shared_ptr<spdlog::logger> gw_log() {
  static auto log = logger("gateway");
  return log;
}

// -- workers (detached: they block) ---------------------------------------------

caf::behavior queue_worker(caf::event_based_actor*,
                           std::shared_ptr<queue_store> conn) {
  return {
    [conn](gw_queue_job_ptr& job) {
      job->replies = conn->run(job->calls);
      return job;
    },
  };
}

caf::behavior match_worker(caf::event_based_actor*,
                           std::shared_ptr<match_store> conn) {
  return {
    [conn](gw_match_job_ptr& job) {
      for (auto& user : job->users)
        job->found.push_back(conn->active_session_of(user));
      return job;
    },
  };
}

/// One connection attempt: blocks in `remote_actor`, answers, and quits (a
/// one-shot actor, so an attempt that outlives its gateway leaves nothing
/// behind).
caf::behavior connector(caf::event_based_actor* self) {
  return {
    [self](caf::connect_atom, const std::string& host,
           uint16_t port) -> caf::result<caf::actor> {
      self->quit();
      auto res = self->system().middleman().remote_actor<node_gateway_actor>(
        host, port);
      if (!res)
        return std::move(res.error());
      return caf::actor_cast<caf::actor>(std::move(*res));
    },
  };
}

// -- state ------------------------------------------------------------------------

/// The gateway's own handle type: the public interface plus its timers
/// (`tick_atom`: membership heartbeat; `tick_atom, id`: the bound of a call
/// waiting for a connection).
using gateway_impl_actor = node_gateway_actor::extend<
  caf::reacts_to<tick_atom>, caf::reacts_to<tick_atom, uint64_t>>;

using peer_cb = std::function<void(const node_gateway_actor&)>;

/// One peer node. Its connection, as seen from here:
///
///   unknown ──membership / route / static──► known ──first call──► connecting
///      ▲                                      ▲  ▲                   │    │
///      │ lapsed (not static)                  │  └─fail: back off────┘    │ ok
///      └──────────────────────────────────────┴──handle down── connected ◄┘
///                                              (hello / peer_atom: connected)
///
/// Calls that need a connection wait in `waiters` (bounded by
/// `forward_timeout_ms`); during a back-off they fail at once.
struct peer_entry {
  std::string address; ///< host:port; empty when only a handle is known
  node_gateway_actor handle;
  bool static_peer = false;
  bool member = false;     ///< live in the last membership answer
  bool connecting = false; ///< a connector is at work
  bool failing = false;    ///< the last attempt failed (logged once)
  caf::actor_clock::time_point retry_at{}; ///< no attempt before
};

struct waiter {
  std::string node;
  peer_cb cb;
};

struct queue_op {
  script_call call;
  std::function<void(const store_reply&)> done;
};

struct match_op {
  std::string user;
  std::function<void(outcome<std::optional<match_record>>&)> done;
};

struct gateway_state {
  std::string node;
  std::string address; ///< ours, advertised
  cluster_config cfg;
  gateway_links links;
  std::shared_ptr<queue_store> queue_inline; ///< non-blocking queue store
  caf::actor queue_worker;                   ///< blocking queue store
  std::vector<queue_op> queue_pending;
  bool queue_busy = false;
  std::shared_ptr<match_store> match_inline; ///< non-blocking match store
  caf::actor match_worker;                   ///< blocking match store
  std::vector<match_op> match_pending;
  bool match_busy = false;
  std::map<std::string, peer_entry> peers; ///< by node id
  std::unordered_map<uint64_t, waiter> waiters;
  uint64_t next_waiter = 0;
  bool beat_failing = false;
  static inline const char* name = "node_gateway";
};

using gw_ptr = gateway_impl_actor::stateful_pointer<gateway_state>;

std::chrono::milliseconds ms(uint32_t x) {
  return std::chrono::milliseconds(x);
}

/// The string fields of a script reply, or why there are none.
outcome<std::vector<std::string>> fields_of(const store_reply& r) {
  if (r.code != errc::none)
    return failure{r.code, r.detail};
  if (r.value.type == store_value::kind::error)
    return failure{errc::protocol_error, r.value.str};
  if (r.value.type != store_value::kind::array || r.value.elements.empty())
    return failure{errc::protocol_error, "unexpected reply shape"};
  std::vector<std::string> out;
  for (auto& e : r.value.elements)
    out.push_back(e.str);
  if (out[0] == "invalid")
    return failure{errc::invalid_argument, out.size() > 1 ? out[1] : ""};
  return out;
}

// -- store access: one pipeline per round, inline or on a worker --------------------

void finish_queue_ops(std::vector<queue_op>& ops,
                      std::vector<store_reply>& replies) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i < replies.size()) {
      ops[i].done(replies[i]);
    } else {
      store_reply missing;
      missing.code = errc::protocol_error;
      missing.detail = "missing reply";
      ops[i].done(missing);
    }
  }
}

/// Runs what is queued for the queue store: at once inline, or as one job
/// for the worker (calls that arrive meanwhile go in the next one).
void pump_queue(gw_ptr self) {
  auto& st = self->state;
  if (st.queue_busy || st.queue_pending.empty())
    return;
  st.queue_busy = true;
  if (st.queue_inline) {
    // Callbacks may queue more calls: they run in the next round here.
    while (!st.queue_pending.empty()) {
      auto ops = std::move(st.queue_pending);
      st.queue_pending.clear();
      std::vector<script_call> calls;
      for (auto& op : ops)
        calls.push_back(op.call);
      auto replies = st.queue_inline->run(calls);
      finish_queue_ops(ops, replies);
    }
    st.queue_busy = false;
    return;
  }
  auto ops = std::make_shared<std::vector<queue_op>>(
    std::move(st.queue_pending));
  st.queue_pending.clear();
  auto job = std::make_shared<gw_queue_job>();
  for (auto& op : *ops)
    job->calls.push_back(op.call);
  self->request(st.queue_worker, caf::infinite, std::move(job))
    .then(
      [self, ops](gw_queue_job_ptr& done) {
        self->state.queue_busy = false;
        finish_queue_ops(*ops, done->replies);
        pump_queue(self);
      },
      [self](caf::error& err) {
        gw_log()->error("queue store worker failed: {}",
                        self->system().render(err));
        self->quit(err);
      });
}

void call_queue(gw_ptr self, script_call call,
                std::function<void(const store_reply&)> done) {
  self->state.queue_pending.push_back(
    queue_op{std::move(call), std::move(done)});
  pump_queue(self);
}

void pump_matches(gw_ptr self) {
  auto& st = self->state;
  if (st.match_busy || st.match_pending.empty())
    return;
  st.match_busy = true;
  if (st.match_inline) {
    while (!st.match_pending.empty()) {
      auto ops = std::move(st.match_pending);
      st.match_pending.clear();
      for (auto& op : ops) {
        auto found = st.match_inline->active_session_of(op.user);
        op.done(found);
      }
    }
    st.match_busy = false;
    return;
  }
  auto ops = std::make_shared<std::vector<match_op>>(
    std::move(st.match_pending));
  st.match_pending.clear();
  auto job = std::make_shared<gw_match_job>();
  for (auto& op : *ops)
    job->users.push_back(op.user);
  self->request(st.match_worker, caf::infinite, std::move(job))
    .then(
      [self, ops](gw_match_job_ptr& done) {
        self->state.match_busy = false;
        for (size_t i = 0; i < ops->size() && i < done->found.size(); ++i)
          (*ops)[i].done(done->found[i]);
        pump_matches(self);
      },
      [self](caf::error& err) {
        gw_log()->error("match store worker failed: {}",
                        self->system().render(err));
        self->quit(err);
      });
}

// -- peers ---------------------------------------------------------------------------

bool live(const gateway_state& st, const peer_entry& p) {
  return p.static_peer || p.member || (!st.cfg.membership && p.handle);
}

/// Calls every waiter for `node` with `h` (invalid: not reachable).
void answer_waiters(gw_ptr self, const std::string& node,
                    node_gateway_actor h) {
  auto& st = self->state;
  std::vector<peer_cb> due;
  for (auto i = st.waiters.begin(); i != st.waiters.end();) {
    if (i->second.node == node) {
      due.push_back(std::move(i->second.cb));
      i = st.waiters.erase(i);
    } else {
      ++i;
    }
  }
  for (auto& cb : due)
    cb(h);
}

/// Takes `h` as the gateway of `node` (monitored); greets it with our id
/// when `greet`, so the peer needs no connection of its own to us.
void adopt(gw_ptr self, const std::string& node, node_gateway_actor h,
           bool greet) {
  auto& p = self->state.peers[node];
  if (p.handle == h)
    return;
  if (p.handle)
    self->demonitor(p.handle.address());
  p.handle = std::move(h);
  p.failing = false;
  self->monitor(p.handle);
  if (greet)
    self->send(p.handle, hello_atom_v, self->state.node);
  answer_waiters(self, node, p.handle);
}

void forget(gw_ptr self, std::map<std::string, peer_entry>::iterator i) {
  if (i->second.handle)
    self->demonitor(i->second.handle.address());
  self->state.peers.erase(i);
}

void connect(gw_ptr self, const std::string& node) {
  auto& st = self->state;
  auto& p = st.peers[node];
  auto hp = parse_address(p.address);
  if (!hp) {
    gw_log()->warn("gateway {}: peer {} has an unusable address: {}", st.node,
                   node, hp.error().detail);
    p.retry_at = self->clock().now() + ms(st.cfg.reconnect_ms);
    answer_waiters(self, node, {});
    return;
  }
  p.connecting = true;
  auto c = self->spawn<caf::detached>(connector);
  self
    ->request(c, caf::infinite, caf::connect_atom_v, hp->first, hp->second)
    .then(
      [self, node](caf::actor& a) {
        auto& p = self->state.peers[node];
        p.connecting = false;
        auto h = caf::actor_cast<node_gateway_actor>(a);
        if (!h) {
          answer_waiters(self, node, {});
          return;
        }
        gw_log()->info("gateway {}: connected to node {} at {}",
                       self->state.node, node, p.address);
        if (!p.handle)
          adopt(self, node, std::move(h), true);
        else
          answer_waiters(self, node, p.handle);
      },
      [self, node](caf::error& err) {
        auto& st = self->state;
        auto& p = st.peers[node];
        p.connecting = false;
        p.retry_at = self->clock().now() + ms(st.cfg.reconnect_ms);
        if (!p.failing)
          gw_log()->warn("gateway {}: cannot connect to node {} at {}: {} "
                         "(retrying after {} ms)",
                         st.node, node, p.address, self->system().render(err),
                         st.cfg.reconnect_ms);
        p.failing = true;
        answer_waiters(self, node, p.handle);
      });
}

/// Calls `cb` with the gateway of `node`: at once when connected (or when
/// it cannot be had now), else once a connection is made, bounded by
/// `forward_timeout_ms` (then with an invalid handle).
void with_peer(gw_ptr self, const std::string& node,
               const std::string& address_hint, peer_cb cb) {
  auto& st = self->state;
  auto& p = st.peers[node];
  if (!address_hint.empty() && !p.static_peer)
    p.address = address_hint;
  if (p.handle) {
    cb(p.handle);
    return;
  }
  if (!st.cfg.auto_connect || p.address.empty()) {
    cb({});
    return;
  }
  if (!p.connecting && self->clock().now() < p.retry_at) {
    cb({}); // backing off after a failed attempt: fail fast
    return;
  }
  auto id = ++st.next_waiter;
  st.waiters.emplace(id, waiter{node, std::move(cb)});
  self->delayed_send(self, ms(st.cfg.forward_timeout_ms), tick_atom_v, id);
  if (!p.connecting)
    connect(self, node);
}

// -- membership ------------------------------------------------------------------------

/// One heartbeat: records ours, learns the live members, forgets the peers
/// that lapsed; then runs `then` (may be empty).
void beat(gw_ptr self, std::function<void()> then) {
  auto& st = self->state;
  script_call call{script_id::cluster_beat,
                   {cluster_keys::nodes, cluster_keys::beats},
                   {st.node, st.address, std::to_string(st.cfg.member_ttl_ms)}};
  call_queue(self, std::move(call), [self, then](const store_reply& r) {
    auto& st = self->state;
    auto f = fields_of(r);
    if (!f || (*f)[0] != "members") {
      if (!st.beat_failing)
        gw_log()->warn("gateway {}: membership heartbeat failed: {}", st.node,
                       f ? "unexpected reply" : f.error().detail);
      st.beat_failing = true;
      if (then)
        then();
      return;
    }
    if (st.beat_failing)
      gw_log()->info("gateway {}: membership heartbeat is back", st.node);
    st.beat_failing = false;
    std::set<std::string> members;
    for (size_t i = 1; i + 1 < f->size(); i += 2) {
      auto& node = (*f)[i];
      if (node == st.node)
        continue;
      members.insert(node);
      auto& p = st.peers[node];
      if (!p.member)
        gw_log()->info("gateway {}: node {} is a member ({})", st.node, node,
                       (*f)[i + 1]);
      p.member = true;
      if (!p.static_peer)
        p.address = (*f)[i + 1];
    }
    for (auto i = st.peers.begin(); i != st.peers.end();) {
      auto& p = i->second;
      if (members.count(i->first) > 0 || p.static_peer) {
        ++i;
        continue;
      }
      if (p.member) {
        gw_log()->info("gateway {}: node {} lapsed: forgotten", st.node,
                       i->first);
        p.member = false;
        auto dead = i++;
        forget(self, dead);
      } else if (!p.handle && !p.connecting) {
        auto stale = i++;
        forget(self, stale); // an address hint of a node that is gone
      } else {
        ++i; // known by its handle only (it greeted us): kept while it lives
      }
    }
    if (then)
      then();
  });
}

// -- routing --------------------------------------------------------------------------

void route_to(gw_ptr self, caf::typed_response_promise<delivery_report> rp,
              std::string user, std::shared_ptr<match_event> ev,
              const std::string& node, const std::string& address,
              bool member) {
  auto& st = self->state;
  if (node.empty() || node == st.node) {
    rp.deliver(delivery_report{}); // no session anywhere
    return;
  }
  auto i = st.peers.find(node);
  bool is_live = member || (i != st.peers.end() && live(st, i->second));
  if (!is_live) {
    rp.deliver(delivery_report{}); // its node is gone: connected nowhere
    return;
  }
  with_peer(self, node, address,
            [self, rp, user, ev, node](const node_gateway_actor& h) mutable {
              delivery_report failed;
              failed.failed = 1;
              if (!h) {
                rp.deliver(failed);
                return;
              }
              self
                ->request(h, ms(self->state.cfg.forward_timeout_ms),
                          deliver_atom_v, user, *ev)
                .then([rp](delivery_report& r) mutable { rp.deliver(r); },
                      [self, rp, failed, node, ev](caf::error& err) mutable {
                        gw_log()->warn("gateway {}: node {} did not take "
                                       "event {}: {}",
                                       self->state.node, node, ev->event_id,
                                       self->system().render(err));
                        rp.deliver(failed);
                      });
            });
}

/// The `match.created` event of a committed session, as the relay would
/// deliver it (same event id and payload).
match_event event_of(const match_record& m) {
  match_event ev;
  ev.event_id = match_created_event_id(m.session_id);
  ev.session_id = m.session_id;
  ev.queue = m.queue;
  ev.user_a = m.user_a;
  ev.ticket_a = m.ticket_a;
  ev.user_b = m.user_b;
  ev.ticket_b = m.ticket_b;
  match_request req;
  req.queue = m.queue;
  req.user_a = m.user_a;
  req.ticket_a = m.ticket_a;
  req.user_b = m.user_b;
  req.ticket_b = m.ticket_b;
  ev.payload = match_created_payload(m.session_id, req);
  return ev;
}

/// Hands the user's active match (if any) to the directory: a session that
/// starts here gets the match it may have missed elsewhere.
void replay(gw_ptr self, const std::string& user) {
  self->state.match_pending.push_back(match_op{
    user, [self, user](outcome<std::optional<match_record>>& found) {
      auto& st = self->state;
      if (!found) {
        gw_log()->warn("gateway {}: active match of '{}' not looked up: {}",
                       st.node, user, found.error().detail);
        return;
      }
      if (!*found)
        return;
      // Its answer (a delivery_report) is of no use here.
      caf::anon_send(st.links.directory, deliver_atom_v, user,
                     event_of(**found));
    }});
  pump_matches(self);
}

/// Asks the finalizer of `node` (a live peer) for a verdict.
void cancel_at_peer(gw_ptr self, caf::typed_response_promise<cancel_verdict> rp,
                    const std::string& node, inflight_cancel c) {
  auto& st = self->state;
  auto address = st.peers[node].address;
  with_peer(self, node, address,
            [self, rp, node, c](const node_gateway_actor& h) mutable {
              if (!h) {
                rp.deliver(caf::make_error(errc::store_unavailable,
                                           "node " + node + " unreachable"));
                return;
              }
              self
                ->request(h, ms(self->state.cfg.cancel_timeout_ms),
                          cancel_atom_v, node, c)
                .then([rp](cancel_verdict& v) mutable { rp.deliver(v); },
                      [rp](caf::error& err) mutable { rp.deliver(err); });
            });
}

// -- the actor -------------------------------------------------------------------------

gateway_impl_actor::behavior_type
gateway_impl(gw_ptr self, std::string node, cluster_config cfg,
             std::shared_ptr<queue_store> queue_conn,
             std::shared_ptr<match_store> match_conn, gateway_links links) {
  auto& st = self->state;
  st.node = std::move(node);
  st.cfg = std::move(cfg);
  st.address = format_address(st.cfg.host, st.cfg.port);
  st.links = std::move(links);
  if (queue_conn) {
    if (queue_conn->blocking())
      st.queue_worker = self->spawn<caf::detached + caf::linked>(queue_worker,
                                                                 queue_conn);
    else
      st.queue_inline = std::move(queue_conn);
  }
  if (match_conn) {
    if (match_conn->blocking())
      st.match_worker = self->spawn<caf::detached + caf::linked>(match_worker,
                                                                 match_conn);
    else
      st.match_inline = std::move(match_conn);
  }
  if (st.cfg.enabled()) {
    for (auto& text : st.cfg.peers) {
      auto p = parse_peer(text);
      if (!p || p->node == st.node) {
        gw_log()->error("gateway {}: ignoring static peer '{}'", st.node,
                        text);
        continue;
      }
      auto& e = st.peers[p->node];
      e.static_peer = true;
      e.address = format_address(p->host, p->port);
    }
    if (st.cfg.membership)
      self->send(self, tick_atom_v);
  }
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    for (auto& [id, p] : st.peers)
      if (p.handle && p.handle.address() == dm.source) {
        gw_log()->info("gateway {}: lost node {} ({}); reconnecting on next "
                       "use",
                       st.node, id, self->system().render(dm.reason));
        p.handle = nullptr;
      }
  });
  return {
    [self](route_atom, std::string& user,
           match_event& ev) -> caf::result<delivery_report> {
      auto& st = self->state;
      if (!st.cfg.enabled() || !(st.queue_inline || st.queue_worker))
        return delivery_report{};
      auto rp = self->make_response_promise<delivery_report>();
      auto shared_ev = std::make_shared<match_event>(std::move(ev));
      script_call call{script_id::cluster_route,
                       {cluster_keys::users, cluster_keys::nodes,
                        cluster_keys::beats},
                       {user}};
      call_queue(self, std::move(call),
                 [self, rp, user, shared_ev](const store_reply& r) mutable {
                   auto f = fields_of(r);
                   if (!f || (*f)[0] != "route" || f->size() < 4) {
                     gw_log()->warn("gateway {}: route of '{}' not looked "
                                    "up: {}",
                                    self->state.node, user,
                                    f ? "unexpected reply"
                                      : f.error().detail);
                     delivery_report failed;
                     failed.failed = 1;
                     rp.deliver(failed);
                     return;
                   }
                   route_to(self, rp, user, shared_ev, (*f)[1], (*f)[2],
                            (*f)[3] == "1");
                 });
      return rp;
    },
    [self](deliver_atom, std::string& user, match_event& ev) {
      return self->delegate(self->state.links.directory, deliver_atom_v,
                            std::move(user), std::move(ev));
    },
    [self](cancel_atom, std::string& node,
           inflight_cancel& c) -> caf::result<cancel_verdict> {
      auto& st = self->state;
      if (node.empty() || node == st.node || !st.cfg.enabled())
        return self->delegate(st.links.finalizer, cancel_atom_v, std::move(c));
      auto rp = self->make_response_promise<cancel_verdict>();
      auto decide = [self, rp, node, c]() mutable {
        auto& st = self->state;
        auto i = st.peers.find(node);
        if (i != st.peers.end() && live(st, i->second)) {
          cancel_at_peer(self, rp, node, c);
          return;
        }
        // The owner is not live: it crashed, and its pairs can no longer
        // commit. Ours decides, as for a pair that never reached it.
        gw_log()->info("gateway {}: node {} is not live; cancel of {} "
                       "decided here",
                       st.node, node, c.ticket);
        rp.delegate(st.links.finalizer, cancel_atom_v, c);
      };
      auto i = st.peers.find(node);
      if ((i == st.peers.end() || !live(st, i->second)) && st.cfg.membership)
        beat(self, decide); // our view may be older than the owner: refresh
      else
        decide();
      return rp;
    },
    [self](register_atom, std::string& user) {
      auto& st = self->state;
      bool wants_replay = st.cfg.replay_on_register && st.cfg.enabled()
                          && (st.match_inline || st.match_worker);
      if (!st.cfg.enabled() || !(st.queue_inline || st.queue_worker)) {
        if (wants_replay)
          replay(self, user);
        return;
      }
      // The map first, the lookup after it: a match committed after the
      // lookup is routed here by the map (docs/cluster.md).
      script_call call{script_id::cluster_user,
                       {cluster_keys::users},
                       {"set", user, st.node}};
      call_queue(self, std::move(call),
                 [self, user, wants_replay](const store_reply& r) {
                   auto f = fields_of(r);
                   if (!f)
                     gw_log()->warn("gateway {}: user '{}' not mapped: {}",
                                    self->state.node, user,
                                    f.error().detail);
                   if (wants_replay)
                     replay(self, user);
                 });
    },
    [self](unregister_atom, std::string& user) {
      auto& st = self->state;
      if (!st.cfg.enabled() || !(st.queue_inline || st.queue_worker))
        return;
      script_call call{script_id::cluster_user,
                       {cluster_keys::users},
                       {"unset", user, st.node}};
      call_queue(self, std::move(call), [self, user](const store_reply& r) {
        auto f = fields_of(r);
        if (!f)
          gw_log()->warn("gateway {}: user '{}' not unmapped: {}",
                         self->state.node, user, f.error().detail);
      });
    },
    [self](hello_atom, std::string& node) {
      auto& st = self->state;
      auto h = caf::actor_cast<node_gateway_actor>(self->current_sender());
      if (!h || node == st.node)
        return;
      auto& p = st.peers[node];
      if (!p.handle) {
        gw_log()->info("gateway {}: node {} connected to us", st.node, node);
        adopt(self, node, std::move(h), false);
      }
    },
    [self](peer_atom, std::string& node, caf::actor& gw) {
      auto& st = self->state;
      auto h = caf::actor_cast<node_gateway_actor>(gw);
      if (!h || node == st.node)
        return;
      adopt(self, node, std::move(h), true);
    },
    [self](peers_atom) {
      std::vector<peer_info> out;
      for (auto& [id, p] : self->state.peers)
        out.push_back(peer_info{id, p.address, static_cast<bool>(p.handle),
                                p.static_peer, p.member});
      return out;
    },
    [self](tick_atom) {
      auto& st = self->state;
      beat(self, {});
      self->delayed_send(self, ms(st.cfg.heartbeat_ms), tick_atom_v);
    },
    [self](tick_atom, uint64_t id) {
      auto& st = self->state;
      auto i = st.waiters.find(id);
      if (i == st.waiters.end())
        return;
      auto cb = std::move(i->second.cb);
      st.waiters.erase(i);
      cb({}); // no connection within the bound
    },
  };
}

} // namespace

node_gateway_actor spawn_node_gateway(
  caf::actor_system& sys, std::string node, cluster_config cfg,
  std::shared_ptr<queue_store_factory> queue,
  std::shared_ptr<match_store_factory> matches, gateway_links links) {
  // The first connections are opened here (never inside a cooperative
  // actor); they tell inline from worker use.
  std::shared_ptr<queue_store> queue_conn;
  if (cfg.enabled() && queue)
    queue_conn = queue->connect();
  std::shared_ptr<match_store> match_conn;
  if (cfg.replay_on_register && cfg.enabled() && matches)
    match_conn = matches->connect();
  auto hdl = sys.spawn(gateway_impl, std::move(node), std::move(cfg),
                       std::move(queue_conn), std::move(match_conn),
                       std::move(links));
  return caf::actor_cast<node_gateway_actor>(hdl);
}

} // namespace mm
