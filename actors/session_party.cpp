// A join of a queue with a shape (docs/groups.md): the session queues its
// user as a party of one at the party hub and mirrors that party's phases,
// so the user's state, cancel and events look as for any other join; and
// the group sessions' events that concern the user alone.
//
//   idle/done ──join──► (hub: party of one) ──► claiming/queued/finalizing
//                                                  │ party.updated
//                                                  ▼
//        done (matched | cancelled | timed_out | failed) ◄── the party ends

#include <chrono>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/session_data.hpp"

namespace mm::session_detail {

namespace {

/// Applies the party's phase (`phase` as to_string(party_phase) names it)
/// to the join.
void mirror(ses_ptr self, const std::string& phase,
            const std::string& session_id, const std::string& detail) {
  auto& d = self->state;
  if (phase == "claiming" || phase == "queued" || phase == "finalizing") {
    auto p = phase == "claiming" ? session_phase::claiming
             : phase == "queued" ? session_phase::queued
                                 : session_phase::finalizing;
    if (p != d.st.phase) {
      d.st.detail = detail;
      enter(self, p);
    }
    return;
  }
  if (phase == "matched") {
    finish(self, session_phase::matched, session_id, {});
    return;
  }
  // The party of one ended without a match: how it says.
  auto starts = [&](const char* x) { return detail.rfind(x, 0) == 0; };
  if (starts("timed out"))
    finish(self, session_phase::timed_out, {}, detail);
  else if (starts("cancelled"))
    finish(self, session_phase::cancelled, {}, detail);
  else
    finish(self, session_phase::failed, {}, detail);
}

} // namespace

void join_as_party(ses_ptr self, join_request& r, state_promise rp) {
  auto& d = self->state;
  if (!d.links.parties) {
    rp.deliver(caf::make_error(errc::invalid_argument,
                               "queue '" + r.queue
                                 + "' matches groups: no party hub here"));
    return;
  }
  party_queue_request q;
  q.user = d.base_user;
  q.queue = r.queue;
  q.ticket = r.ticket;
  q.attrs = {{d.base_user, r.attrs.empty() ? std::string{"{}"} : r.attrs}};
  q.give_up_after_s = r.give_up_after_s;
  // Nothing changes here until the hub accepted the ticket: a refusal
  // leaves the session as it was.
  self->request(d.links.parties, store_timeout(d), join_atom_v, std::move(q))
    .then(
      [self, r, rp](party_info& p) mutable {
        auto& d = self->state;
        d.st.queue = r.queue;
        d.st.ticket = r.ticket;
        d.st.token.clear();
        d.st.session_id.clear();
        d.st.detail.clear();
        d.st.windows.clear();
        d.base_ticket = r.ticket;
        d.store_ticket.clear();
        d.tickets.clear();
        d.join_started = self->clock().now();
        d.party = p.party;
        d.party_version = p.version;
        ++d.join_no;
        if (d.cfg.metrics)
          d.cfg.metrics->joins.fetch_add(1, std::memory_order_relaxed);
        d.st.phase = session_phase::idle; // mirror() enters the party's
        mirror(self, to_string(p.phase), p.session_id, p.detail);
        auto early = std::move(d.party_early);
        d.party_early.clear();
        for (auto& ev : early)
          party_event(self, ev);
        rp.deliver(d.st);
      },
      [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
}

void party_event(ses_ptr self, const match_event& ev) {
  auto& d = self->state;
  if (d.party.empty()) {
    d.party_early.push_back(ev);
    if (d.party_early.size() > 8)
      d.party_early.erase(d.party_early.begin());
    return;
  }
  auto j = nlohmann::json::parse(ev.payload, nullptr, false);
  if (!j.is_object() || j.value("party", "") != d.party)
    return;
  auto version = j.value("version", uint64_t{0});
  if (version <= d.party_version)
    return; // older than what we saw
  d.party_version = version;
  mirror(self, j.value("phase", ""), j.value("session_id", ""),
         j.value("detail", ""));
}

/// The user plays in the group session of `ev` (its match, or a fill).
void in_group(ses_ptr self, const match_event& ev, const char* detail) {
  auto& d = self->state;
  d.free_known = false;
  if (live(d.st.phase) || d.st.session_id == ev.session_id)
    return; // a join of ours: its party tells how it ended
  d.st.queue = ev.queue;
  d.st.token.clear();
  d.st.detail = detail;
  d.st.session_id = ev.session_id;
  enter(self, session_phase::matched);
}

bool group_event(ses_ptr self, const match_event& ev) {
  auto& d = self->state;
  if (ev.type == "match.created" && !ev.others.empty()) {
    in_group(self, ev, "matched with a group");
    return true;
  }
  if (ev.type == "session.members_changed") {
    // A fill of a session (backfill): a new member plays from now on.
    auto j = nlohmann::json::parse(ev.payload, nullptr, false);
    if (!j.is_object() || !j.contains("added") || !j["added"].is_array())
      return true;
    for (auto& a : j["added"])
      if (a.is_object() && a.value("user", "") == d.base_user)
        in_group(self, ev, "joined a session (backfill)");
    return true;
  }
  if (ev.type == "session.member_left") {
    auto j = nlohmann::json::parse(ev.payload, nullptr, false);
    if (j.is_object() && j.value("user", "") == d.base_user)
      session_over(self, ev.session_id, "left");
    return true;
  }
  return false;
}

session_actor::behavior_type grouped_b(ses_ptr self) {
  return make(
    self, join_while_busy(self),
    [self](state_promise rp) {
      auto& d = self->state;
      auto party = d.party;
      self
        ->request(d.links.parties, store_timeout(d), cancel_atom_v, d.base_user,
                  party)
        .then(
          [self, rp, party](party_info& p) mutable {
            auto& d = self->state;
            if (d.party == party && p.version > d.party_version) {
              d.party_version = p.version;
              mirror(self, to_string(p.phase), p.session_id, p.detail);
            }
            rp.deliver(d.st);
          },
          [self, rp](caf::error& err) mutable {
            // The party of one closed meanwhile: its last event told us.
            if (terminal(self->state.st.phase))
              rp.deliver(self->state.st);
            else
              rp.deliver(std::move(err));
          });
    },
    ignore_timer);
}

} // namespace mm::session_detail
