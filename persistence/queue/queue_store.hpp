#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/errc.hpp"
#include "core/outcome.hpp"
#include "mm_scripts.hpp" // generated from lua/: enum class script_id, sources

namespace mm {

/// One value of a store reply, mirroring the Redis protocol (RESP2).
struct store_value {
  enum class kind : uint8_t { nil, integer, string, status, error, array };
  kind type = kind::nil;
  int64_t integer = 0;
  std::string str; ///< text of a string, status or error
  std::vector<store_value> elements;
};

/// The reply to one call. `code != errc::none` means the call could not be
/// carried out (transport failure after retries); `value` is then nil.
struct store_reply {
  errc code = errc::none;
  std::string detail;
  store_value value;
};

/// One invocation of a script from lua/ with its KEYS and ARGV.
struct script_call {
  script_id script;
  std::vector<std::string> keys;
  std::vector<std::string> args;
};

/// One plain command, e.g. {"SET", key, value, "NX", "PX", "3000"}.
using store_command = std::vector<std::string>;

/// A connection to the queue store. One instance is used by one thread at a
/// time; get one per worker from a `queue_store_factory`. Implementations:
/// Redis (persistence/queue/redis_queue_store.cpp, redis_cluster_store.cpp)
/// and the embedded in-process store (embedded_queue_store.cpp); all pass
/// tests/conformance.
class queue_store {
 public:
  virtual ~queue_store();

  /// Runs `calls` in order — pipelined in one round trip where the store can —
  /// and returns exactly one reply per call, in the same order. A reply with
  /// `code == errc::none` holds what the script answered (a script's error is
  /// an error value). Otherwise: `store_unavailable` when the call got no
  /// reply within the retries (`max_attempts`; cluster: `failover_wait_ms`)
  /// or AUTH was refused — such a call may have run; `invalid_argument` for
  /// an unknown script id (Redis; the embedded store answers an error value);
  /// `protocol_error` for a reply of an unknown type. Reloads the function
  /// library when the server forgot it and reconnects after a dropped
  /// connection. Idempotent exactly when the scripts called are.
  virtual std::vector<store_reply> run(const std::vector<script_call>& calls)
    = 0;

  /// Runs plain commands in order, pipelined like `run`, one reply each, with
  /// the same codes (an empty command: `invalid_argument` on Redis, an error
  /// value on the embedded store). Only the subset of commands that the
  /// embedded store implements is portable. Idempotent exactly when the
  /// commands are.
  virtual std::vector<store_reply>
  execute(const std::vector<store_command>& commands) = 0;

  /// True when calls block the calling thread on I/O (then they belong in a
  /// detached actor).
  virtual bool blocking() const noexcept = 0;
};

/// Makes connections to one store. Thread-safe.
class queue_store_factory {
 public:
  virtual ~queue_store_factory();

  /// Opens a new connection. Never fails: a server that cannot be reached now
  /// is tried again on each call, and the calls answer `store_unavailable`
  /// while it stays away. Not idempotent: every call opens another
  /// connection.
  virtual std::unique_ptr<queue_store> connect() = 0;

  /// A short description for logs, e.g. "redis 127.0.0.1:6379".
  virtual std::string describe() const = 0;
};

/// Settings of the Redis store.
struct redis_options {
  std::string host = "127.0.0.1";
  uint16_t port = 6379;
  uint32_t connect_timeout_ms = 2000;
  uint32_t command_timeout_ms = 5000;
  /// Attempts per batch after a dropped connection before the calls fail
  /// with `store_unavailable`.
  uint32_t max_attempts = 3;
  /// Pause between reconnect attempts.
  uint32_t retry_delay_ms = 100;
  /// AUTH: the ACL user (empty: the default user) and password (empty: no
  /// AUTH). The password is never logged nor shown by describe().
  std::string user;
  std::string password;
  /// Redis Cluster: `host:port` and `seeds` are where the slot map is first
  /// asked for (CLUSTER SLOTS); each call then goes to the primary of its
  /// first key's slot, following MOVED and ASK (docs/cluster.md).
  bool cluster = false;
  std::vector<std::string> seeds; ///< more "host:port" entry points
  /// Cluster: how long a call keeps retrying while its slot has no
  /// reachable primary (a failover in progress) before it fails with
  /// `store_unavailable`.
  uint32_t failover_wait_ms = 6000;
};

/// Returns a factory for Redis connections (hiredis): one Redis, or with
/// `opts.cluster` a Redis Cluster. Never fails; connecting does not wait for
/// the server.
std::shared_ptr<queue_store_factory> make_redis_store(redis_options opts);

/// What a first contact with the configured Redis found.
struct redis_probe {
  bool cluster = false;
  size_t primaries = 1; ///< cluster: primaries in the slot map
};

/// Connects once (AUTH included) and, for a cluster, reads the slot map.
/// Fails with `store_auth_failed` when the server refuses the credentials
/// (or wants some and none are configured), `store_unavailable` when it
/// cannot be reached, `protocol_error` for a cluster without a complete slot
/// map or a server without Redis functions (before 7.0). Idempotent; opens
/// and closes its own connection.
outcome<redis_probe> probe_redis(const redis_options& opts);

/// Settings of the embedded store.
struct embedded_options {
  /// Defaults to the system clock when empty.
  store_clock clock;
};

/// Returns a factory whose connections all share ONE in-memory data set that
/// runs the lua/ scripts in an embedded Lua 5.1. Every call creates a new,
/// empty data set (throws std::bad_alloc when Lua cannot start). Its stores
/// never answer a code: every failure is an error value in the reply.
std::shared_ptr<queue_store_factory> make_embedded_store(embedded_options opts);

} // namespace mm
