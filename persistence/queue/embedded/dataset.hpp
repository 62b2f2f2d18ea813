#pragma once

// The key space of the embedded data set: values with lazy expiry against the
// injected clock, and the command table that maps names to handlers.

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>

#include "core/clock.hpp"
#include "persistence/queue/embedded/reply_sink.hpp"
#include "persistence/queue/embedded/t_hash.hpp"
#include "persistence/queue/embedded/t_stream.hpp"
#include "persistence/queue/embedded/t_zset.hpp"
#include "persistence/queue/embedded/util.hpp"

namespace mm::embedded {

inline constexpr int64_t no_expiry = -1;

struct value {
  std::variant<std::string, hash_type, zset_type, stream_type> data;
  int64_t expire_at = no_expiry; // ms since the epoch
};

/// The key space and the commands. Not thread-safe: the owner serializes.
/// The handlers live beside their value type, like Redis's t_*.c files:
/// generic ones in dataset.cpp, the others in t_string.cpp, t_hash.cpp,
/// t_zset.cpp and t_stream.cpp.
class dataset {
 public:
  /// An empty key space on `clock` (ms since the epoch, read by `tick`).
  explicit dataset(store_clock clock) : clock_(std::move(clock)) {}

  /// Reads the clock once: expiry and TIME within one command or script use
  /// this instant (Redis also freezes time for key expiry during a script).
  void tick() {
    now_ = clock_();
  }

  /// Runs one command (argv[0] is its name, any case) and writes exactly one
  /// reply to `out`. Precondition: argc > 0.
  void exec(const std::string* argv, size_t argc, reply_sink& out);

 private:
  using handler = void (dataset::*)(const std::string*, size_t, reply_sink&);

  struct command_def {
    int arity; // > 0: exactly; < 0: at least -arity
    handler fn;
  };

  /// The command table: lower-case name -> arity and handler.
  static const std::unordered_map<std::string, command_def>& commands();

  /// The value of `key`, or nullptr when absent; a key past its expiry is
  /// erased here (lazy expiry, as in Redis).
  value* find(const std::string& key) {
    auto i = keys_.find(key);
    if (i == keys_.end())
      return nullptr;
    if (i->second.expire_at != no_expiry && now_ > i->second.expire_at) {
      keys_.erase(i);
      return nullptr;
    }
    return &i->second;
  }

  /// Finds `key` as a T. Returns false (after writing WRONGTYPE) when the key
  /// holds another type; `result` is nullptr when the key is absent.
  template <class T>
  bool find_as(const std::string& key, T*& result, reply_sink& out) {
    result = nullptr;
    auto* v = find(key);
    if (v == nullptr)
      return true;
    result = std::get_if<T>(&v->data);
    if (result == nullptr) {
      out.error(wrongtype_error);
      return false;
    }
    return true;
  }

  /// Like `find_as`, but creates an empty T when the key is absent.
  template <class T>
  T* find_or_create(const std::string& key, reply_sink& out) {
    T* result = nullptr;
    if (!find_as(key, result, out))
      return nullptr;
    if (result == nullptr) {
      auto& v = keys_[key];
      v.data.template emplace<T>();
      v.expire_at = no_expiry;
      result = std::get_if<T>(&v.data);
    }
    return result;
  }

  /// Removes `key` if present.
  void erase(const std::string& key) {
    keys_.erase(key);
  }

  /// Writes `d` as Redis replies a score (format_double).
  void reply_double(double d, reply_sink& out) {
    format_double(d, scratch_);
    out.bulk(scratch_);
  }

  // The command handlers. `argv[0]` is the name and `exec` checked the
  // arity. Each writes exactly one reply, with Redis's arguments, replies and
  // error texts (WRONGTYPE for a key of another type), and changes nothing
  // when it answers an error.

  // Generic (dataset.cpp).
  /// TIME -> [seconds, microseconds] of the instant of `tick`.
  void cmd_time(const std::string* argv, size_t argc, reply_sink& out);
  /// DEL key [key ...] -> how many existed.
  void cmd_del(const std::string* argv, size_t argc, reply_sink& out);
  /// EXISTS key [key ...] -> how many exist (a key named twice counts twice).
  void cmd_exists(const std::string* argv, size_t argc, reply_sink& out);
  /// PEXPIRE key ms [NX|XX|GT|LT] -> 1 when set, else 0; a time not in the
  /// future deletes the key.
  void cmd_pexpire(const std::string* argv, size_t argc, reply_sink& out);
  /// PTTL key -> ms left, -1 without expiry, -2 when absent.
  void cmd_pttl(const std::string* argv, size_t argc, reply_sink& out);
  // Strings (t_string.cpp).
  /// GET key -> the value or nil.
  void cmd_get(const std::string* argv, size_t argc, reply_sink& out);
  /// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL] -> OK;
  /// nil when NX/XX refused it; with GET the old value.
  void cmd_set(const std::string* argv, size_t argc, reply_sink& out);
  /// INCR key -> the new value; keeps the key's TTL.
  void cmd_incr(const std::string* argv, size_t argc, reply_sink& out);
  // Hashes (t_hash.cpp).
  /// HGET key field -> the value or nil.
  void cmd_hget(const std::string* argv, size_t argc, reply_sink& out);
  /// HMGET key field [field ...] -> one value (or nil) per field.
  void cmd_hmget(const std::string* argv, size_t argc, reply_sink& out);
  /// HSET key field value [field value ...] -> the number of new fields.
  void cmd_hset(const std::string* argv, size_t argc, reply_sink& out);
  /// HDEL key field [field ...] -> how many went; an emptied hash goes too.
  void cmd_hdel(const std::string* argv, size_t argc, reply_sink& out);
  /// HEXISTS key field -> 1 or 0.
  void cmd_hexists(const std::string* argv, size_t argc, reply_sink& out);
  /// HLEN key -> the number of fields.
  void cmd_hlen(const std::string* argv, size_t argc, reply_sink& out);
  /// HGETALL key -> field, value, ... in no particular order.
  void cmd_hgetall(const std::string* argv, size_t argc, reply_sink& out);
  // Sorted sets (t_zset.cpp).
  /// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
  /// -> members added (with CH: also changed); with INCR the new score.
  void cmd_zadd(const std::string* argv, size_t argc, reply_sink& out);
  /// ZREM key member [member ...] -> how many went; an emptied set goes too.
  void cmd_zrem(const std::string* argv, size_t argc, reply_sink& out);
  /// ZPOPMIN key [count] -> member, score, ... of the lowest, removed.
  void cmd_zpopmin(const std::string* argv, size_t argc, reply_sink& out);
  /// ZSCORE key member -> the score or nil.
  void cmd_zscore(const std::string* argv, size_t argc, reply_sink& out);
  /// ZCARD key -> the number of members.
  void cmd_zcard(const std::string* argv, size_t argc, reply_sink& out);
  /// ZRANGE key start stop [REV] [WITHSCORES], by rank (negative: from the
  /// end); no BYSCORE, BYLEX or LIMIT.
  void cmd_zrange(const std::string* argv, size_t argc, reply_sink& out);
  /// ZRANGEBYLEX key min max [LIMIT offset count], among the members that
  /// share the lowest score.
  void cmd_zrangebylex(const std::string* argv, size_t argc, reply_sink& out);
  /// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]; '(' makes
  /// a bound exclusive.
  void cmd_zrangebyscore(const std::string* argv, size_t argc, reply_sink& out);
  // Streams (t_stream.cpp).
  /// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT n]] id
  /// field value [...] -> the new id; '~' trims exactly here.
  void cmd_xadd(const std::string* argv, size_t argc, reply_sink& out);
  /// XLEN key -> the number of entries.
  void cmd_xlen(const std::string* argv, size_t argc, reply_sink& out);
  /// XRANGE key start end [COUNT n] -> [id, [field, value, ...]] each.
  void cmd_xrange(const std::string* argv, size_t argc, reply_sink& out);

  store_clock clock_;
  int64_t now_ = 0;
  std::unordered_map<std::string, value> keys_;
  std::string name_;    // lower-cased command name
  std::string scratch_; // formatting buffer
};

} // namespace mm::embedded
