// The virtual users of `matchctl load` (app/load/virtual_users.hpp): what
// each one sends, and what it makes of every answer, message and close.

#include "app/load/virtual_users.hpp"

#include <algorithm>

#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/verb.hpp>
#include <nlohmann/json.hpp>

#include "app/token.hpp"

namespace mm::load {

namespace {

using json = nlohmann::json;
using verb = boost::beast::http::verb;
using uf = user_record::flag;

// A user is finished with once one of these happened (then only answers
// still on the wire are awaited).
constexpr uint32_t terminal_flags = uf::got_event | uf::cancel_acked
                                    | uf::ended | uf::ws_failed
                                    | uf::join_refused | uf::join_error;

/// The error name of a non-2xx answer: its `error` field, else http_<status>.
std::string error_name(const http_result& res) {
  auto body = json::parse(res.body, nullptr, false);
  if (body.is_object()) {
    auto it = body.find("error");
    if (it != body.end() && it->is_string())
      return it->get<std::string>();
  }
  return "http_" + std::to_string(res.status);
}

std::string transport_name(const error_code& ec) {
  if (ec == boost::beast::error::timeout)
    return "timeout";
  if (ec == asio::error::connection_refused)
    return "connection_refused";
  if (ec == asio::error::operation_aborted)
    return "aborted";
  if (ec == asio::error::connection_reset)
    return "connection_reset";
  if (ec == asio::error::eof || ec == boost::beast::http::error::end_of_stream)
    return "eof";
  return "transport";
}

std::string str_field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it != j.end() && it->is_string())
    return it->get<std::string>();
  return {};
}

bool is_waiting_state(const std::string& s) {
  return s == "queued" || s == "claiming" || s == "finalizing";
}

} // namespace

struct virtual_users::active_user {
  explicit active_user(asio::io_context& io) : cancel_timer(io) {
  }
  std::shared_ptr<ws_client> ws;
  asio::steady_timer cancel_timer;
  std::string auth;
  int64_t cancel_delay_ms = -1;
  uint16_t inflight = 0;
  bool timer_armed = false;
};

virtual_users::virtual_users(const load_options& opts, shared_state& st,
                             std::vector<user_record>& recs, unsigned id,
                             unsigned count, asio::io_context& io,
                             const std::vector<http_endpoint>& endpoints,
                             std::function<void()> released)
  : opts_(opts),
    st_(st),
    recs_(recs),
    id_(id),
    count_(count),
    io_(io),
    endpoints_(endpoints),
    released_(std::move(released)),
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

std::string virtual_users::ticket_name(uint32_t i) const {
  return "t-" + opts_.user_name(i);
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

void virtual_users::start(uint32_t i) {
  auto& r = recs_[i];
  r.flags |= uf::started;
  r.start_us = st_.now_us();
  auto a = std::make_unique<active_user>(io_);
  if (opts_.cancel_rate > 0 && unit_(rng_) < opts_.cancel_rate) {
    r.flags |= uf::cancel_planned;
    std::uniform_int_distribution<int64_t> delay(
      0, std::max<int64_t>(0, opts_.cancel_delay_ms));
    a->cancel_delay_ms = delay(rng_);
  }
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
  auto* a = active(i);
  if (a == nullptr)
    return;
  auto& r = recs_[i];
  r.flags |= uf::ws_open;
  if (final_)
    return; // too late to join
  json body{{"queue", "q" + std::to_string(i % opts_.queues)},
            {"ticket", ticket_name(i)}};
  r.flags |= uf::join_sent;
  r.t0_us = st_.now_us();
  last_join_us_ = r.t0_us;
  a->inflight++;
  pool_of(i).request(verb::post, user_path(i) + "/tickets", a->auth,
                     body.dump(-1, ' ', false,
                               json::error_handler_t::replace),
                     [this, i](http_result&& res) {
                       on_join(i, std::move(res));
                     });
}

void virtual_users::apply_state(uint32_t i, const json& j) {
  auto& r = recs_[i];
  auto state = str_field(j, "state");
  if (state == "matched") {
    r.flags |= uf::told_matched;
    auto sid = str_field(j, "session_id");
    if (r.told_session.empty())
      r.told_session = sid;
    if (r.has(uf::got_event) && !sid.empty() && sid != r.session)
      r.flags |= uf::multi_session;
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
  if (res.ec) {
    r.flags |= uf::join_error;
    count_error("join_" + transport_name(res.ec));
  } else if (!res.ok()) {
    r.flags |= uf::join_refused;
    count_refusal(r, res);
  } else {
    st_.ok_answers++;
    r.flags |= uf::join_ok;
    auto body = json::parse(res.body, nullptr, false);
    if (body.is_object())
      apply_state(i, body);
    else
      count_error("bad_json");
  }
  // A user already told "matched" has nothing left to cancel.
  if (a != nullptr && !r.has(terminal_flags) && !r.has(uf::told_matched)
      && a->cancel_delay_ms >= 0 && !final_ && !r.has(uf::cancel_sent)) {
    a->timer_armed = true;
    a->cancel_timer.expires_after(
      std::chrono::milliseconds(a->cancel_delay_ms));
    a->cancel_timer.async_wait(
      [this, i](const error_code& ec) { on_cancel_timer(i, ec); });
  }
  maybe_done(i);
}

void virtual_users::on_cancel_timer(uint32_t i, const error_code& ec) {
  auto* a = active(i);
  if (ec || a == nullptr)
    return;
  a->timer_armed = false;
  auto& r = recs_[i];
  if (r.has(terminal_flags) || r.has(uf::told_matched) || final_)
    return maybe_done(i);
  r.flags |= uf::cancel_sent;
  a->inflight++;
  pool_of(i).request(verb::delete_,
                     user_path(i) + "/tickets/" + path_escape(ticket_name(i)),
                     a->auth, {}, [this, i](http_result&& res) {
                       on_cancel(i, std::move(res));
                     });
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
      r.flags |= uf::cancel_acked;
    } else if (state == "matched") {
      r.flags |= uf::cancel_late;
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
  if (type == "match.created") {
    auto sid = str_field(j, "session_id");
    auto eid = str_field(j, "event_id");
    int32_t partner = -1;
    bool bad = true;
    auto users = j.find("users");
    if (users != j.end() && users->is_array() && users->size() == 2
        && (*users)[0].is_string() && (*users)[1].is_string()) {
      auto self = opts_.user_name(i);
      auto u0 = (*users)[0].get<std::string>();
      auto u1 = (*users)[1].get<std::string>();
      if (u0 == self && u1 != self) {
        partner = index_of(u1);
        bad = false;
      } else if (u1 == self && u0 != self) {
        partner = index_of(u0);
        bad = false;
      }
    }
    if (!r.has(uf::got_event)) {
      r.flags |= uf::got_event;
      r.event_us = st_.now_us();
      r.session = sid;
      r.event_id = eid;
      r.partner = partner;
      if (bad)
        r.flags |= uf::bad_event;
      if (!r.told_session.empty() && r.told_session != sid)
        r.flags |= uf::multi_session;
      st_.matched++;
    } else if (eid == r.event_id || sid == r.session) {
      duplicate_events++; // at-least-once delivery
    } else {
      r.flags |= uf::multi_session;
      extras.push_back(extra_event{i, partner, bad, sid});
    }
  } else if (type == "state") {
    // Our ticket, or one the server derived from it ("<ticket>.h1").
    auto t = str_field(j, "ticket");
    auto ours = ticket_name(i);
    if (t == ours
        || (t.size() > ours.size() && t.compare(0, ours.size(), ours) == 0
            && t[ours.size()] == '.'))
      apply_state(i, j);
  }
  maybe_done(i);
}

void virtual_users::on_close(uint32_t i, const ws_close_info& info) {
  auto* a = active(i);
  auto& r = recs_[i];
  if (a != nullptr)
    a->ws.reset();
  if (info.by_us || r.has(uf::done) || r.has(terminal_flags))
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

void virtual_users::maybe_done(uint32_t i) {
  auto* a = active(i);
  if (a == nullptr)
    return;
  auto& r = recs_[i];
  if (!r.has(terminal_flags))
    return;
  if (a->timer_armed) {
    a->timer_armed = false;
    a->cancel_timer.cancel();
  }
  if (a->ws) {
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
      if (a->timer_armed) {
        a->timer_armed = false;
        a->cancel_timer.cancel();
      }
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
  auto target = user_path(i) + "/tickets/" + path_escape(ticket_name(i));
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
    if (a->timer_armed)
      a->cancel_timer.cancel();
    if (a->ws)
      a->ws->abort();
    release(global(l));
  }
  // Whatever is still on the wire now would only delay the report.
  for (auto& p : pools_)
    p->abort();
}

} // namespace mm::load
