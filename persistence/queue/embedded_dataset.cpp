// The engine of the embedded queue store (see embedded_dataset.hpp).
//
// Layout of this file:
//   reply_sink     — where a command writes its reply: straight onto the Lua
//                    stack (redis.call) or into a store_value (execute)
//   dataset        — the key space and the command implementations
//   lua_runtime    — the Lua state: the `redis` table, KEYS/ARGV, compiled
//                    scripts, conversion of script results
//   engine         — the public face of both

#include "persistence/queue/embedded_dataset.hpp"

#include <lua.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace mm::embedded {

namespace {

// -- reply sinks --------------------------------------------------------------

/// Receives one reply in the shape of RESP2. Arrays are opened with
/// `begin_array` and closed with `end_array`; the values in between are their
/// elements. A command writes exactly one top-level value; an error is only
/// ever written as the top-level value.
class reply_sink {
public:
  virtual ~reply_sink() = default;
  virtual void nil() = 0;
  virtual void integer(int64_t x) = 0;
  virtual void bulk(const char* data, size_t size) = 0;
  virtual void status(const char* text) = 0;
  virtual void error(const std::string& text) = 0;
  virtual void begin_array(size_t size_hint) = 0;
  virtual void end_array() = 0;

  void bulk(const std::string& x) {
    bulk(x.data(), x.size());
  }
};

/// Builds a `store_value`, as a Redis client would see the reply.
class value_sink final : public reply_sink {
public:
  void nil() override {
    next();
  }

  void integer(int64_t x) override {
    auto& v = next();
    v.type = store_value::kind::integer;
    v.integer = x;
  }

  void bulk(const char* data, size_t size) override {
    auto& v = next();
    v.type = store_value::kind::string;
    v.str.assign(data, size);
  }

  void status(const char* text) override {
    auto& v = next();
    v.type = store_value::kind::status;
    v.str = text;
  }

  void error(const std::string& text) override {
    auto& v = next();
    v.type = store_value::kind::error;
    v.str = text;
  }

  void begin_array(size_t size_hint) override {
    auto& v = next();
    v.type = store_value::kind::array;
    v.elements.reserve(size_hint);
    open_.push_back(&v);
  }

  void end_array() override {
    open_.pop_back();
  }

  store_value take() {
    open_.clear();
    return std::move(root_);
  }

private:
  // Pointers stay valid: only the innermost open array grows.
  store_value& next() {
    if (open_.empty())
      return root_;
    auto& xs = open_.back()->elements;
    xs.emplace_back();
    return xs.back();
  }

  store_value root_;
  std::vector<store_value*> open_;
};

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

// -- parsing and formatting helpers --------------------------------------------

const char* const wrongtype_error
  = "WRONGTYPE Operation against a key holding the wrong kind of value";
const char* const not_integer_error
  = "ERR value is not an integer or out of range";
const char* const syntax_error = "ERR syntax error";

/// Redis's string2ll: optional '-', no '+', no leading zeros, no spaces.
bool parse_ll(const std::string& s, int64_t& out) {
  const char* p = s.data();
  size_t n = s.size();
  if (n == 0 || n > 20)
    return false;
  if (n == 1 && p[0] == '0') {
    out = 0;
    return true;
  }
  bool neg = false;
  if (p[0] == '-') {
    neg = true;
    ++p;
    --n;
    if (n == 0)
      return false;
  }
  if (p[0] < '1' || p[0] > '9')
    return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] < '0' || p[i] > '9')
      return false;
    uint64_t d = static_cast<uint64_t>(p[i] - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10)
      return false;
    v = v * 10 + d;
  }
  if (neg) {
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + 1)
      return false;
    out = v == static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + 1
            ? std::numeric_limits<int64_t>::min()
            : -static_cast<int64_t>(v);
  } else {
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return false;
    out = static_cast<int64_t>(v);
  }
  return true;
}

/// Redis's string-to-double for scores: strtod over the whole string, no
/// leading space, no NaN.
bool parse_double(const std::string& s, double& out) {
  // Fast path, same result: a plain integer that a double holds exactly.
  int64_t n = 0;
  if (parse_ll(s, n) && n > -(int64_t{1} << 53) && n < (int64_t{1} << 53)) {
    out = static_cast<double>(n);
    return true;
  }
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0])))
    return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.data() + s.size() || std::isnan(v))
    return false;
  if (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL || v == 0.0))
    return false;
  out = v;
  return true;
}

/// Formats `d` like printf's "%.17g" (what Redis 7.0 uses for scores and
/// for Lua numbers passed to redis.call). Returns the length written.
size_t format_g17(double d, char (&buf)[64]) {
  // Fast path, same text: an integral value below 1e15 prints as its digits.
  if (d > -1e15 && d < 1e15 && d == std::trunc(d)
      && !(d == 0 && std::signbit(d))) {
    auto r = std::to_chars(buf, buf + sizeof(buf), static_cast<int64_t>(d));
    return static_cast<size_t>(r.ptr - buf);
  }
  int n = std::snprintf(buf, sizeof(buf), "%.17g", d);
  return static_cast<size_t>(n);
}

/// A score as Redis 7.0 replies it (RESP2): "%.17g", "inf", "-inf".
void format_double(double d, std::string& out) {
  if (std::isinf(d)) {
    out = d > 0 ? "inf" : "-inf";
    return;
  }
  char buf[64];
  out.assign(buf, format_g17(d, buf));
}

char ascii_lower(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool equals_nocase(const std::string& x, const char* lit) {
  size_t n = std::strlen(lit);
  if (x.size() != n)
    return false;
  for (size_t i = 0; i < n; ++i)
    if (ascii_lower(x[i]) != lit[i])
      return false;
  return true;
}

bool add_overflows(int64_t a, int64_t b) {
  return (b > 0 && a > std::numeric_limits<int64_t>::max() - b)
         || (b < 0 && a < std::numeric_limits<int64_t>::min() - b);
}

// -- value types -----------------------------------------------------------------

using hash_type = std::unordered_map<std::string, std::string>;

/// Orders (score, member) like Redis; also compares against a bare score so
/// that lower_bound/upper_bound can find a score boundary.
struct zset_less {
  using is_transparent = void;
  using item = std::pair<double, std::string>;
  bool operator()(const item& x, const item& y) const {
    return x < y;
  }
  bool operator()(const item& x, double y) const {
    return x.first < y;
  }
  bool operator()(double x, const item& y) const {
    return x < y.first;
  }
};

struct zset_type {
  std::set<std::pair<double, std::string>, zset_less> ordered;
  std::unordered_map<std::string, double> scores;
};

struct stream_id {
  uint64_t ms = 0;
  uint64_t seq = 0;
  friend bool operator<(const stream_id& x, const stream_id& y) {
    return x.ms != y.ms ? x.ms < y.ms : x.seq < y.seq;
  }
  friend bool operator==(const stream_id& x, const stream_id& y) {
    return x.ms == y.ms && x.seq == y.seq;
  }
  std::string to_string() const {
    return std::to_string(ms) + '-' + std::to_string(seq);
  }
};

struct stream_entry {
  stream_id id;
  std::vector<std::string> fields; // f1, v1, f2, v2, ...
};

struct stream_type {
  std::vector<stream_entry> entries; // ascending ids
  stream_id last;
};

constexpr int64_t no_expiry = -1;

struct value {
  std::variant<std::string, hash_type, zset_type, stream_type> data;
  int64_t expire_at = no_expiry; // ms since the epoch
};

// -- the data set ------------------------------------------------------------------

/// The key space and the commands. Not thread-safe: the owner serializes.
class dataset {
public:
  explicit dataset(store_clock clock) : clock_(std::move(clock)) {
  }

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
  void cmd_time(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_get(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_set(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_del(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_exists(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_incr(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_pexpire(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_pttl(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_hget(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_hset(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_hdel(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_hexists(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_hlen(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_hgetall(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_zadd(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_zrem(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_zscore(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_zcard(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_zrange(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_zrangebyscore(const std::string* argv, size_t argc,
                         reply_sink& out);
  void cmd_xadd(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_xlen(const std::string* argv, size_t argc, reply_sink& out);
  void cmd_xrange(const std::string* argv, size_t argc, reply_sink& out);

  store_clock clock_;
  int64_t now_ = 0;
  std::unordered_map<std::string, value> keys_;
  std::string name_;    // lower-cased command name
  std::string scratch_; // formatting buffer
};

const std::unordered_map<std::string, dataset::command_def>&
dataset::commands() {
  static const std::unordered_map<std::string, command_def> table{
    {"time", {1, &dataset::cmd_time}},
    {"get", {2, &dataset::cmd_get}},
    {"set", {-3, &dataset::cmd_set}},
    {"del", {-2, &dataset::cmd_del}},
    {"exists", {-2, &dataset::cmd_exists}},
    {"incr", {2, &dataset::cmd_incr}},
    {"pexpire", {-3, &dataset::cmd_pexpire}},
    {"pttl", {2, &dataset::cmd_pttl}},
    {"hget", {3, &dataset::cmd_hget}},
    {"hset", {-4, &dataset::cmd_hset}},
    {"hdel", {-3, &dataset::cmd_hdel}},
    {"hexists", {3, &dataset::cmd_hexists}},
    {"hlen", {2, &dataset::cmd_hlen}},
    {"hgetall", {2, &dataset::cmd_hgetall}},
    {"zadd", {-4, &dataset::cmd_zadd}},
    {"zrem", {-3, &dataset::cmd_zrem}},
    {"zscore", {3, &dataset::cmd_zscore}},
    {"zcard", {2, &dataset::cmd_zcard}},
    {"zrange", {-4, &dataset::cmd_zrange}},
    {"zrangebyscore", {-4, &dataset::cmd_zrangebyscore}},
    {"xadd", {-5, &dataset::cmd_xadd}},
    {"xlen", {2, &dataset::cmd_xlen}},
    {"xrange", {-4, &dataset::cmd_xrange}},
  };
  return table;
}

void dataset::exec(const std::string* argv, size_t argc, reply_sink& out) {
  name_.assign(argv[0]);
  for (auto& c : name_)
    c = ascii_lower(c);
  const auto& table = commands();
  auto i = table.find(name_);
  if (i == table.end()) {
    out.error("ERR unknown command '" + argv[0] + "'");
    return;
  }
  auto arity = i->second.arity;
  if ((arity > 0 && argc != static_cast<size_t>(arity))
      || (arity < 0 && argc < static_cast<size_t>(-arity))) {
    out.error("ERR wrong number of arguments for '" + name_ + "' command");
    return;
  }
  (this->*(i->second.fn))(argv, argc, out);
}

// TIME -> [seconds, microseconds]
void dataset::cmd_time(const std::string*, size_t, reply_sink& out) {
  int64_t secs = now_ / 1000;
  int64_t ms = now_ % 1000;
  if (ms < 0) {
    ms += 1000;
    secs -= 1;
  }
  out.begin_array(2);
  out.bulk(std::to_string(secs));
  out.bulk(std::to_string(ms * 1000));
  out.end_array();
}

void dataset::cmd_get(const std::string* argv, size_t, reply_sink& out) {
  std::string* s = nullptr;
  if (!find_as(argv[1], s, out))
    return;
  if (s == nullptr)
    out.nil();
  else
    out.bulk(*s);
}

// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]
void dataset::cmd_set(const std::string* argv, size_t argc, reply_sink& out) {
  bool nx = false, xx = false, get = false, keepttl = false;
  bool has_expire = false;
  int64_t expire_at = no_expiry;
  for (size_t i = 3; i < argc; ++i) {
    const auto& opt = argv[i];
    if (equals_nocase(opt, "nx") && !xx) {
      nx = true;
    } else if (equals_nocase(opt, "xx") && !nx) {
      xx = true;
    } else if (equals_nocase(opt, "get")) {
      get = true;
    } else if (equals_nocase(opt, "keepttl") && !has_expire) {
      keepttl = true;
    } else if ((equals_nocase(opt, "ex") || equals_nocase(opt, "px")
                || equals_nocase(opt, "exat") || equals_nocase(opt, "pxat"))
               && !has_expire && !keepttl && i + 1 < argc) {
      int64_t n = 0;
      if (!parse_ll(argv[++i], n)) {
        out.error(not_integer_error);
        return;
      }
      bool secs = opt.size() == 2 ? equals_nocase(opt, "ex")
                                  : equals_nocase(opt, "exat");
      bool absolute = opt.size() == 4;
      const int64_t max = std::numeric_limits<int64_t>::max();
      if (n <= 0 || (secs && n > max / 1000)) {
        out.error("ERR invalid expire time in 'set' command");
        return;
      }
      int64_t ms = secs ? n * 1000 : n;
      if (!absolute && add_overflows(ms, now_)) {
        out.error("ERR invalid expire time in 'set' command");
        return;
      }
      expire_at = absolute ? ms : now_ + ms;
      has_expire = true;
    } else {
      out.error(syntax_error);
      return;
    }
  }
  auto* v = find(argv[1]);
  std::string* old = v ? std::get_if<std::string>(&v->data) : nullptr;
  if (get && v != nullptr && old == nullptr) {
    out.error(wrongtype_error);
    return;
  }
  auto reply_skipped = [&] {
    if (get && old != nullptr)
      out.bulk(*old);
    else
      out.nil();
  };
  if ((nx && v != nullptr) || (xx && v == nullptr)) {
    reply_skipped();
    return;
  }
  if (get) {
    // Reply with the old value before it is overwritten.
    reply_skipped();
  } else {
    out.status("OK");
  }
  if (v == nullptr) {
    auto& nv = keys_[argv[1]];
    nv.data.emplace<std::string>(argv[2]);
    nv.expire_at = expire_at;
  } else {
    if (old != nullptr)
      old->assign(argv[2]);
    else
      v->data.emplace<std::string>(argv[2]);
    if (!keepttl)
      v->expire_at = expire_at;
  }
}

void dataset::cmd_del(const std::string* argv, size_t argc, reply_sink& out) {
  int64_t n = 0;
  for (size_t i = 1; i < argc; ++i) {
    if (find(argv[i]) != nullptr) {
      erase(argv[i]);
      ++n;
    }
  }
  out.integer(n);
}

void dataset::cmd_exists(const std::string* argv, size_t argc,
                         reply_sink& out) {
  int64_t n = 0;
  for (size_t i = 1; i < argc; ++i)
    if (find(argv[i]) != nullptr)
      ++n;
  out.integer(n);
}

void dataset::cmd_incr(const std::string* argv, size_t, reply_sink& out) {
  std::string* s = nullptr;
  if (!find_as(argv[1], s, out))
    return;
  int64_t n = 0;
  if (s != nullptr && !parse_ll(*s, n)) {
    out.error(not_integer_error);
    return;
  }
  if (n == std::numeric_limits<int64_t>::max()) {
    out.error("ERR increment or decrement would overflow");
    return;
  }
  ++n;
  if (s == nullptr) {
    auto& v = keys_[argv[1]];
    v.data.emplace<std::string>(std::to_string(n));
    v.expire_at = no_expiry;
  } else {
    *s = std::to_string(n); // keeps the TTL, like Redis
  }
  out.integer(n);
}

// PEXPIRE key ms [NX|XX|GT|LT]
void dataset::cmd_pexpire(const std::string* argv, size_t argc,
                          reply_sink& out) {
  bool nx = false, xx = false, gt = false, lt = false;
  for (size_t i = 3; i < argc; ++i) {
    if (equals_nocase(argv[i], "nx"))
      nx = true;
    else if (equals_nocase(argv[i], "xx"))
      xx = true;
    else if (equals_nocase(argv[i], "gt"))
      gt = true;
    else if (equals_nocase(argv[i], "lt"))
      lt = true;
    else {
      out.error("ERR Unsupported option " + argv[i]);
      return;
    }
  }
  if (nx && (xx || gt || lt)) {
    out.error("ERR NX and XX, GT or LT options at the same time are not "
              "compatible");
    return;
  }
  if (gt && lt) {
    out.error("ERR GT and LT options at the same time are not compatible");
    return;
  }
  int64_t ms = 0;
  if (!parse_ll(argv[2], ms)) {
    out.error(not_integer_error);
    return;
  }
  if (add_overflows(ms, now_)) {
    out.error("ERR invalid expire time in 'pexpire' command");
    return;
  }
  int64_t when = now_ + ms;
  auto* v = find(argv[1]);
  if (v == nullptr) {
    out.integer(0);
    return;
  }
  bool has = v->expire_at != no_expiry;
  if ((nx && has) || (xx && !has) || (gt && (!has || when <= v->expire_at))
      || (lt && has && when >= v->expire_at)) {
    out.integer(0);
    return;
  }
  if (when <= now_)
    erase(argv[1]);
  else
    v->expire_at = when;
  out.integer(1);
}

void dataset::cmd_pttl(const std::string* argv, size_t, reply_sink& out) {
  auto* v = find(argv[1]);
  if (v == nullptr)
    out.integer(-2);
  else if (v->expire_at == no_expiry)
    out.integer(-1);
  else
    out.integer(std::max<int64_t>(0, v->expire_at - now_));
}

void dataset::cmd_hget(const std::string* argv, size_t, reply_sink& out) {
  hash_type* h = nullptr;
  if (!find_as(argv[1], h, out))
    return;
  if (h != nullptr) {
    auto i = h->find(argv[2]);
    if (i != h->end()) {
      out.bulk(i->second);
      return;
    }
  }
  out.nil();
}

// HSET key field value [field value ...] -> number of new fields
void dataset::cmd_hset(const std::string* argv, size_t argc,
                       reply_sink& out) {
  if (argc % 2 != 0) {
    out.error("ERR wrong number of arguments for 'hset' command");
    return;
  }
  auto* h = find_or_create<hash_type>(argv[1], out);
  if (h == nullptr)
    return;
  int64_t added = 0;
  for (size_t i = 2; i < argc; i += 2) {
    auto i_field = h->find(argv[i]);
    if (i_field == h->end()) {
      h->emplace(argv[i], argv[i + 1]);
      ++added;
    } else {
      i_field->second.assign(argv[i + 1]);
    }
  }
  out.integer(added);
}

void dataset::cmd_hdel(const std::string* argv, size_t argc,
                       reply_sink& out) {
  hash_type* h = nullptr;
  if (!find_as(argv[1], h, out))
    return;
  int64_t n = 0;
  if (h != nullptr) {
    for (size_t i = 2; i < argc; ++i)
      n += static_cast<int64_t>(h->erase(argv[i]));
    if (h->empty())
      erase(argv[1]);
  }
  out.integer(n);
}

void dataset::cmd_hexists(const std::string* argv, size_t, reply_sink& out) {
  hash_type* h = nullptr;
  if (!find_as(argv[1], h, out))
    return;
  out.integer(h != nullptr && h->count(argv[2]) > 0 ? 1 : 0);
}

void dataset::cmd_hlen(const std::string* argv, size_t, reply_sink& out) {
  hash_type* h = nullptr;
  if (!find_as(argv[1], h, out))
    return;
  out.integer(h != nullptr ? static_cast<int64_t>(h->size()) : 0);
}

void dataset::cmd_hgetall(const std::string* argv, size_t, reply_sink& out) {
  hash_type* h = nullptr;
  if (!find_as(argv[1], h, out))
    return;
  if (h == nullptr) {
    out.begin_array(0);
    out.end_array();
    return;
  }
  out.begin_array(h->size() * 2);
  for (const auto& [field, val] : *h) {
    out.bulk(field);
    out.bulk(val);
  }
  out.end_array();
}

// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
void dataset::cmd_zadd(const std::string* argv, size_t argc,
                       reply_sink& out) {
  bool nx = false, xx = false, gt = false, lt = false, ch = false;
  bool incr = false;
  size_t i = 2;
  for (; i < argc; ++i) {
    const auto& opt = argv[i];
    if (equals_nocase(opt, "nx"))
      nx = true;
    else if (equals_nocase(opt, "xx"))
      xx = true;
    else if (equals_nocase(opt, "gt"))
      gt = true;
    else if (equals_nocase(opt, "lt"))
      lt = true;
    else if (equals_nocase(opt, "ch"))
      ch = true;
    else if (equals_nocase(opt, "incr"))
      incr = true;
    else
      break;
  }
  size_t pairs_begin = i;
  size_t rest = argc - pairs_begin;
  if (rest == 0 || rest % 2 != 0) {
    out.error(syntax_error);
    return;
  }
  if (nx && xx) {
    out.error("ERR XX and NX options at the same time are not compatible");
    return;
  }
  if ((gt && nx) || (lt && nx) || (gt && lt)) {
    out.error("ERR GT, LT, and/or NX options at the same time are not "
              "compatible");
    return;
  }
  if (incr && rest > 2) {
    out.error("ERR INCR option supports a single increment-element pair");
    return;
  }
  // Parse every score first: a bad one changes nothing.
  for (size_t j = pairs_begin; j < argc; j += 2) {
    double d;
    if (!parse_double(argv[j], d)) {
      out.error("ERR value is not a valid float");
      return;
    }
  }
  zset_type* z = nullptr;
  if (!find_as(argv[1], z, out))
    return;
  if (z == nullptr) {
    if (xx) {
      if (incr)
        out.nil();
      else
        out.integer(0);
      return;
    }
    z = find_or_create<zset_type>(argv[1], out);
  }
  int64_t added = 0, changed = 0;
  bool incr_done = false;
  double incr_result = 0;
  for (size_t j = pairs_begin; j < argc; j += 2) {
    double score = 0;
    parse_double(argv[j], score);
    const auto& member = argv[j + 1];
    auto found = z->scores.find(member);
    if (found != z->scores.end()) {
      if (nx)
        continue;
      double cur = found->second;
      double next = incr ? cur + score : score;
      if (std::isnan(next)) {
        out.error("ERR resulting score is not a number (NaN)");
        return;
      }
      if ((lt && next >= cur) || (gt && next <= cur))
        continue;
      incr_done = true;
      incr_result = next;
      if (next != cur) {
        auto node = z->ordered.extract(std::make_pair(cur, member));
        node.value().first = next;
        z->ordered.insert(std::move(node));
        found->second = next;
        ++changed;
      }
    } else {
      if (xx)
        continue;
      z->ordered.emplace(score, member);
      z->scores.emplace(member, score);
      ++added;
      incr_done = true;
      incr_result = score;
    }
  }
  if (incr) {
    if (incr_done)
      reply_double(incr_result, out);
    else
      out.nil();
  } else {
    out.integer(ch ? added + changed : added);
  }
}

void dataset::cmd_zrem(const std::string* argv, size_t argc,
                       reply_sink& out) {
  zset_type* z = nullptr;
  if (!find_as(argv[1], z, out))
    return;
  int64_t n = 0;
  if (z != nullptr) {
    for (size_t i = 2; i < argc; ++i) {
      auto found = z->scores.find(argv[i]);
      if (found == z->scores.end())
        continue;
      z->ordered.erase(std::make_pair(found->second, argv[i]));
      z->scores.erase(found);
      ++n;
    }
    if (z->scores.empty())
      erase(argv[1]);
  }
  out.integer(n);
}

void dataset::cmd_zscore(const std::string* argv, size_t, reply_sink& out) {
  zset_type* z = nullptr;
  if (!find_as(argv[1], z, out))
    return;
  if (z != nullptr) {
    auto found = z->scores.find(argv[2]);
    if (found != z->scores.end()) {
      reply_double(found->second, out);
      return;
    }
  }
  out.nil();
}

void dataset::cmd_zcard(const std::string* argv, size_t, reply_sink& out) {
  zset_type* z = nullptr;
  if (!find_as(argv[1], z, out))
    return;
  out.integer(z != nullptr ? static_cast<int64_t>(z->scores.size()) : 0);
}

// ZRANGE key start stop [REV] [WITHSCORES] — ranks, negative from the end.
void dataset::cmd_zrange(const std::string* argv, size_t argc,
                         reply_sink& out) {
  bool withscores = false, rev = false;
  for (size_t i = 4; i < argc; ++i) {
    if (equals_nocase(argv[i], "withscores"))
      withscores = true;
    else if (equals_nocase(argv[i], "rev"))
      rev = true;
    else {
      out.error(syntax_error);
      return;
    }
  }
  int64_t start = 0, stop = 0;
  if (!parse_ll(argv[2], start) || !parse_ll(argv[3], stop)) {
    out.error(not_integer_error);
    return;
  }
  zset_type* z = nullptr;
  if (!find_as(argv[1], z, out))
    return;
  int64_t len = z != nullptr ? static_cast<int64_t>(z->ordered.size()) : 0;
  if (start < 0)
    start += len;
  if (stop < 0)
    stop += len;
  if (start < 0)
    start = 0;
  if (z == nullptr || start > stop || start >= len) {
    out.begin_array(0);
    out.end_array();
    return;
  }
  if (stop >= len)
    stop = len - 1;
  auto count = static_cast<size_t>(stop - start + 1);
  out.begin_array(withscores ? count * 2 : count);
  auto emit = [&](const std::pair<double, std::string>& item) {
    out.bulk(item.second);
    if (withscores)
      reply_double(item.first, out);
  };
  if (!rev) {
    // Walk from the nearer end of the set to the first rank.
    auto it = start <= len / 2 ? std::next(z->ordered.begin(), start)
                               : std::prev(z->ordered.end(), len - start);
    for (size_t k = 0; k < count; ++k, ++it)
      emit(*it);
  } else {
    auto it = start <= len / 2 ? std::next(z->ordered.rbegin(), start)
                               : std::prev(z->ordered.rend(), len - start);
    for (size_t k = 0; k < count; ++k, ++it)
      emit(*it);
  }
  out.end_array();
}

// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
void dataset::cmd_zrangebyscore(const std::string* argv, size_t argc,
                                reply_sink& out) {
  bool withscores = false;
  int64_t offset = 0, limit = -1;
  for (size_t i = 4; i < argc; ++i) {
    if (equals_nocase(argv[i], "withscores")) {
      withscores = true;
    } else if (equals_nocase(argv[i], "limit") && i + 2 < argc) {
      if (!parse_ll(argv[i + 1], offset) || !parse_ll(argv[i + 2], limit)) {
        out.error(not_integer_error);
        return;
      }
      i += 2;
    } else {
      out.error(syntax_error);
      return;
    }
  }
  auto parse_bound = [](const std::string& s, double& x, bool& exclusive) {
    exclusive = !s.empty() && s[0] == '(';
    if (!exclusive)
      return parse_double(s, x);
    return parse_double(s.substr(1), x);
  };
  double min = 0, max = 0;
  bool minex = false, maxex = false;
  if (!parse_bound(argv[2], min, minex) || !parse_bound(argv[3], max, maxex)) {
    out.error("ERR min or max is not a float");
    return;
  }
  zset_type* z = nullptr;
  if (!find_as(argv[1], z, out))
    return;
  out.begin_array(0);
  bool empty_range = min > max || (min == max && (minex || maxex));
  if (z != nullptr && !empty_range && offset >= 0 && limit != 0) {
    auto it = minex ? z->ordered.upper_bound(min)
                    : z->ordered.lower_bound(min);
    auto end = z->ordered.end();
    for (; it != end && offset > 0; ++it, --offset)
      if (maxex ? it->first >= max : it->first > max)
        break;
    for (; it != end && limit != 0; ++it) {
      if (maxex ? it->first >= max : it->first > max)
        break;
      out.bulk(it->second);
      if (withscores)
        reply_double(it->first, out);
      if (limit > 0)
        --limit;
    }
  }
  out.end_array();
}

/// Parses "<ms>-<seq>" or "<ms>" (seq = `missing_seq`).
bool parse_stream_id(const std::string& s, uint64_t missing_seq,
                     stream_id& out) {
  auto parse_u64 = [](const char* first, const char* last, uint64_t& x) {
    if (first == last || last - first > 20)
      return false;
    x = 0;
    for (auto p = first; p != last; ++p) {
      if (*p < '0' || *p > '9')
        return false;
      uint64_t d = static_cast<uint64_t>(*p - '0');
      if (x > (std::numeric_limits<uint64_t>::max() - d) / 10)
        return false;
      x = x * 10 + d;
    }
    return true;
  };
  const char* first = s.data();
  const char* last = first + s.size();
  const char* dash = std::find(first, last, '-');
  if (!parse_u64(first, dash, out.ms))
    return false;
  if (dash == last) {
    out.seq = missing_seq;
    return true;
  }
  return parse_u64(dash + 1, last, out.seq);
}

const char* const invalid_stream_id
  = "ERR Invalid stream ID specified as stream command argument";

// XADD key <* | ms-seq | ms-* | ms> field value [field value ...]
void dataset::cmd_xadd(const std::string* argv, size_t argc,
                       reply_sink& out) {
  if ((argc - 3) % 2 != 0) {
    out.error("ERR wrong number of arguments for 'xadd' command");
    return;
  }
  const auto& id_arg = argv[2];
  bool auto_id = id_arg == "*";
  bool auto_seq = false;
  stream_id id;
  if (!auto_id) {
    std::string ms_part = id_arg;
    if (id_arg.size() > 2 && id_arg.compare(id_arg.size() - 2, 2, "-*") == 0) {
      auto_seq = true;
      ms_part = id_arg.substr(0, id_arg.size() - 2);
    }
    if (!parse_stream_id(ms_part, 0, id)
        || (auto_seq && ms_part.find('-') != std::string::npos)) {
      out.error(invalid_stream_id);
      return;
    }
    if (!auto_seq && id.ms == 0 && id.seq == 0) {
      out.error("ERR The ID specified in XADD must be greater than 0-0");
      return;
    }
  }
  stream_type* st = nullptr;
  if (!find_as(argv[1], st, out))
    return;
  stream_id last = st != nullptr ? st->last : stream_id{};
  if (auto_id) {
    auto now = static_cast<uint64_t>(std::max<int64_t>(0, now_));
    if (now > last.ms) {
      id = stream_id{now, 0};
    } else {
      id = last;
      id.seq += 1; // seq overflow at 2^64 entries per ms: not reachable
    }
  } else if (auto_seq) {
    if (id.ms < last.ms) {
      out.error("ERR The ID specified in XADD is equal or smaller than the "
                "target stream top item");
      return;
    }
    id.seq = id.ms == last.ms ? last.seq + 1 : 0;
  }
  if (!(last < id)) {
    out.error("ERR The ID specified in XADD is equal or smaller than the "
              "target stream top item");
    return;
  }
  if (st == nullptr)
    st = find_or_create<stream_type>(argv[1], out);
  stream_entry entry;
  entry.id = id;
  entry.fields.assign(argv + 3, argv + argc);
  st->entries.push_back(std::move(entry));
  st->last = id;
  out.bulk(id.to_string());
}

void dataset::cmd_xlen(const std::string* argv, size_t, reply_sink& out) {
  stream_type* st = nullptr;
  if (!find_as(argv[1], st, out))
    return;
  out.integer(st != nullptr ? static_cast<int64_t>(st->entries.size()) : 0);
}

// XRANGE key start end [COUNT n]; start/end: - + ms ms-seq (exclusive
// with a leading '(').
void dataset::cmd_xrange(const std::string* argv, size_t argc,
                         reply_sink& out) {
  int64_t count = -1;
  for (size_t i = 4; i < argc; ++i) {
    if (equals_nocase(argv[i], "count") && i + 1 < argc) {
      if (!parse_ll(argv[++i], count)) {
        out.error(not_integer_error);
        return;
      }
      if (count < 0)
        count = 0;
    } else {
      out.error(syntax_error);
      return;
    }
  }
  constexpr auto max_u64 = std::numeric_limits<uint64_t>::max();
  stream_id lo, hi{max_u64, max_u64};
  bool empty = false;
  const auto& a = argv[2];
  const auto& b = argv[3];
  if (a != "-") {
    bool ex = !a.empty() && a[0] == '(';
    if (!parse_stream_id(ex ? a.substr(1) : a, 0, lo)) {
      out.error(invalid_stream_id);
      return;
    }
    if (ex) {
      if (lo.seq < max_u64)
        ++lo.seq;
      else if (lo.ms < max_u64)
        lo = stream_id{lo.ms + 1, 0};
      else
        empty = true;
    }
  }
  if (b != "+") {
    bool ex = !b.empty() && b[0] == '(';
    if (!parse_stream_id(ex ? b.substr(1) : b, max_u64, hi)) {
      out.error(invalid_stream_id);
      return;
    }
    if (ex) {
      if (hi.seq > 0)
        --hi.seq;
      else if (hi.ms > 0)
        hi = stream_id{hi.ms - 1, max_u64};
      else
        empty = true;
    }
  }
  stream_type* st = nullptr;
  if (!find_as(argv[1], st, out))
    return;
  out.begin_array(0);
  if (st != nullptr && !empty && count != 0 && !(hi < lo)) {
    auto it = std::lower_bound(
      st->entries.begin(), st->entries.end(), lo,
      [](const stream_entry& e, const stream_id& x) { return e.id < x; });
    for (; it != st->entries.end() && !(hi < it->id) && count != 0; ++it) {
      out.begin_array(2);
      out.bulk(it->id.to_string());
      out.begin_array(it->fields.size());
      for (const auto& f : it->fields)
        out.bulk(f);
      out.end_array();
      out.end_array();
      if (count > 0)
        --count;
    }
  }
  out.end_array();
}

// -- Lua -------------------------------------------------------------------------------

/// Lua's allocator. A script call creates and drops many small objects
/// (closures, tables, strings: common.lua alone makes dozens per call); they
/// come from per-size free lists here instead of malloc/free. Small blocks
/// are kept for reuse while the state lives. Not thread-safe, like the state.
class lua_pool {
public:
  lua_pool() = default;
  lua_pool(const lua_pool&) = delete;
  lua_pool& operator=(const lua_pool&) = delete;

  ~lua_pool() {
    while (chunks_ != nullptr) {
      auto* next = chunks_->next;
      std::free(chunks_);
      chunks_ = next;
    }
  }

  /// A lua_Alloc; `ud` is the pool.
  static void* alloc(void* ud, void* ptr, size_t osize, size_t nsize) noexcept {
    return static_cast<lua_pool*>(ud)->resize(ptr, osize, nsize);
  }

private:
  static constexpr size_t granule = 16; // keeps every block 16-byte aligned
  static constexpr size_t classes = 16;
  static constexpr size_t max_small = granule * classes;
  static constexpr size_t chunk_size = 64 * 1024;

  struct block {
    block* next;
  };

  struct alignas(16) chunk {
    chunk* next;
  };

  static size_t class_of(size_t n) noexcept {
    return (n + granule - 1) / granule - 1; // n >= 1
  }

  void* get(size_t n) noexcept {
    if (n > max_small)
      return std::malloc(n);
    auto c = class_of(n);
    if (auto* b = free_[c]) {
      free_[c] = b->next;
      return b;
    }
    size_t size = (c + 1) * granule;
    if (left_ < size) {
      auto* fresh = static_cast<chunk*>(std::malloc(chunk_size));
      if (fresh == nullptr)
        return nullptr;
      fresh->next = chunks_;
      chunks_ = fresh;
      cur_ = reinterpret_cast<char*>(fresh) + sizeof(chunk);
      left_ = chunk_size - sizeof(chunk);
    }
    void* result = cur_;
    cur_ += size;
    left_ -= size;
    return result;
  }

  void put(void* ptr, size_t n) noexcept {
    if (n > max_small) {
      std::free(ptr);
      return;
    }
    auto* b = static_cast<block*>(ptr);
    auto c = class_of(n);
    b->next = free_[c];
    free_[c] = b;
  }

  void* resize(void* ptr, size_t osize, size_t nsize) noexcept {
    if (nsize == 0) {
      if (ptr != nullptr)
        put(ptr, osize);
      return nullptr;
    }
    if (ptr == nullptr)
      return get(nsize);
    bool small_old = osize <= max_small;
    bool small_new = nsize <= max_small;
    if (!small_old && !small_new)
      return std::realloc(ptr, nsize);
    if (small_old && small_new && class_of(osize) == class_of(nsize))
      return ptr;
    void* fresh = get(nsize);
    if (fresh == nullptr) {
      // Lua requires shrinking to succeed: keep the (larger) block. Freeing
      // it later as a small block just recycles it in its small size class.
      return nsize <= osize ? ptr : nullptr;
    }
    std::memcpy(fresh, ptr, std::min(osize, nsize));
    put(ptr, osize);
    return fresh;
  }

  block* free_[classes] = {};
  chunk* chunks_ = nullptr;
  char* cur_ = nullptr;
  size_t left_ = 0;
};

int lua_panic(lua_State* L) {
  const char* msg = lua_tostring(L, -1);
  std::fprintf(stderr, "PANIC: unprotected error in call to Lua API (%s)\n",
               msg ? msg : "?");
  return 0; // Lua aborts the process
}

/// One Lua state with the scripts of lua/ loaded once, and the `redis` table
/// bound to a data set. Not thread-safe: the owner serializes.
class lua_runtime {
public:
  explicit lua_runtime(dataset& data);
  ~lua_runtime();

  lua_runtime(const lua_runtime&) = delete;
  lua_runtime& operator=(const lua_runtime&) = delete;

  /// Runs one script of lua/; a Lua error becomes an error value, never a
  /// throw (except std::bad_alloc from building the reply).
  store_value run(const script_call& call);

  /// Compiles and runs `source` like `run`.
  store_value eval(const std::string& source,
                   const std::vector<std::string>& keys,
                   const std::vector<std::string>& args);

private:
  static int redis_call(lua_State* L);
  static int redis_pcall(lua_State* L);
  static int redis_error_reply(lua_State* L);
  static int redis_status_reply(lua_State* L);
  static int redis_log(lua_State* L);

  /// Runs redis.call/pcall with the arguments on the stack. Leaves exactly
  /// one value on top; returns true when it is an error table. Never throws
  /// and never raises a Lua error itself (so no C++ frame is jumped over).
  bool dispatch(lua_State* L) noexcept;

  /// Calls the function on top of the stack with KEYS and ARGV set.
  store_value invoke(const std::vector<std::string>& keys,
                     const std::vector<std::string>& args);
  void push_args(const std::vector<std::string>& xs);
  void to_value(int depth, store_value& out);

  lua_pool pool_; // outlives L_
  lua_State* L_ = nullptr;
  dataset& data_;
  /// Gives the function on top of the stack the scripts' environment.
  void set_env() {
    lua_rawgeti(L_, LUA_REGISTRYINDEX, env_ref_);
    lua_setfenv(L_, -2);
  }

  int env_ref_ = LUA_NOREF;
  std::array<int, script_count> refs_{};
  std::array<std::string, script_count> load_errors_;
  std::vector<std::string> args_; // arguments of redis.call, reused
  std::vector<int> open_;         // lua_sink's open tables, reused
};

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

lua_runtime::lua_runtime(dataset& data) : data_(data) {
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
  const std::pair<const char*, int> levels[] = {
    {"LOG_DEBUG", 0}, {"LOG_VERBOSE", 1}, {"LOG_NOTICE", 2}, {"LOG_WARNING", 3}};
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
  // Compile every script once; keep the functions in the registry.
  for (size_t i = 0; i < script_count; ++i) {
    const char* text = script_sources[i].text;
    if (luaL_loadbuffer(L_, text, std::strlen(text), "@user_script") != 0) {
      const char* msg = lua_tostring(L_, -1);
      load_errors_[i] = std::string("ERR Error compiling script ")
                        + script_sources[i].name + ": " + (msg ? msg : "?");
      lua_pop(L_, 1);
      refs_[i] = LUA_NOREF;
    } else {
      set_env();
      refs_[i] = luaL_ref(L_, LUA_REGISTRYINDEX);
    }
  }
  lua_settop(L_, 0);
}

lua_runtime::~lua_runtime() {
  lua_close(L_);
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
    result.str = "NOSCRIPT No matching script";
    return result;
  }
  if (refs_[index] == LUA_NOREF) {
    result.type = store_value::kind::error;
    result.str = load_errors_[index];
    return result;
  }
  lua_settop(L_, 0);
  lua_rawgeti(L_, LUA_REGISTRYINDEX, refs_[index]);
  return invoke(call.keys, call.args);
}

store_value lua_runtime::eval(const std::string& source,
                              const std::vector<std::string>& keys,
                              const std::vector<std::string>& args) {
  lua_settop(L_, 0);
  if (luaL_loadbuffer(L_, source.data(), source.size(), "@user_script")
      != 0) {
    store_value result;
    result.type = store_value::kind::error;
    const char* msg = lua_tostring(L_, -1);
    result.str = std::string("ERR Error compiling script: ") + (msg ? msg : "?");
    lua_settop(L_, 0);
    return result;
  }
  set_env();
  return invoke(keys, args);
}

store_value lua_runtime::invoke(const std::vector<std::string>& keys,
                                const std::vector<std::string>& args) {
  store_value result;
  // Raw sets: the sandbox's metamethods must never run here (an error would
  // be unprotected).
  lua_pushliteral(L_, "KEYS");
  push_args(keys);
  lua_rawset(L_, LUA_GLOBALSINDEX);
  lua_pushliteral(L_, "ARGV");
  push_args(args);
  lua_rawset(L_, LUA_GLOBALSINDEX);
  if (lua_pcall(L_, 0, 1, 0) != 0) {
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
  auto* self = static_cast<lua_runtime*>(lua_touserdata(L, lua_upvalueindex(1)));
  if (self->dispatch(L))
    return lua_error(L); // raises the {err=...} table, aborting the script
  return 1;
}

int lua_runtime::redis_pcall(lua_State* L) {
  auto* self = static_cast<lua_runtime*>(lua_touserdata(L, lua_upvalueindex(1)));
  self->dispatch(L);
  return 1;
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


} // namespace

// -- engine ---------------------------------------------------------------------

struct engine::impl {
  explicit impl(store_clock clock) : data(std::move(clock)), lua(data) {
  }
  dataset data;
  lua_runtime lua;
};

engine::engine(store_clock clock)
  : impl_(std::make_unique<impl>(std::move(clock))) {
}

engine::~engine() = default;

store_value engine::execute(const store_command& command) {
  if (command.empty()) {
    store_value result;
    result.type = store_value::kind::error;
    result.str = "ERR empty command";
    return result;
  }
  impl_->data.tick();
  value_sink sink;
  impl_->data.exec(command.data(), command.size(), sink);
  return sink.take();
}

store_value engine::run(const script_call& call) {
  impl_->data.tick();
  return impl_->lua.run(call);
}

store_value engine::eval(const std::string& source,
                         const std::vector<std::string>& keys,
                         const std::vector<std::string>& args) {
  impl_->data.tick();
  return impl_->lua.eval(source, keys, args);
}

} // namespace mm::embedded
