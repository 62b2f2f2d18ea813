#pragma once

// Parsing and formatting the way Redis does it (numbers, scores, option
// names), and the error texts that several commands share.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

namespace mm::embedded {

inline constexpr const char* wrongtype_error
  = "WRONGTYPE Operation against a key holding the wrong kind of value";
inline constexpr const char* not_integer_error
  = "ERR value is not an integer or out of range";
inline constexpr const char* syntax_error = "ERR syntax error";

/// Redis's string2ll: optional '-', no '+', no leading zeros, no spaces.
bool parse_ll(const std::string& s, int64_t& out);

/// Redis's string-to-double for scores: strtod over the whole string, no
/// leading space, no NaN.
bool parse_double(const std::string& s, double& out);

/// Formats `d` like printf's "%.17g" (what Redis 7.0 uses for scores and
/// for Lua numbers passed to redis.call). Returns the length written.
size_t format_g17(double d, char (&buf)[64]);

/// A score as Redis 7.0 replies it (RESP2): "%.17g", "inf", "-inf".
void format_double(double d, std::string& out);

/// `c` in lower case when it is an ASCII capital, else `c` (no locale).
inline char ascii_lower(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

/// True when `x` equals the lower-case literal `lit`, ignoring ASCII case.
inline bool equals_nocase(const std::string& x, const char* lit) {
  size_t n = std::strlen(lit);
  if (x.size() != n)
    return false;
  for (size_t i = 0; i < n; ++i)
    if (ascii_lower(x[i]) != lit[i])
      return false;
  return true;
}

/// True when `a + b` does not fit an int64_t.
inline bool add_overflows(int64_t a, int64_t b) {
  return (b > 0 && a > std::numeric_limits<int64_t>::max() - b)
         || (b < 0 && a < std::numeric_limits<int64_t>::min() - b);
}

} // namespace mm::embedded
