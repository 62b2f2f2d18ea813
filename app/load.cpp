#include "app/load.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <unordered_map>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/verb.hpp>
#include <nlohmann/json.hpp>

#include "app/token.hpp"

namespace mm {

namespace {

using clock_type = std::chrono::steady_clock;
using json = nlohmann::json;
using verb = boost::beast::http::verb;
using uf = user_record::flag;

// A user is finished with once one of these happened (then only answers
// still on the wire are awaited).
constexpr uint32_t terminal_flags = uf::got_event | uf::cancel_acked
                                    | uf::ended | uf::ws_failed
                                    | uf::join_refused | uf::join_error;

std::atomic<int> interrupts{0};

extern "C" void on_interrupt(int) {
  // The second Ctrl-C means "now": no report.
  if (interrupts.fetch_add(1) >= 1)
    std::_Exit(130);
}

/// Counters that the progress line reads while the io threads run.
struct shared_state {
  clock_type::time_point start = clock_type::now();
  std::atomic<uint64_t> started{0};
  std::atomic<uint64_t> done{0};
  std::atomic<uint64_t> matched{0};
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> ok_answers{0};

  int64_t now_us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(
             clock_type::now() - start)
      .count();
  }
};

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

/// "state:detail" with the parts that differ per user (quoted names, ids,
/// numbers) left out, so that the report can count the kinds.
std::string detail_shape(const std::string& state, const std::string& detail) {
  std::string out = state + ":";
  std::size_t pos = 0;
  bool first = true;
  while (pos < detail.size() && detail[pos] != ';' && out.size() < 64) {
    auto end = detail.find_first_of(" ;", pos);
    if (end == std::string::npos)
      end = detail.size();
    auto word = detail.substr(pos, end - pos);
    if (!word.empty()
        && word.find_first_of("0123456789'\"") == std::string::npos) {
      out += (first ? "" : " ") + word;
      first = false;
    }
    pos = end;
    if (pos < detail.size() && detail[pos] == ' ')
      ++pos;
  }
  if (first)
    out += detail.empty() ? "-" : "?";
  return out;
}

/// Upper bound of one HTTP request (connect, send, answer).
constexpr std::chrono::milliseconds request_timeout{15000};

/// How long the final GETs may take all together.
constexpr std::chrono::milliseconds final_timeout = request_timeout;

bool is_waiting_state(const std::string& s) {
  return s == "queued" || s == "claiming" || s == "finalizing";
}

/// The users of one io thread: every `count`-th user starting at `id`, with
/// their own io_context, connection pools and share of rate and concurrency.
class shard {
public:
  shard(const load_options& opts, shared_state& st,
        std::vector<user_record>& recs, unsigned id, unsigned count,
        const std::vector<http_endpoint>& endpoints)
    : opts_(opts),
      st_(st),
      recs_(recs),
      id_(id),
      count_(count),
      endpoints_(endpoints),
      rng_(opts.seed * 0x9e3779b97f4a7c15ull + id),
      tick_(io_),
      settle_(io_) {
    local_users_ = opts.users > id ? (opts.users - id + count - 1) / count : 0;
    active_.resize(local_users_);
    rate_ = opts.rate / count;
    concurrency_ = std::max<std::size_t>(1, opts.concurrency / count);
    http_pool_options po;
    po.timeout = request_timeout;
    po.max_connections
      = std::max<std::size_t>(1, (opts.connections + count - 1) / count);
    for (auto& ep : endpoints_)
      pools_.push_back(std::make_unique<http_pool>(io_, ep, po));
    ws_opts_.handshake_timeout = std::chrono::milliseconds(10000);
    ws_opts_.idle_timeout = std::chrono::milliseconds(20000);
  }

  /// The thread body. Not idempotent.
  void run() {
    asio::post(io_, [this] {
      try_start();
      if (!starting_over_)
        arm_tick();
    });
    // A throwing handler must not take the whole run down with it.
    for (;;) {
      try {
        io_.run();
        return;
      } catch (const std::exception& e) {
        std::cerr << "\nmatchctl load: internal error: " << e.what() << "\n";
        errors["internal_error"]++;
      }
    }
  }

  /// Stops starting users and checks the rest now. Thread-safe; idempotent.
  void interrupt() {
    asio::post(io_, [this] {
      if (final_)
        return;
      end_starting();
      begin_final();
    });
  }

  std::map<std::string, uint64_t> errors;
  std::vector<extra_event> extras;
  uint64_t duplicate_events = 0;
  uint64_t not_joined_at_end = 0;

private:
  struct active_user {
    explicit active_user(asio::io_context& io) : cancel_timer(io) {
    }
    std::shared_ptr<ws_client> ws;
    asio::steady_timer cancel_timer;
    std::string auth;
    int64_t cancel_delay_ms = -1;
    uint16_t inflight = 0;
    bool timer_armed = false;
  };

  // -- naming ---------------------------------------------------------------

  std::string user_name(uint32_t i) const {
    return opts_.prefix + std::to_string(i);
  }
  std::string ticket_name(uint32_t i) const {
    return "t-" + user_name(i);
  }
  std::string user_path(uint32_t i) const {
    return "/v1/users/" + path_escape(user_name(i));
  }

  /// The index of one of our users from its name, -2 for anyone else.
  int32_t index_of(const std::string& name) const {
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

  std::string fresh_auth(uint32_t i) const {
    auto now = std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
    return "Bearer "
           + sign_token(opts_.secret, user_name(i), now + opts_.token_ttl_s);
  }

  std::size_t local(uint32_t i) const {
    return i / count_;
  }
  uint32_t global(std::size_t l) const {
    return static_cast<uint32_t>(l * count_ + id_);
  }
  active_user* active(uint32_t i) {
    return active_[local(i)].get();
  }
  http_pool& pool_of(uint32_t i) {
    return *pools_[i % pools_.size()];
  }

  void count_error(const std::string& name) {
    errors[name]++;
    st_.errors++;
  }

  /// A non-2xx answer: counted by its error name; a 503 shutting_down also
  /// tells the user that its node is going away.
  void count_refusal(user_record& r, const http_result& res) {
    auto name = error_name(res);
    if (name == "shutting_down")
      r.flags |= uf::shutdown_notice;
    count_error(name);
  }

  // -- pacing ---------------------------------------------------------------

  void arm_tick() {
    // Fine-grained while pacing; otherwise only to notice --duration.
    tick_.expires_after(rate_ > 0 ? std::chrono::milliseconds(1)
                                  : std::chrono::milliseconds(50));
    tick_.async_wait([this](const error_code& ec) {
      if (ec || starting_over_)
        return;
      try_start();
      if (!starting_over_)
        arm_tick();
    });
  }

  void try_start() {
    if (starting_over_)
      return;
    auto now = st_.now_us();
    if (interrupts.load() > 0
        || (opts_.duration_s > 0 && now >= opts_.duration_s * 1e6)) {
      end_starting();
      return;
    }
    // Every slot taken by a user that never finishes (a server that stopped
    // answering) would block the run forever: give up starting instead.
    if (in_progress_ >= concurrency_ && next_ < local_users_
        && now - last_done_us_
             > std::max<int64_t>(opts_.settle_ms, 1000) * 1000) {
      errors["stalled"]++;
      st_.errors++;
      end_starting();
      return;
    }
    uint64_t allowed = UINT64_MAX;
    if (rate_ > 0)
      allowed = static_cast<uint64_t>(rate_ * (now / 1e6)) + 1;
    while (next_ < local_users_ && in_progress_ < concurrency_
           && started_ < allowed)
      start_user(global(next_++));
    if (next_ >= local_users_)
      end_starting();
  }

  void end_starting() {
    if (starting_over_)
      return;
    starting_over_ = true;
    starting_over_us_ = st_.now_us();
    tick_.cancel();
    arm_settle();
    check_finished();
  }

  void arm_settle() {
    auto deadline = std::max(last_join_us_, starting_over_us_)
                    + opts_.settle_ms * 1000;
    settle_.expires_at(st_.start + std::chrono::microseconds(deadline));
    settle_.async_wait([this](const error_code& ec) {
      if (ec || final_)
        return;
      // A join sent after the timer was armed moves the deadline.
      auto deadline = std::max(last_join_us_, starting_over_us_)
                      + opts_.settle_ms * 1000;
      if (st_.now_us() < deadline)
        return arm_settle();
      begin_final();
    });
  }

  void check_finished() {
    if (starting_over_ && in_progress_ == 0 && !final_)
      begin_final();
  }

  // -- one user -------------------------------------------------------------

  void start_user(uint32_t i) {
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
    started_++;
    st_.started++;
    ws_handlers h;
    h.on_open = [this, i] { on_open(i); };
    h.on_message = [this, i](std::string_view m) { on_message(i, m); };
    h.on_close = [this, i](const ws_close_info& info) { on_close(i, info); };
    ws->start(std::move(h));
  }

  void on_open(uint32_t i) {
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

  /// Applies a ticket object from an HTTP answer or a state message.
  void apply_state(uint32_t i, const json& j) {
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

  void on_join(uint32_t i, http_result&& res) {
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

  void on_cancel_timer(uint32_t i, const error_code& ec) {
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

  void on_cancel(uint32_t i, http_result&& res) {
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

  void on_message(uint32_t i, std::string_view text) {
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
        auto self = user_name(i);
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

  void on_close(uint32_t i, const ws_close_info& info) {
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

  void maybe_done(uint32_t i) {
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
    if (!final_) {
      try_start();
      check_finished();
    }
  }

  void release(uint32_t i) {
    last_done_us_ = st_.now_us();
    recs_[i].flags |= uf::done;
    active_[local(i)].reset();
    in_progress_--;
    st_.done++;
  }

  // -- the end: ask about everyone who is still open ------------------------

  void begin_final() {
    if (final_)
      return;
    final_ = true;
    tick_.cancel();
    settle_.cancel();
    for (std::size_t l = 0; l < local_users_; ++l) {
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
        final_pending_++;
        final_get(i, 0, fresh_auth(i));
      }
    }
    if (not_joined_at_end > 0)
      errors["not_joined_at_end"] += not_joined_at_end;
    if (final_pending_ == 0)
      return close_all();
    // Answers that take longer than a request may are not coming.
    settle_.expires_after(final_timeout + std::chrono::seconds(1));
    settle_.async_wait([this](const error_code& ec) {
      if (!ec && final_pending_ > 0)
        close_all();
    });
  }

  void final_get(uint32_t i, std::size_t attempt, std::string auth) {
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
        if (--final_pending_ == 0)
          grace();
      });
  }

  void grace() {
    if (closed_)
      return;
    // Events racing the last GETs still count.
    settle_.expires_after(std::chrono::milliseconds(
      std::min<int64_t>(1000, std::max<int64_t>(opts_.settle_ms, 0))));
    settle_.async_wait([this](const error_code&) { close_all(); });
  }

  void close_all() {
    if (closed_)
      return;
    closed_ = true;
    settle_.cancel();
    for (std::size_t l = 0; l < local_users_; ++l) {
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

  const load_options& opts_;
  shared_state& st_;
  std::vector<user_record>& recs_;
  unsigned id_;
  unsigned count_;
  asio::io_context io_{1};
  std::vector<http_endpoint> endpoints_;
  std::vector<std::unique_ptr<http_pool>> pools_;
  ws_options ws_opts_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
  asio::steady_timer tick_;
  asio::steady_timer settle_;
  std::vector<std::unique_ptr<active_user>> active_;
  std::size_t local_users_ = 0;
  std::size_t next_ = 0;
  std::size_t in_progress_ = 0;
  std::size_t concurrency_ = 1;
  uint64_t started_ = 0;
  double rate_ = 0;
  int64_t last_join_us_ = 0;
  int64_t starting_over_us_ = 0;
  int64_t last_done_us_ = 0;
  std::size_t final_pending_ = 0;
  bool starting_over_ = false;
  bool final_ = false;
  bool closed_ = false;
};

struct distribution {
  double p50 = 0, p95 = 0, p99 = 0, max = 0;
};

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty())
    return 0;
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * sorted.size()));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

distribution distribution_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  distribution d;
  d.p50 = percentile(v, 50);
  d.p95 = percentile(v, 95);
  d.p99 = percentile(v, 99);
  d.max = v.empty() ? 0.0 : v.back();
  return d;
}

std::string fixed1(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::string to_text(const distribution& d) {
  return "p50 " + fixed1(d.p50) + " ms, p95 " + fixed1(d.p95) + " ms, p99 "
         + fixed1(d.p99) + " ms, max " + fixed1(d.max) + " ms";
}

json to_json(const distribution& d) {
  return json{{"p50", d.p50}, {"p95", d.p95}, {"p99", d.p99}, {"max", d.max}};
}

void draw_progress(const shared_state& st, const load_options& opts) {
  auto elapsed = st.now_us() / 1e6;
  std::fprintf(stderr,
               "\rstarted %llu/%zu  done %llu  matched %llu  errors %llu  "
               "%.1fs   ",
               static_cast<unsigned long long>(st.started.load()), opts.users,
               static_cast<unsigned long long>(st.done.load()),
               static_cast<unsigned long long>(st.matched.load()),
               static_cast<unsigned long long>(st.errors.load()), elapsed);
  std::fflush(stderr);
}

/// What the shards gathered besides the records.
struct run_extras {
  std::map<std::string, uint64_t> errors;
  std::vector<extra_event> extras;
  uint64_t duplicates = 0;
  uint64_t ok_answers = 0;
  double duration_s = 0;
};

/// The figures of the report.
struct load_summary {
  uint64_t started = 0, joined = 0, matched = 0, cancel_requested = 0,
           cancelled = 0, cancel_too_late = 0, waiting = 0, notices = 0,
           unreachable = 0, ended = 0, ws_failed = 0, error_total = 0;
  std::size_t sessions = 0;
  double matches_per_s = 0;
  distribution time_to_match, ws_connect, join;
  std::map<std::string, uint64_t> ended_details;
  std::vector<std::string> matched_users, cancelled_users, waiting_users;
  std::vector<std::string> cancel_requested_users; ///< sent a DELETE
};

std::string user_name(const load_options& opts, std::size_t i) {
  return opts.prefix + std::to_string(i);
}

load_summary summarize(const load_options& opts,
                       const std::vector<user_record>& recs,
                       const run_extras& run) {
  load_summary s;
  int64_t first_join = -1, last_event = -1;
  std::vector<double> ttm, connect_ms, join_ms;
  std::unordered_map<std::string, bool> session_ids;
  for (std::size_t i = 0; i < recs.size(); ++i) {
    auto& r = recs[i];
    if (!r.has(uf::started))
      continue;
    s.started++;
    if (r.t0_us >= 0 && r.start_us >= 0)
      connect_ms.push_back((r.t0_us - r.start_us) / 1000.0);
    if (r.join_us >= 0 && r.t0_us >= 0)
      join_ms.push_back((r.join_us - r.t0_us) / 1000.0);
    if (r.has(uf::join_ok))
      s.joined++;
    if (r.t0_us >= 0 && (first_join < 0 || r.t0_us < first_join))
      first_join = r.t0_us;
    if (r.has(uf::got_event)) {
      session_ids.emplace(r.session, true);
      last_event = std::max(last_event, r.event_us);
      if (r.t0_us >= 0)
        ttm.push_back((r.event_us - r.t0_us) / 1000.0);
    }
    if (!r.told_session.empty())
      session_ids.emplace(r.told_session, true);
    bool matched = r.has(uf::got_event) || r.has(uf::told_matched);
    if (matched) {
      s.matched++;
      s.matched_users.push_back(user_name(opts, i));
    }
    if (r.has(uf::cancel_sent)) {
      s.cancel_requested++;
      s.cancel_requested_users.push_back(user_name(opts, i));
    }
    if (r.has(uf::cancel_acked)) {
      s.cancelled++;
      s.cancelled_users.push_back(user_name(opts, i));
    }
    if (r.has(uf::cancel_late))
      s.cancel_too_late++;
    if (r.has(uf::final_waiting) && !matched) {
      s.waiting++;
      s.waiting_users.push_back(user_name(opts, i));
    }
    if (r.has(uf::shutdown_notice))
      s.notices++;
    if (r.has(uf::final_unreachable))
      s.unreachable++;
    if (r.has(uf::ended) && !r.has(uf::cancel_acked)) {
      s.ended++;
      auto colon = r.detail.find(':');
      s.ended_details[detail_shape(r.detail.substr(0, colon),
                                   colon == std::string::npos
                                     ? std::string()
                                     : r.detail.substr(colon + 1))]++;
    }
    if (r.has(uf::ws_failed))
      s.ws_failed++;
  }
  for (auto& e : run.extras)
    session_ids.emplace(e.session, true);
  s.sessions = session_ids.size();
  double span_s = (first_join >= 0 && last_event > first_join)
                    ? (last_event - first_join) / 1e6
                    : 0;
  s.matches_per_s = span_s > 0 ? s.sessions / span_s : 0;
  for (auto& [k, v] : run.errors)
    s.error_total += v;
  s.time_to_match = distribution_of(std::move(ttm));
  s.ws_connect = distribution_of(std::move(connect_ms));
  s.join = distribution_of(std::move(join_ms));
  return s;
}

/// One line about one user, for the examples of violations.
std::string describe_user(const load_options& opts,
                          const std::vector<user_record>& recs, uint32_t u) {
  static const char* names[] = {
    "started",         "ws_open",           "join_sent",     "join_ok",
    "join_refused",    "join_error",        "cancel_planned", "cancel_sent",
    "cancel_acked",    "cancel_late",       "got_event",     "told_matched",
    "ended",           "shutdown_notice",   "ws_failed",     "done",
    "final_waiting",   "final_unreachable", "final_unknown", "multi_session",
    "bad_event"};
  auto& r = recs[u];
  std::string text = user_name(opts, u) + " [";
  for (std::size_t b = 0; b < std::size(names); ++b)
    if (r.flags & (1u << b))
      text += std::string(text.back() == '[' ? "" : " ") + names[b];
  text += "]";
  if (!r.session.empty())
    text += " event " + r.session + " partner "
            + (r.partner >= 0 ? user_name(opts, r.partner) : "?");
  if (!r.told_session.empty())
    text += " told " + r.told_session;
  if (!r.detail.empty())
    text += " " + r.detail;
  auto ms = [](int64_t us) {
    return us < 0 ? std::string("-") : fixed1(us / 1000.0);
  };
  return text + " t0 " + ms(r.t0_us) + " join " + ms(r.join_us) + " event "
         + ms(r.event_us) + " ms";
}

void print_report(std::ostream& out, const load_options& opts,
                  const std::vector<user_record>& recs, const run_extras& run,
                  const load_summary& s, const checker_result& c) {
  out << "users            " << s.started << " started of " << opts.users
      << ", " << s.joined << " joined\n";
  out << "matched          " << s.matched << " users in " << s.sessions
      << " sessions, " << fixed1(s.matches_per_s) << " matches/s\n";
  out << "cancelled        " << s.cancelled << " of " << s.cancel_requested
      << " requested, " << s.cancel_too_late << " too late\n";
  out << "waiting          " << s.waiting << "\n";
  out << "ended by server  " << s.ended << " (" << s.notices
      << " shutdown notices), unreachable " << s.unreachable << "\n";
  if (!s.ended_details.empty()) {
    out << "ended as        ";
    for (auto& [k, v] : s.ended_details)
      out << " " << k << "=" << v;
    out << "\n";
  }
  out << "time to match    " << to_text(s.time_to_match) << "\n";
  out << "ws connect       " << to_text(s.ws_connect) << "\n";
  out << "join answer      " << to_text(s.join) << "\n";
  out << "duration         " << fixed1(run.duration_s) << " s\n";
  if (run.duplicates > 0)
    out << "duplicate events " << run.duplicates << " (deduplicated)\n";
  if (c.unobserved > 0)
    out << "unobserved       " << c.unobserved
        << " matches of users whose WebSocket had failed\n";
  for (auto& [kind, u] : c.examples)
    out << "example " << kind << ": " << describe_user(opts, recs, u)
        << "\n";
  out << "errors           " << s.error_total;
  for (auto& [k, v] : run.errors)
    out << " " << k << "=" << v;
  out << "\n";
  // The last line is for scripts: keep its form.
  out << "verdict=" << c.verdict() << " users=" << s.started
      << " matched=" << s.matched << " cancelled=" << s.cancelled
      << " waiting=" << s.waiting << " errors=" << s.error_total
      << " matches_per_s=" << fixed1(s.matches_per_s)
      << " p50_ms=" << fixed1(s.time_to_match.p50)
      << " p95_ms=" << fixed1(s.time_to_match.p95)
      << " p99_ms=" << fixed1(s.time_to_match.p99)
      << " double_bookings=" << c.double_bookings
      << " lost_users=" << c.lost_users
      << " undelivered_events=" << c.undelivered_events
      << " cancelled_but_matched=" << c.cancelled_but_matched << std::endl;
}

bool write_json(const std::string& file, const load_options& opts,
                const run_extras& run, const load_summary& s,
                const checker_result& c) {
  json report{
    {"users", opts.users},
    {"started", s.started},
    {"joined", s.joined},
    {"matched", s.matched},
    {"sessions", s.sessions},
    {"cancel_requested", s.cancel_requested},
    {"cancelled", s.cancelled},
    {"cancel_too_late", s.cancel_too_late},
    {"waiting", s.waiting},
    {"shutdown_notices", s.notices},
    {"unreachable", s.unreachable},
    {"ended_by_server", s.ended},
    {"ended_details", s.ended_details},
    {"ws_failed", s.ws_failed},
    {"duplicate_events", run.duplicates},
    {"unobserved_matches", c.unobserved},
    {"errors", run.errors},
    {"duration_s", run.duration_s},
    {"matches_per_s", s.matches_per_s},
    {"time_to_match_ms", to_json(s.time_to_match)},
    {"ws_connect_ms", to_json(s.ws_connect)},
    {"join_ms", to_json(s.join)},
    {"checker",
     {{"double_bookings", c.double_bookings},
      {"lost_users", c.lost_users},
      {"undelivered_events", c.undelivered_events},
      {"cancelled_but_matched", c.cancelled_but_matched},
      {"verdict", c.verdict()}}},
    {"matched_users", s.matched_users},
    {"cancelled_users", s.cancelled_users},
    {"waiting_users", s.waiting_users},
    {"cancel_requested_users", s.cancel_requested_users},
  };
  std::ofstream f(file);
  f << report.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  f.close();
  return static_cast<bool>(f);
}

} // namespace

checker_result check_records(const std::vector<user_record>& users,
                             const std::vector<extra_event>& extras) {
  checker_result res;
  struct session_info {
    int32_t a = -3; ///< the pair as the first observer reported it
    int32_t b = -3;
    bool conflict = false;
  };
  std::unordered_map<std::string, session_info> sessions;
  std::vector<const std::string*> first_session(users.size(), nullptr);
  std::vector<uint8_t> in_two(users.size(), 0);
  std::vector<uint8_t> missed(users.size(), 0); // a session lacks its event

  auto associate = [&](int32_t u, const std::string& sid) {
    if (u < 0 || static_cast<std::size_t>(u) >= users.size() || sid.empty())
      return;
    auto*& first = first_session[u];
    if (first == nullptr)
      first = &sid;
    else if (*first != sid)
      in_two[u] = 1;
  };
  auto observe = [&](uint32_t u, int32_t partner, bool bad,
                     const std::string& sid) {
    if (sid.empty())
      return;
    auto& s = sessions[sid];
    int32_t lo = std::min<int32_t>(static_cast<int32_t>(u), partner);
    int32_t hi = std::max<int32_t>(static_cast<int32_t>(u), partner);
    if (bad)
      s.conflict = true;
    if (s.a == -3) {
      s.a = lo;
      s.b = hi;
    } else if (s.a != lo || s.b != hi) {
      s.conflict = true; // the two sides disagree about who is in it
    }
    associate(static_cast<int32_t>(u), sid);
    associate(partner, sid);
  };

  for (std::size_t u = 0; u < users.size(); ++u) {
    auto& r = users[u];
    if (r.has(uf::got_event))
      observe(static_cast<uint32_t>(u), r.partner, r.has(uf::bad_event),
              r.session);
    if (!r.told_session.empty())
      associate(static_cast<int32_t>(u), r.told_session);
  }
  for (auto& e : extras)
    observe(e.user, e.partner, e.bad, e.session);

  // Every side of every session must have heard of it on its WebSocket.
  auto got = [&](int32_t u, const std::string& sid) {
    auto& r = users[u];
    if (r.has(uf::got_event) && r.session == sid)
      return true;
    for (auto& e : extras)
      if (e.user == static_cast<uint32_t>(u) && e.session == sid)
        return true;
    return false;
  };
  std::map<std::string, std::size_t> shown;
  auto example = [&](const char* kind, int32_t u) {
    if (u >= 0 && shown[kind]++ < 5)
      res.examples.emplace_back(kind, static_cast<uint32_t>(u));
  };
  for (auto& [sid, s] : sessions) {
    if (s.conflict) {
      res.double_bookings++;
      example("double_booking", s.a >= 0 ? s.a : s.b);
    }
    for (auto u : {s.a, s.b})
      if (u >= 0 && !got(u, sid))
        missed[u] = 1;
  }

  for (std::size_t u = 0; u < users.size(); ++u) {
    auto& r = users[u];
    auto ui = static_cast<int32_t>(u);
    if (in_two[u] || r.has(uf::multi_session)) {
      res.double_bookings++;
      example("double_booking", ui);
    }
    bool told_matched = r.has(uf::told_matched) && !r.has(uf::got_event);
    bool matched = r.has(uf::got_event) || r.has(uf::told_matched)
                   || missed[u];
    bool told_off = r.has(uf::cancel_acked) || r.has(uf::ended);
    if (told_off && matched) {
      // Told "cancelled" (or failed), yet matched after all.
      res.cancelled_but_matched++;
      example("cancelled_but_matched", ui);
    } else if ((missed[u] || told_matched) && !in_two[u]) {
      // (A user in two sessions misses one of them: that is counted as the
      // double booking it is.)
      // Only a user who kept listening can be expected to have heard.
      if (r.has(uf::ws_failed) || !r.has(uf::join_ok)) {
        res.unobserved++;
      } else {
        res.undelivered_events++;
        example("undelivered_event", ui);
      }
    }
    if (r.has(uf::join_ok) && !told_off && !r.has(uf::shutdown_notice)
        && !matched && !r.has(uf::final_waiting)) {
      res.lost_users++;
      example("lost_user", ui);
    }
  }
  return res;
}

int run_load(const load_options& opts) {
  shared_state st;
  std::vector<user_record> recs(opts.users);
  unsigned threads = std::max(1u, opts.threads);

  asio::io_context resolver_io;
  std::vector<http_endpoint> endpoints;
  for (auto& u : opts.urls) {
    http_endpoint ep;
    std::string err;
    if (!resolve_endpoint(resolver_io, u, ep, err)) {
      std::cerr << "matchctl load: " << err << "\n";
      return 1;
    }
    endpoints.push_back(std::move(ep));
  }

  std::vector<std::unique_ptr<shard>> shards;
  for (unsigned s = 0; s < threads; ++s)
    shards.push_back(
      std::make_unique<shard>(opts, st, recs, s, threads, endpoints));

  interrupts = 0;
  auto old_int = std::signal(SIGINT, on_interrupt);
  auto old_term = std::signal(SIGTERM, on_interrupt);

  st.start = clock_type::now();
  std::atomic<unsigned> running{threads};
  std::vector<std::thread> pool;
  for (auto& s : shards)
    pool.emplace_back([&running, sp = s.get()] {
      sp->run();
      running--;
    });
  bool interrupted = false;
  while (running.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (interrupts.load() > 0 && !interrupted) {
      interrupted = true;
      for (auto& s : shards)
        s->interrupt();
    }
    if (opts.progress)
      draw_progress(st, opts);
  }
  for (auto& t : pool)
    t.join();
  auto duration_s = st.now_us() / 1e6;
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  if (opts.progress) {
    draw_progress(st, opts);
    std::fputc('\n', stderr);
  }

  // -- merge, check, report ---------------------------------------------------

  run_extras run;
  run.duration_s = duration_s;
  run.ok_answers = st.ok_answers.load();
  for (auto& s : shards) {
    for (auto& [k, v] : s->errors)
      run.errors[k] += v;
    run.extras.insert(run.extras.end(), s->extras.begin(), s->extras.end());
    run.duplicates += s->duplicate_events;
  }
  auto checked = check_records(recs, run.extras);
  auto summary = summarize(opts, recs, run);
  print_report(std::cout, opts, recs, run, summary, checked);
  if (!opts.json_file.empty()
      && !write_json(opts.json_file, opts, run, summary, checked)) {
    std::cerr << "matchctl load: cannot write " << opts.json_file << "\n";
    return 1;
  }
  if (run.ok_answers == 0)
    return 1; // nothing worked at all: most likely no server there
  return std::string(checked.verdict()) == "ok" ? 0 : 2;
}

} // namespace mm
