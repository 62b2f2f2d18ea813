#pragma once

// The Lua bridge of the embedded store: one Lua 5.1 state that loads the
// function library of lua/ and runs its functions against a dataset the way
// Redis does (sandbox, keys and args, redis.call/pcall, Redis<->Lua
// conversion). Lua headers stay in the .cpp.

#include <array>
#include <string>
#include <vector>

#include "persistence/queue/embedded/lua_pool.hpp"
#include "persistence/queue/queue_store.hpp"

struct lua_State;

namespace mm::embedded {

class dataset;

/// One Lua state with the library of lua/ loaded once, and the `redis` table
/// bound to a data set. Not thread-safe: the owner serializes.
class lua_runtime {
 public:
  /// Opens a Lua state with the safe libraries, the sandbox and the `redis`
  /// table bound to `data` (which must outlive the runtime), and loads the
  /// library (a library that does not load makes `run` answer its error).
  /// Throws std::bad_alloc when Lua cannot start, std::runtime_error when
  /// the sandbox does not load.
  explicit lua_runtime(dataset& data);

  /// Closes the state.
  ~lua_runtime();

  lua_runtime(const lua_runtime&) = delete;
  lua_runtime& operator=(const lua_runtime&) = delete;

  /// Runs one function of the library (FCALL); a Lua error becomes an error
  /// value, never a throw (except std::bad_alloc from building the reply).
  store_value run(const script_call& call);

  /// Compiles and runs `source` as EVAL does (KEYS and ARGV globals); a
  /// compile or run error becomes an error value.
  store_value eval(const std::string& source,
                   const std::vector<std::string>& keys,
                   const std::vector<std::string>& args);

 private:
  static int redis_call(lua_State* L);
  static int redis_pcall(lua_State* L);
  static int redis_error_reply(lua_State* L);
  static int redis_status_reply(lua_State* L);
  static int redis_log(lua_State* L);
  static int redis_register_function(lua_State* L);

  /// FUNCTION LOAD of the library: fills refs_ (or load_errors_).
  void load_library();

  /// The result of a pcall with `status` on top of the stack, converted.
  store_value finish(int status);

  /// Runs redis.call/pcall with the arguments on the stack. Leaves exactly
  /// one value on top; returns true when it is an error table. Never throws
  /// and never raises a Lua error itself (so no C++ frame is jumped over).
  bool dispatch(lua_State* L) noexcept;

  /// Calls the chunk on top of the stack with KEYS and ARGV set.
  store_value invoke(const std::vector<std::string>& keys,
                     const std::vector<std::string>& args);
  void push_args(const std::vector<std::string>& xs);
  void to_value(int depth, store_value& out);

  /// Gives the function on top of the stack the scripts' environment.
  void set_env();

  lua_pool pool_; // outlives L_
  lua_State* L_ = nullptr;
  dataset& data_;
  int env_ref_; // LUA_NOREF until the sandbox is built
  std::array<int, script_count> refs_{};
  std::array<std::string, script_count> load_errors_;
  std::vector<std::string> args_; // arguments of redis.call, reused
  std::vector<int> open_;         // lua_sink's open tables, reused
};

} // namespace mm::embedded
