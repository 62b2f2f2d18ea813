// The virtual users of `matchctl load` (app/matchctl/load/virtual_users.hpp):
// what each one sends, and what it makes of every answer, message and
// close. The part that only --cycles needs (ending sessions, the next join)
// is in app/matchctl/load/cycles.cpp.

#include "app/matchctl/load/virtual_users.hpp"

#include <algorithm>

#include <boost/beast/http/verb.hpp>
#include <nlohmann/json.hpp>

#include "app/common/token.hpp"
#include "app/matchctl/load/active_user.hpp"
#include "app/matchctl/load/wire.hpp"

namespace mm::load {

namespace {

using json = nlohmann::json;
using verb = boost::beast::http::verb;
using uf = user_record::flag;

// A user's join is over once one of these happened (then only answers
// still on the wire are awaited); without --cycles so is the user.
constexpr uint32_t terminal_flags = uf::got_event | uf::cancel_acked | uf::ended
                                    | uf::ws_failed | uf::join_refused
                                    | uf::join_error;

// With --cycles, the user's life is over once one of these happened.
constexpr uint32_t life_over_flags = uf::lived | uf::gave_up | uf::ended
                                     | uf::ws_failed | uf::join_refused
                                     | uf::join_error;

bool is_waiting_state(const std::string& s) {
  return s == "queued" || s == "claiming" || s == "finalizing";
}

} // namespace

virtual_users::virtual_users(const load_options& opts, shared_state& st,
                             std::vector<user_record>& recs, unsigned id,
                             unsigned count, asio::io_context& io,
                             const std::vector<http_endpoint>& endpoints,
                             session_ledger* ledger,
                             std::function<void()> released)
  : opts_(opts), st_(st), recs_(recs), id_(id), count_(count), io_(io),
    endpoints_(endpoints), ledger_(ledger), released_(std::move(released)),
    rng_(opts.seed * 0x9e3779b97f4a7c15ull + id) {
  auto local_users = opts.users > id ? (opts.users - id + count - 1) / count
                                     : 0;
  active_.resize(local_users);
  http_pool_options po;
  po.timeout = request_timeout;
  po.max_connections
    = std::max<std::size_t>(1, (opts.connections + count - 1) / count);
  for (auto& ep : endpoints_)
    pools_.push_back(std::make_unique<http_pool>(io_, ep, po));
  ws_opts_.handshake_timeout = std::chrono::milliseconds(10000);
  ws_opts_.idle_timeout = std::chrono::milliseconds(20000);
}

virtual_users::~virtual_users() = default;

// -- naming -------------------------------------------------------------------

std::string virtual_users::ticket_name(uint32_t i, uint32_t c) const {
  // Not "<ticket>.<x>": that is how matchd derives tickets from ours.
  if (c == 0)
    return "t-" + opts_.user_name(i);
  return "t-" + opts_.user_name(i) + "-c" + std::to_string(c);
}

std::string virtual_users::user_path(uint32_t i) const {
  return "/v1/users/" + path_escape(opts_.user_name(i));
}

int32_t virtual_users::index_of(const std::string& name) const {
  auto& p = opts_.prefix;
  if (name.size() <= p.size() || name.size() > p.size() + 9
      || name.compare(0, p.size(), p) != 0)
    return -2;
  uint64_t v = 0;
  for (std::size_t k = p.size(); k < name.size(); ++k) {
    char c = name[k];
    if (c < '0' || c > '9')
      return -2;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v >= opts_.users || std::to_string(v) != name.substr(p.size()))
    return -2;
  return static_cast<int32_t>(v);
}

std::string virtual_users::fresh_auth(uint32_t i) const {
  auto now = std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count();
  return "Bearer "
         + sign_token(opts_.secret, opts_.user_name(i),
                      now + opts_.token_ttl_s);
}

virtual_users::active_user* virtual_users::active(uint32_t i) {
  return active_[local(i)].get();
}

void virtual_users::count_error(const std::string& name) {
  errors[name]++;
  st_.errors++;
}

void virtual_users::count_refusal(user_record& r, const http_result& res) {
  auto name = error_name(res);
  if (name == "shutting_down")
    r.flags |= uf::shutdown_notice;
  count_error(name);
}

// -- one user -----------------------------------------------------------------

void virtual_users::plan_cancel(user_record& r, active_user& a) {
  a.cancel_delay_ms = -1;
  if (opts_.cancel_rate > 0 && unit_(rng_) < opts_.cancel_rate) {
    r.flags |= uf::cancel_planned;
    std::uniform_int_distribution<int64_t> delay(
      0, std::max<int64_t>(0, opts_.cancel_delay_ms));
    a.cancel_delay_ms = delay(rng_);
  }
}

void virtual_users::start(uint32_t i) {
  auto& r = recs_[i];
  r.flags |= uf::started;
  r.start_us = st_.now_us();
  r.ticket = ticket_name(i);
  auto a = std::make_unique<active_user>(io_);
  plan_cancel(r, *a);
  a->auth = fresh_auth(i);
  a->ws = std::make_shared<ws_client>(io_, endpoints_[i % endpoints_.size()],
                                      user_path(i) + "/events", a->auth,
                                      ws_opts_);
  auto ws = a->ws;
  active_[local(i)] = std::move(a);
  in_progress_++;
  st_.started++;
  ws_handlers h;
  h.on_open = [this, i] { on_open(i); };
  h.on_message = [this, i](std::string_view m) { on_message(i, m); };
  h.on_close = [this, i](const ws_close_info& info) { on_close(i, info); };
  ws->start(std::move(h));
}

void virtual_users::on_open(uint32_t i) {
  if (active(i) == nullptr)
    return;
  recs_[i].flags |= uf::ws_open;
  if (final_)
    return; // too late to join
  send_join(i);
}

void virtual_users::send_join(uint32_t i) {
  auto* a = active(i);
  auto& r = recs_[i];
  json body{{"queue", opts_.queue_name(i)}, {"ticket", r.ticket}};
  r.flags |= uf::join_sent;
  r.counts.joins_sent++;
  r.t0_us = st_.now_us();
  last_join_us_ = r.t0_us;
  if (first_join_us < 0)
    first_join_us = r.t0_us;
  if (r.cycle == 0)
    connect_ms.push_back((r.t0_us - r.start_us) / 1000.0);
  a->inflight++;
  auto text = body.dump(-1, ' ', false, json::error_handler_t::replace);
  call(i, verb::post, user_path(i) + "/tickets", std::move(text),
       json{{"op", "join"}, {"body", std::move(body)}},
       [this, i](http_result&& res) { on_join(i, std::move(res)); });
}

void virtual_users::apply_state(uint32_t i, const json& j) {
  auto& r = recs_[i];
  auto state = str_field(j, "state");
  if (state == "matched") {
    auto sid = str_field(j, "session_id");
    if (cycling() && ended_before(r, sid)) {
      // "Matched" in a session that ended: a stale answer, counted once a
      // cycle; it names no session of this join.
      if (!r.has(uf::told_stale))
        r.counts.in_session_after_end++;
      r.flags |= uf::told_stale;
      return;
    }
    if (cycling() && r.has(uf::cancel_acked) && !r.has(uf::told_matched)
        && !r.has(uf::got_event))
      r.counts.cancelled_but_matched++; // told cancelled, then matched
    r.flags |= uf::told_matched;
    if (r.told_session.empty())
      r.told_session = sid;
    if (r.has(uf::got_event) && !sid.empty() && sid != r.session)
      r.flags |= uf::multi_session;
  } else if (state == "cancelled" && r.has(uf::cancel_sent)
             && !r.has(uf::cancel_acked)
             && str_field(j, "detail") != "shutting_down") {
    // The server says cancelled to a user who asked to cancel (its cancel
    // call itself timed out or failed): that is the cancel's answer.
    r.flags |= uf::cancel_acked;
    r.counts.cancels_acked++;
  } else if (state == "cancelled" || state == "failed") {
    r.flags |= uf::ended;
    auto detail = str_field(j, "detail");
    if (detail == "shutting_down")
      r.flags |= uf::shutdown_notice;
    if (r.detail.empty())
      r.detail = state + ":" + (detail.empty() ? "-" : detail);
    if (r.detail.size() > 200)
      r.detail.resize(200);
  }
}

void virtual_users::on_join(uint32_t i, http_result&& res) {
  auto* a = active(i);
  if (a != nullptr)
    a->inflight--;
  auto& r = recs_[i];
  r.join_us = st_.now_us();
  join_ms.push_back((r.join_us - r.t0_us) / 1000.0);
  if (res.ec) {
    r.flags |= uf::join_error;
    count_error("join_" + transport_name(res.ec));
  } else if (!res.ok()) {
    r.flags |= uf::join_refused;
    r.counts.joins_refused++;
    count_refusal(r, res);
    // Still in a session after having seen one end (I8 of docs/design.md).
    if (cycling() && r.counts.ends_seen > 0 && error_name(res) == "in_session")
      r.counts.in_session_after_end++;
  } else {
    st_.ok_answers++;
    r.flags |= uf::join_ok;
    r.counts.joins_ok++;
    auto body = json::parse(res.body, nullptr, false);
    if (body.is_object())
      apply_state(i, body);
    else
      count_error("bad_json");
  }
  // A user already told "matched" has nothing left to cancel.
  if (a != nullptr && !r.has(terminal_flags) && !r.has(uf::told_matched)
      && a->cancel_delay_ms >= 0 && !final_ && !r.has(uf::cancel_sent))
    arm_timer(i, timer_use::cancel, a->cancel_delay_ms);
  maybe_done(i);
}

void virtual_users::on_cancel_timer(uint32_t i) {
  auto* a = active(i);
  auto& r = recs_[i];
  if (r.has(terminal_flags) || r.has(uf::told_matched) || final_)
    return maybe_done(i);
  r.flags |= uf::cancel_sent;
  r.counts.cancels_sent++;
  a->inflight++;
  call(i, verb::delete_, user_path(i) + "/tickets/" + path_escape(r.ticket), {},
       json{{"op", "cancel"}, {"ticket", r.ticket}},
       [this, i](http_result&& res) { on_cancel(i, std::move(res)); });
}

void virtual_users::on_cancel(uint32_t i, http_result&& res) {
  if (auto* a = active(i))
    a->inflight--;
  auto& r = recs_[i];
  if (res.ec) {
    count_error("cancel_" + transport_name(res.ec));
  } else if (!res.ok()) {
    count_refusal(r, res);
  } else {
    st_.ok_answers++;
    auto body = json::parse(res.body, nullptr, false);
    auto state = body.is_object() ? str_field(body, "state") : "";
    if (state == "cancelled") {
      if (!r.has(uf::cancel_acked))
        r.counts.cancels_acked++;
      // Told cancelled after this very join was matched.
      if (cycling() && !r.has(uf::cancel_acked)
          && (r.has(uf::got_event) || r.has(uf::told_matched)))
        r.counts.cancelled_but_matched++;
      r.flags |= uf::cancel_acked;
    } else if (state == "matched") {
      r.flags |= uf::cancel_late;
      r.counts.cancels_late++;
      apply_state(i, body);
    } else {
      count_error("cancel_answered_" + (state.empty() ? "nothing" : state));
    }
  }
  maybe_done(i);
}

void virtual_users::on_message(uint32_t i, std::string_view text) {
  auto j = json::parse(text, nullptr, false);
  if (!j.is_object()) {
    count_error("ws_bad_message");
    return;
  }
  auto& r = recs_[i];
  auto type = str_field(j, "type");
  if (type == "reply") {
    on_reply(i, j); // its callback moves the user on
    return;
  }
  if (type == "match.created") {
    if (cycling())
      cycle_match(i, j);
    else
      on_match_created(i, j);
  } else if (type == "session.ended") {
    if (cycling())
      on_session_ended(i, j);
  } else if (type == "state") {
    // Our ticket, or one the server derived from it ("<ticket>.h1").
    if (same_join(str_field(j, "ticket"), r.ticket)) {
      // With --cycles our own cancel only ends the cycle, not the user.
      if (cycling() && r.has(uf::cancel_sent)
          && str_field(j, "state") == "cancelled"
          && str_field(j, "detail") != "shutting_down") {
        if (!r.has(uf::cancel_acked))
          r.counts.cancels_acked++;
        r.flags |= uf::cancel_acked;
      } else {
        apply_state(i, j);
      }
    }
  }
  maybe_done(i);
}

bool virtual_users::read_sighting(uint32_t i, const json& j,
                                  session_sighting& s,
                                  std::string& other) const {
  s.self = i;
  s.partner = -1;
  s.bad = true;
  auto users = j.find("users");
  if (users == j.end() || !users->is_array() || users->size() != 2
      || !(*users)[0].is_string() || !(*users)[1].is_string())
    return false;
  auto self = opts_.user_name(i);
  auto u0 = (*users)[0].get<std::string>();
  auto u1 = (*users)[1].get<std::string>();
  int mine;
  if (u0 == self && u1 != self)
    mine = 0;
  else if (u1 == self && u0 != self)
    mine = 1;
  else
    return false;
  other = mine == 0 ? u1 : u0;
  s.partner = index_of(other);
  s.bad = false;
  auto tickets = j.find("tickets");
  if (tickets != j.end() && tickets->is_array() && tickets->size() == 2
      && (*tickets)[0].is_string() && (*tickets)[1].is_string()) {
    s.self_ticket = (*tickets)[mine].get<std::string>();
    s.partner_ticket = (*tickets)[1 - mine].get<std::string>();
  }
  return true;
}

void virtual_users::adopt_match(uint32_t i, const std::string& session,
                                std::string event_id, int32_t partner) {
  auto& r = recs_[i];
  r.flags |= uf::got_event;
  r.event_us = st_.now_us();
  r.session = session;
  r.event_id = std::move(event_id);
  r.partner = partner;
  if (!r.told_session.empty() && r.told_session != session)
    r.flags |= uf::multi_session;
  st_.matched++;
  r.counts.matches++;
  match_ms.push_back((r.event_us - r.t0_us) / 1000.0);
  last_event_us = std::max(last_event_us, r.event_us);
}

void virtual_users::on_match_created(uint32_t i, const json& j) {
  auto& r = recs_[i];
  auto sid = str_field(j, "session_id");
  auto eid = str_field(j, "event_id");
  session_sighting s;
  std::string other;
  read_sighting(i, j, s, other);
  if (!r.has(uf::got_event)) {
    adopt_match(i, sid, eid, s.partner);
    if (s.bad)
      r.flags |= uf::bad_event;
  } else if (eid == r.event_id || sid == r.session) {
    duplicate_events++; // at-least-once delivery
  } else {
    r.flags |= uf::multi_session;
    extras.push_back(extra_event{i, s.partner, s.bad, sid});
  }
}

void virtual_users::on_close(uint32_t i, const ws_close_info& info) {
  // Requests on the socket get no reply any more: they failed as an HTTP
  // request whose connection broke would have.
  fail_calls(i, info.ec ? info.ec : error_code{asio::error::connection_reset});
  auto* a = active(i);
  auto& r = recs_[i];
  if (a != nullptr)
    a->ws.reset();
  if (info.by_us || r.has(uf::done) || finished(r))
    return maybe_done(i);
  if (!info.opened) {
    if (info.http_status != 0) {
      http_result res;
      res.status = info.http_status;
      res.body = info.http_body;
      auto name = error_name(res);
      if (name == "shutting_down")
        r.flags |= uf::shutdown_notice;
      count_error("ws_" + name);
    } else {
      count_error("ws_connect_" + transport_name(info.ec));
    }
  } else {
    // 1001 "going away" is how a draining node says goodbye.
    if (info.code == 1001)
      r.flags |= uf::shutdown_notice;
    count_error("ws_closed");
  }
  r.flags |= uf::ws_failed;
  maybe_done(i);
}

bool virtual_users::finished(const user_record& r) const noexcept {
  return r.has(cycling() ? life_over_flags : terminal_flags);
}

void virtual_users::maybe_done(uint32_t i) {
  auto* a = active(i);
  if (a == nullptr)
    return;
  auto& r = recs_[i];
  if (!finished(r)) {
    if (cycling())
      step(i);
    return;
  }
  stop_timer(*a);
  // Requests on the socket are answered on it: close it after their replies.
  if (a->ws && a->calls.empty()) {
    if (opts_.abrupt_close)
      a->ws->abort();
    else
      a->ws->close();
  }
  if (a->inflight > 0)
    return;
  release(i);
  if (!final_ && released_)
    released_();
}

// -- the timer ---------------------------------------------------------------

void virtual_users::arm_timer(uint32_t i, timer_use use, int64_t delay_ms) {
  auto* a = active(i);
  a->timer_armed = use;
  auto gen = ++a->timer_gen;
  a->timer.expires_after(std::chrono::milliseconds(delay_ms));
  a->timer.async_wait([this, i, gen](const error_code& ec) {
    if (!ec)
      on_timer(i, gen);
  });
}

void virtual_users::stop_timer(active_user& a) {
  if (a.timer_armed == timer_use::none)
    return;
  a.timer_armed = timer_use::none;
  ++a.timer_gen; // a wait that has already fired is ignored too
  a.timer.cancel();
}

void virtual_users::on_timer(uint32_t i, uint32_t gen) {
  auto* a = active(i);
  if (a == nullptr || gen != a->timer_gen)
    return;
  auto use = a->timer_armed;
  a->timer_armed = timer_use::none;
  switch (use) {
    case timer_use::cancel:
      return on_cancel_timer(i);
    case timer_use::hold:
    case timer_use::end_retry:
      return send_end(i);
    case timer_use::none:
      return;
  }
}

void virtual_users::release(uint32_t i) {
  last_done_us_ = st_.now_us();
  recs_[i].flags |= uf::done;
  active_[local(i)].reset();
  in_progress_--;
  st_.done++;
}

// -- the end: ask about everyone who is still open ----------------------------

std::size_t virtual_users::begin_final(std::function<void()> answered) {
  final_ = true;
  answered_ = std::move(answered);
  std::size_t asked = 0;
  for (std::size_t l = 0; l < active_.size(); ++l) {
    auto i = global(l);
    auto& r = recs_[i];
    if (!r.has(uf::started))
      continue;
    if (auto* a = active_[l].get()) {
      stop_timer(*a);
      if (!r.has(uf::join_sent))
        not_joined_at_end++;
    }
    bool settled = r.has(uf::got_event) || r.has(uf::cancel_acked)
                   || r.has(uf::ended) || r.has(uf::join_refused);
    if (r.has(uf::join_sent) && !settled) {
      asked++;
      final_get(i, 0, fresh_auth(i));
    }
  }
  if (not_joined_at_end > 0)
    errors["not_joined_at_end"] += not_joined_at_end;
  return asked;
}

void virtual_users::final_get(uint32_t i, std::size_t attempt,
                              std::string auth) {
  // A node that is gone or draining may still be covered by another one.
  auto& pool = *pools_[(i + attempt) % pools_.size()];
  auto target = user_path(i) + "/tickets/" + path_escape(recs_[i].ticket);
  pool.request(
    verb::get, std::move(target), auth, {},
    [this, i, attempt, auth](http_result&& res) mutable {
      auto& r = recs_[i];
      if (res.ec || res.status == 503) {
        if (!res.ec && error_name(res) == "shutting_down")
          r.flags |= uf::shutdown_notice;
        if (attempt + 1 < pools_.size())
          return final_get(i, attempt + 1, std::move(auth));
        r.flags |= uf::final_unreachable;
      } else if (res.ok()) {
        st_.ok_answers++;
        auto body = json::parse(res.body, nullptr, false);
        auto state = body.is_object() ? str_field(body, "state") : "";
        if (is_waiting_state(state)) {
          r.flags |= uf::final_waiting;
        } else if (state == "matched") {
          apply_state(i, body);
        } else if (state == "cancelled" && r.has(uf::cancel_sent)) {
          if (!r.has(uf::cancel_acked))
            r.counts.cancels_acked++;
          r.flags |= uf::cancel_acked; // our cancel, its answer was lost
        } else {
          auto detail = str_field(body, "detail");
          if (detail == "shutting_down")
            r.flags |= uf::shutdown_notice;
          r.flags |= uf::final_unknown;
          if (r.detail.empty())
            r.detail = "at the end " + state + ":" + detail;
        }
      } else {
        count_error("final_" + error_name(res));
        r.flags |= uf::final_unknown;
      }
      answered_();
    });
}

void virtual_users::close_all() {
  for (std::size_t l = 0; l < active_.size(); ++l) {
    auto* a = active_[l].get();
    if (a == nullptr)
      continue;
    stop_timer(*a);
    if (a->ws)
      a->ws->abort();
    release(global(l));
  }
  // Whatever is still on the wire now would only delay the report.
  for (auto& p : pools_)
    p->abort();
}

} // namespace mm::load
