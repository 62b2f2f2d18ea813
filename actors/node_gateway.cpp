// The node gateway (interface in actors/node_gateway.hpp): membership, the
// shared user -> node map, routing of events and cancels to the peers' links
// (actors/peer_link.hpp), the replay on registration, the checks of what
// peers send; its store workers are in actors/gateway_store.hpp.

#include "actors/worker_bound.hpp"
#include "actors/node_gateway.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/gateway_store.hpp"
#include "actors/peer_events.hpp"
#include "actors/peer_link.hpp"
#include "core/logger.hpp"
#include "persistence/matchdb/match_store.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm {

namespace {

std::shared_ptr<spdlog::logger> gw_log() {
  static auto log = logger("gateway");
  return log;
}

// -- state ------------------------------------------------------------------------

/// The gateway's own handle type: the public interface, its heartbeat timer
/// and its links' reports.
using gateway_impl_actor = node_gateway_actor::extend<
  caf::reacts_to<tick_atom>, caf::reacts_to<link_report>>;

/// One peer node. Its connection is its link's (actors/peer_link.hpp):
///
///   unknown --membership / route / hello / peer_atom / static--> known
///      ^          (a link is spawned, monitored; calls go through it)  |
///      +--------- lapsed (not static): the link is dropped ------------+
///
/// A peer known only by a route's address hint is dropped at a heartbeat
/// that does not list it, unless its link is connected, connecting or busy
/// with a call.
struct peer_entry {
  std::string address; ///< host:port; empty when only a handle is known
  peer_link_actor link;
  link_phase phase = link_phase::idle; ///< as the link last reported it
  uint32_t calls = 0; ///< calls handed to the link, not answered yet
  bool static_peer = false;
  bool member = false; ///< live in the last membership answer
};

struct queue_op {
  script_call call;
  std::function<void(const store_reply&)> done;
};

struct match_op {
  gw_lookup lookup;
  std::function<void(outcome<std::optional<match_record>>&)> done;
};

struct gateway_state {
  std::string node;
  std::string address; ///< ours, advertised
  cluster_config cfg;
  gateway_links links;
  std::shared_ptr<queue_store> queue_inline; ///< non-blocking queue store
  queue_worker_actor queue_worker;           ///< blocking queue store
  std::vector<queue_op> queue_pending;
  bool queue_busy = false;
  std::shared_ptr<match_store> match_inline; ///< non-blocking match store
  match_worker_actor match_worker;           ///< blocking match store
  std::vector<match_op> match_pending;
  bool match_busy = false;
  std::map<std::string, peer_entry> peers; ///< by node id
  /// Users whose sessions registered here (mapped to this node in
  /// mm:{cluster}:users): written again when a beat finds this node's
  /// record gone. As many as the node's live sessions.
  std::set<std::string> mapped;
  bool beat_failing = false;
  uint64_t refused = 0; ///< peer messages refused (logged sparsely)
  static inline const char* name = "node_gateway";
};

using gw_ptr = gateway_impl_actor::stateful_pointer<gateway_state>;

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
  self->request(st.queue_worker, worker_bound(st.cfg.worker_timeout_ms),
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
  auto ops = std::make_shared<std::vector<match_op>>(
    std::move(st.match_pending));
  st.match_pending.clear();
  auto job = std::make_shared<gw_match_job>();
  for (auto& op : *ops)
    job->lookups.push_back(op.lookup);
  self->request(st.match_worker, worker_bound(st.cfg.worker_timeout_ms),
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

// -- peers ---------------------------------------------------------------------------

bool live(const gateway_state& st, const peer_entry& p) {
  return p.static_peer || p.member
         || (!st.cfg.membership && p.phase == link_phase::connected);
}

peer_link_actor spawn_link(gw_ptr self, const std::string& node,
                           const std::string& address) {
  auto& st = self->state;
  auto link = spawn_peer_link(self->system(),
                              caf::actor_cast<link_owner_actor>(self), st.node,
                              node, address, st.cfg);
  self->monitor(link);
  return link;
}

/// The entry of `node`; a new one gets its link.
peer_entry& peer(gw_ptr self, const std::string& node) {
  auto& st = self->state;
  auto i = st.peers.find(node);
  if (i != st.peers.end())
    return i->second;
  auto& p = st.peers[node];
  p.link = spawn_link(self, node, p.address);
  return p;
}

/// Records where the gateway of a peer is published, and tells its link.
void locate(gw_ptr self, peer_entry& p, const std::string& address) {
  if (p.address == address)
    return;
  p.address = address;
  self->send(p.link, link_address{address});
}

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

/// Hands the call `xs...` to the link of `node` and answers `rp` with the
/// link's answer, or with `on_error(err)` when the link ends first.
template <class Result, class OnError, class... Ts>
void call_link(gw_ptr self, caf::typed_response_promise<Result> rp,
               const std::string& node, OnError on_error, Ts... xs) {
  auto& p = peer(self, node);
  ++p.calls;
  auto link = p.link;
  auto done = [self, node, link] {
    auto i = self->state.peers.find(node);
    if (i != self->state.peers.end() && i->second.link == link)
      --i->second.calls;
  };
  self->request(link, caf::infinite, std::move(xs)...)
    .then(
      [rp, done](Result& r) mutable {
        done();
        rp.deliver(std::move(r));
      },
      [rp, done, on_error](caf::error& err) mutable {
        done();
        rp.deliver(on_error(err));
      });
}

// -- membership ------------------------------------------------------------------------

/// One heartbeat: records ours, learns the live members, forgets the peers
/// that lapsed; then runs `then` (may be empty).
/// The user map of this node's sessions, written again: the store had no
/// record of this node (restarted empty, failed over, or this node lapsed),
/// so it may have lost their entries too, and events for them would find
/// no route. Idempotent (a `set` of what is there changes nothing).
void map_again(gw_ptr self) {
  auto& st = self->state;
  gw_log()->warn("gateway {}: the store had no record of this node; mapping "
                 "its {} user(s) to it again",
                 st.node, st.mapped.size());
  for (const auto& user : st.mapped) {
    script_call call{script_id::cluster_user,
                     {cluster_keys::users},
                     {"set", user, st.node}};
    call_queue(self, std::move(call), [self, user](const store_reply& r) {
      if (auto f = fields_of(r); !f)
        gw_log()->warn("gateway {}: user '{}' not mapped again: {}",
                       self->state.node, user, f.error().detail);
    });
  }
}

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

// -- routing --------------------------------------------------------------------------

void route_to(gw_ptr self, caf::typed_response_promise<delivery_report> rp,
              std::string user, std::shared_ptr<match_event> ev,
              const std::string& node, const std::string& address,
              bool member) {
  auto& st = self->state;
  if (node.empty()) {
    // No node known: connected nowhere, or the store forgot the map (a
    // Redis restart) and the user's node has not mapped it again yet.
    delivery_report unknown;
    unknown.unrouted = 1;
    rp.deliver(unknown);
    return;
  }
  if (node == st.node) {
    rp.deliver(delivery_report{}); // no session anywhere
    return;
  }
  auto i = st.peers.find(node);
  bool is_live = member || (i != st.peers.end() && live(st, i->second));
  if (!is_live) {
    rp.deliver(delivery_report{}); // its node is gone: connected nowhere
    return;
  }
  auto& p = peer(self, node);
  if (!address.empty() && !p.static_peer)
    locate(self, p, address);
  auto unreachable = [](const caf::error&) {
    delivery_report failed;
    failed.failed = 1;
    return failed;
  };
  call_link(self, rp, node, unreachable, deliver_atom_v, std::move(user),
            std::move(*ev));
}

/// Hands the user's active match (if any) to the directory: a session that
/// starts here gets the match it may have missed elsewhere.
void replay(gw_ptr self, const std::string& user) {
  self->state.match_pending.push_back(match_op{
    gw_lookup{false, user},
    [self, user](outcome<std::optional<match_record>>& found) {
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

// -- what peers may send ------------------------------------------------------------
//
// The gateway is published: anybody who connects to the cluster port (with a
// certificate of the cluster's CA, when TLS is on) can send it every message
// of its interface. Host and directory messages are taken from actors of
// this node only; an event from a peer is delivered only as the database
// has it.

/// True when the current message comes from an actor of this node (a
/// message from another node, or without a sender, is not).
bool from_here(gw_ptr self) {
  auto& src = self->current_sender();
  return src != nullptr && src->node() == self->node();
}

/// Logs a refused peer message: the first, then every power of two.
void refuse(gw_ptr self, const std::string& what) {
  auto& st = self->state;
  auto n = ++st.refused;
  if ((n & (n - 1)) == 0)
    gw_log()->warn("gateway {}: refused {} (refused so far: {})", st.node,
                   what, n);
}

/// A peer's (user, event): to the directory once the database confirms the
/// session and the user's part in it; refused (all counts zero, nothing
/// delivered) otherwise; `failed = 1` when the database cannot answer (the
/// sending relay tries again).
void deliver_checked(gw_ptr self,
                     caf::typed_response_promise<delivery_report> rp,
                     std::string user, std::shared_ptr<match_event> ev) {
  auto& st = self->state;
  if (!(st.match_inline || st.match_worker)) {
    refuse(self, "an event from a peer (no database to check it)");
    rp.deliver(delivery_report{});
    return;
  }
  st.match_pending.push_back(match_op{
    gw_lookup{true, ev->session_id},
    [self, rp, user, ev](outcome<std::optional<match_record>>& found) mutable {
      auto& st = self->state;
      if (!found) {
        gw_log()->warn("gateway {}: event {} for '{}' not checked: {}",
                       st.node, ev->event_id, user, found.error().detail);
        delivery_report failed;
        failed.failed = 1;
        rp.deliver(failed);
        return;
      }
      auto checked = *found ? as_recorded(user, *ev, **found) : std::nullopt;
      if (!checked) {
        refuse(self, "event '" + ev->event_id + "' for '" + user
                       + "': not in the database");
        rp.deliver(delivery_report{});
        return;
      }
      rp.delegate(st.links.directory, deliver_atom_v, user,
                  std::move(*checked));
    }});
  pump_matches(self);
}

/// Asks the finalizer of `node` (a live peer) for a verdict.
void cancel_at_peer(gw_ptr self, caf::typed_response_promise<cancel_verdict> rp,
                    const std::string& node, inflight_cancel c) {
  auto pass = [](const caf::error& err) { return err; };
  call_link(self, rp, node, pass, cancel_atom_v, node, std::move(c));
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
    [self](deliver_atom, std::string& user,
           match_event& ev) -> caf::result<delivery_report> {
      auto rp = self->make_response_promise<delivery_report>();
      deliver_checked(self, rp, std::move(user),
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
          gw_log()->warn("gateway {}: user '{}' not unmapped: {}",
                         self->state.node, user, f.error().detail);
      });
    },
    [self](hello_atom, std::string& node) {
      auto& st = self->state;
      auto h = caf::actor_cast<node_gateway_actor>(self->current_sender());
      if (!h || node == st.node)
        return;
      hand_over(self, node, std::move(h), hello_atom_v);
    },
    [self](peer_atom, std::string& node, caf::actor& gw) {
      auto& st = self->state;
      if (!from_here(self)) {
        // A peer must not replace another node's handle (and so receive
        // its users' events): only the host introduces handles.
        refuse(self, "a peer announcement for node '" + node
                       + "' from another node");
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
        out.push_back(peer_info{id, p.address,
                                p.phase == link_phase::connected,
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
               == caf::actor_cast<caf::strong_actor_ptr>(i->second.link))
        i->second.phase = r.phase;
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
  // The match store: the replay, and the check of peers' events.
  std::shared_ptr<match_store> match_conn;
  if (cfg.enabled() && matches)
    match_conn = matches->connect();
  auto hdl = sys.spawn(gateway_impl, std::move(node), std::move(cfg),
                       std::move(queue_conn), std::move(match_conn),
                       std::move(links));
  return caf::actor_cast<node_gateway_actor>(hdl);
}

} // namespace mm