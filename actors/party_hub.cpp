#include "actors/party_hub.hpp"

#include <random>
#include <unordered_map>

#include <caf/all.hpp>

#include "core/ticket_id.hpp"

namespace mm {

namespace {

struct hub_data {
  party_links links;
  party_config cfg;
  std::unordered_map<std::string, party_actor> parties;
  static inline const char* name = "party_hub";
};

using hub_ptr = party_hub_actor::stateful_pointer<hub_data>;

/// An invite code: 10 characters of an unambiguous alphabet (50 bits).
std::string invite_code() {
  static const char* alphabet = "23456789abcdefghjkmnpqrstuvwxyz_";
  std::random_device rd;
  std::string out;
  for (int i = 0; i < 10; ++i)
    out += alphabet[rd() % 32];
  return out;
}

/// Spawns a party led by `leader` (in the registry already) and watches it.
party_actor make_party(hub_ptr self, const std::string& id,
                       const std::string& leader, bool solo) {
  auto& d = self->state;
  auto p = spawn_party(self->system(), id, leader, invite_code(), solo, d.links,
                       d.cfg);
  d.parties.emplace(id, p);
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
      for (auto& [id, p] : self->state.parties)
        if (p.address() == em.source)
          return;
      self->quit(em.reason);
    });
    self->set_down_handler([self](caf::down_msg& dm) {
      auto& m = self->state.parties;
      for (auto i = m.begin(); i != m.end(); ++i)
        if (i->second.address() == dm.source) {
          m.erase(i);
          return;
        }
    });
    // A new party: its leader is in the registry before anything else, so
    // a join of the leader's own that starts later is refused.
    auto create = [self](const std::string& user, bool solo,
                         std::function<void(party_actor)> then,
                         caf::typed_response_promise<party_info> rp) {
      if (!valid_client_id(user)) {
        rp.deliver(caf::make_error(errc::invalid_argument, "bad user id"));
        return;
      }
      auto id = "p" + make_nonce();
      auto& reg = *self->state.links.registry;
      if (!reg.enter(user, id)) {
        rp.deliver(caf::make_error(errc::in_party, user + " is in party "
                                                     + reg.party_of(user)));
        return;
      }
      auto go = [self, user, id, solo, then]() {
        then(make_party(self, id, user, solo));
      };
      auto s = self->state.links.session_of ? self->state.links.session_of(user)
                                            : session_actor{};
      if (!s) {
        go();
        return;
      }
      self
        ->request(s,
                  std::chrono::milliseconds(self->state.cfg.request_timeout_ms),
                  state_atom_v)
        .then(
          [self, user, id, go, rp](session_state& st) mutable {
            if (st.phase == session_phase::claiming
                || st.phase == session_phase::queued
                || st.phase == session_phase::finalizing) {
              self->state.links.registry->leave(user, id);
              rp.deliver(caf::make_error(errc::duplicate_ticket,
                                         user + " is in a join (ticket "
                                           + st.ticket + ")"));
              return;
            }
            go();
          },
          [go](caf::error&) { go(); }); // its session is gone: no join
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
      [self](join_atom, std::string& user, std::string& party,
             std::string& code) -> caf::result<party_info> {
        auto p = find(self, party);
        if (!p)
          return no_party(party);
        return self->delegate(p, join_atom_v, std::move(user), std::move(code));
      },
      [self](leave_atom, std::string& user,
             std::string& party) -> caf::result<party_info> {
        auto p = find(self, party);
        if (!p)
          return no_party(party);
        return self->delegate(p, leave_atom_v, std::move(user));
      },
      [self, create](join_atom, party_queue_request& r) {
        auto rp = self->make_response_promise<party_info>();
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
        auto p = find(self, party);
        if (!p)
          return no_party(party);
        return self->delegate(p, cancel_atom_v, std::move(user));
      },
      [self](state_atom, std::string& user,
             std::string& party) -> caf::result<party_info> {
        auto p = find(self, party);
        if (!p)
          return no_party(party);
        return self->delegate(p, state_atom_v, std::move(user));
      },
      [self](deliver_atom, std::string& party, match_event& ev) {
        if (auto p = find(self, party))
          self->send(p, deliver_atom_v, std::move(ev));
      },
    };
  });
}

} // namespace mm
