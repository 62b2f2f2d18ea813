// The party's ticket (actors/party.hpp): the claim and its re-scans, the
// commit of the groups its claims make, a member's truthful cancel, and the
// checks before the leader's ticket is filed. The I1-I12 it cites are
// those of docs/design.md.

#include <algorithm>
#include <chrono>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/member_spec.hpp"
#include "actors/party_data.hpp"
#include "core/log_limit.hpp"
#include "core/ticket_id.hpp"

namespace mm::party_detail {

/// The ready check's time of the party's queue (0: none).
uint32_t g_accept(const party_data& d) {
  return d.rs != nullptr ? d.rs->shape.accept_timeout_ms : 0;
}

caf::timespan bound(const party_data& d) {
  return std::chrono::milliseconds(d.cfg.request_timeout_ms);
}

void retry_later(party_ptr self) {
  auto& d = self->state;
  d.backoff_ms = d.backoff_ms == 0 ? 100 : std::min(2 * d.backoff_ms, 2000u);
  self->delayed_send(self, std::chrono::milliseconds(d.backoff_ms),
                     retry_atom_v, d.gen);
}

void arm_tick(party_ptr self, uint32_t ms) {
  self->delayed_send(self, std::chrono::milliseconds(ms), tick_atom_v,
                     self->state.gen);
}

/// The whole ticket failed for a reason the store named.
void failed(party_ptr self, const caf::error& err) {
  auto what = self->system().render(err);
  MM_LOG_LIMITED(party_log(), warn, "party {}: ticket {} failed: {}",
                 self->state.id, self->state.ticket, what);
  auto waiters = std::move(self->state.queue_waiters);
  self->state.queue_waiters.clear();
  for (auto& rp : waiters)
    rp.deliver(err);
  enter(self, party_phase::open, "failed: " + what);
}

// -- the ticket's commit ------------------------------------------------------

void on_verdict(party_ptr self, uint64_t gen, group_verdict& v) {
  auto& d = self->state;
  if (gen != d.gen || d.phase != party_phase::finalizing)
    return;
  if (v.committed) {
    d.session_id = v.session_id;
    enter(self, party_phase::matched, {});
    return;
  }
  auto i = std::find(v.removed.begin(), v.removed.end(), d.store_ticket);
  if (i != v.removed.end()) {
    // A ready check names why each ticket left (declined, timed_out).
    auto k = static_cast<size_t>(i - v.removed.begin());
    auto why = k < v.reasons.size() ? v.reasons[k] : "removed: " + v.detail;
    enter(self, party_phase::open,
          d.cancelling ? "cancelled by " + d.cancelled_by : why);
    return;
  }
  // Back at its place: look again at once (the others may still match).
  d.detail = "requeued";
  claim(self, true);
}

/// Commits a group this party's claim made (with or without its ticket).
void commit(party_ptr self, const group_claim_result& r, bool ours) {
  auto& d = self->state;
  group_commit g;
  g.queue = d.queue;
  g.group = r.group;
  g.min_players = d.rs != nullptr ? d.rs->shape.min_players : 2;
  g.max_players = d.rs != nullptr ? d.rs->shape.max_players : 2;
  g.team_size = d.rs != nullptr ? d.rs->shape.team_size : 0;
  g.tickets = r.tickets;
  g.accept_ms = g_accept(d);
  auto gen = d.gen;
  self->request(d.links.finalizer, caf::infinite, finalize_atom_v, std::move(g))
    .then(
      [self, gen, ours](group_verdict& v) {
        if (ours) {
          on_verdict(self, gen, v);
          return;
        }
        // Older tickets went back to their places: with ours they may now
        // make a match that no other claim will look for until a re-scan.
        // (Any generation: the claim that made the group queued ours.)
        auto& d = self->state;
        if (!v.committed && d.phase == party_phase::queued && !d.cancelling)
          claim(self, true);
      },
      [self, gen, ours](caf::error& err) {
        // The group finalizer is a core actor: the engine stops without it.
        if (ours && gen == self->state.gen)
          failed(self, err);
      });
}

// -- the claim ----------------------------------------------------------------

/// A re-scan found the ticket settled or lapsed: the database says whether
/// the party plays (matched), a member is busy elsewhere (open), or the
/// ticket lapsed and is filed anew (I2).
void after_gone(party_ptr self) {
  auto& d = self->state;
  if (!d.links.lifecycle) {
    claim(self, false);
    return;
  }
  auto gen = d.gen;
  auto leader = d.members.front();
  self->request(d.links.lifecycle, bound(d), state_atom_v, leader)
    .then(
      [self, gen](std::string& session) {
        auto& d = self->state;
        if (gen != d.gen)
          return;
        if (!session.empty()) {
          d.session_id = session;
          enter(self, party_phase::matched, {});
        } else if (d.cancelling) {
          enter(self, party_phase::open, "cancelled by " + d.cancelled_by);
        } else if (!d.gone_waited && d.cfg.gone_grace_ms > 0) {
          // Settled by a claim whose session already ended, or lapsed. Its
          // match event may still be on the way: filed anew now, the
          // party could be matched again while that session is being
          // delivered. The event gets the grace; then the database again.
          d.gone_waited = true;
          d.rescan = true;
          self->delayed_send(self,
                             std::chrono::milliseconds(d.cfg.gone_grace_ms),
                             retry_atom_v, gen);
        } else {
          d.gone_waited = false;
          claim(self, false);
        }
      },
      [self, gen](caf::error&) {
        if (gen == self->state.gen)
          retry_later(self);
      });
}

void on_claim(party_ptr self, uint64_t gen, group_claim_result& r) {
  auto& d = self->state;
  if (gen != d.gen || !live(d.phase))
    return;
  d.backoff_ms = 0;
  if (r.outcome != group_claim_outcome::gone)
    d.gone_waited = false;
  switch (r.outcome) {
    case group_claim_outcome::gone:
      after_gone(self);
      return;
    case group_claim_outcome::removed: // a ready check took it out
      enter(self, party_phase::open,
            d.cancelling ? "cancelled by " + d.cancelled_by : r.detail);
      return;
    case group_claim_outcome::claimed_by_other:
      d.token = r.token;
      enter(self, party_phase::finalizing, "in a group being committed");
      if (d.cancelling)
        d.links.cancels->add(d.queue, d.members.front(), d.store_ticket);
      arm_tick(self, d.cancelling ? d.cfg.recheck_ms : d.cfg.heartbeat_ms);
      return;
    case group_claim_outcome::matched:
      d.token = r.token;
      if (r.in_group) {
        enter(self, party_phase::finalizing,
              g_accept(d) > 0 ? "proposed" : "committing");
        if (d.cancelling) // seen at the commit's first checkpoint
          d.links.cancels->add(d.queue, d.members.front(), d.store_ticket);
        commit(self, r, true);
        return;
      }
      commit(self, r, false); // older tickets matched; ours still waits
      if (r.held) {           // ... or another claim holds ours in a group
        r.outcome = group_claim_outcome::claimed_by_other;
        on_claim(self, gen, r);
        return;
      }
      [[fallthrough]];
    case group_claim_outcome::queued:
      d.token = r.token;
      if (d.cancelling) {
        cancel_at_queue(self);
        return;
      }
      if (d.phase != party_phase::queued || !d.queue_waiters.empty())
        enter(self, party_phase::queued, d.detail);
      arm_tick(self, r.more ? 50 : d.cfg.heartbeat_ms);
      return;
  }
}

void claim(party_ptr self, bool rescan) {
  auto& d = self->state;
  if (d.phase != party_phase::claiming && d.phase != party_phase::queued)
    enter(self, party_phase::claiming, d.detail);
  d.rescan = rescan;
  group_ticket_spec s;
  s.queue = d.queue;
  s.ticket = d.store_ticket;
  s.node = d.cfg.node;
  s.ttl_ms = d.cfg.ttl_ms;
  s.rules = d.rs != nullptr ? d.rs->spec : std::string{};
  s.shape = d.rs != nullptr ? d.rs->shape.spec : std::string{};
  s.members = d.spec_members;
  s.rescan = rescan;
  s.accept_ms = g_accept(d);
  auto gen = d.gen;
  self->request(d.links.broker, bound(d), claim_atom_v, std::move(s))
    .then([self, gen](group_claim_result& r) { on_claim(self, gen, r); },
          [self, gen](caf::error& err) {
            if (gen != self->state.gen)
              return;
            if (store_trouble(err))
              retry_later(self);
            else
              failed(self, err);
          });
}

// -- the cancel ---------------------------------------------------------------

/// Cancels the ticket at the queue: removed while it waits (open); held by
/// a claim, the group's commit honours it at its checkpoints and this
/// looks again every recheck_ms.
void cancel_at_queue(party_ptr self) {
  auto& d = self->state;
  auto gen = d.gen;
  self
    ->request(d.links.broker, bound(d), cancel_atom_v,
              group_leave{d.queue, d.members.front(), d.token})
    .then(
      [self, gen](group_cancel_result& r) {
        auto& d = self->state;
        if (gen != d.gen)
          return;
        if (!r.in_flight) {
          enter(self, party_phase::open,
                d.giving_up ? "timed out" : "cancelled by " + d.cancelled_by);
          return;
        }
        d.links.cancels->add(d.queue, d.members.front(), d.store_ticket);
        if (d.phase != party_phase::finalizing)
          enter(self, party_phase::finalizing, "cancelling");
        arm_tick(self, d.cfg.recheck_ms);
      },
      [self, gen](caf::error& err) {
        if (gen != self->state.gen)
          return;
        if (store_trouble(err))
          retry_later(self);
        else
          after_gone(self); // not_found / stale_token: not waiting any more
      });
}

void start_cancel(party_ptr self, const std::string& by) {
  auto& d = self->state;
  if (d.cancelling)
    return;
  d.cancelling = true;
  d.cancelled_by = by;
  if (d.phase == party_phase::queued)
    cancel_at_queue(self);
  else if (d.phase == party_phase::finalizing)
    // Our own commit decides (its checkpoints see the cancel), or the
    // re-check does for another's.
    d.links.cancels->add(d.queue, d.members.front(), d.store_ticket);
  // claiming: decided when the claim answers
}

// -- queueing the party -------------------------------------------------------

/// Checks the leader's request against the queue's shape and rules; fills
/// the ticket's members. A refusal changes nothing.
caf::error check_request(party_data& d, party_queue_request& r,
                         std::vector<party_member>& out, const rule_set*& rs) {
  if (d.members.empty() || r.user != d.members.front())
    return caf::make_error(errc::forbidden, "only the leader queues the party");
  if (!valid_client_id(r.ticket))
    return caf::make_error(errc::invalid_argument,
                           "ticket must be 1..128 bytes of [A-Za-z0-9._:@-]");
  rs = nullptr;
  if (d.cfg.rules)
    if (auto i = d.cfg.rules->find(r.queue); i != d.cfg.rules->end())
      rs = &i->second;
  if (rs == nullptr || !rs->has_shape)
    return caf::make_error(errc::invalid_argument,
                           "queue '" + r.queue
                             + "' pairs users: a party queues only a queue "
                               "with a shape (docs/groups.md)");
  auto& sh = rs->shape;
  auto size = static_cast<uint32_t>(d.members.size());
  auto room = sh.teams > 0 ? sh.team_size : sh.max_players;
  if (size > sh.party_max || size > room)
    return caf::make_error(errc::party_too_large,
                           "a party of " + std::to_string(size)
                             + " exceeds queue '" + r.queue + "''s party_max "
                             + std::to_string(std::min(sh.party_max, room)));
  for (auto& [user, attrs] : r.attrs)
    if (!is_member(d, user))
      return caf::make_error(errc::invalid_argument,
                             "attributes for " + user
                               + ", who is not in the party");
  out.clear();
  for (auto& user : d.members) {
    auto i = r.attrs.find(user);
    auto text = i == r.attrs.end() ? std::string{"{}"} : i->second;
    auto m = member_of(*rs, user, text);
    if (!m)
      return caf::make_error(m.error().code,
                             "member " + user + ": " + m.error().detail);
    out.push_back(std::move(*m));
  }
  return {};
}

/// Every member must be free of an active session (I8: a user in a
/// session never waits in a queue); then the ticket is claimed.
/// A refused queue request changes nothing, but a party of one made for it
/// closes.
void refuse(party_ptr self, info_promise& rp, caf::error err) {
  rp.deliver(std::move(err));
  auto& d = self->state;
  if (d.solo && d.phase == party_phase::open)
    close(self, "refused");
}

void queue_party(party_ptr self, party_queue_request& r, info_promise rp) {
  auto& d = self->state;
  std::vector<party_member> members;
  const rule_set* rs = nullptr;
  if (auto err = check_request(d, r, members, rs)) {
    refuse(self, rp, std::move(err));
    return;
  }
  auto roster = d.members;
  auto begin = [self, r, members, rs, rp, roster]() mutable {
    auto& d = self->state;
    if (d.phase != party_phase::open) {
      rp.deliver(
        caf::make_error(errc::duplicate_ticket, "the party queued meanwhile"));
      return;
    }
    if (d.members != roster) { // a member came or left during the checks
      refuse(self, rp,
             caf::make_error(errc::conflict, "the party changed meanwhile"));
      return;
    }
    d.queue = r.queue;
    d.ticket = r.ticket;
    d.rs = rs;
    d.spec_members = std::move(members);
    d.store_ticket = make_store_ticket(make_nonce(), 0, d.members.front(),
                                       r.ticket);
    d.token.clear();
    d.session_id.clear();
    d.cancelling = false;
    d.giving_up = false;
    d.backoff_ms = 0;
    d.gone_waited = false;
    ++d.ticket_no;
    if (r.give_up_after_s > 0)
      self->delayed_send(self, std::chrono::seconds(r.give_up_after_s),
                         give_up_atom_v, d.ticket_no);
    d.queue_waiters.push_back(rp);
    d.detail.clear();
    claim(self, false);
  };
  if (!d.links.lifecycle) {
    begin();
    return;
  }
  // Every member asked at once (the lifecycle actor batches the lookups);
  // a busy member refuses, naming itself.
  struct pending {
    size_t left = 0;
    bool refused = false;
  };
  auto p = std::make_shared<pending>();
  p->left = d.members.size();
  for (auto& user : d.members)
    self->request(d.links.lifecycle, bound(d), state_atom_v, user)
      .then(
        [self, p, user, begin, rp](std::string& session) mutable {
          if (p->refused)
            return;
          if (!session.empty()) {
            p->refused = true;
            refuse(self, rp,
                   caf::make_error(errc::in_session,
                                   user + " is in session " + session));
            return;
          }
          if (--p->left == 0)
            begin();
        },
        [self, p, rp](caf::error& err) mutable {
          if (p->refused)
            return;
          p->refused = true;
          refuse(self, rp, std::move(err));
        });
}

} // namespace mm::party_detail
