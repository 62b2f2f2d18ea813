// The peer link: one per peer node of a gateway, owning the connection to
// that node's gateway — the lazy `remote_actor`, the reconnect back-off and
// the calls waiting for a connection (interface in actors/peer_link.hpp).

#include "actors/peer_link.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/remote_actor.hpp>
#include <spdlog/spdlog.h>

#include "core/log_limit.hpp"
#include "core/logger.hpp"

namespace mm {

namespace {

std::shared_ptr<spdlog::logger> link_log() {
  static auto log = logger("gateway"); // the gateway's subsystem
  return log;
}

// -- the connector (detached: it blocks) --------------------------------------

/// One connection attempt to a peer's gateway at (host, port).
using connector_actor
  = caf::typed_actor<caf::replies_to<caf::connect_atom, std::string,
                                     uint16_t>::with<node_gateway_actor>>;

/// Blocks in `remote_actor` (over mutual TLS when `tls`), answers, and
/// quits (a one-shot actor, so an attempt that outlives its link leaves
/// nothing behind).
connector_actor::behavior_type connector(connector_actor::pointer self,
                                         bool tls) {
  return {
    [self, tls](caf::connect_atom, const std::string& host,
                uint16_t port) -> caf::result<node_gateway_actor> {
      self->quit();
      auto& sys = self->system();
      auto res
        = tls ? caf::openssl::remote_actor<node_gateway_actor>(sys, host, port)
              : sys.middleman().remote_actor<node_gateway_actor>(host, port);
      if (!res)
        return std::move(res.error());
      return std::move(*res);
    },
  };
}

// -- state --------------------------------------------------------------------

/// Called with the peer's gateway, or with an invalid handle when the peer
/// cannot be reached.
using link_cb = std::function<void(const node_gateway_actor&)>;

struct link_state {
  std::string self_node; ///< ours: the greeting, the log
  std::string node;      ///< the peer's
  std::string address;   ///< host:port; empty when only a handle is known
  cluster_config cfg;
  link_owner_actor owner; ///< the gateway (monitored)
  link_phase phase = link_phase::idle;
  std::string reported_id;   ///< the handle's node id as last reported
  node_gateway_actor handle; ///< the peer's gateway (monitored)
  bool attempt = false;      ///< a connector is at work
  bool failing = false;      ///< the last attempt failed (logged once)
  caf::actor_clock::time_point retry_at{}; ///< no attempt before
  std::map<uint64_t, link_cb> waiters;     ///< calls waiting for a connection
  uint64_t next_waiter = 0;
  uint32_t in_flight = 0; ///< calls at the peer, not answered yet
  bool closing = false;   ///< dropped: ends once `in_flight` is 0
  static inline const char* name = "peer_link";
};

using link_ptr = peer_link_actor::stateful_pointer<link_state>;

std::chrono::milliseconds ms(uint32_t x) {
  return std::chrono::milliseconds(x);
}

// -- the states ---------------------------------------------------------------
//
// One behavior per state; they differ in how a call gets the peer's gateway.
//
//            call (auto_connect, address)            connector fails
//   +-> idle ---------------------------> connecting -----------------> backoff
//   |    ^                                |      ^                        |
//   |    +------ connector: no handle ----+      +--- call after ---------+
//   |                                     |           reconnect_ms
//   |                        connector ok | (greeted)  (before it: calls
//   |                                     v             fail fast)
//   +---------- handle down -------- connected <-- hello / peer_atom (any
//                                                  state; peer_atom greets)
//
// A handle that goes down leads to `connecting` while a connector is still
// at work, and to `backoff` within `reconnect_ms` of a failed attempt.
// Calls wait only in `connecting`, each bounded by `forward_timeout_ms`.

peer_link_actor::behavior_type idle(link_ptr self);
peer_link_actor::behavior_type connecting(link_ptr self);
peer_link_actor::behavior_type backoff(link_ptr self);
peer_link_actor::behavior_type connected(link_ptr self);

/// The state the link is in by its facts: a handle, a connector at work, a
/// recent failure.
link_phase phase_now(link_ptr self) {
  auto& st = self->state;
  if (st.handle)
    return link_phase::connected;
  if (st.attempt)
    return link_phase::connecting;
  if (self->clock().now() < st.retry_at)
    return link_phase::backoff;
  return link_phase::idle;
}

/// Becomes the behavior of the state the facts say, and tells the gateway
/// when that is a change.
void update_phase(link_ptr self) {
  using state_fn = peer_link_actor::behavior_type (*)(link_ptr);
  static constexpr state_fn behavior_of[] = {idle, connecting, backoff,
                                             connected}; // link_phase order
  static_assert(static_cast<size_t>(link_phase::connected) == 3);
  auto& st = self->state;
  auto next = phase_now(self);
  self->become(behavior_of[static_cast<size_t>(next)](self));
  auto id = st.handle ? caf::to_string(st.handle.node()) : std::string{};
  if (st.phase == next && st.reported_id == id)
    return;
  st.phase = next;
  st.reported_id = id;
  self->send(st.owner, link_report{st.node, next, std::move(id)});
}

/// Calls every waiting call with `h` (invalid: not reachable).
void answer_waiters(link_ptr self, const node_gateway_actor& h) {
  auto due = std::move(self->state.waiters);
  self->state.waiters.clear();
  for (auto& [id, cb] : due)
    cb(h);
}

/// Takes `h` as the peer's gateway (monitored); greets it in the gateway's
/// name when `greet`, so the peer needs no connection of its own to us.
void adopt(link_ptr self, node_gateway_actor h, bool greet) {
  auto& st = self->state;
  if (st.handle == h)
    return;
  if (st.handle)
    self->demonitor(st.handle.address());
  st.handle = std::move(h);
  st.failing = false;
  self->monitor(st.handle);
  if (greet)
    caf::send_as(st.owner, st.handle, hello_atom_v, st.self_node);
  update_phase(self);
  answer_waiters(self, st.handle);
}

void attempt_succeeded(link_ptr self, node_gateway_actor h) {
  auto& st = self->state;
  st.attempt = false;
  if (st.closing)
    return;
  if (!h) {
    answer_waiters(self, {});
    update_phase(self);
    return;
  }
  link_log()->info("gateway {}: connected to node {} at {}", st.self_node,
                   st.node, st.address);
  if (!st.handle)
    adopt(self, std::move(h), true);
  else
    answer_waiters(self, st.handle); // the peer greeted us meanwhile
}

void attempt_failed(link_ptr self, const caf::error& err) {
  auto& st = self->state;
  st.attempt = false;
  if (st.closing)
    return;
  st.retry_at = self->clock().now() + ms(st.cfg.reconnect_ms);
  if (!st.failing)
    MM_LOG_LIMITED(link_log(), warn,
                   "gateway {}: cannot connect to node {} at {}: {} "
                   "(retrying after {} ms)",
                   st.self_node, st.node, st.address,
                   self->system().render(err), st.cfg.reconnect_ms);
  st.failing = true;
  answer_waiters(self, st.handle);
  update_phase(self);
}

/// Starts one connection attempt in a detached connector.
void connect(link_ptr self) {
  auto& st = self->state;
  auto hp = parse_address(st.address);
  if (!hp) {
    MM_LOG_LIMITED(link_log(), warn,
                   "gateway {}: peer {} has an unusable address: {}",
                   st.self_node, st.node, hp.error().detail);
    st.retry_at = self->clock().now() + ms(st.cfg.reconnect_ms);
    answer_waiters(self, {});
    update_phase(self);
    return;
  }
  st.attempt = true;
  update_phase(self);
  auto c = self->spawn<caf::detached>(connector, st.cfg.tls());
  self->request(c, caf::infinite, caf::connect_atom_v, hp->first, hp->second)
    .then([self](node_gateway_actor& h) { attempt_succeeded(self, h); },
          [self](caf::error& err) { attempt_failed(self, err); });
}

/// Parks `cb` until a connection is made, bounded by `forward_timeout_ms`.
void wait_for_connection(link_ptr self, link_cb cb) {
  auto& st = self->state;
  auto id = ++st.next_waiter;
  st.waiters.emplace(id, std::move(cb));
  self->delayed_send(self, ms(st.cfg.forward_timeout_ms), tick_atom_v, id);
}

// How a call gets the peer's gateway, per state.

void call_connected(link_ptr self, link_cb cb) {
  cb(self->state.handle);
}

void call_connecting(link_ptr self, link_cb cb) {
  wait_for_connection(self, std::move(cb));
}

void call_idle(link_ptr self, link_cb cb) {
  auto& st = self->state;
  if (!st.cfg.auto_connect || st.address.empty()) {
    cb({});
    return;
  }
  wait_for_connection(self, std::move(cb));
  connect(self);
}

void call_backoff(link_ptr self, link_cb cb) {
  if (self->clock().now() < self->state.retry_at) {
    cb({}); // backing off after a failed attempt: fail fast
    return;
  }
  call_idle(self, std::move(cb));
}

// -- calls at the peer --------------------------------------------------------

void call_done(link_ptr self) {
  auto& st = self->state;
  --st.in_flight;
  if (st.closing && st.in_flight == 0)
    self->quit();
}

/// How a call gets the peer's gateway in the state the link is in now.
void get_now(link_ptr self, link_cb cb);

/// Hands (user, event) to the peer's gateway `h` (invalid: unreachable).
/// When `h` turns out to be gone or silent (the peer restarted and its old
/// handle's down message did not come), drops it and tries once more with
/// a new connection.
void forward_event(link_ptr self,
                   caf::typed_response_promise<delivery_report> rp,
                   const std::string& user,
                   const std::shared_ptr<match_event>& ev,
                   const node_gateway_actor& h, bool again = true) {
  auto& st = self->state;
  delivery_report failed;
  failed.failed = 1;
  if (!h) {
    rp.deliver(failed);
    return;
  }
  ++st.in_flight;
  self->request(h, ms(st.cfg.forward_timeout_ms), deliver_atom_v, user, *ev)
    .then(
      [self, rp](delivery_report& r) mutable {
        rp.deliver(r);
        call_done(self);
      },
      [self, rp, failed, user, ev, h, again](caf::error& err) mutable {
        auto& st = self->state;
        // A handle that is gone or silent may be a restarted peer's old
        // one (its down message may never come, e.g. after a SIGKILL and a
        // restart on the same address).
        if (again
            && (err == caf::sec::request_receiver_down
                || err == caf::sec::request_timeout)) {
          if (st.closing) {
            rp.deliver(failed);
            call_done(self);
            return;
          }
          call_done(self);
          if (st.handle == h) {
            link_log()->info("gateway {}: node {}'s gateway did not take an "
                             "event ({}); connecting again",
                             st.self_node, st.node, self->system().render(err));
            self->demonitor(st.handle.address());
            st.handle = nullptr;
            update_phase(self);
          }
          get_now(self, [self, rp, user, ev](const node_gateway_actor& h2) {
            forward_event(self, rp, user, ev, h2, false);
          });
          return;
        }
        MM_LOG_LIMITED(link_log(), warn,
                       "gateway {}: node {} did not take event {}: {}",
                       st.self_node, st.node, ev->event_id,
                       self->system().render(err));
        rp.deliver(failed);
        call_done(self);
      });
}

/// Hands `xs...` to the peer's gateway `h` and its answer (bounded by
/// `timeout_ms`) to `rp`; `store_unavailable` without a handle. `quiet`:
/// a timeout or a gone handle is also `store_unavailable` ("did not
/// answer": the peer may have done it; the calls are idempotent).
template <class Result, class... Ts>
void forward_call(link_ptr self, caf::typed_response_promise<Result> rp,
                  const std::string& node, const node_gateway_actor& h,
                  uint32_t timeout_ms, bool quiet, Ts... xs) {
  auto& st = self->state;
  if (!h) {
    rp.deliver(caf::make_error(errc::store_unavailable,
                               "node " + node + " unreachable"));
    return;
  }
  ++st.in_flight;
  self->request(h, ms(timeout_ms), std::move(xs)...)
    .then(
      [self, rp](Result& x) mutable {
        rp.deliver(std::move(x));
        call_done(self);
      },
      [self, rp, node, quiet](caf::error& err) mutable {
        if (quiet
            && (err == caf::sec::request_timeout
                || err == caf::sec::request_receiver_down))
          err = caf::make_error(errc::store_unavailable,
                                "node " + node + " did not answer");
        rp.deliver(err);
        call_done(self);
      });
}

/// A behavior of the link: `get` is how a call gets the peer's gateway in
/// this state; the rest is the same in every state.
peer_link_actor::behavior_type link_behavior(link_ptr self,
                                             void (*get)(link_ptr, link_cb)) {
  return {
    [self, get](deliver_atom, std::string& user,
                match_event& ev) -> caf::result<delivery_report> {
      auto rp = self->make_response_promise<delivery_report>();
      auto shared_ev = std::make_shared<match_event>(std::move(ev));
      get(self, [self, rp, user, shared_ev](const node_gateway_actor& h) {
        forward_event(self, rp, user, shared_ev, h);
      });
      return rp;
    },
    [self, get](cancel_atom, std::string& node,
                inflight_cancel& c) -> caf::result<cancel_verdict> {
      auto rp = self->make_response_promise<cancel_verdict>();
      get(self, [self, rp, node, c](const node_gateway_actor& h) {
        // The finalizer's verdict for a pair the peer owns.
        forward_call(self, rp, node, h, self->state.cfg.cancel_timeout_ms,
                     false, cancel_atom_v, node, c);
      });
      return rp;
    },
    [self, get](party_atom, std::string& node,
                party_call& c) -> caf::result<party_info> {
      auto rp = self->make_response_promise<party_info>();
      get(self, [self, rp, node, c](const node_gateway_actor& h) {
        // The peer's gateway gives it to its party hub.
        forward_call(self, rp, node, h, self->state.cfg.forward_timeout_ms,
                     true, party_atom_v, node, c);
      });
      return rp;
    },
    [self, get](stats_atom) -> caf::result<std::string> {
      auto rp = self->make_response_promise<std::string>();
      get(self, [self, rp](const node_gateway_actor& h) {
        forward_call(self, rp, self->state.node, h,
                     self->state.cfg.forward_timeout_ms, true, stats_atom_v);
      });
      return rp;
    },
    [self](hello_atom, node_gateway_actor& h) {
      auto& st = self->state;
      if (st.handle)
        return; // one known already
      link_log()->info("gateway {}: node {} connected to us", st.self_node,
                       st.node);
      adopt(self, std::move(h), false);
    },
    [self](peer_atom, node_gateway_actor& h) {
      adopt(self, std::move(h), true);
    },
    [self](link_address& a) { self->state.address = std::move(a.address); },
    [self](tick_atom, uint64_t id) {
      auto& st = self->state;
      auto i = st.waiters.find(id);
      if (i == st.waiters.end())
        return;
      auto cb = std::move(i->second);
      st.waiters.erase(i);
      cb({}); // no connection within the bound
    },
  };
}

peer_link_actor::behavior_type idle(link_ptr self) {
  return link_behavior(self, call_idle);
}

void get_now(link_ptr self, link_cb cb) {
  switch (phase_now(self)) {
    case link_phase::connected:
      call_connected(self, std::move(cb));
      break;
    case link_phase::connecting:
      call_connecting(self, std::move(cb));
      break;
    case link_phase::backoff:
      call_backoff(self, std::move(cb));
      break;
    default:
      call_idle(self, std::move(cb));
  }
}

peer_link_actor::behavior_type connecting(link_ptr self) {
  return link_behavior(self, call_connecting);
}

peer_link_actor::behavior_type backoff(link_ptr self) {
  return link_behavior(self, call_backoff);
}

peer_link_actor::behavior_type connected(link_ptr self) {
  return link_behavior(self, call_connected);
}

// -- the actor ----------------------------------------------------------------

/// Answers the waiting calls as unreachable and ends the link, at once or
/// once its calls at the peer are answered.
void close(link_ptr self, const caf::error& reason) {
  auto& st = self->state;
  st.closing = true;
  answer_waiters(self, {});
  if (st.in_flight == 0)
    self->quit(reason);
}

peer_link_actor::behavior_type
peer_link(link_ptr self, link_owner_actor owner, std::string self_node,
          std::string node, std::string address, cluster_config cfg) {
  auto& st = self->state;
  st.owner = std::move(owner);
  st.self_node = std::move(self_node);
  st.node = std::move(node);
  st.address = std::move(address);
  st.cfg = std::move(cfg);
  self->monitor(st.owner);
  // The gateway drops the link of a peer it forgets.
  self->set_exit_handler(
    [self](caf::exit_msg& msg) { close(self, msg.reason); });
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    if (dm.source == st.owner.address()) {
      answer_waiters(self, {}); // to nobody: the gateway is gone
      self->quit(dm.reason);
      return;
    }
    if (st.handle && st.handle.address() == dm.source) {
      link_log()->info("gateway {}: lost node {} ({}); reconnecting on next "
                       "use",
                       st.self_node, st.node, self->system().render(dm.reason));
      st.handle = nullptr;
      update_phase(self);
    }
  });
  return idle(self);
}

} // namespace

peer_link_actor spawn_peer_link(caf::actor_system& sys, link_owner_actor owner,
                                std::string self_node, std::string node,
                                std::string address,
                                const cluster_config& cfg) {
  return sys.spawn(peer_link, std::move(owner), std::move(self_node),
                   std::move(node), std::move(address), cfg);
}

} // namespace mm
