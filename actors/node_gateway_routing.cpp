// The node gateway's routing (actors/gateway_data.hpp): events to the
// node that holds the user's session, the replay on registration, cancels
// to the owner's finalizer, and the checks of what peers send.

#include "actors/gateway_data.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/log_limit.hpp"

#include "actors/party_registry.hpp"
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

namespace {

/// The party a `party.updated` event is about ('' none): its id is
/// "party:<party>:<version>".
std::string party_of_event(const match_event& ev) {
  const std::string prefix = "party:";
  auto end = ev.event_id.rfind(':');
  if (ev.event_id.compare(0, prefix.size(), prefix) != 0
      || end == std::string::npos || end <= prefix.size())
    return {};
  return ev.event_id.substr(prefix.size(), end - prefix.size());
}

/// True when `src` is the gateway handle the link of `node` holds.
bool from_node(gw_ptr self, const caf::strong_actor_ptr& src,
               const std::string& node) {
  auto& st = self->state;
  auto i = st.peers.find(node);
  return src != nullptr && i != st.peers.end() && !i->second.peer_id.empty()
         && caf::to_string(src->node()) == i->second.peer_id;
}

/// A peer's `party.updated` for `user`: taken from the party's own node
/// only (a party's state is in no database), and this node's registry
/// follows the members it lists.
void deliver_party_update(gw_ptr self,
                          caf::typed_response_promise<delivery_report> rp,
                          const caf::strong_actor_ptr& src, std::string user,
                          std::shared_ptr<match_event> ev) {
  auto& st = self->state;
  auto party = party_of_event(*ev);
  auto node = party_node(party);
  if (party.empty() || node.empty() || node == st.node
      || !from_node(self, src, node)) {
    refuse(self, "a party event '" + ev->event_id + "' not from its node");
    rp.deliver(delivery_report{});
    return;
  }
  if (auto& reg = st.links.parties) {
    auto j = nlohmann::json::parse(ev->payload, nullptr, false);
    bool in = false;
    if (j.is_object() && j.contains("members") && j["members"].is_array())
      for (auto& m : j["members"])
        in = in || (m.is_string() && m.get<std::string>() == user);
    if (in)
      reg->enter(user, party);
    else
      reg->leave(user, party);
  }
  rp.delegate(st.links.directory, deliver_atom_v, user, std::move(*ev));
}

void to_hub(gw_ptr self, caf::typed_response_promise<party_info> rp,
            party_call c) {
  auto& st = self->state;
  if (!st.hub) {
    rp.deliver(caf::make_error(errc::not_found, "no party " + c.party));
    return;
  }
  rp.delegate(st.hub, party_atom_v, std::move(c));
}

} // namespace

void party_call_for(gw_ptr self, caf::typed_response_promise<party_info> rp,
                    bool local, const std::string& node, party_call c) {
  auto& st = self->state;
  if (!local) {
    // A member's call from a peer: for our parties only.
    if (node != st.node || party_node(c.party) != st.node) {
      refuse(self, "a party call for another node");
      rp.deliver(caf::make_error(errc::forbidden,
                                 "party " + c.party + " is not held by node "
                                   + st.node + " (asked for " + node + ")"));
      return;
    }
    if (c.op != party_op::deliver) {
      to_hub(self, rp, std::move(c));
      return;
    }
    if (!(st.match_inline || st.match_worker)) {
      rp.deliver(party_info{});
      return;
    }
    auto shared = std::make_shared<party_call>(std::move(c));
    st.match_pending.push_back(match_op{
      gw_lookup{true, shared->event.session_id},
      [self, rp, shared](outcome<std::optional<match_record>>& found) mutable {
        if (!found) {
          rp.deliver(
            caf::make_error(errc::store_unavailable,
                            "event not checked: " + found.error().detail));
          return;
        }
        auto checked = *found
                         ? as_recorded(shared->user, shared->event, **found)
                         : std::nullopt;
        if (!checked) {
          refuse(self, "a party's event '" + shared->event.event_id
                         + "': not in the database");
          rp.deliver(party_info{});
          return;
        }
        shared->event = std::move(*checked);
        to_hub(self, rp, std::move(*shared));
      }});
    pump_matches(self);
    return;
  }
  if (node.empty() || node == st.node) {
    to_hub(self, rp, std::move(c));
    return;
  }
  auto decide = [self, rp, node, c]() mutable {
    auto& st = self->state;
    auto i = st.peers.find(node);
    if (!st.cfg.enabled() || i == st.peers.end() || !live(st, i->second)) {
      rp.deliver(
        caf::make_error(errc::not_found, "no party " + c.party + " (node "
                                           + node + " is not in the cluster)"));
      return;
    }
    auto pass = [](const caf::error& err) { return err; };
    call_link(self, rp, node, pass, party_atom_v, node, std::move(c));
  };
  auto i = st.peers.find(node);
  if (st.cfg.enabled() && st.cfg.membership
      && (i == st.peers.end() || !live(st, i->second)))
    beat(self, decide); // our view may be older than the node: refresh
  else
    decide();
}

/// A peer's proposal event for `user` (the ready check): taken from the
/// node that holds the proposal only, which its payload names (a
/// proposal is in no database).
void deliver_proposal_event(gw_ptr self,
                            caf::typed_response_promise<delivery_report> rp,
                            const caf::strong_actor_ptr& src, std::string user,
                            std::shared_ptr<match_event> ev) {
  auto& st = self->state;
  auto j = nlohmann::json::parse(ev->payload, nullptr, false);
  std::string holder;
  if (j.is_object() && j.contains("holder") && j["holder"].is_string())
    holder = j["holder"].get<std::string>();
  if (holder.empty() || holder == st.node || !from_node(self, src, holder)) {
    refuse(self, "a proposal event '" + ev->event_id + "' not from its node");
    rp.deliver(delivery_report{});
    return;
  }
  rp.delegate(st.links.directory, deliver_atom_v, user, std::move(*ev));
}

void deliver_checked(gw_ptr self,
                     caf::typed_response_promise<delivery_report> rp,
                     const caf::strong_actor_ptr& src, std::string user,
                     std::shared_ptr<match_event> ev) {
  auto& st = self->state;
  if (ev->type == party_updated_event) {
    deliver_party_update(self, rp, src, std::move(user), std::move(ev));
    return;
  }
  if (is_proposal_event(ev->type)) {
    deliver_proposal_event(self, rp, src, std::move(user), std::move(ev));
    return;
  }
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

// -- the console's cluster page ------------------------------------------------

void cluster_stats(gw_ptr self, caf::typed_response_promise<std::string> rp) {
  using nlohmann::json;
  auto& st = self->state;
  // Slot 0 is this node; then the live peers, answered in any order.
  struct gather {
    json nodes = json::array();
    size_t left = 0;
  };
  auto g = std::make_shared<gather>();
  auto own = json::parse(st.links.stats ? st.links.stats() : "{}", nullptr,
                         false);
  g->nodes.push_back({{"node", st.node}, {"stats", own}});
  std::vector<std::string> asked;
  for (auto& [id, p] : st.peers)
    if (live(st, p))
      asked.push_back(id);
  auto finish = [self, rp, g]() mutable {
    json out{{"node", self->state.node}, {"nodes", std::move(g->nodes)}};
    rp.deliver(out.dump());
  };
  g->left = asked.size();
  if (asked.empty()) {
    finish();
    return;
  }
  for (auto& id : asked) {
    auto& p = peer(self, id);
    ++p.calls;
    auto link = p.link;
    auto done = [self, id, link, g, finish](json entry) mutable {
      auto i = self->state.peers.find(id);
      if (i != self->state.peers.end() && i->second.link == link)
        --i->second.calls;
      g->nodes.push_back(std::move(entry));
      if (--g->left == 0)
        finish();
    };
    self->request(link, caf::infinite, stats_atom_v)
      .then(
        [id, done](std::string& text) mutable {
          auto j = json::parse(text, nullptr, false);
          if (j.is_discarded() || !j.is_object())
            done({{"node", id}, {"error", "not JSON"}});
          else
            done({{"node", id}, {"stats", std::move(j)}});
        },
        [self, id, done](caf::error& err) mutable {
          done({{"node", id}, {"error", self->system().render(err)}});
        });
  }
}

} // namespace mm::gateway_detail
