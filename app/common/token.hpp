#pragma once

// Bearer tokens (docs/api.md, "Authentication"). Two formats:
// - "v1.<user b64url>.<expiry>.<signature>", matchd's own, HMAC-SHA256
//   with a secret the host application shares with matchd;
// - JWTs (RFC 7519) with alg HS256 (the shared secret) or RS256/ES256 (an
//   identity provider's public keys, app/common/jwks.hpp), so host
//   backends sign with stock libraries: `sub` is the user, `exp` is
//   required, `nbf`, `iat`, `aud` and `iss` are checked when present (or
//   required by the policy).
// Verification takes a list of secrets: during a key rollover both the
// current and the next secret are accepted.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mm {

class key_source; // app/common/jwks.hpp

/// Why a token was refused; `to_string` gives the API's error name.
enum class token_error : uint8_t {
  none,
  missing,         ///< no token at all
  malformed,       ///< neither format, or a JWT without a valid sub/exp
  expired,         ///< the expiry has passed
  forged,          ///< the signature matches none of the secrets
  oversized,       ///< longer than `max_token_bytes`
  bad_algorithm,   ///< a JWT whose alg is not HS256 (alg none included)
  not_yet_valid,   ///< a JWT whose nbf or iat is in the future
  wrong_audience,  ///< a JWT whose aud does not name this service
  wrong_issuer,    ///< a JWT whose iss is not the configured issuer
  format_disabled, ///< a format the node was told not to accept
  unknown_key,     ///< an RS256/ES256 JWT whose kid is in no key set
};

/// The API's error name of `x`: "missing_token", "malformed_token",
/// "expired_token", "bad_signature", "oversized_token",
/// "unsupported_algorithm", "token_not_yet_valid", "wrong_audience",
/// "wrong_issuer", "disabled_token_format", "unknown_key" ("none" for
/// none).
const char* to_string(token_error x) noexcept;

/// The longest token looked at (either format); longer is `oversized`.
inline constexpr std::size_t max_token_bytes = 4096;

/// Signs a v1 token for `user` that expires at `expiry_unix_s`. The same
/// arguments give the same token.
std::string sign_token(const std::string& secret, const std::string& user,
                       int64_t expiry_unix_s);

/// Signs a JWT: base64url(header).base64url(payload).HMAC-SHA256 signature.
/// The JSON texts are taken as they are (tests make hostile ones with it).
/// The same arguments give the same token.
std::string sign_jwt(const std::string& secret, const std::string& header_json,
                     const std::string& payload_json);

/// What a verification answered.
struct token_check {
  token_error error = token_error::none;
  std::string user;   ///< set when `error == none`
  std::string detail; ///< why, for the error body; never a secret
  /// A JWT's `queues` claim: the only queues the token may join (its
  /// tickets and its party's). Empty: any queue (v1 tokens, JWTs without
  /// the claim).
  std::vector<std::string> queues;
  /// The first second (Unix time) at which the token counts as expired (a
  /// JWT's exp plus the leeway); set when `error == none`.
  int64_t valid_until = 0;

  /// Whether the token may join `queue`. Idempotent.
  bool may_join(const std::string& queue) const;
};

/// Verifies a v1 `token` against `secret` at `now_unix_s` (constant-time
/// signature comparison, checked before the expiry). Answers `missing` for
/// an empty token, `malformed` for anything but v1.<user>.<expiry>.<sig>
/// (or over 1024 bytes), `forged` when the signature does not match,
/// `expired` once `now_unix_s` reached the expiry, else `none` and the
/// user. Leaves `detail` empty (`verify_bearer` fills it).
token_check verify_token(const std::string& secret, const std::string& token,
                         int64_t now_unix_s);

/// What a node accepts (matchd's --secret, --secret-next, --token-*).
struct token_policy {
  /// Accepted secrets, the signing one first; a second one during a key
  /// rollover. A token signed with any of them is accepted.
  std::vector<std::string> secrets;
  /// JWTs: `aud` (a string or an array of strings) must name it. Empty: a
  /// JWT that names any audience is refused (RFC 7519 4.1.3).
  std::string audience;
  /// JWTs: `iss` must equal it. Empty: `iss` is not checked.
  std::string issuer;
  /// JWTs: seconds of clock skew allowed on exp, nbf and iat.
  int64_t leeway_s = 30;
  bool accept_v1 = true;  ///< --token-formats names v1
  bool accept_jwt = true; ///< --token-formats names jwt
  /// Public keys of an identity provider (--jwks-file, --jwks-url): JWTs
  /// signed RS256 or ES256 with them are accepted. Null: none are.
  std::shared_ptr<const key_source> keys;
};

/// Verifies a bearer token of either format at `now_unix_s`. The signature
/// is checked (in constant time, against every secret) before any claim,
/// so a forger learns nothing about them; a JWT's payload is parsed only
/// once its signature matched. A JWT's user (`sub`) must be a valid API id
/// (1-128 bytes of [A-Za-z0-9_.:@-]). Answers `none` and the user, or the
/// refusal and a `detail`: `missing`, `oversized`, `format_disabled`; for
/// v1 `malformed`, `forged` (no secret matches) or `expired`; for a JWT
/// `malformed`, `bad_algorithm`, `forged`, `expired`, `not_yet_valid`,
/// `wrong_audience` or `wrong_issuer` (docs/api.md, "Errors").
token_check verify_bearer(const token_policy& policy, const std::string& token,
                          int64_t now_unix_s);

/// base64url without padding.
std::string base64url_encode(const std::string& in);

/// Decodes base64url without padding into `out`; false on a bad
/// character, an impossible length or leftover bits that are not zero
/// (only the canonical spelling of a text is accepted).
bool base64url_decode(const std::string& in, std::string& out);

} // namespace mm
