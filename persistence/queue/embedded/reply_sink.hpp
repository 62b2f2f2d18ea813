#pragma once

// Where a command of the embedded data set writes its reply: the interface
// (reply_sink) and the sink that builds a store_value (value_sink). The sink
// onto a Lua stack lives with the Lua bridge (script_lua.cpp).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "persistence/queue/queue_store.hpp"

namespace mm::embedded {

/// Receives one reply in the shape of RESP2. Arrays are opened with
/// `begin_array` and closed with `end_array`; the values in between are their
/// elements. A command writes exactly one top-level value; an error is only
/// ever written as the top-level value.
class reply_sink {
 public:
  virtual ~reply_sink() = default;
  /// A nil bulk reply.
  virtual void nil() = 0;
  /// An integer reply.
  virtual void integer(int64_t x) = 0;
  /// A bulk string: `size` bytes from `data`, any bytes.
  virtual void bulk(const char* data, size_t size) = 0;
  /// A status reply such as "OK".
  virtual void status(const char* text) = 0;
  /// An error reply; `text` starts with its code ("ERR ...", "WRONGTYPE ...").
  virtual void error(const std::string& text) = 0;
  /// Opens an array; `size_hint` is the expected count (may be 0 when not
  /// known ahead).
  virtual void begin_array(size_t size_hint) = 0;
  /// Closes the innermost open array.
  virtual void end_array() = 0;

  /// `bulk` of a whole string.
  void bulk(const std::string& x) {
    bulk(x.data(), x.size());
  }
};

/// Builds a `store_value`, as a Redis client would see the reply.
class value_sink final : public reply_sink {
 public:
  /// The calls of reply_sink: each adds its part to the value being built.
  void nil() override;
  void integer(int64_t x) override;
  void bulk(const char* data, size_t size) override;
  void status(const char* text) override;
  void error(const std::string& text) override;
  void begin_array(size_t size_hint) override;
  void end_array() override;

  /// Hands over the reply; call once, after the command has written it.
  store_value take();

 private:
  // Pointers stay valid: only the innermost open array grows.
  store_value& next();

  store_value root_;
  std::vector<store_value*> open_;
};

} // namespace mm::embedded
