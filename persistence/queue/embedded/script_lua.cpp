// The Lua bridge (see script_lua.hpp): lua_sink (a reply onto the Lua
// stack), the sandbox, the `redis` table, running scripts and converting
// their results.

#include "persistence/queue/embedded/script_lua.hpp"

#include <lua.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <utility>

#include "persistence/queue/embedded/dataset.hpp"
#include "persistence/queue/embedded/reply_sink.hpp"
#include "persistence/queue/embedded/util.hpp"

namespace mm::embedded {

namespace {

/// Pushes the reply onto a Lua stack, converted the way Redis converts a
/// reply for `redis.call`: integer -> number, bulk -> string, nil -> false,
/// array -> table, status -> {ok=...}, error -> {err=...}.
class lua_sink final : public reply_sink {
 public:
  lua_sink(lua_State* L, std::vector<int>& open) : L_(L), open_(open) {
    open_.clear();
  }

  void nil() override {
    lua_pushboolean(L_, 0);
    done();
  }

  void integer(int64_t x) override {
    lua_pushnumber(L_, static_cast<lua_Number>(x));
    done();
  }

  void bulk(const char* data, size_t size) override {
    lua_pushlstring(L_, data, size);
    done();
  }

  void status(const char* text) override {
    lua_createtable(L_, 0, 1);
    lua_pushstring(L_, text);
    lua_setfield(L_, -2, "ok");
    done();
  }

  void error(const std::string& text) override {
    lua_createtable(L_, 0, 1);
    lua_pushlstring(L_, text.data(), text.size());
    lua_setfield(L_, -2, "err");
    failed_ = true;
    done();
  }

  void begin_array(size_t size_hint) override {
    lua_createtable(L_, static_cast<int>(std::min<size_t>(size_hint, 1 << 20)),
                    0);
    open_.push_back(0);
  }

  void end_array() override {
    open_.pop_back();
    done();
  }

  /// True when the reply is an error.
  bool failed() const noexcept {
    return failed_;
  }

 private:
  // A complete value is on top of the stack: store it in the open array.
  void done() {
    if (!open_.empty())
      lua_rawseti(L_, -2, ++open_.back());
  }

  lua_State* L_;
  std::vector<int>& open_; // next index - 1 of every open table
  bool failed_ = false;
};

int lua_panic(lua_State* L) {
  const char* msg = lua_tostring(L, -1);
  std::fprintf(stderr, "PANIC: unprotected error in call to Lua API (%s)\n",
               msg ? msg : "?");
  return 0; // Lua aborts the process
}

// Globals are read-only for scripts, as on Redis 7: a script runs with an
// empty environment that reads through to the globals and refuses every
// assignment; reading a global that does not exist is an error too. Returns
// that environment.
constexpr const char* lua_sandbox = R"lua(
local error, tostring, setmetatable = error, tostring, setmetatable
local function readonly(_, name)
  error("Attempt to modify a readonly table: global '" .. tostring(name)
        .. "'", 2)
end
setmetatable(_G, {
  __index = function(_, name)
    error("Script attempted to access nonexistent global variable '"
          .. tostring(name) .. "'", 2)
  end,
  __newindex = readonly,
  __metatable = false,
})
return setmetatable({}, {__index = _G, __newindex = readonly,
                         __metatable = false})
)lua";

} // namespace

lua_runtime::lua_runtime(dataset& data) : data_(data), env_ref_(LUA_NOREF) {
  L_ = lua_newstate(&lua_pool::alloc, &pool_);
  if (L_ == nullptr)
    throw std::bad_alloc();
  lua_atpanic(L_, &lua_panic);
  // Only the safe libraries, like Redis (no io, os, package, debug).
  const std::pair<const char*, lua_CFunction> libs[] = {
    {"", luaopen_base},
    {LUA_TABLIBNAME, luaopen_table},
    {LUA_STRLIBNAME, luaopen_string},
    {LUA_MATHLIBNAME, luaopen_math},
  };
  for (const auto& [name, open] : libs) {
    lua_pushcfunction(L_, open);
    lua_pushstring(L_, name);
    lua_call(L_, 1, 0);
  }
  for (const char* name : {"loadfile", "dofile"}) {
    lua_pushnil(L_);
    lua_setglobal(L_, name);
  }
  // The redis table.
  lua_createtable(L_, 0, 10);
  auto set_fn = [this](const char* name, lua_CFunction fn) {
    lua_pushlightuserdata(L_, this);
    lua_pushcclosure(L_, fn, 1);
    lua_setfield(L_, -2, name);
  };
  set_fn("call", &lua_runtime::redis_call);
  set_fn("pcall", &lua_runtime::redis_pcall);
  set_fn("error_reply", &lua_runtime::redis_error_reply);
  set_fn("status_reply", &lua_runtime::redis_status_reply);
  set_fn("log", &lua_runtime::redis_log);
  const std::pair<const char*, int> levels[] = {{"LOG_DEBUG", 0},
                                                {"LOG_VERBOSE", 1},
                                                {"LOG_NOTICE", 2},
                                                {"LOG_WARNING", 3}};
  for (const auto& [name, level] : levels) {
    lua_pushinteger(L_, level);
    lua_setfield(L_, -2, name);
  }
  lua_setglobal(L_, "redis");
  for (const char* name : {"KEYS", "ARGV"}) {
    lua_newtable(L_);
    lua_setglobal(L_, name);
  }
  if (luaL_loadbuffer(L_, lua_sandbox, std::strlen(lua_sandbox), "=sandbox")
        != 0
      || lua_pcall(L_, 0, 1, 0) != 0) {
    std::string msg = lua_tostring(L_, -1) ? lua_tostring(L_, -1) : "?";
    lua_close(L_);
    throw std::runtime_error("embedded store: Lua sandbox failed: " + msg);
  }
  env_ref_ = luaL_ref(L_, LUA_REGISTRYINDEX);
  load_library();
  lua_settop(L_, 0);
}

void lua_runtime::load_library() {
  // Like FUNCTION LOAD: the first line names the library (Redis reads it,
  // Lua would not); the chunk runs once and registers the functions, which
  // land in a table that this runtime keeps in the registry.
  const char* text = script_library;
  const char* body = std::strchr(text, '\n');
  body = body != nullptr ? body + 1 : text + std::strlen(text);
  auto fail = [this](std::string msg) {
    for (auto& e : load_errors_)
      e = msg;
    refs_.fill(LUA_NOREF);
    lua_settop(L_, 0);
  };
  lua_newtable(L_);
  int registered = luaL_ref(L_, LUA_REGISTRYINDEX);
  // redis.register_function writes into that table.
  lua_getglobal(L_, "redis");
  lua_rawgeti(L_, LUA_REGISTRYINDEX, registered);
  lua_pushcclosure(L_, &lua_runtime::redis_register_function, 1);
  lua_setfield(L_, -2, "register_function");
  lua_pop(L_, 1);
  if (luaL_loadbuffer(L_, body, std::strlen(body), "@user_function") != 0) {
    const char* msg = lua_tostring(L_, -1);
    fail(std::string("ERR Error compiling function: ") + (msg ? msg : "?"));
    luaL_unref(L_, LUA_REGISTRYINDEX, registered);
    return;
  }
  set_env();
  if (lua_pcall(L_, 0, 0, 0) != 0) {
    const char* msg = lua_tostring(L_, -1);
    fail(std::string("ERR Error registering functions: ") + (msg ? msg : "?"));
    luaL_unref(L_, LUA_REGISTRYINDEX, registered);
    return;
  }
  for (size_t i = 0; i < script_count; ++i) {
    lua_rawgeti(L_, LUA_REGISTRYINDEX, registered);
    lua_getfield(L_, -1, script_sources[i].function);
    if (lua_isfunction(L_, -1)) {
      refs_[i] = luaL_ref(L_, LUA_REGISTRYINDEX);
    } else {
      lua_pop(L_, 1);
      refs_[i] = LUA_NOREF;
      load_errors_[i] = "ERR Function not found";
    }
    lua_pop(L_, 1);
  }
  luaL_unref(L_, LUA_REGISTRYINDEX, registered);
}

lua_runtime::~lua_runtime() {
  lua_close(L_);
}

void lua_runtime::set_env() {
  lua_rawgeti(L_, LUA_REGISTRYINDEX, env_ref_);
  lua_setfenv(L_, -2);
}

void lua_runtime::push_args(const std::vector<std::string>& xs) {
  lua_createtable(L_, static_cast<int>(xs.size()), 0);
  int i = 0;
  for (const auto& x : xs) {
    lua_pushlstring(L_, x.data(), x.size());
    lua_rawseti(L_, -2, ++i);
  }
}

store_value lua_runtime::run(const script_call& call) {
  store_value result;
  auto index = static_cast<size_t>(call.script);
  if (index >= script_count) {
    result.type = store_value::kind::error;
    result.str = "ERR Function not found";
    return result;
  }
  if (refs_[index] == LUA_NOREF) {
    result.type = store_value::kind::error;
    result.str = load_errors_[index];
    return result;
  }
  lua_settop(L_, 0);
  lua_rawgeti(L_, LUA_REGISTRYINDEX, refs_[index]);
  push_args(call.keys);
  push_args(call.args);
  return finish(lua_pcall(L_, 2, 1, 0));
}

store_value lua_runtime::eval(const std::string& source,
                              const std::vector<std::string>& keys,
                              const std::vector<std::string>& args) {
  lua_settop(L_, 0);
  if (luaL_loadbuffer(L_, source.data(), source.size(), "@user_script") != 0) {
    store_value result;
    result.type = store_value::kind::error;
    const char* msg = lua_tostring(L_, -1);
    result.str = std::string("ERR Error compiling script: ")
                 + (msg ? msg : "?");
    lua_settop(L_, 0);
    return result;
  }
  set_env();
  return invoke(keys, args);
}

store_value lua_runtime::invoke(const std::vector<std::string>& keys,
                                const std::vector<std::string>& args) {
  // Raw sets: the sandbox's metamethods must never run here (an error would
  // be unprotected).
  lua_pushliteral(L_, "KEYS");
  push_args(keys);
  lua_rawset(L_, LUA_GLOBALSINDEX);
  lua_pushliteral(L_, "ARGV");
  push_args(args);
  lua_rawset(L_, LUA_GLOBALSINDEX);
  return finish(lua_pcall(L_, 0, 1, 0));
}

store_value lua_runtime::finish(int status) {
  store_value result;
  if (status != 0) {
    // A table {err=...} raised by redis.call, or a runtime error message.
    result.type = store_value::kind::error;
    if (lua_istable(L_, -1)) {
      lua_pushliteral(L_, "err");
      lua_rawget(L_, -2);
      if (lua_type(L_, -1) == LUA_TSTRING) {
        size_t n = 0;
        const char* p = lua_tolstring(L_, -1, &n);
        result.str.assign(p, n);
      } else {
        result.str = "ERR unknown error";
      }
    } else if (lua_type(L_, -1) == LUA_TSTRING
               || lua_type(L_, -1) == LUA_TNUMBER) {
      size_t n = 0;
      const char* p = lua_tolstring(L_, -1, &n);
      result.str.assign("ERR ").append(p, n);
    } else {
      result.str = "ERR unknown error";
    }
  } else {
    to_value(0, result);
  }
  lua_settop(L_, 0);
  return result;
}

// Converts the value on top of the stack the way Redis converts a script's
// result: number -> integer (truncated), string -> bulk, {err=} -> error,
// {ok=} -> status, other table -> array up to the first nil, true -> 1,
// false/nil/other -> nil.
void lua_runtime::to_value(int depth, store_value& out) {
  switch (lua_type(L_, -1)) {
    case LUA_TSTRING: {
      size_t n = 0;
      const char* p = lua_tolstring(L_, -1, &n);
      out.type = store_value::kind::string;
      out.str.assign(p, n);
      break;
    }
    case LUA_TBOOLEAN:
      if (lua_toboolean(L_, -1)) {
        out.type = store_value::kind::integer;
        out.integer = 1;
      }
      break;
    case LUA_TNUMBER: {
      double d = lua_tonumber(L_, -1);
      out.type = store_value::kind::integer;
      if (std::isnan(d))
        out.integer = 0;
      else if (d >= 9223372036854775807.0)
        out.integer = std::numeric_limits<int64_t>::max();
      else if (d <= -9223372036854775808.0)
        out.integer = std::numeric_limits<int64_t>::min();
      else
        out.integer = static_cast<int64_t>(d);
      break;
    }
    case LUA_TTABLE: {
      if (depth > 200 || !lua_checkstack(L_, 4)) {
        out.type = store_value::kind::error;
        out.str = "ERR reached lua stack limit";
        break;
      }
      lua_pushliteral(L_, "err");
      lua_rawget(L_, -2);
      if (lua_type(L_, -1) == LUA_TSTRING) {
        size_t n = 0;
        const char* p = lua_tolstring(L_, -1, &n);
        out.type = store_value::kind::error;
        out.str.assign(p, n);
        lua_pop(L_, 1);
        break;
      }
      lua_pop(L_, 1);
      lua_pushliteral(L_, "ok");
      lua_rawget(L_, -2);
      if (lua_type(L_, -1) == LUA_TSTRING) {
        size_t n = 0;
        const char* p = lua_tolstring(L_, -1, &n);
        out.type = store_value::kind::status;
        out.str.assign(p, n);
        lua_pop(L_, 1);
        break;
      }
      lua_pop(L_, 1);
      out.type = store_value::kind::array;
      for (int j = 1;; ++j) {
        lua_rawgeti(L_, -1, j);
        if (lua_isnil(L_, -1)) {
          lua_pop(L_, 1);
          break;
        }
        out.elements.emplace_back();
        to_value(depth + 1, out.elements.back());
        lua_pop(L_, 1);
      }
      break;
    }
    default:
      break; // nil, functions, userdata: nil
  }
}

bool lua_runtime::dispatch(lua_State* L) noexcept {
  int argc = lua_gettop(L);
  auto push_error = [L, argc](const char* msg) {
    lua_settop(L, argc);
    lua_createtable(L, 0, 1);
    lua_pushstring(L, msg);
    lua_setfield(L, -2, "err");
    return true;
  };
  try {
    if (argc == 0)
      return push_error("ERR Please specify at least one argument for this "
                        "redis lib call");
    if (args_.size() < static_cast<size_t>(argc))
      args_.resize(static_cast<size_t>(argc));
    for (int i = 0; i < argc; ++i) {
      auto& arg = args_[static_cast<size_t>(i)];
      switch (lua_type(L, i + 1)) {
        case LUA_TSTRING: {
          size_t n = 0;
          const char* p = lua_tolstring(L, i + 1, &n);
          arg.assign(p, n);
          break;
        }
        case LUA_TNUMBER: {
          // Like Redis 7.0: "%.17g", not Lua's lossy "%.14g".
          char buf[64];
          arg.assign(buf, format_g17(lua_tonumber(L, i + 1), buf));
          break;
        }
        default:
          return push_error("ERR Lua redis lib command arguments must be "
                            "strings or integers");
      }
    }
    lua_sink sink{L, open_};
    data_.exec(args_.data(), static_cast<size_t>(argc), sink);
    return sink.failed();
  } catch (...) {
    // Only std::bad_alloc can get here; C++ exceptions must not cross Lua.
    return push_error("ERR embedded store failure");
  }
}

int lua_runtime::redis_call(lua_State* L) {
  auto* self
    = static_cast<lua_runtime*>(lua_touserdata(L, lua_upvalueindex(1)));
  if (self->dispatch(L))
    return lua_error(L); // raises the {err=...} table, aborting the script
  return 1;
}

int lua_runtime::redis_pcall(lua_State* L) {
  auto* self
    = static_cast<lua_runtime*>(lua_touserdata(L, lua_upvalueindex(1)));
  self->dispatch(L);
  return 1;
}

// redis.register_function(name, callback) or ({function_name = name,
// callback = fn, flags = {...}}): the function goes into the table of the
// closure's upvalue (flags are Redis's business; the embedded store runs
// every function the same way).
int lua_runtime::redis_register_function(lua_State* L) {
  if (lua_gettop(L) == 1 && lua_istable(L, 1)) {
    lua_getfield(L, 1, "function_name");
    lua_getfield(L, 1, "callback");
  } else if (lua_gettop(L) != 2) {
    return luaL_error(L,
                      "wrong number of arguments to redis.register_function");
  }
  if (lua_type(L, -2) != LUA_TSTRING || !lua_isfunction(L, -1))
    return luaL_error(L, "redis.register_function needs a name and a function");
  lua_pushvalue(L, -2);
  lua_rawget(L, lua_upvalueindex(1));
  if (!lua_isnil(L, -1))
    return luaL_error(L, "Function already exists");
  lua_pop(L, 1);
  lua_rawset(L, lua_upvalueindex(1));
  return 0;
}

int lua_runtime::redis_error_reply(lua_State* L) {
  if (lua_gettop(L) != 1 || lua_type(L, 1) != LUA_TSTRING)
    return luaL_error(L, "wrong number or type of arguments");
  lua_createtable(L, 0, 1);
  lua_pushvalue(L, 1);
  lua_setfield(L, -2, "err");
  return 1;
}

int lua_runtime::redis_status_reply(lua_State* L) {
  if (lua_gettop(L) != 1 || lua_type(L, 1) != LUA_TSTRING)
    return luaL_error(L, "wrong number or type of arguments");
  lua_createtable(L, 0, 1);
  lua_pushvalue(L, 1);
  lua_setfield(L, -2, "ok");
  return 1;
}

int lua_runtime::redis_log(lua_State* L) {
  if (lua_gettop(L) < 2)
    return luaL_error(L, "redis.log() requires two arguments or more.");
  return 0; // The embedded store has no server log.
}

} // namespace mm::embedded
