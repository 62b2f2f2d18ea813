#pragma once

// The virtual users of one io thread of `matchctl load`: each user's state
// machine (WebSocket, join, maybe a cancel, the match event, the last GET),
// writing what it observed into its user_record.

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

#include "app/http_client.hpp"
#include "app/load.hpp"

namespace mm::load {

using clock_type = std::chrono::steady_clock;

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
/// In the final phase nothing is sent any more but one GET of the ticket of
/// every user who joined and has not settled; then everyone is dropped.
/// Not thread-safe: used only on the thread that runs `io`.
class virtual_users {
public:
  /// `released` runs after a user is done, unless the final phase began.
  /// Starts nothing yet.
  virtual_users(const load_options& opts, shared_state& st,
                std::vector<user_record>& recs, unsigned id, unsigned count,
                asio::io_context& io,
                const std::vector<http_endpoint>& endpoints,
                std::function<void()> released);
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

  /// When the last join was sent / a user was last done (us since the
  /// start).
  int64_t last_join_us() const noexcept {
    return last_join_us_;
  }
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
  /// still open is done.
  void close_all();

  /// Counts an error by name, also for the progress line. Not idempotent.
  void count_error(const std::string& name);

  std::map<std::string, uint64_t> errors;
  std::vector<extra_event> extras;
  uint64_t duplicate_events = 0;
  uint64_t not_joined_at_end = 0;

private:
  struct active_user;

  // -- naming ---------------------------------------------------------------

  std::string ticket_name(uint32_t i) const;
  std::string user_path(uint32_t i) const;
  /// The index of one of our users from its name, -2 for anyone else.
  int32_t index_of(const std::string& name) const;
  std::string fresh_auth(uint32_t i) const;

  std::size_t local(uint32_t i) const {
    return i / count_;
  }
  active_user* active(uint32_t i);
  http_pool& pool_of(uint32_t i) {
    return *pools_[i % pools_.size()];
  }

  /// A non-2xx answer: counted by its error name; a 503 shutting_down also
  /// tells the user that its node is going away.
  void count_refusal(user_record& r, const http_result& res);

  // -- one user -------------------------------------------------------------

  void on_open(uint32_t i);
  /// Applies a ticket object from an HTTP answer or a state message.
  void apply_state(uint32_t i, const nlohmann::json& j);
  void on_join(uint32_t i, http_result&& res);
  void on_cancel_timer(uint32_t i, const error_code& ec);
  void on_cancel(uint32_t i, http_result&& res);
  void on_message(uint32_t i, std::string_view text);
  void on_close(uint32_t i, const ws_close_info& info);
  void maybe_done(uint32_t i);
  void release(uint32_t i);
  /// The last GET of user `i`'s ticket, on pool `i + attempt`.
  void final_get(uint32_t i, std::size_t attempt, std::string auth);

  const load_options& opts_;
  shared_state& st_;
  std::vector<user_record>& recs_;
  unsigned id_;
  unsigned count_;
  asio::io_context& io_;
  std::vector<http_endpoint> endpoints_; ///< the WebSockets refer to these
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
