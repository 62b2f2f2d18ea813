#pragma once

// The virtual users of one io thread of `matchctl load`: each user's state
// machine (WebSocket, join, maybe a cancel, the match event, with --cycles
// the end of the session and the next join, the last GET), writing what it
// observed into its user_record.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json_fwd.hpp>

#include "app/common/http_client.hpp"
#include "app/matchctl/load.hpp"
#include "app/matchctl/load/session_ledger.hpp"

namespace mm::load {

using clock_type = std::chrono::steady_clock;

/// Counters that the progress line reads while the io threads run.
struct shared_state {
  clock_type::time_point start = clock_type::now();
  std::atomic<uint64_t> started{0};
  std::atomic<uint64_t> done{0};
  std::atomic<uint64_t> matched{0};
  std::atomic<uint64_t> cycles{0}; ///< cycles completed (--cycles)
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> ok_answers{0};

  /// Microseconds since `start`.
  int64_t now_us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(
             clock_type::now() - start)
      .count();
  }
};

/// Upper bound of one HTTP request (connect, send, answer).
constexpr std::chrono::milliseconds request_timeout{15000};

/// The users `id`, `id + count`, `id + 2 * count`, ... of a run, with their
/// own connection pools (one per URL) on the io_context of their thread.
/// One user's life:
///
///   start ─▶ connecting ─open─▶ joining ─2xx─▶ waiting ─timer─▶ cancelling
///
/// and from any of these, once failed, refused, matched (an event),
/// cancelled or ended by the server:
///
///   closing ─(no answer left on the wire)─▶ done ─▶ the driver starts the
///   next user
///
/// With --cycles N a match or an acknowledged cancel ends only the cycle;
/// the WebSocket stays open for the user's whole life:
///
///   waiting ─match.created─▶ matched ─hold timer─▶ ending ─200─▶ matched
///      │                       │ (only the member whose name sorts first
///      │                       │  ends the session; the other waits)
///      │                       ▼
///      │                 session.ended ─▶ cycle over ─▶ joining (cycle + 1)
///      └─cancel acked───────────────────▶ cycle over    or, after N: closing
///
/// A cycle is over only when no request of it is on the wire. The next join
/// takes a new ticket; with --reuse-tickets every other one reuses the
/// ticket of the cycle before when its session ended (never after a
/// cancel: a cancelled ticket stays cancelled).
///
/// In the final phase nothing is sent any more but one GET of the ticket of
/// every user who joined and has not settled; then everyone is dropped.
/// Not thread-safe: used only on the thread that runs `io`.
class virtual_users {
 public:
  /// `released` runs after a user is done, unless the final phase began.
  /// `ledger` (shared by all threads) is needed with --cycles only.
  /// Starts nothing yet.
  virtual_users(const load_options& opts, shared_state& st,
                std::vector<user_record>& recs, unsigned id, unsigned count,
                asio::io_context& io,
                const std::vector<http_endpoint>& endpoints,
                session_ledger* ledger, std::function<void()> released);
  ~virtual_users();

  virtual_users(const virtual_users&) = delete;
  virtual_users& operator=(const virtual_users&) = delete;

  /// How many users belong to this thread.
  std::size_t size() const noexcept {
    return active_.size();
  }

  /// The run-wide index of this thread's `l`-th user.
  uint32_t global(std::size_t l) const noexcept {
    return static_cast<uint32_t>(l * count_ + id_);
  }

  /// Users started and not yet done.
  std::size_t in_progress() const noexcept {
    return in_progress_;
  }

  /// When the last join was sent (us since the start).
  int64_t last_join_us() const noexcept {
    return last_join_us_;
  }
  /// When a user was last done or completed a cycle (us since the start).
  int64_t last_done_us() const noexcept {
    return last_done_us_;
  }

  /// True once `begin_final` ran.
  bool finishing() const noexcept {
    return final_;
  }

  /// Starts user `i` (one of this thread's): opens its WebSocket; the join
  /// follows once it is open. Not idempotent.
  void start(uint32_t i);

  /// The final phase: no join or cancel is sent any more; every user who
  /// joined and has not settled is asked for its ticket (on the next URL
  /// when one does not answer). `answered` runs once per user asked, never
  /// within this call. Returns how many were asked. Not idempotent.
  std::size_t begin_final(std::function<void()> answered);

  /// Drops every WebSocket and every request still on the wire; everyone
  /// still open is done. Idempotent.
  void close_all();

  /// Counts an error by name, also for the progress line. Not idempotent.
  void count_error(const std::string& name);

  std::map<std::string, uint64_t> errors;
  std::vector<extra_event> extras;
  uint64_t duplicate_events = 0;
  uint64_t not_joined_at_end = 0;

  /// Latencies in ms, one sample per WebSocket (connect), per join answer
  /// (join) and per cycle's first match event (time to match).
  std::vector<double> connect_ms, join_ms, match_ms;
  /// First join sent, last first-match event of a cycle, last cycle over
  /// (us since the start; -1: none).
  int64_t first_join_us = -1;
  int64_t last_event_us = -1;
  int64_t last_cycle_us = -1;

 private:
  struct active_user;

  // -- naming ---------------------------------------------------------------

  /// The ticket of user `i`'s cycle `c`: "t-<user>", then "t-<user>-c<c>".
  std::string ticket_name(uint32_t i, uint32_t c = 0) const;
  /// "/v1/users/<user i>", escaped.
  std::string user_path(uint32_t i) const;
  /// The index of one of our users from its name, -2 for anyone else.
  int32_t index_of(const std::string& name) const;
  /// An Authorization header value: a v1 token of user `i`, valid for
  /// --token-ttl from now.
  std::string fresh_auth(uint32_t i) const;

  /// The slot of user `i` in `active_`.
  std::size_t local(uint32_t i) const {
    return i / count_;
  }
  /// What user `i` holds while in progress; null once it is done.
  active_user* active(uint32_t i);
  /// The pool (URL) of user `i`.
  http_pool& pool_of(uint32_t i) {
    return *pools_[i % pools_.size()];
  }

  /// One request of user `i`: as `ws_msg` (an "id" added) on its
  /// WebSocket when --socket and the socket is open, else over HTTP. `cb`
  /// runs once either way (a socket request: its reply, request_timeout, or
  /// the socket's end as a transport error).
  void call(uint32_t i, boost::beast::http::verb method, std::string target,
            std::string body, nlohmann::json&& ws_msg, http_callback cb);
  /// Handles a reply frame on user `i`'s socket.
  void on_reply(uint32_t i, const nlohmann::json& j);
  /// Fails every socket request of user `i` still without its reply.
  void fail_calls(uint32_t i, error_code ec);

  /// A non-2xx answer: counted by its error name; a 503 shutting_down also
  /// tells the user that its node is going away.
  void count_refusal(user_record& r, const http_result& res);

  // -- one user -------------------------------------------------------------

  /// True with --cycles above 1.
  bool cycling() const noexcept {
    return opts_.cycles > 1;
  }

  /// Plans the cancel of the current cycle's join (--cancel-rate).
  void plan_cancel(user_record& r, active_user& a);
  /// The WebSocket opened: the join goes out, unless the final phase began.
  void on_open(uint32_t i);
  /// Sends the join of the user's current cycle.
  void send_join(uint32_t i);
  /// Applies a ticket object from an HTTP answer or a state message.
  void apply_state(uint32_t i, const nlohmann::json& j);
  /// The join's answer; arms the planned cancel while the join waits.
  void on_join(uint32_t i, http_result&& res);
  /// Sends the planned cancel, unless the join is over by now.
  void on_cancel_timer(uint32_t i);
  /// The cancel's answer: "cancelled" acknowledges it, "matched" was late.
  void on_cancel(uint32_t i, http_result&& res);
  /// One text message on the WebSocket: a reply, a match.created, a
  /// session.ended or a state message.
  void on_message(uint32_t i, std::string_view text);
  /// A match.created without --cycles: the first one is the user's match,
  /// a copy is a duplicate, another session goes to `extras`.
  void on_match_created(uint32_t i, const nlohmann::json& j);
  /// The first match event of the user's join (cycle): its session.
  void adopt_match(uint32_t i, const std::string& session, std::string event_id,
                   int32_t partner);
  /// The WebSocket ended: its socket requests fail; unless the user was
  /// finished or closed it itself, the user's WebSocket failed.
  void on_close(uint32_t i, const ws_close_info& info);
  /// True when the user's life is over: it is closed once nothing of it is
  /// on the wire any more.
  bool finished(const user_record& r) const noexcept;
  /// Moves user `i` on: the next cycle step, or its close and release once
  /// it is finished and nothing of it is on the wire.
  void maybe_done(uint32_t i);
  /// User `i` is done: its slot is freed.
  void release(uint32_t i);

  // -- timers: one per user (cancel, hold, end retry; never two at once) -----

  enum class timer_use : uint8_t { none, cancel, hold, end_retry };
  /// Arms user `i`'s timer for `use` in `delay_ms`, replacing any other.
  void arm_timer(uint32_t i, timer_use use, int64_t delay_ms);
  /// Disarms the timer; a wait that fired already is ignored. Idempotent.
  void stop_timer(active_user& a);
  /// The timer of arming `gen` fired: the cancel, or the (retried) end.
  void on_timer(uint32_t i, uint32_t gen);

  /// What a match.created or session.ended event says about user `i`'s
  /// session; false (and `s.bad`) when its users are not {i, other}.
  /// `other` is the other user's name.
  bool read_sighting(uint32_t i, const nlohmann::json& j, session_sighting& s,
                     std::string& other) const;

  // -- cycles (app/matchctl/load/cycles.cpp) --------------------------------

  /// A match.created with --cycles: checked against the user's cycle and
  /// told to the ledger; the member whose name sorts first (or whose
  /// partner is not of this run) arms the hold before its end.
  void cycle_match(uint32_t i, const nlohmann::json& j);
  /// A session.ended: told to the ledger and checked against the user's
  /// session (which, who, why); the end of that session ends the cycle.
  void on_session_ended(uint32_t i, const nlohmann::json& j);
  /// Ends the user's session, unless it ended already.
  void send_end(uint32_t i);
  /// The end's answer: a transport error, a 5xx, `conflict` or
  /// `rate_limited` is retried (three attempts in all, then the user gives
  /// up); another refusal (the user gives up) or an answer that disagrees
  /// with the events is an end mismatch.
  void on_end(uint32_t i, const std::string& session, http_result&& res);
  /// Moves the user on when its cycle is over; the cycle part of maybe_done.
  void step(uint32_t i);
  /// Starts the next cycle: its ticket, a fresh plan, the join.
  void next_cycle(uint32_t i);
  /// A session user `i` saw end: late copies of its events are duplicates.
  void remember_ended(user_record& r, const std::string& session);
  /// True when `session` is one of the last few the user saw end.
  bool ended_before(const user_record& r, const std::string& session) const;

  // -- the end ----------------------------------------------------------------

  /// The last GET of user `i`'s ticket, on pool `i + attempt`.
  void final_get(uint32_t i, std::size_t attempt, std::string auth);

  const load_options& opts_;
  shared_state& st_;
  std::vector<user_record>& recs_;
  unsigned id_;
  unsigned count_;
  asio::io_context& io_;
  std::vector<http_endpoint> endpoints_; ///< the WebSockets refer to these
  session_ledger* ledger_;
  std::function<void()> released_;
  std::function<void()> answered_;
  std::vector<std::unique_ptr<http_pool>> pools_;
  ws_options ws_opts_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
  std::vector<std::unique_ptr<active_user>> active_;
  std::size_t in_progress_ = 0;
  int64_t last_join_us_ = 0;
  int64_t last_done_us_ = 0;
  bool final_ = false;
};

} // namespace mm::load
