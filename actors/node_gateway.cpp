// The node gateway (interface in actors/node_gateway.hpp): its behaviour,
// store access, peers and membership (the shared user -> node map); the
// routing of events and cancels to the peers' links (actors/peer_link.hpp)
// and the checks of what peers send are in actors/node_gateway_routing.cpp,
// the state both share in actors/gateway_data.hpp, its store workers in
// actors/gateway_store.hpp.

#include "actors/gateway_data.hpp"
#include "actors/worker_bound.hpp"

#include <chrono>

#include <spdlog/spdlog.h>

#include "actors/peer_events.hpp"
#include "core/log_limit.hpp"
#include "core/logger.hpp"

namespace mm::gateway_detail {

std::shared_ptr<spdlog::logger> gw_log() {
  static auto log = logger("gateway");
  return log;
}

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

// -- store access: one pipeline per round, inline or on a worker --------------

namespace {

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
  auto ops
    = std::make_shared<std::vector<queue_op>>(std::move(st.queue_pending));
  st.queue_pending.clear();
  auto job = std::make_shared<gw_queue_job>();
  for (auto& op : *ops)
    job->calls.push_back(op.call);
  self
    ->request(st.queue_worker, worker_bound(st.cfg.worker_timeout_ms),
              std::move(job))
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

} // namespace

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
        auto found = look_up(*st.match_inline, op.lookup);
        op.done(found);
      }
    }
    st.match_busy = false;
    return;
  }
  auto ops
    = std::make_shared<std::vector<match_op>>(std::move(st.match_pending));
  st.match_pending.clear();
  auto job = std::make_shared<gw_match_job>();
  for (auto& op : *ops)
    job->lookups.push_back(op.lookup);
  self
    ->request(st.match_worker, worker_bound(st.cfg.worker_timeout_ms),
              std::move(job))
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

// -- peers --------------------------------------------------------------------

bool live(const gateway_state& st, const peer_entry& p) {
  return p.static_peer || p.member
         || (!st.cfg.membership && p.phase == link_phase::connected);
}

namespace {

peer_link_actor spawn_link(gw_ptr self, const std::string& node,
                           const std::string& address) {
  auto& st = self->state;
  auto link = spawn_peer_link(self->system(),
                              caf::actor_cast<link_owner_actor>(self), st.node,
                              node, address, st.cfg);
  self->monitor(link);
  return link;
}

} // namespace

peer_entry& peer(gw_ptr self, const std::string& node) {
  auto& st = self->state;
  auto i = st.peers.find(node);
  if (i != st.peers.end())
    return i->second;
  auto& p = st.peers[node];
  p.link = spawn_link(self, node, p.address);
  return p;
}

void locate(gw_ptr self, peer_entry& p, const std::string& address) {
  if (p.address == address)
    return;
  p.address = address;
  self->send(p.link, link_address{address});
}

namespace {

/// Drops a peer and its link (calls waiting for a connection there are
/// answered as unreachable; calls at the peer finish).
void forget(gw_ptr self, std::map<std::string, peer_entry>::iterator i) {
  self->demonitor(i->second.link.address());
  self->send_exit(i->second.link, caf::exit_reason::user_shutdown);
  self->state.peers.erase(i);
}

/// Hands a handle of `node`'s gateway to its link, which holds one next:
/// `how` is `hello_atom` (kept unless it holds one) or `peer_atom`
/// (replaces it, greeted).
template <class Atom>
void hand_over(gw_ptr self, const std::string& node, node_gateway_actor h,
               Atom how) {
  auto& p = peer(self, node);
  p.phase = link_phase::connected; // as the link reports next
  self->send(p.link, how, std::move(h));
}

// -- membership ---------------------------------------------------------------

/// The user map of this node's sessions, written again: the store had no
/// record of this node (restarted empty, failed over, or this node lapsed),
/// so it may have lost their entries too, and events for them would find
/// no route. Idempotent (a `set` of what is there changes nothing).
void map_again(gw_ptr self) {
  auto& st = self->state;
  MM_LOG_LIMITED(gw_log(), warn,
                 "gateway {}: the store had no record of this node; mapping "
                 "its {} user(s) to it again",
                 st.node, st.mapped.size());
  for (const auto& user : st.mapped) {
    script_call call{
      script_id::cluster_user, {cluster_keys::users}, {"set", user, st.node}};
    call_queue(self, std::move(call), [self, user](const store_reply& r) {
      if (auto f = fields_of(r); !f)
        MM_LOG_LIMITED(gw_log(), warn,
                       "gateway {}: user '{}' not mapped again: {}",
                       self->state.node, user, f.error().detail);
    });
  }
}

} // namespace

void beat(gw_ptr self, std::function<void()> then) {
  auto& st = self->state;
  script_call call{script_id::cluster_beat,
                   {cluster_keys::nodes, cluster_keys::beats},
                   {st.node, st.address, std::to_string(st.cfg.member_ttl_ms)}};
  call_queue(self, std::move(call), [self, then](const store_reply& r) {
    auto& st = self->state;
    auto f = fields_of(r);
    if (!f || ((*f)[0] != "members" && (*f)[0] != "joined")) {
      if (!st.beat_failing)
        MM_LOG_LIMITED(gw_log(), warn,
                       "gateway {}: membership heartbeat failed: {}", st.node,
                       f ? "unexpected reply" : f.error().detail);
      st.beat_failing = true;
      if (then)
        then();
      return;
    }
    if (st.beat_failing)
      gw_log()->info("gateway {}: membership heartbeat is back", st.node);
    st.beat_failing = false;
    if ((*f)[0] == "joined" && !st.mapped.empty())
      map_again(self);
    std::set<std::string> members;
    for (size_t i = 1; i + 1 < f->size(); i += 2) {
      auto& node = (*f)[i];
      if (node == st.node)
        continue;
      members.insert(node);
      auto& p = peer(self, node);
      if (!p.member)
        gw_log()->info("gateway {}: node {} is a member ({})", st.node, node,
                       (*f)[i + 1]);
      p.member = true;
      if (!p.static_peer)
        locate(self, p, (*f)[i + 1]);
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
        auto dead = i++;
        forget(self, dead);
      } else if (p.phase != link_phase::connected
                 && p.phase != link_phase::connecting && p.calls == 0) {
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

namespace {

// -- the actor ----------------------------------------------------------------

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
        gw_log()->error("gateway {}: ignoring static peer '{}'", st.node, text);
        continue;
      }
      auto& e = peer(self, p->node);
      e.static_peer = true;
      locate(self, e, format_address(p->host, p->port));
    }
    if (st.cfg.membership)
      self->send(self, tick_atom_v);
  }
  // A link ends only with its gateway or when dropped (demonitored first):
  // one that fails is replaced, so its peer stays reachable.
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    for (auto& [id, p] : st.peers)
      if (p.link.address() == dm.source) {
        gw_log()->error("gateway {}: link to node {} failed ({}); replaced",
                        st.node, id, self->system().render(dm.reason));
        p.link = spawn_link(self, id, p.address);
        p.phase = link_phase::idle;
        p.calls = 0;
      }
  });
  return {
    [self](route_atom, std::string& user,
           match_event& ev) -> caf::result<delivery_report> {
      auto& st = self->state;
      if (!from_here(self)) {
        refuse(self, "a route request from another node");
        return delivery_report{};
      }
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
                     MM_LOG_LIMITED(gw_log(), warn,
                                    "gateway {}: route of '{}' not looked "
                                    "up: {}",
                                    self->state.node, user,
                                    f ? "unexpected reply" : f.error().detail);
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
    [self](deliver_atom, std::string& user,
           match_event& ev) -> caf::result<delivery_report> {
      auto src = self->current_sender(); // the promise takes it
      auto rp = self->make_response_promise<delivery_report>();
      deliver_checked(self, rp, src, std::move(user),
                      std::make_shared<match_event>(std::move(ev)));
      return rp;
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
      if (!from_here(self)) {
        refuse(self, "a registration from another node");
        return;
      }
      bool wants_replay = st.cfg.replay_on_register && st.cfg.enabled()
                          && (st.match_inline || st.match_worker);
      if (!st.cfg.enabled() || !(st.queue_inline || st.queue_worker)) {
        if (wants_replay)
          replay(self, user);
        return;
      }
      st.mapped.insert(user);
      // The map first, the lookup after it: a match committed after the
      // lookup is routed here by the map (docs/cluster.md).
      script_call call{
        script_id::cluster_user, {cluster_keys::users}, {"set", user, st.node}};
      call_queue(self, std::move(call),
                 [self, user, wants_replay](const store_reply& r) {
                   auto f = fields_of(r);
                   if (!f)
                     MM_LOG_LIMITED(gw_log(), warn,
                                    "gateway {}: user '{}' not mapped: {}",
                                    self->state.node, user, f.error().detail);
                   if (wants_replay)
                     replay(self, user);
                 });
    },
    [self](unregister_atom, std::string& user) {
      auto& st = self->state;
      if (!from_here(self)) {
        refuse(self, "an unregistration from another node");
        return;
      }
      if (!st.cfg.enabled() || !(st.queue_inline || st.queue_worker))
        return;
      st.mapped.erase(user);
      script_call call{script_id::cluster_user,
                       {cluster_keys::users},
                       {"unset", user, st.node}};
      call_queue(self, std::move(call), [self, user](const store_reply& r) {
        auto f = fields_of(r);
        if (!f)
          MM_LOG_LIMITED(gw_log(), warn,
                         "gateway {}: user '{}' not unmapped: {}",
                         self->state.node, user, f.error().detail);
      });
    },
    [self](hello_atom, std::string& node) {
      auto& st = self->state;
      auto h = caf::actor_cast<node_gateway_actor>(self->current_sender());
      if (!h || node == st.node)
        return;
      // Known at once (the link's report comes later): the messages that
      // follow the greeting on its connection are checked against it. The
      // link keeps a handle it holds already, and so does this.
      if (auto& p = peer(self, node); p.peer_id.empty())
        p.peer_id = caf::to_string(h.node());
      hand_over(self, node, std::move(h), hello_atom_v);
    },
    [self](peer_atom, std::string& node, caf::actor& gw) {
      auto& st = self->state;
      if (!from_here(self)) {
        // A peer must not replace another node's handle (and so receive
        // its users' events): only the host introduces handles.
        refuse(self,
               "a peer announcement for node '" + node + "' from another node");
        return;
      }
      auto h = caf::actor_cast<node_gateway_actor>(gw);
      if (!h || node == st.node)
        return;
      hand_over(self, node, std::move(h), peer_atom_v);
    },
    [self](peers_atom) {
      std::vector<peer_info> out;
      for (auto& [id, p] : self->state.peers)
        out.push_back(peer_info{id, p.address, p.phase == link_phase::connected,
                                p.static_peer, p.member});
      return out;
    },
    [self](tick_atom) {
      auto& st = self->state;
      beat(self, {});
      self->delayed_send(self, std::chrono::milliseconds(st.cfg.heartbeat_ms),
                         tick_atom_v);
    },
    [self](link_report& r) {
      auto& st = self->state;
      auto i = st.peers.find(r.node);
      // A dropped or replaced link may still report: only the current one
      // counts.
      if (i != st.peers.end()
          && self->current_sender()
               == caf::actor_cast<caf::strong_actor_ptr>(i->second.link)) {
        i->second.phase = r.phase;
        i->second.peer_id = std::move(r.peer_id);
      }
    },
    [self](party_atom, std::string& node,
           party_call& c) -> caf::result<party_info> {
      auto local = from_here(self); // before the promise takes the sender
      auto rp = self->make_response_promise<party_info>();
      party_call_for(self, rp, local, node, std::move(c));
      return rp;
    },
    [self](stats_atom) -> std::string {
      auto& f = self->state.links.stats;
      return f ? f() : std::string{"{}"};
    },
    [self](stats_atom, peers_atom) -> caf::result<std::string> {
      if (!from_here(self)) {
        refuse(self, "a cluster stats call from another node");
        return caf::make_error(errc::forbidden, "only from this node");
      }
      auto rp = self->make_response_promise<std::string>();
      cluster_stats(self, rp);
      return rp;
    },
    [self](attach_atom, party_hub_actor& hub) {
      if (!from_here(self)) {
        refuse(self, "a party hub from another node");
        return;
      }
      self->state.hub = std::move(hub);
    },
  };
}

} // namespace

} // namespace mm::gateway_detail

namespace mm {

node_gateway_actor
spawn_node_gateway(caf::actor_system& sys, std::string node, cluster_config cfg,
                   std::shared_ptr<queue_store_factory> queue,
                   std::shared_ptr<match_store_factory> matches,
                   gateway_links links) {
  // The first connections are opened here (never inside a cooperative
  // actor); they tell inline from worker use.
  std::shared_ptr<queue_store> queue_conn;
  if (cfg.enabled() && queue)
    queue_conn = queue->connect();
  // The match store: the replay, and the check of peers' events.
  std::shared_ptr<match_store> match_conn;
  if (cfg.enabled() && matches)
    match_conn = matches->connect();
  auto hdl = sys.spawn(gateway_detail::gateway_impl, std::move(node),
                       std::move(cfg), std::move(queue_conn),
                       std::move(match_conn), std::move(links));
  return caf::actor_cast<node_gateway_actor>(hdl);
}

} // namespace mm