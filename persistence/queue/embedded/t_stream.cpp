// Stream commands of the embedded data set: XADD (with its trimming
// options) XLEN XRANGE, and parsing of stream ids.

#include "persistence/queue/embedded/dataset.hpp"

#include <algorithm>
#include <limits>

namespace mm::embedded {

namespace {

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

/// The trimming options of XADD (Redis 7.0: MAXLEN and MINID, `=` or `~`,
/// LIMIT with `~` only).
struct trim_args {
  enum class by : uint8_t { none, maxlen, minid } strategy = by::none;
  bool approx = false;
  int64_t maxlen = 0;
  stream_id minid;
  int64_t limit = 0; ///< with `~`: most entries one call drops; 0: any
};

/// Drops entries from the front of `st` as `t` says. Approximate trimming
/// trims exactly here (Redis may keep up to a radix-tree node more); its
/// LIMIT caps the entries dropped by one call, as in Redis.
void trim(stream_type& st, const trim_args& t) {
  int64_t budget = t.approx && t.limit > 0 ? t.limit : -1; // -1: no cap
  auto& es = st.entries;
  while (!es.empty() && budget != 0) {
    bool drop = t.strategy == trim_args::by::maxlen
                  ? static_cast<int64_t>(es.size()) > t.maxlen
                  : es.front().id < t.minid;
    if (!drop)
      break;
    es.pop_front();
    if (budget > 0)
      --budget;
  }
}

} // namespace

// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]]
//      <* | ms-seq | ms-* | ms> field value [field value ...]
void dataset::cmd_xadd(const std::string* argv, size_t argc, reply_sink& out) {
  bool no_mkstream = false;
  bool limit_given = false;
  trim_args trim_by;
  size_t i = 2;
  for (; i < argc; ++i) {
    bool more = i + 1 < argc;
    const auto& opt = argv[i];
    if (opt == "*")
      break;
    if ((equals_nocase(opt, "maxlen") || equals_nocase(opt, "minid")) && more) {
      bool by_len = equals_nocase(opt, "maxlen");
      auto strategy = by_len ? trim_args::by::maxlen : trim_args::by::minid;
      if (trim_by.strategy != trim_args::by::none) {
        out.error("ERR syntax error, MAXLEN and MINID options at the same "
                  "time are not compatible");
        return;
      }
      trim_by.strategy = strategy;
      const auto* next = &argv[i + 1];
      if ((*next == "~" || *next == "=") && i + 2 < argc) {
        trim_by.approx = *next == "~";
        ++i;
        next = &argv[i + 1];
      }
      ++i;
      if (by_len) {
        if (!parse_ll(*next, trim_by.maxlen)) {
          out.error(not_integer_error);
          return;
        }
        if (trim_by.maxlen < 0) {
          out.error("ERR The MAXLEN argument must be >= 0.");
          return;
        }
      } else if (!parse_stream_id(*next, 0, trim_by.minid)) {
        out.error(invalid_stream_id);
        return;
      }
    } else if (equals_nocase(opt, "limit") && more) {
      if (!parse_ll(argv[++i], trim_by.limit)) {
        out.error(not_integer_error);
        return;
      }
      if (trim_by.limit < 0) {
        out.error("ERR The LIMIT argument must be >= 0.");
        return;
      }
      limit_given = true;
    } else if (equals_nocase(opt, "nomkstream")) {
      no_mkstream = true;
    } else {
      break; // the id (or a bad one, refused below)
    }
  }
  if (trim_by.limit > 0 && trim_by.strategy == trim_args::by::none) {
    out.error("ERR syntax error, LIMIT cannot be used without specifying a "
              "trimming strategy");
    return;
  }
  if (limit_given && !trim_by.approx) {
    out.error("ERR syntax error, LIMIT cannot be used without the special ~ "
              "option");
    return;
  }
  if (i >= argc || argc - (i + 1) < 2 || (argc - (i + 1)) % 2 != 0) {
    out.error("ERR wrong number of arguments for 'xadd' command");
    return;
  }
  const auto& id_arg = argv[i];
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
  if (st == nullptr && no_mkstream) {
    out.nil();
    return;
  }
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
  entry.fields.assign(argv + i + 1, argv + argc);
  st->entries.push_back(std::move(entry));
  st->last = id;
  if (trim_by.strategy != trim_args::by::none)
    trim(*st, trim_by);
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
    auto it = std::lower_bound(st->entries.begin(), st->entries.end(), lo,
                               [](const stream_entry& e, const stream_id& x) {
                                 return e.id < x;
                               });
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

} // namespace mm::embedded
