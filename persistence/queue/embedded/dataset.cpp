// The command table (name -> handler and arity, like Redis's command table),
// dispatch, and the generic commands: TIME DEL EXISTS PEXPIRE PTTL.

#include "persistence/queue/embedded/dataset.hpp"

#include <algorithm>
#include <limits>

namespace mm::embedded {

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
    {"hmget", {-3, &dataset::cmd_hmget}},
    {"hset", {-4, &dataset::cmd_hset}},
    {"hdel", {-3, &dataset::cmd_hdel}},
    {"hexists", {3, &dataset::cmd_hexists}},
    {"hlen", {2, &dataset::cmd_hlen}},
    {"hgetall", {2, &dataset::cmd_hgetall}},
    {"zadd", {-4, &dataset::cmd_zadd}},
    {"zrem", {-3, &dataset::cmd_zrem}},
    {"zpopmin", {-2, &dataset::cmd_zpopmin}},
    {"zscore", {3, &dataset::cmd_zscore}},
    {"zcard", {2, &dataset::cmd_zcard}},
    {"zrange", {-4, &dataset::cmd_zrange}},
    {"zrangebyscore", {-4, &dataset::cmd_zrangebyscore}},
    {"zrangebylex", {-4, &dataset::cmd_zrangebylex}},
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

} // namespace mm::embedded
