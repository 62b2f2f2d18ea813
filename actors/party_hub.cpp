#include "actors/party_hub.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <functional>
#include <random>
#include <unordered_map>

#include <caf/all.hpp>
#include <sys/random.h>

#include "core/ticket_id.hpp"

namespace mm {

namespace {

struct hub_data {
  party_links links;
  party_config cfg;
  std::unordered_map<std::string, party_actor> parties;
  /// The same parties by address: a down or exit message finds its party
  /// without a walk over all of them.
  std::unordered_map<caf::actor_addr, std::string> ids;
  static inline const char* name = "party_hub";
};

using hub_ptr = party_hub_actor::stateful_pointer<hub_data>;

/// An invite code: 10 characters of an unambiguous alphabet (50 bits) from
/// the kernel's CSPRNG (a secret: a generator seeded once could be
/// predicted from the codes it handed out).
std::string invite_code() {
  static const char* alphabet = "23456789abcdefghjkmnpqrstuvwxyz_";
  unsigned char bytes[10];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    auto n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (errno != EINTR) {
      std::random_device rd; // not expected on Linux >= 3.17
      for (; got < sizeof bytes; ++got)
        bytes[got] = static_cast<unsigned char>(rd());
    }
  }
  std::string out;
  for (auto b : bytes)
    out += alphabet[b % 32];
  return out;
}

/// Spawns a party led by `leader` (in the registry already) and watches it.
party_actor make_party(hub_ptr self, const std::string& id,
                       const std::string& leader, bool solo) {
  auto& d = self->state;
  auto p = spawn_party(self->system(), id, leader, invite_code(), solo, d.links,
                       d.cfg);
  d.parties.emplace(id, p);
  d.ids.emplace(p.address(), id);
  self->monitor(p);
  self->link_to(p); // the parties stop with the hub (the exit handler)
  return p;
}

/// The party `id`, or an invalid handle after answering `not_found`.
party_actor find(hub_ptr self, const std::string& id) {
  auto i = self->state.parties.find(id);
  return i == self->state.parties.end() ? party_actor{} : i->second;
}

caf::error no_party(const std::string& id) {
  return caf::make_error(errc::not_found, "no party " + id);
}

/// True when party `id` is held by another node.
bool elsewhere(hub_ptr self, const std::string& id) {
  auto node = party_node(id);
  return !node.empty() && node != self->state.cfg.node;
}

/// Hands `c` to the node that holds its party, through the gateway, and
/// keeps this node's registry in step with the answer: a member who joined
/// there is in that party here too (its session here then refuses joins
/// of its own), one who left or is unknown there is not. `done` gets the
/// answer.
void forward(hub_ptr self, party_call c,
             std::function<void(caf::expected<party_info>)> done) {
  auto& d = self->state;
  if (!d.links.gateway) {
    d.links.registry->leave(c.user, c.party);
    done(no_party(c.party));
    return;
  }
  auto node = party_node(c.party);
  self
    ->request(d.links.gateway,
              std::chrono::milliseconds(d.cfg.request_timeout_ms), party_atom_v,
              node, c)
    .then(
      [self, c, done](party_info& x) {
        auto& reg = *self->state.links.registry;
        bool in = std::find(x.members.begin(), x.members.end(), c.user)
                  != x.members.end();
        if (c.op == party_op::join || c.op == party_op::leave
            || c.op == party_op::state) {
          if (in)
            reg.enter(c.user, c.party);
          else
            reg.leave(c.user, c.party);
        }
        done(std::move(x));
      },
      [self, c, done](caf::error& err) {
        // A join refused, or no such party or member there: not here
        // either. (After a timeout the party's events put a member who did
        // join back in.)
        bool gone = err.category() == caf::atom("mm")
                    && (err.code() == static_cast<uint8_t>(errc::not_found)
                        || err.code() == static_cast<uint8_t>(errc::forbidden));
        if (gone || c.op == party_op::join)
          self->state.links.registry->leave(c.user, c.party);
        done(std::move(err));
      });
}

void forward(hub_ptr self, party_call c,
             caf::typed_response_promise<party_info> rp) {
  forward(self, std::move(c), [rp](caf::expected<party_info> x) mutable {
    if (x)
      rp.deliver(std::move(*x));
    else
      rp.deliver(std::move(x.error()));
  });
}

/// Runs `c` on party `p` of this node (a call a member on another node
/// sent through the gateways).
void run_here(hub_ptr self, const party_actor& p, party_call& c,
              caf::typed_response_promise<party_info> rp) {
  switch (c.op) {
    case party_op::join:
      rp.delegate(p, join_atom_v, std::move(c.user), std::move(c.code));
      return;
    case party_op::leave:
      rp.delegate(p, leave_atom_v, std::move(c.user));
      return;
    case party_op::queue:
      c.queue.user = c.user;
      c.queue.party = c.party;
      rp.delegate(p, join_atom_v, std::move(c.queue));
      return;
    case party_op::cancel:
      rp.delegate(p, cancel_atom_v, std::move(c.user));
      return;
    case party_op::state:
      rp.delegate(p, state_atom_v, std::move(c.user));
      return;
    case party_op::deliver:
      self->send(p, deliver_atom_v, std::move(c.event));
      rp.deliver(party_info{});
      return;
  }
  rp.deliver(caf::make_error(errc::invalid_argument, "unknown party call"));
}

party_call call_of(party_op op, const std::string& user,
                   const std::string& party);

/// Puts `user` in party `id` in this node's registry, then `go`: a user in
/// another party is refused `in_party` (unless that party's node no longer
/// knows the user: an entry left by a node that died is dropped first),
/// one whose own join is live `duplicate_ticket` (the entry taken back).
/// Entered first, looked at second: a join of the user's own that starts
/// later is refused by its session.
void reserve(hub_ptr self, const std::string& user, const std::string& id,
             std::function<void()> go,
             caf::typed_response_promise<party_info> rp, bool probed) {
  if (!valid_client_id(user)) {
    rp.deliver(caf::make_error(errc::invalid_argument, "bad user id"));
    return;
  }
  auto& reg = *self->state.links.registry;
  if (!reg.enter(user, id)) {
    auto other = reg.party_of(user);
    if (!probed && elsewhere(self, other)) {
      forward(self, call_of(party_op::state, user, other),
              [self, user, id, go, rp](caf::expected<party_info>) {
                reserve(self, user, id, go, rp, true);
              });
      return;
    }
    rp.deliver(caf::make_error(errc::in_party, user + " is in party " + other));
    return;
  }
  auto s = self->state.links.session_of ? self->state.links.session_of(user)
                                        : session_actor{};
  if (!s) {
    go();
    return;
  }
  self
    ->request(s, std::chrono::milliseconds(self->state.cfg.request_timeout_ms),
              state_atom_v)
    .then(
      [self, user, id, go, rp](session_state& st) mutable {
        if (st.phase == session_phase::claiming
            || st.phase == session_phase::queued
            || st.phase == session_phase::finalizing) {
          self->state.links.registry->leave(user, id);
          rp.deliver(
            caf::make_error(errc::duplicate_ticket,
                            user + " is in a join (ticket " + st.ticket + ")"));
          return;
        }
        go();
      },
      [go](caf::error&) { go(); }); // its session is gone: no join
}

party_call call_of(party_op op, const std::string& user,
                   const std::string& party) {
  party_call c;
  c.op = op;
  c.user = user;
  c.party = party;
  return c;
}

} // namespace

party_hub_actor spawn_party_hub(caf::actor_system& sys, party_links links,
                                party_config cfg) {
  return sys.spawn([links,
                    cfg](hub_ptr self) -> party_hub_actor::behavior_type {
    self->state.links = links;
    self->state.cfg = cfg;
    // A party's exit is its own (the down handler forgets it); any other
    // exit message stops the hub, and the links take its parties along.
    self->set_exit_handler([self](caf::exit_msg& em) {
      if (em.reason == caf::exit_reason::normal)
        return; // a party that closed
      if (self->state.ids.count(em.source) == 0)
        self->quit(em.reason);
    });
    self->set_down_handler([self](caf::down_msg& dm) {
      auto& d = self->state;
      if (auto i = d.ids.find(dm.source); i != d.ids.end()) {
        d.parties.erase(i->second);
        d.ids.erase(i);
      }
    });
    auto create = [self](const std::string& user, bool solo,
                         std::function<void(party_actor)> then,
                         caf::typed_response_promise<party_info> rp) {
      auto id = party_id_on(make_nonce(), self->state.cfg.node);
      reserve(
        self, user, id,
        [self, user, id, solo, then] {
          then(make_party(self, id, user, solo));
        },
        rp, false);
    };
    auto join_elsewhere = [self](party_call c,
                                 caf::typed_response_promise<party_info> rp) {
      auto user = c.user;
      auto id = c.party;
      reserve(
        self, user, id, [self, c, rp] { forward(self, c, rp); }, rp, false);
    };
    return {
      [self, create](create_atom, std::string& user) {
        auto rp = self->make_response_promise<party_info>();
        create(
          user, false,
          [self, user, rp](party_actor p) mutable {
            rp.delegate(p, state_atom_v, user);
          },
          rp);
        return rp;
      },
      [self, join_elsewhere](join_atom, std::string& user, std::string& party,
                             std::string& code) -> caf::result<party_info> {
        if (elsewhere(self, party)) {
          auto rp = self->make_response_promise<party_info>();
          auto c = call_of(party_op::join, user, party);
          c.code = std::move(code);
          join_elsewhere(std::move(c), rp);
          return rp;
        }
        auto p = find(self, party);
        if (!p)
          return no_party(party);
        return self->delegate(p, join_atom_v, std::move(user), std::move(code));
      },
      [self](leave_atom, std::string& user,
             std::string& party) -> caf::result<party_info> {
        if (elsewhere(self, party)) {
          auto rp = self->make_response_promise<party_info>();
          forward(self, call_of(party_op::leave, user, party), rp);
          return rp;
        }
        auto p = find(self, party);
        if (!p)
          return no_party(party);
        return self->delegate(p, leave_atom_v, std::move(user));
      },
      [self, create](join_atom, party_queue_request& r) {
        auto rp = self->make_response_promise<party_info>();
        if (!r.party.empty() && elsewhere(self, r.party)) {
          auto c = call_of(party_op::queue, r.user, r.party);
          c.queue = std::move(r);
          forward(self, std::move(c), rp);
          return rp;
        }
        if (!r.party.empty()) {
          auto p = find(self, r.party);
          if (!p)
            rp.deliver(no_party(r.party));
          else
            rp.delegate(p, join_atom_v, std::move(r));
          return rp;
        }
        // Alone on a queue with a shape: a party of one for this ticket.
        create(
          r.user, true,
          [r, rp](party_actor p) mutable {
            r.party.clear();
            rp.delegate(p, join_atom_v, std::move(r));
          },
          rp);
        return rp;
      },
      [self](cancel_atom, std::string& user,
             std::string& party) -> caf::result<party_info> {
        if (elsewhere(self, party)) {
          auto rp = self->make_response_promise<party_info>();
          forward(self, call_of(party_op::cancel, user, party), rp);
          return rp;
        }
        auto p = find(self, party);
        if (!p)
          return no_party(party);
        return self->delegate(p, cancel_atom_v, std::move(user));
      },
      [self](state_atom, std::string& user,
             std::string& party) -> caf::result<party_info> {
        if (elsewhere(self, party)) {
          auto rp = self->make_response_promise<party_info>();
          forward(self, call_of(party_op::state, user, party), rp);
          return rp;
        }
        auto p = find(self, party);
        if (!p)
          return no_party(party);
        return self->delegate(p, state_atom_v, std::move(user));
      },
      [self](deliver_atom, std::string& party, match_event& ev) {
        if (elsewhere(self, party)) {
          // A member here passes its match event on to its party's node
          // (which checks it against the database); nobody waits for it.
          auto& d = self->state;
          // (The party reads match.created, a fill's members_changed and
          // session.ended only; the check needs a member of the event's
          // session: user_a is one.)
          if (!d.links.gateway || ev.user_a.empty()
              || (ev.type != "match.created" && ev.type != session_ended_event
                  && ev.type != "session.members_changed"))
            return;
          auto c = call_of(party_op::deliver, ev.user_a, party);
          c.event = std::move(ev);
          self
            ->request(d.links.gateway,
                      std::chrono::milliseconds(d.cfg.request_timeout_ms),
                      party_atom_v, party_node(party), std::move(c))
            .then([](party_info&) {}, [](caf::error&) {});
          return;
        }
        if (auto p = find(self, party))
          self->send(p, deliver_atom_v, std::move(ev));
      },
      [self](answer_atom, proposal_answer& a) {
        // A member's answer to a proposal is recorded in the queue store
        // (the store decides); the holder is nudged when it is this node,
        // others look at their proposals every poll.
        auto& d = self->state;
        auto rp = self->make_response_promise<proposal_state>();
        self
          ->request(d.links.broker,
                    std::chrono::milliseconds(d.cfg.request_timeout_ms),
                    answer_atom_v, a)
          .then(
            [self, rp](proposal_state& st) mutable {
              auto& d = self->state;
              if (st.claimer == d.cfg.node && d.links.ready
                  && (st.complete || st.declined))
                self->send(d.links.ready, answer_atom_v,
                           group_ref{st.queue, st.proposal});
              rp.deliver(std::move(st));
            },
            [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
        return rp;
      },
      [self](party_atom, party_call& c) -> caf::result<party_info> {
        auto rp = self->make_response_promise<party_info>();
        if (elsewhere(self, c.party)) {
          rp.deliver(no_party(c.party)); // never routed twice
          return rp;
        }
        auto p = find(self, c.party);
        if (!p)
          rp.deliver(no_party(c.party));
        else
          run_here(self, p, c, rp);
        return rp;
      },
    };
  });
}

} // namespace mm
