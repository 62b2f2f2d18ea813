#pragma once

// Bearer tokens: the host application signs "v1.<user b64url>.<expiry>" with
// HMAC-SHA256 and the secret it shares with matchd (docs/api.md).

#include <cstdint>
#include <string>

namespace mm {

/// Why a token was refused; `to_string` gives the API's error name.
enum class token_error : uint8_t {
  none,
  missing,   ///< no token at all
  malformed, ///< not "v1.user.expiry.signature"
  expired,   ///< the expiry has passed
  forged,    ///< the signature does not match
};

/// "missing_token", "malformed_token", "expired_token", "bad_signature".
const char* to_string(token_error x) noexcept;

/// Signs a token for `user` that expires at `expiry_unix_s`.
std::string sign_token(const std::string& secret, const std::string& user,
                       int64_t expiry_unix_s);

struct token_check {
  token_error error = token_error::none;
  std::string user; ///< set when `error == none`
};

/// Verifies `token` against `secret` at `now_unix_s` (constant-time
/// signature comparison).
token_check verify_token(const std::string& secret, const std::string& token,
                         int64_t now_unix_s);

/// base64url without padding.
std::string base64url_encode(const std::string& in);

/// Decodes base64url without padding; false on a bad character.
bool base64url_decode(const std::string& in, std::string& out);

} // namespace mm
