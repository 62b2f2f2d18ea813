#include "app/token.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

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

std::string hmac_sha256(const std::string& key, const std::string& msg) {
  unsigned char out[EVP_MAX_MD_SIZE];
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
  auto body = "v1." + base64url_encode(user) + "." + std::to_string(expiry_unix_s);
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
  return res;
}

} // namespace mm
