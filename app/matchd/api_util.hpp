#pragma once

// Pieces every route handler of the client API shares (app/matchd/api.cpp,
// app/matchd/party_api.cpp): JSON replies, refusals by error name, body
// fields, and the exception boundary of engine callbacks. Internal to
// matchd's API.

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "app/matchd/api.hpp"

namespace mm::api_detail {

using json = nlohmann::json;

/// The JSON text of `j`. What a client sent (a path, a method) may be
/// echoed in a detail: bytes that are not UTF-8 become U+FFFD instead of
/// an exception.
std::string text(const json& j);

/// 200 with `body`.
api_reply ok(json body);

/// The answer to an engine refusal: its status (api_router::status_of),
/// its name and detail; `in_session` names the session, a store outage
/// asks to retry after a second.
api_reply refusal(const failure& f);

/// Reads a string field; false (and `err` set) when absent-but-required or
/// not a string.
bool string_field(const json& body, const char* key, bool required,
                  std::string& out, api_reply& err);

/// Answers 500 `internal` for an exception caught at a handler boundary and
/// logs it (rate-limited).
void internal_error(const reply_fn& reply, const char* what);

/// `f`, but an exception it throws becomes a 500 answer (engine callbacks
/// run on the engine's threads: nothing may leave them).
template <class T, class F>
std::function<void(T)> guarded(const reply_fn& reply, F f) {
  return [reply, f](T x) {
    try {
      f(std::move(x));
    } catch (const std::exception& e) {
      internal_error(reply, e.what());
    } catch (...) {
      internal_error(reply, "unknown exception");
    }
  };
}

/// 400 `invalid_argument` for a malformed id named `what`.
api_reply bad_id(const char* what);

} // namespace mm::api_detail
