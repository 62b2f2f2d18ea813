// String commands of the embedded data set: GET SET INCR (values are
// std::string).

#include "persistence/queue/embedded/dataset.hpp"

#include <limits>

namespace mm::embedded {

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

} // namespace mm::embedded
