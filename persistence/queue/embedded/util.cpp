// Number parsing and formatting with Redis's rules (string2ll, scores as
// doubles, "%.17g" replies).

#include "persistence/queue/embedded/util.hpp"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace mm::embedded {

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

void format_double(double d, std::string& out) {
  if (std::isinf(d)) {
    out = d > 0 ? "inf" : "-inf";
    return;
  }
  char buf[64];
  out.assign(buf, format_g17(d, buf));
}

} // namespace mm::embedded
