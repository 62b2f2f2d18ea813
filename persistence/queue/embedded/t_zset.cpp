// Sorted-set commands of the embedded data set: ZADD ZREM ZPOPMIN ZSCORE
// ZCARD ZRANGE ZRANGEBYSCORE ZRANGEBYLEX.

#include "persistence/queue/embedded/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace mm::embedded {

// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
void dataset::cmd_zadd(const std::string* argv, size_t argc, reply_sink& out) {
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

void dataset::cmd_zrem(const std::string* argv, size_t argc, reply_sink& out) {
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

// ZPOPMIN key [count] -> member, score, ... of the lowest members, removed
void dataset::cmd_zpopmin(const std::string* argv, size_t argc,
                          reply_sink& out) {
  int64_t count = 1;
  if (argc > 3) {
    out.error(syntax_error);
    return;
  }
  if (argc == 3 && (!parse_ll(argv[2], count) || count < 0)) {
    out.error("ERR value is out of range, must be positive");
    return;
  }
  zset_type* z = nullptr;
  if (!find_as(argv[1], z, out))
    return;
  size_t n = z != nullptr
               ? std::min<size_t>(z->ordered.size(), static_cast<size_t>(count))
               : 0;
  out.begin_array(n * 2);
  for (size_t k = 0; k < n; ++k) {
    auto first = z->ordered.begin();
    out.bulk(first->second);
    reply_double(first->first, out);
    z->scores.erase(first->second);
    z->ordered.erase(first);
  }
  out.end_array();
  if (z != nullptr && z->scores.empty())
    erase(argv[1]);
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
    auto it = minex ? z->ordered.upper_bound(min) : z->ordered.lower_bound(min);
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

// ZRANGEBYLEX key min max [LIMIT offset count] — members by byte order;
// like Redis, meaningful only when all members share one score. Bounds are
// '[' inclusive or '(' exclusive followed by the member, or '-' / '+'.
void dataset::cmd_zrangebylex(const std::string* argv, size_t argc,
                              reply_sink& out) {
  int64_t offset = 0, limit = -1;
  for (size_t i = 4; i < argc; ++i) {
    if (equals_nocase(argv[i], "limit") && i + 2 < argc) {
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
  struct bound {
    enum { neg_inf, pos_inf, value } kind = value;
    bool exclusive = false;
    std::string text;
  };
  auto parse = [](const std::string& s, bound& b) {
    if (s == "-") {
      b.kind = bound::neg_inf;
      return true;
    }
    if (s == "+") {
      b.kind = bound::pos_inf;
      return true;
    }
    if (s.empty() || (s[0] != '[' && s[0] != '('))
      return false;
    b.exclusive = s[0] == '(';
    b.text = s.substr(1);
    return true;
  };
  bound lo, hi;
  if (!parse(argv[2], lo) || !parse(argv[3], hi)) {
    out.error("ERR min or max not valid string range item");
    return;
  }
  zset_type* z = nullptr;
  if (!find_as(argv[1], z, out))
    return;
  out.begin_array(0);
  if (z == nullptr || z->ordered.empty() || offset < 0 || limit == 0
      || lo.kind == bound::pos_inf || hi.kind == bound::neg_inf) {
    out.end_array();
    return;
  }
  // Members sharing the first member's score, in byte order.
  double score = z->ordered.begin()->first;
  auto it = z->ordered.begin();
  if (lo.kind == bound::value) {
    it = z->ordered.lower_bound(std::make_pair(score, lo.text));
    if (lo.exclusive && it != z->ordered.end() && it->first == score
        && it->second == lo.text)
      ++it;
  }
  auto past_hi = [&](const std::string& m) {
    if (hi.kind == bound::pos_inf)
      return false;
    return hi.exclusive ? m >= hi.text : m > hi.text;
  };
  for (; it != z->ordered.end() && offset > 0; ++it, --offset)
    if (it->first != score || past_hi(it->second))
      break;
  for (; it != z->ordered.end() && limit != 0; ++it) {
    if (it->first != score || past_hi(it->second))
      break;
    out.bulk(it->second);
    if (limit > 0)
      --limit;
  }
  out.end_array();
}

} // namespace mm::embedded
