#include "app/common/token.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/common/jwks.hpp"
#include "core/ticket_id.hpp"

namespace mm {

namespace {

constexpr char b64url_chars[]
  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int b64url_value(char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '-')
    return 62;
  if (c == '_')
    return 63;
  return -1;
}

/// Keyed HMAC-SHA256 contexts of this thread, one per secret: OpenSSL 3's
/// one-shot HMAC() looks the algorithm up and builds a context on every
/// call (about 1.2 us, more under contention); a keyed context re-armed
/// with the same key costs about 0.2 us. A node has one or two secrets.
class hmac_cache {
 public:
  hmac_cache() = default;
  hmac_cache(const hmac_cache&) = delete;
  hmac_cache& operator=(const hmac_cache&) = delete;
  ~hmac_cache() {
    for (auto& e : entries_)
      EVP_MAC_CTX_free(e.ctx);
    EVP_MAC_free(mac_);
  }

  /// A context keyed with `key`, ready for updates; nullptr if OpenSSL
  /// failed (the caller then takes the one-shot path).
  EVP_MAC_CTX* armed(const std::string& key) {
    for (auto& e : entries_)
      if (e.key == key)
        return EVP_MAC_init(e.ctx, nullptr, 0, nullptr) == 1 ? e.ctx : nullptr;
    if (mac_ == nullptr)
      mac_ = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    if (mac_ == nullptr)
      return nullptr;
    EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac_);
    char digest[] = "SHA256";
    OSSL_PARAM params[]
      = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
         OSSL_PARAM_construct_end()};
    if (ctx == nullptr
        || EVP_MAC_init(ctx, reinterpret_cast<const unsigned char*>(key.data()),
                        key.size(), params)
             != 1) {
      EVP_MAC_CTX_free(ctx);
      return nullptr;
    }
    if (entries_.size() >= max_keys) { // keys changed: forget the oldest
      EVP_MAC_CTX_free(entries_.front().ctx);
      entries_.erase(entries_.begin());
    }
    entries_.push_back({key, ctx});
    return ctx;
  }

 private:
  static constexpr size_t max_keys = 4;
  struct entry {
    std::string key;
    EVP_MAC_CTX* ctx;
  };
  EVP_MAC* mac_ = nullptr;
  std::vector<entry> entries_;
};

std::string hmac_sha256(const std::string& key, const std::string& msg) {
  unsigned char out[EVP_MAX_MD_SIZE];
  thread_local hmac_cache cache;
  if (EVP_MAC_CTX* ctx = cache.armed(key)) {
    size_t len = 0;
    if (EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(msg.data()),
                       msg.size())
          == 1
        && EVP_MAC_final(ctx, out, &len, sizeof(out)) == 1)
      return std::string(reinterpret_cast<char*>(out), len);
  }
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out,
       &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

} // namespace

const char* to_string(token_error x) noexcept {
  switch (x) {
    case token_error::none:
      return "none";
    case token_error::missing:
      return "missing_token";
    case token_error::malformed:
      return "malformed_token";
    case token_error::expired:
      return "expired_token";
    case token_error::forged:
      return "bad_signature";
    case token_error::oversized:
      return "oversized_token";
    case token_error::bad_algorithm:
      return "unsupported_algorithm";
    case token_error::not_yet_valid:
      return "token_not_yet_valid";
    case token_error::wrong_audience:
      return "wrong_audience";
    case token_error::wrong_issuer:
      return "wrong_issuer";
    case token_error::format_disabled:
      return "disabled_token_format";
    case token_error::unknown_key:
      return "unknown_key";
  }
  return "malformed_token";
}

std::string base64url_encode(const std::string& in) {
  std::string out;
  out.reserve((in.size() * 4 + 2) / 3);
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(b64url_chars[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0)
    out.push_back(b64url_chars[(acc << (6 - bits)) & 0x3f]);
  return out;
}

bool base64url_decode(const std::string& in, std::string& out) {
  out.clear();
  if (in.size() % 4 == 1)
    return false; // no valid encoding has this length
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    auto v = b64url_value(c);
    if (v < 0)
      return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  // Canonical only: leftover bits must be zero, or two texts would carry
  // the same signature.
  return (acc & ((1u << bits) - 1)) == 0;
}

std::string sign_token(const std::string& secret, const std::string& user,
                       int64_t expiry_unix_s) {
  auto body = "v1." + base64url_encode(user) + "."
              + std::to_string(expiry_unix_s);
  return body + "." + base64url_encode(hmac_sha256(secret, body));
}

token_check verify_token(const std::string& secret, const std::string& token,
                         int64_t now_unix_s) {
  token_check res;
  if (token.empty()) {
    res.error = token_error::missing;
    return res;
  }
  res.error = token_error::malformed;
  if (token.size() > 1024 || token.compare(0, 3, "v1.") != 0)
    return res;
  auto p1 = token.find('.', 3);
  if (p1 == std::string::npos)
    return res;
  auto p2 = token.find('.', p1 + 1);
  if (p2 == std::string::npos || token.find('.', p2 + 1) != std::string::npos)
    return res;
  std::string user;
  if (p1 == 3 || !base64url_decode(token.substr(3, p1 - 3), user)
      || user.empty())
    return res;
  auto exp_text = token.substr(p1 + 1, p2 - p1 - 1);
  if (exp_text.empty() || exp_text.size() > 18)
    return res;
  int64_t expiry = 0;
  for (char c : exp_text) {
    if (c < '0' || c > '9')
      return res;
    expiry = expiry * 10 + (c - '0');
  }
  std::string sig;
  if (!base64url_decode(token.substr(p2 + 1), sig) || sig.size() != 32)
    return res;
  auto want = hmac_sha256(secret, token.substr(0, p2));
  // Signature first, so a forged token never learns whether it expired.
  if (CRYPTO_memcmp(want.data(), sig.data(), 32) != 0) {
    res.error = token_error::forged;
    return res;
  }
  if (expiry <= now_unix_s) {
    res.error = token_error::expired;
    return res;
  }
  res.error = token_error::none;
  res.user = std::move(user);
  res.valid_until = expiry;
  return res;
}

std::string sign_jwt(const std::string& secret, const std::string& header_json,
                     const std::string& payload_json) {
  auto body = base64url_encode(header_json) + "."
              + base64url_encode(payload_json);
  return body + "." + base64url_encode(hmac_sha256(secret, body));
}

namespace {

using json = nlohmann::json;

token_check refuse(token_error e, std::string detail) {
  token_check res;
  res.error = e;
  res.detail = std::move(detail);
  return res;
}

/// A JSON object decoded from one base64url part; discarded when the part
/// is not canonical base64url or not a JSON object.
json decode_part(const std::string& part) {
  std::string text;
  if (part.empty() || !base64url_decode(part, text))
    return json(json::value_t::discarded);
  auto j = json::parse(text, nullptr, false);
  if (!j.is_object())
    return json(json::value_t::discarded);
  return j;
}

/// A NumericDate (RFC 7519 2): a JSON number of seconds, maybe fractional
/// (truncated), bounded so that adding a leeway cannot overflow.
bool numeric_date(const json& j, int64_t& out) {
  constexpr int64_t bound = int64_t{1} << 52;
  if (j.is_number_unsigned()) {
    auto v = j.get<uint64_t>();
    out = v > static_cast<uint64_t>(bound) ? bound : static_cast<int64_t>(v);
    return true;
  }
  if (j.is_number_integer()) {
    out = std::max(std::min(j.get<int64_t>(), bound), -bound);
    return true;
  }
  if (j.is_number_float()) {
    auto v = j.get<double>();
    if (!std::isfinite(v))
      return false;
    v = std::max(std::min(v, static_cast<double>(bound)),
                 -static_cast<double>(bound));
    out = static_cast<int64_t>(v);
    return true;
  }
  return false;
}

/// Reads the optional NumericDate `key`; false (and `res` set) when it is
/// there but not a number.
bool date_claim(const json& claims, const char* key, bool& present,
                int64_t& out, token_check& res) {
  present = false;
  auto i = claims.find(key);
  if (i == claims.end())
    return true;
  if (!numeric_date(*i, out)) {
    res = refuse(token_error::malformed,
                 std::string{key} + ": must be a number of seconds");
    return false;
  }
  present = true;
  return true;
}

token_check verify_jwt(const token_policy& policy, const std::string& token,
                       int64_t now) {
  auto p1 = token.find('.');
  auto p2 = p1 == std::string::npos ? p1 : token.find('.', p1 + 1);
  if (p2 == std::string::npos || token.find('.', p2 + 1) != std::string::npos)
    return refuse(token_error::malformed,
                  "neither a v1 token nor a JWT (header.payload.signature)");
  // The header first: it says how the token is signed.
  auto header = decode_part(token.substr(0, p1));
  if (header.is_discarded())
    return refuse(token_error::malformed,
                  "the JWT header is not a base64url JSON object");
  auto alg = header.find("alg");
  if (alg == header.end() || !alg->is_string())
    return refuse(token_error::malformed, "the JWT header has no alg");
  const bool hs = *alg == "HS256";
  const bool pk = *alg == "RS256" || *alg == "ES256";
  auto alg_text = alg->dump(-1, ' ', false, json::error_handler_t::replace);
  if ((hs && policy.secrets.empty()) || (pk && !policy.keys) || (!hs && !pk))
    return refuse(token_error::bad_algorithm,
                  "alg " + alg_text + " is not accepted here (this node takes "
                    + std::string{policy.secrets.empty() ? "" : "HS256"}
                    + (policy.secrets.empty() || !policy.keys ? "" : ", ")
                    + std::string{policy.keys ? "RS256, ES256" : ""} + ")");
  if (header.contains("crit"))
    // Extensions that change the meaning of the token (RFC 7515 4.1.11),
    // none of which matchd implements.
    return refuse(token_error::malformed,
                  "crit: no JWS extension is supported");
  // The payload's encoding is form, checked now; its JSON is parsed only
  // once the signature matched.
  std::string payload;
  if (p2 == p1 + 1
      || !base64url_decode(token.substr(p1 + 1, p2 - p1 - 1), payload))
    return refuse(token_error::malformed, "the JWT payload is not base64url");
  std::string sig;
  auto signed_part = token.substr(0, p2);
  if (hs) {
    if (!base64url_decode(token.substr(p2 + 1), sig) || sig.size() != 32)
      return refuse(token_error::malformed,
                    "the JWT signature is not 32 bytes of base64url");
    // Every secret is tried, each comparison in constant time.
    bool match = false;
    for (auto& secret : policy.secrets) {
      auto want = hmac_sha256(secret, signed_part);
      match |= CRYPTO_memcmp(want.data(), sig.data(), 32) == 0;
    }
    if (!match)
      return refuse(token_error::forged, "the signature matches no secret");
  } else {
    if (!base64url_decode(token.substr(p2 + 1), sig) || sig.empty())
      return refuse(token_error::malformed,
                    "the JWT signature is not base64url");
    std::string kid;
    if (auto k = header.find("kid"); k != header.end()) {
      if (!k->is_string() || k->get<std::string>().empty()
          || k->get<std::string>().size() > 256)
        return refuse(token_error::malformed, "kid: a string of 1-256 bytes");
      kid = k->get<std::string>();
    }
    switch (policy.keys->current()->verify(kid, *alg, signed_part, sig)) {
      case jwk_check::ok:
        break;
      case jwk_check::unknown_key:
        if (!kid.empty())
          policy.keys->missed(kid);
        return refuse(token_error::unknown_key,
                      kid.empty() ? "no kid, and the key set does not have "
                                    "exactly one key for "
                                      + alg_text
                                  : "no key of this kid in the key set");
      case jwk_check::wrong_algorithm:
        return refuse(token_error::bad_algorithm,
                      "the key of this kid is not for " + alg_text);
      case jwk_check::bad_signature:
        return refuse(token_error::forged,
                      "the signature does not verify with the key");
    }
  }
  // Authentic from here on: the claims.
  auto claims = json::parse(payload, nullptr, false);
  if (!claims.is_object())
    return refuse(token_error::malformed,
                  "the JWT payload is not a base64url JSON object");
  auto sub = claims.find("sub");
  if (sub == claims.end() || !sub->is_string())
    return refuse(token_error::malformed, "sub: required, the user id");
  auto user = sub->get<std::string>();
  if (!valid_client_id(user))
    return refuse(token_error::malformed,
                  "sub: must be 1-128 bytes of [A-Za-z0-9_.:@-]");
  token_check res;
  bool has = false;
  int64_t exp = 0, nbf = 0, iat = 0;
  if (!date_claim(claims, "exp", has, exp, res))
    return res;
  if (!has)
    return refuse(token_error::malformed, "exp: required");
  auto leeway = policy.leeway_s;
  if (exp + leeway <= now)
    return refuse(token_error::expired, "exp has passed");
  if (!date_claim(claims, "nbf", has, nbf, res))
    return res;
  if (has && nbf > now + leeway)
    return refuse(token_error::not_yet_valid, "nbf is in the future");
  if (!date_claim(claims, "iat", has, iat, res))
    return res;
  if (has && iat > now + leeway)
    return refuse(token_error::not_yet_valid, "iat is in the future");
  if (auto aud = claims.find("aud"); aud != claims.end()) {
    std::vector<std::string> named;
    if (aud->is_string()) {
      named.push_back(aud->get<std::string>());
    } else if (aud->is_array()) {
      for (auto& a : *aud) {
        if (!a.is_string())
          return refuse(token_error::malformed,
                        "aud: a string or an array of strings");
        named.push_back(a.get<std::string>());
      }
    } else {
      return refuse(token_error::malformed,
                    "aud: a string or an array of strings");
    }
    if (policy.audience.empty())
      return refuse(token_error::wrong_audience,
                    "the token names an audience and this node has none "
                    "(--token-audience)");
    bool found = false;
    for (auto& a : named)
      found |= a == policy.audience;
    if (!found)
      return refuse(token_error::wrong_audience,
                    "aud does not name this service");
  } else if (!policy.audience.empty()) {
    return refuse(token_error::wrong_audience, "aud: required on this node");
  }
  if (!policy.issuer.empty()) {
    auto iss = claims.find("iss");
    if (iss == claims.end())
      return refuse(token_error::wrong_issuer, "iss: required on this node");
    if (!iss->is_string() || *iss != policy.issuer)
      return refuse(token_error::wrong_issuer,
                    "iss is not the expected issuer");
  }
  // Per-queue scope: a token that names queues may join only those.
  if (auto qs = claims.find("queues"); qs != claims.end()) {
    if (!qs->is_array() || qs->empty())
      return refuse(token_error::malformed,
                    "queues: a non-empty array of queue names");
    for (auto& q : *qs) {
      if (!q.is_string() || !valid_client_id(q.get<std::string>()))
        return refuse(token_error::malformed,
                      "queues: a non-empty array of queue names");
      res.queues.push_back(q.get<std::string>());
    }
  }
  res.error = token_error::none;
  res.user = std::move(user);
  res.valid_until = exp + leeway;
  return res;
}

} // namespace

bool token_check::may_join(const std::string& queue) const {
  return queues.empty()
         || std::find(queues.begin(), queues.end(), queue) != queues.end();
}

token_check verify_bearer(const token_policy& policy, const std::string& token,
                          int64_t now_unix_s) {
  if (token.empty())
    return refuse(token_error::missing, "no bearer token");
  if (token.size() > max_token_bytes)
    return refuse(token_error::oversized, "a token is at most "
                                            + std::to_string(max_token_bytes)
                                            + " bytes");
  if (token.compare(0, 3, "v1.") == 0) {
    if (!policy.accept_v1)
      return refuse(token_error::format_disabled,
                    "v1 tokens are not accepted here (--token-formats)");
    token_check res;
    for (auto& secret : policy.secrets) {
      res = verify_token(secret, token, now_unix_s);
      if (res.error != token_error::forged)
        break; // accepted, or a refusal that no other secret changes
    }
    if (policy.secrets.empty())
      res.error = token_error::forged;
    switch (res.error) {
      case token_error::none:
        break;
      case token_error::forged:
        res.detail = "the signature matches no secret";
        break;
      case token_error::expired:
        res.detail = "the token's expiry has passed";
        break;
      default:
        res.detail = "not of the form v1.user.expiry.signature";
    }
    return res;
  }
  if (!policy.accept_jwt)
    return refuse(token_error::format_disabled,
                  "JWTs are not accepted here (--token-formats)");
  return verify_jwt(policy, token, now_unix_s);
}

} // namespace mm
