// Stream commands of the embedded data set: XADD XLEN XRANGE, and parsing of
// stream ids.

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

} // namespace

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

} // namespace mm::embedded
