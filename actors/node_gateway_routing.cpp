// The node gateway's routing (actors/gateway_data.hpp): events to the
// node that holds the user's session, the replay on registration, cancels
// to the owner's finalizer, and the checks of what peers send.

#include "actors/gateway_data.hpp"

#include <spdlog/spdlog.h>

#include "core/log_limit.hpp"

#include "actors/peer_events.hpp"

namespace mm::gateway_detail {

namespace {

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

} // namespace

// -- routing ------------------------------------------------------------------

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

void replay(gw_ptr self, const std::string& user) {
  self->state.match_pending.push_back(match_op{
    gw_lookup{false, user},
    [self, user](outcome<std::optional<match_record>>& found) {
      auto& st = self->state;
      if (!found) {
        MM_LOG_LIMITED(gw_log(), warn,
                       "gateway {}: active match of '{}' not looked up: {}",
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

// -- what peers may send ------------------------------------------------------
//
// The gateway is published: anybody who connects to the cluster port (with a
// certificate of the cluster's CA, when TLS is on) can send it every message
// of its interface. Host and directory messages are taken from actors of
// this node only; an event from a peer is delivered only as the database
// has it.

bool from_here(gw_ptr self) {
  auto& src = self->current_sender();
  return src != nullptr && src->node() == self->node();
}

void refuse(gw_ptr self, const std::string& what) {
  auto& st = self->state;
  auto n = ++st.refused;
  if ((n & (n - 1)) == 0)
    MM_LOG_LIMITED(gw_log(), warn,
                   "gateway {}: refused {} (refused so far: {})", st.node, what,
                   n);
}

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
        MM_LOG_LIMITED(gw_log(), warn,
                       "gateway {}: event {} for '{}' not checked: {}", st.node,
                       ev->event_id, user, found.error().detail);
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

void cancel_at_peer(gw_ptr self, caf::typed_response_promise<cancel_verdict> rp,
                    const std::string& node, inflight_cancel c) {
  auto pass = [](const caf::error& err) { return err; };
  call_link(self, rp, node, pass, cancel_atom_v, node, std::move(c));
}

} // namespace mm::gateway_detail
