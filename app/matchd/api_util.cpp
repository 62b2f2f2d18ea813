#include "app/matchd/api_util.hpp"

#include <chrono>

#include <spdlog/spdlog.h>

#include "core/log_limit.hpp"
#include "core/logger.hpp"

namespace mm::api_detail {

/// The JSON text of `j`. What a client sent (a path, a method) may be
/// echoed in a detail: bytes that are not UTF-8 become U+FFFD instead of
/// an exception.
std::string text(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

api_reply ok(json body) {
  return api_reply{200, text(body)};
}

api_reply refusal(const failure& f) {
  auto r = api_router::error(api_router::status_of(f.code), to_string(f.code),
                             f.detail);
  if (f.code == errc::in_session) {
    // The refusal names the session the user must end (or wait out) first.
    json j{{"error", to_string(f.code)},
           {"detail", "the user is in an active match session"},
           {"session_id", f.detail}};
    r.body = text(j);
  }
  if (f.code == errc::store_unavailable)
    r.headers.emplace_back("Retry-After", "1");
  return r;
}

/// Reads a string field; false (and `err` set) when absent-but-required or
/// not a string.
bool string_field(const json& body, const char* key, bool required,
                  std::string& out, api_reply& err) {
  auto i = body.find(key);
  if (i == body.end()) {
    if (!required)
      return true;
    err = api_router::error(400, "invalid_argument",
                            std::string{key} + ": required");
    return false;
  }
  if (!i->is_string()) {
    err = api_router::error(400, "invalid_argument",
                            std::string{key} + ": must be a string");
    return false;
  }
  out = i->get<std::string>();
  return true;
}

/// Answers 500 `internal` for an exception caught at a handler boundary and
/// logs it (rate-limited).
void internal_error(const reply_fn& reply, const char* what) {
  static log_limit limit{5, std::chrono::seconds(10)};
  static auto lg = logger("http");
  uint64_t suppressed = 0;
  if (limit.admit(suppressed)) {
    if (suppressed > 0)
      lg->error("{} similar handler errors suppressed", suppressed);
    lg->error("request: exception caught at the handler boundary: {}", what);
  }
  reply(api_router::error(500, "internal", "the request could not be handled"));
}

api_reply bad_id(const char* what) {
  return api_router::error(400, "invalid_argument",
                           std::string{what}
                             + ": must be 1-128 bytes of [A-Za-z0-9_.:@-]");
}

} // namespace mm::api_detail
