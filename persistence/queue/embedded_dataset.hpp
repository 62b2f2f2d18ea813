#pragma once

// The engine of the embedded queue store: an in-memory data set with the
// subset of Redis commands the lua/ scripts use (Redis semantics, lazy key
// expiry against an injected clock) and an embedded Lua 5.1 that runs the
// scripts against it the way Redis does (KEYS/ARGV, redis.call/pcall,
// Redis<->Lua type conversion). No Lua or CAF headers leak from here.
// The implementation is in persistence/queue/embedded/, split like Redis's
// source: dataset (key space, command table), t_string/t_hash/t_zset/t_stream
// (the commands per value type), script_lua (the Lua bridge), engine.cpp.
//
// Commands: TIME GET SET DEL EXISTS INCR PEXPIRE PTTL HGET HMGET HSET HDEL
// HEXISTS HLEN HGETALL ZADD ZREM ZPOPMIN ZSCORE ZCARD ZRANGE ZRANGEBYSCORE
// ZRANGEBYLEX XADD XLEN XRANGE.

#include <memory>
#include <string>
#include <vector>

#include "persistence/queue/queue_store.hpp"

namespace mm::embedded {

/// One data set plus the Lua state bound to it. Not thread-safe: one caller
/// at a time (the embedded store's factory guards one engine with a mutex).
/// Every reply carries what a Redis client would see; errors of a command or
/// a script are error values (`store_value::kind::error`), never exceptions.
class engine {
 public:
  /// Creates an empty data set; `clock` (ms since the epoch) plays the role
  /// of the server's clock. Loads the function library of lua/ once; a
  /// library that does not load makes every `run` answer its error. Throws
  /// std::bad_alloc when Lua cannot start.
  explicit engine(store_clock clock);
  ~engine();

  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  /// Runs one plain command, e.g. {"SET", "k", "v", "PX", "100"}, and
  /// answers what Redis would. The name is case-insensitive; an empty, an
  /// unknown or a malformed command answers an error value. Idempotent
  /// exactly when the command is.
  store_value execute(const store_command& command);

  /// Runs one function of the lua/ library atomically (FCALL). An unknown
  /// script id answers the error value "ERR Function not found". Idempotent
  /// exactly when the script is.
  store_value run(const script_call& call);

  /// Runs Lua `source` as a script (like EVAL: compiled on every call), with
  /// the same environment as the lua/ scripts. For tests and tools.
  /// Idempotent exactly when the script is.
  store_value eval(const std::string& source,
                   const std::vector<std::string>& keys,
                   const std::vector<std::string>& args);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace mm::embedded
