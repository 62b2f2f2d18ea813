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

  static const std::unordered_map<std::string, command_def>& commands();

  // Key lookup with lazy expiry; nullptr when absent.
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

  void erase(const std::string& key) {
    keys_.erase(key);
  }

  void reply_double(double d, reply_sink& out) {
    format_double(d, scratch_);
    out.bulk(scratch_);
  }

  // Commands, each with Redis's arguments and replies.
  // Generic (dataset.cpp).
  void cmd_time(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_del(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_exists(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_pexpire(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_pttl(const std::string* argv, size_t argc, reply_sink& out);
  // Strings (t_string.cpp).
  void cmd_get(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_set(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_incr(const std::string* argv, size_t argc, reply_sink& out);
  // Hashes (t_hash.cpp).
  void cmd_hget(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_hmget(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_hset(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_hdel(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_hexists(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_hlen(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_hgetall(const std::string* argv, size_t argc, reply_sink& out);
  // Sorted sets (t_zset.cpp).
  void cmd_zadd(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_zrem(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_zpopmin(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_zscore(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_zcard(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_zrange(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_zrangebylex(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_zrangebyscore(const std::string* argv, size_t argc, reply_sink& out);
  // Streams (t_stream.cpp).
  void cmd_xadd(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_xlen(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_xrange(const std::string* argv, size_t argc, reply_sink& out);

  store_clock clock_;
  int64_t now_ = 0;
  std::unordered_map<std::string, value> keys_;
  std::string name_;    // lower-cased command name
  std::string scratch_; // formatting buffer
};

} // namespace mm::embedded
