#pragma once

// Requests on a user's WebSocket (docs/api.md "Requests on the WebSocket"):
// a text frame names an operation and a request id; it stands for one HTTP
// request of the same user, which the router answers as it answers HTTP, so
// both transports give the same errors. No Beast, no CAF.

#include <cstddef>
#include <string>
#include <string_view>

#include "app/matchd/api.hpp"

namespace mm {

/// One request frame, checked and translated.
struct ws_request {
  enum class kind {
    refused, ///< answer `refusal` (the frame changes nothing)
    http,    ///< hand method/target/body to the router
    auth,    ///< replace the socket's token by `token`
  };
  kind what = kind::refused;
  /// The request id as JSON text ("null" when the frame had none usable).
  std::string id = "null";
  std::string method;
  std::string target;
  std::string body;
  std::string token;
  api_reply refusal;
};

/// Reads one client frame of `user`'s socket. Never throws; bad input
/// gives `kind::refused` with a named error (400 malformed_json,
/// invalid_argument or unknown_op). The target is built from `user` and
/// checked ids only, so a frame can reach no route but its operation's.
ws_request parse_ws_request(std::string_view text, const std::string& user);

/// The reply frame to request `id_json`: {"type":"reply","id":..,
/// "status":..,"body":..} with the HTTP answer's body (JSON) inside.
std::string ws_reply_text(const std::string& id_json, const api_reply& r);

} // namespace mm
