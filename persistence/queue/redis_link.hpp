#pragma once

// One synchronous connection to one Redis server (hiredis), shared by the
// single-Redis store (redis_queue_store.cpp) and the cluster store, which
// holds one per primary (redis_cluster_store.cpp). Internal to
// persistence/queue: users get stores from make_redis_store().

#include <memory>
#include <string>
#include <vector>

#include "persistence/queue/queue_store.hpp"

struct redisContext;

namespace mm {

/// What a link connects to and how patiently.
struct redis_link_options {
  std::string host = "127.0.0.1";
  uint16_t port = 6379;
  uint32_t connect_timeout_ms = 2000;
  uint32_t command_timeout_ms = 5000;
  uint32_t max_attempts = 3; ///< per batch, after a dropped connection
  uint32_t retry_delay_ms = 100;
  std::string user;         ///< AUTH user; empty: the default user
  std::string password;     ///< AUTH password; empty: no AUTH. Never logged
  bool load_scripts = true; ///< FUNCTION LOAD the library on connect
};

/// One entry of a batch: a script call or a plain command, optionally after
/// ASKING (a Redis Cluster ASK redirect: this one command, on this node).
struct link_request {
  const script_call* call = nullptr;
  const store_command* command = nullptr;
  bool asking = false;
};

/// A connection that reconnects on demand. Used by one thread at a time.
class redis_link {
 public:
  /// Keeps `opts`; connects on first use (or `ensure_connected`), never here.
  explicit redis_link(redis_link_options opts);

  /// Closes the connection, if open.
  ~redis_link();

  redis_link(const redis_link&) = delete;
  redis_link& operator=(const redis_link&) = delete;

  /// Pipelines `reqs` in one round trip and returns one reply per request,
  /// in order. Loads the library again when the server forgot it ("Function
  /// not found", at most 3 rounds) and reconnects after a drop, re-sending
  /// what got no reply, up to max_attempts; what still has no reply then is
  /// `store_unavailable` (the detail names no address). A refused AUTH fails
  /// every request the same way, its detail saying so. A request with an
  /// unknown script id or an empty command is `invalid_argument` and is not
  /// sent; a reply of a type the store does not know is `protocol_error`.
  /// Idempotent exactly when the requests are.
  std::vector<store_reply> exchange(const std::vector<link_request>& reqs);

  /// `exchange` in two halves, so that a caller with links to several
  /// servers has all of them working at once: `send` appends `reqs` and
  /// writes them out without waiting for a reply (when connected; else it
  /// leaves everything to `receive`), `receive` reads the replies and does
  /// the rest of what `exchange` does (reloads, reconnects, re-sends). Each
  /// `send` must be followed by `receive` with the same `reqs` before any
  /// other call on this link. Idempotent exactly when the requests are.
  void send(const std::vector<link_request>& reqs);

  /// The replies to the `send` before it, as `exchange` answers them; sends
  /// `reqs` first when no `send` of them is pending.
  std::vector<store_reply> receive(const std::vector<link_request>& reqs);

  /// Connects now unless connected: AUTH, then the library unless
  /// `load_scripts` is off. Returns false with last_error() (and
  /// auth_refused()) when it cannot. Idempotent.
  bool ensure_connected();

  /// True when the server refused the credentials at the last connect.
  bool auth_refused() const noexcept {
    return auth_refused_;
  }

  /// "host:port", for logs only.
  const std::string& where() const noexcept {
    return where_;
  }

  /// The last failure (connect, AUTH, a lost connection, a timeout), for
  /// logs; kept after a success. Never holds the password.
  const std::string& last_error() const noexcept {
    return last_error_;
  }

 private:
  bool connect_now();
  void drop_connection();
  bool authenticate();
  /// FUNCTION LOAD of the library (an "already exists" is fine); false
  /// only when the connection failed. A refusal is kept in library_error_.
  bool load_library();
  bool append(const link_request& req);

  /// What `send` did, for `receive`: the replies known without the server
  /// (refused requests), the requests to send and, when `written`, those
  /// already written on this connection.
  struct in_flight {
    std::vector<store_reply> out;
    std::vector<size_t> todo;
    std::vector<size_t> sent;
    bool written = false;
    bool pending = false;  ///< sent, not received yet
    uint32_t failures = 0; ///< of the connection, while sending
  };
  /// Appends the requests of `f.todo` whose script is loaded (the others
  /// get their error in `f.out`) to `f.sent`; false when hiredis refused.
  bool append_all(const std::vector<link_request>& reqs, in_flight& f);
  in_flight flight_;

  redis_link_options opts_;
  std::string where_;
  redisContext* ctx_ = nullptr; ///< null while disconnected
  bool auth_refused_ = false;
  std::string last_error_;
  std::string library_error_; ///< why FUNCTION LOAD failed; empty: it did not
  std::vector<const char*> argv_; ///< scratch for append
  std::vector<size_t> argvlen_;
};

/// Whether the server behind `link` runs Redis functions (7.0 and later):
/// the queue's scripts are one function library (docs/queue.md). Fails with
/// `protocol_error` naming the need when the server does not know FUNCTION,
/// with the link's failure when it cannot be asked; succeeds otherwise (a
/// user not allowed FUNCTION may still call a library loaded by others).
/// Idempotent; reads only.
outcome<bool> check_functions(redis_link& link);

/// Blocks SIGPIPE for the calling thread while it talks to Redis: hiredis
/// writes with write(2), and a peer that closed the socket would kill the
/// process. A SIGPIPE raised meanwhile is discarded; dispositions are left
/// alone.
class sigpipe_guard {
 public:
  /// Blocks SIGPIPE for this thread and notes whether one was pending.
  sigpipe_guard() noexcept;

  /// Discards a SIGPIPE raised while it lived (unless one was already
  /// pending) and restores the thread's mask; errno is kept.
  ~sigpipe_guard();

  sigpipe_guard(const sigpipe_guard&) = delete;
  sigpipe_guard& operator=(const sigpipe_guard&) = delete;

 private:
  unsigned char old_[128]; ///< the previous sigset_t, opaque here
  bool was_pending_ = false;
};

} // namespace mm
