// The cycles of `matchctl load --cycles N`
// (app/matchctl/load/virtual_users.hpp): a matched user holds its session,
// one member ends it, both wait for its session.ended event and join again.
// What each user checks on the way:
// - overlapping: a match.created while the user's session of this cycle is
//   still on (or for a join that is over);
// - end mismatches: an end answer or a session.ended event that disagrees
//   with the session the events put the user in (its id, who ended it, why);
// - in_session_after_end: a join refused `in_session` (or answered
//   "matched" in an old session) after the user saw its session end;
// - cancelled_but_matched: a match of a ticket the user was told cancelled.
// What needs both users (did each see both events?) is in the ledger.

#include <algorithm>
#include <functional>

#include <boost/beast/http/verb.hpp>
#include <nlohmann/json.hpp>

#include "app/matchctl/load/active_user.hpp"
#include "app/matchctl/load/virtual_users.hpp"
#include "app/matchctl/load/wire.hpp"

namespace mm::load {

namespace {

using json = nlohmann::json;
using verb = boost::beast::http::verb;
using uf = user_record::flag;

/// The reason a virtual user gives when it ends its session.
constexpr const char* end_reason = "cycle";

/// Attempts at ending one session before the user gives up.
constexpr uint8_t max_end_attempts = 3;

uint64_t session_hash(const std::string& session) {
  auto h = static_cast<uint64_t>(std::hash<std::string>{}(session));
  return h == 0 ? 1 : h; // 0 marks an empty slot
}

/// Who ended a session and why, as an answer or an event has it, is what
/// this run does: the member whose name sorts first with our reason, or the
/// engine when the session grew too old.
bool plausible_end(const std::string& ended_by, const std::string& reason,
                   const std::string& ender) {
  return (ended_by == ender && reason == end_reason)
         || (ended_by.empty() && reason == "expired");
}

} // namespace

void virtual_users::remember_ended(user_record& r, const std::string& session) {
  r.ended_sessions[r.ended_next] = session_hash(session);
  r.ended_next
    = static_cast<uint8_t>((r.ended_next + 1) % r.ended_sessions.size());
}

bool virtual_users::ended_before(const user_record& r,
                                 const std::string& session) const {
  if (session.empty())
    return false;
  auto h = session_hash(session);
  return std::find(r.ended_sessions.begin(), r.ended_sessions.end(), h)
         != r.ended_sessions.end();
}

void virtual_users::cycle_match(uint32_t i, const json& j) {
  auto& r = recs_[i];
  auto sid = str_field(j, "session_id");
  if ((r.has(uf::got_event) && sid == r.session) || ended_before(r, sid)) {
    duplicate_events++; // at-least-once delivery
    return;
  }
  session_sighting s;
  std::string other;
  read_sighting(i, j, s, other);
  if (ledger_ != nullptr && !sid.empty())
    ledger_->created(sid, s);
  if (s.bad) {
    r.flags |= uf::bad_event; // the ledger counts it against the session
    return;
  }
  bool current = same_join(s.self_ticket, r.ticket);
  bool told_cancelled = current && r.has(uf::cancel_acked);
  if ((!r.cancelled_ticket.empty() && s.self_ticket == r.cancelled_ticket)
      || (told_cancelled && !r.has(uf::got_event))) {
    // (Counted already when an answer said "matched" after the cancel.)
    if (!(told_cancelled && r.has(uf::told_matched)))
      r.counts.cancelled_but_matched++;
    return;
  }
  if (r.has(uf::got_event) || !current) {
    // A second session for this join, or a match of a join that is over.
    r.counts.overlapping++;
    return;
  }
  adopt_match(i, sid, str_field(j, "event_id"), s.partner);
  auto* a = active(i);
  if (a == nullptr)
    return;
  stop_timer(*a); // nothing left to cancel
  // One member ends the session: the one whose name sorts first, or we
  // when the other one is not of this run (it may never end it).
  if ((s.partner < 0 || opts_.user_name(i) < other) && !final_) {
    std::uniform_int_distribution<int64_t> hold(
      0, std::max<int64_t>(0, opts_.hold_ms));
    arm_timer(i, timer_use::hold, hold(rng_));
  }
}

void virtual_users::on_session_ended(uint32_t i, const json& j) {
  auto& r = recs_[i];
  auto sid = str_field(j, "session_id");
  if (ended_before(r, sid)) {
    duplicate_events++;
    return;
  }
  session_sighting s;
  std::string other;
  read_sighting(i, j, s, other);
  if (ledger_ != nullptr && !sid.empty())
    ledger_->ended(sid, s, st_.now_us());
  remember_ended(r, sid);
  if (!r.has(uf::got_event) || sid != r.session || s.bad) {
    // The end of a session this user did not know it was in.
    r.counts.end_mismatches++;
    return;
  }
  // Who ended it is known when both members are of this run.
  auto ender = std::min(opts_.user_name(i), other);
  if (s.partner >= 0
      && !plausible_end(str_field(j, "ended_by"), str_field(j, "reason"),
                        ender))
    r.counts.end_mismatches++;
  r.flags |= uf::session_over;
  r.counts.ends_seen++;
  if (auto* a = active(i))
    stop_timer(*a); // over: no end (or retry of one) needed
}

void virtual_users::send_end(uint32_t i) {
  auto* a = active(i);
  auto& r = recs_[i];
  if (a == nullptr || final_ || r.has(uf::session_over))
    return maybe_done(i);
  r.flags |= uf::end_sent;
  a->end_attempts++;
  a->inflight++;
  json body{{"reason", end_reason}};
  auto sid = r.session;
  auto text = body.dump();
  call(i, verb::post, user_path(i) + "/sessions/" + path_escape(sid) + "/end",
       std::move(text),
       json{{"op", "end"}, {"session", sid}, {"body", std::move(body)}},
       [this, i, sid](http_result&& res) { on_end(i, sid, std::move(res)); });
}

void virtual_users::on_end(uint32_t i, const std::string& session,
                           http_result&& res) {
  auto* a = active(i);
  if (a != nullptr)
    a->inflight--;
  auto& r = recs_[i];
  bool retry = false;
  if (res.ec) {
    count_error("end_" + transport_name(res.ec));
    retry = true;
  } else if (!res.ok()) {
    count_refusal(r, res);
    auto name = error_name(res);
    if (res.status >= 500 || name == "conflict" || name == "rate_limited") {
      retry = true;
    } else {
      // Not found, not a member: the server disagrees with the events.
      r.counts.end_mismatches++;
      r.flags |= uf::gave_up;
    }
  } else {
    st_.ok_answers++;
    auto body = json::parse(res.body, nullptr, false);
    bool agrees = body.is_object() && str_field(body, "session_id") == session
                  && str_field(body, "state") == "ended";
    if (agrees) {
      auto self = opts_.user_name(i);
      auto by = str_field(body, "ended_by");
      auto reason = str_field(body, "reason");
      auto now = body.find("ended_now");
      bool ended_now = now != body.end() && now->is_boolean()
                       && now->get<bool>();
      // Ended now: by us, for our reason. Ended before: by us (a retry of
      // ours), or by the engine when it expired.
      agrees = ended_now ? (by == self && reason == end_reason)
                         : plausible_end(by, reason, self);
      if (ledger_ != nullptr)
        ledger_->end_answered(session, st_.now_us());
    }
    if (!agrees)
      r.counts.end_mismatches++;
  }
  if (retry && !r.has(uf::session_over)) {
    if (a != nullptr && a->end_attempts < max_end_attempts && !final_)
      arm_timer(i, timer_use::end_retry, 100 * a->end_attempts);
    else
      r.flags |= uf::gave_up;
  }
  maybe_done(i);
}

void virtual_users::step(uint32_t i) {
  auto* a = active(i);
  auto& r = recs_[i];
  bool cancelled = r.has(uf::cancel_acked) && !r.has(uf::got_event);
  bool over = r.has(uf::session_over) || cancelled;
  // Answers and timers of this cycle must not spill into the next one.
  if (a == nullptr || !over || a->inflight > 0
      || a->timer_armed != timer_use::none)
    return;
  r.counts.completed++;
  st_.cycles++;
  last_done_us_ = last_cycle_us = st_.now_us();
  if (cancelled)
    r.cancelled_ticket = r.ticket;
  if (r.counts.completed >= opts_.cycles) {
    r.flags |= uf::lived;
    return maybe_done(i);
  }
  if (final_)
    return; // no joins any more; close_all drops the user
  next_cycle(i);
}

void virtual_users::next_cycle(uint32_t i) {
  auto* a = active(i);
  auto& r = recs_[i];
  bool after_session = r.has(uf::session_over);
  r.cycle++;
  // With --reuse-tickets every other cycle reuses the ticket of a session
  // that ended (matchd allows that); a cancelled ticket stays cancelled: a
  // new one then.
  if (!(opts_.reuse_tickets && after_session && r.cycle % 2 == 1))
    r.ticket = ticket_name(i, r.cycle);
  r.flags &= ~user_record::cycle_flags;
  r.session.clear();
  r.event_id.clear();
  r.told_session.clear();
  r.partner = -1;
  r.t0_us = r.join_us = r.event_us = -1;
  a->end_attempts = 0;
  plan_cancel(r, *a);
  send_join(i);
}

} // namespace mm::load
