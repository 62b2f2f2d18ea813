#pragma once

// What the codecs of the queue scripts share (queue_codec.cpp,
// group_codec.cpp): argument checks and the reading of a script's reply.
// Internal to persistence/queue/.

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/outcome.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm::codec::detail {

inline bool id_char(char c, bool allow_at) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
         || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':'
         || c == '-' || (allow_at && c == '@');
}

inline std::string check_id(const char* what, const std::string& x, size_t max,
                            bool allow_at = true) {
  if (x.empty())
    return std::string{what} + " is empty";
  if (x.size() > max)
    return std::string{what} + " is longer than " + std::to_string(max)
           + " bytes";
  for (char c : x)
    if (!id_char(c, allow_at))
      return std::string{what} + " has a character outside [A-Za-z0-9._:"
             + (allow_at ? "@" : "") + "-]";
  return {};
}

inline std::string check_range(const char* what, uint64_t x, uint64_t lo,
                               uint64_t hi) {
  if (x < lo || x > hi)
    return std::string{what} + " must be in " + std::to_string(lo) + ".."
           + std::to_string(hi);
  return {};
}

inline failure invalid(std::string what) {
  return failure{errc::invalid_argument, std::move(what)};
}

// -- reply reading ------------------------------------------------------------

/// A script's reply value as an array of strings, or the failure it is.
inline outcome<std::vector<std::string>> fields(const store_value& v) {
  if (v.type == store_value::kind::error)
    return failure{errc::protocol_error, "script error: " + v.str};
  if (v.type != store_value::kind::array || v.elements.empty())
    return failure{errc::protocol_error, "script reply is not an array"};
  std::vector<std::string> out;
  out.reserve(v.elements.size());
  for (auto& e : v.elements) {
    if (e.type == store_value::kind::integer)
      out.emplace_back(std::to_string(e.integer));
    else
      out.emplace_back(e.str);
  }
  return out;
}

/// The reply as an array of strings, or the failure it carries.
inline outcome<std::vector<std::string>> fields(const store_reply& reply) {
  if (reply.code != errc::none)
    return failure{reply.code, reply.detail};
  return fields(reply.value);
}

/// Maps the refusals every script may answer to named errors.
inline failure refusal(const std::vector<std::string>& f) {
  auto arg = [&](size_t i) { return i < f.size() ? f[i] : std::string{}; };
  if (f[0] == "invalid")
    return failure{errc::invalid_argument, arg(1)};
  if (f[0] == "duplicate")
    return failure{errc::duplicate_ticket,
                   "the user already has ticket " + arg(1)};
  if (f[0] == "stale_token")
    return failure{errc::stale_token,
                   "the token is not the current one of ticket " + arg(1)};
  if (f[0] == "not_found")
    return failure{errc::not_found, "the user has no ticket in this queue"};
  if (f[0] == "error") // a rescan's ticket whose claim raised
    return failure{errc::protocol_error, "script error: " + arg(1)};
  return failure{errc::protocol_error,
                 "unexpected script reply '" + f[0] + "'"};
}

inline int64_t to_int(const std::string& x) {
  return std::strtoll(x.c_str(), nullptr, 10);
}

inline bool has(const std::vector<std::string>& f, size_t n) {
  return f.size() >= n;
}

inline failure short_reply(const std::vector<std::string>& f) {
  return failure{errc::protocol_error, "short '" + f[0] + "' reply"};
}

} // namespace mm::codec::detail
