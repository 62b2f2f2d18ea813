// Bearer tokens (app/token.hpp): signing, verification and base64url.

#include "app/token.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using mm::token_error;

constexpr int64_t now = 1700000000;
const std::string secret = "s3cret";

std::string b64(const std::string& s) {
  return mm::base64url_encode(s);
}

// The signed part of a token: "v1.<user>.<expiry>".
std::string body_of(const std::string& user_part,
                    const std::string& expiry_part) {
  return "v1." + user_part + "." + expiry_part;
}

TEST(token, round_trip) {
  auto tok = mm::sign_token(secret, "alice", now + 60);
  auto res = mm::verify_token(secret, tok, now);
  EXPECT_EQ(res.error, token_error::none);
  EXPECT_EQ(res.user, "alice");
}

TEST(token, form_is_v1_user_expiry_signature) {
  auto tok = mm::sign_token(secret, "alice", now + 60);
  EXPECT_EQ(tok.rfind("v1." + b64("alice") + "." + std::to_string(now + 60)
                        + ".",
                      0),
            0u);
  // HMAC-SHA256 is 32 bytes: 43 base64url characters without padding.
  EXPECT_EQ(tok.size() - tok.rfind('.') - 1, 43u);
}

TEST(token, signing_is_deterministic) {
  EXPECT_EQ(mm::sign_token(secret, "bob", now),
            mm::sign_token(secret, "bob", now));
  EXPECT_NE(mm::sign_token(secret, "bob", now),
            mm::sign_token(secret, "bob", now + 1));
}

TEST(token, users_with_any_bytes_round_trip) {
  for (std::string user : {std::string("a"), std::string("user@example.com"),
                           std::string("x.y:z-1_2"),
                           std::string("\xff\x00\x01 binary", 10),
                           std::string(128, 'u')}) {
    auto res = mm::verify_token(secret, mm::sign_token(secret, user, now + 1),
                                now);
    EXPECT_EQ(res.error, token_error::none) << user;
    EXPECT_EQ(res.user, user);
  }
}

TEST(token, expired) {
  auto tok = mm::sign_token(secret, "alice", now);
  EXPECT_EQ(mm::verify_token(secret, tok, now).error, token_error::expired);
  EXPECT_EQ(mm::verify_token(secret, tok, now + 100).error,
            token_error::expired);
  EXPECT_EQ(mm::verify_token(secret, tok, now - 1).error, token_error::none);
  EXPECT_TRUE(mm::verify_token(secret, tok, now).user.empty());
}

TEST(token, wrong_secret_is_forged) {
  auto tok = mm::sign_token(secret, "alice", now + 60);
  EXPECT_EQ(mm::verify_token("other", tok, now).error, token_error::forged);
  EXPECT_EQ(mm::verify_token("", tok, now).error, token_error::forged);
}

TEST(token, forged_signature) {
  auto tok = mm::sign_token(secret, "alice", now + 60);
  // Flip one signature character.
  auto forged = tok;
  forged.back() = forged.back() == 'A' ? 'B' : 'A';
  EXPECT_EQ(mm::verify_token(secret, forged, now).error, token_error::forged);
  // Another user's signature on a body claiming to be alice.
  auto bob = mm::sign_token(secret, "bob", now + 60);
  auto swapped = tok.substr(0, tok.rfind('.')) + bob.substr(bob.rfind('.'));
  EXPECT_EQ(mm::verify_token(secret, swapped, now).error, token_error::forged);
  // A later expiry under the old signature.
  auto extended = body_of(b64("alice"), std::to_string(now + 99999))
                  + tok.substr(tok.rfind('.'));
  EXPECT_EQ(mm::verify_token(secret, extended, now).error,
            token_error::forged);
  // A forged token must not learn that it also expired.
  auto old = mm::sign_token(secret, "alice", now - 10);
  auto old_forged = old.substr(0, old.rfind('.')) + tok.substr(tok.rfind('.'));
  EXPECT_EQ(mm::verify_token(secret, old_forged, now).error,
            token_error::forged);
}

TEST(token, empty_is_missing) {
  EXPECT_EQ(mm::verify_token(secret, "", now).error, token_error::missing);
}

TEST(token, malformed_forms) {
  auto tok = mm::sign_token(secret, "alice", now + 60);
  auto sig = tok.substr(tok.rfind('.') + 1);
  auto user = b64("alice");
  auto exp = std::to_string(now + 60);
  const std::string cases[] = {
    "v1",
    "v1.",
    "v2." + user + "." + exp + "." + sig, // unknown version
    "V1." + user + "." + exp + "." + sig,
    "x" + tok,
    "v1." + user,                          // missing expiry and signature
    "v1." + user + "." + exp,              // missing signature
    "v1." + user + "." + exp + ".",        // empty signature
    "v1.." + exp + "." + sig,              // empty user
    "v1." + user + ".." + sig,             // empty expiry
    "v1." + user + "." + exp + "." + sig + ".", // extra dot
    "v1." + user + "." + exp + "." + sig + ".x",
    "v1." + user + ".1." + exp + "." + sig,
    "v1.a*b." + exp + "." + sig,            // bad base64 in the user
    "v1." + user + "=." + exp + "." + sig,  // padding is not base64url
    "v1.a." + exp + "." + sig,              // impossible base64 length
    "v1." + user + "." + exp + "." + sig.substr(0, 42) + "*",
    "v1." + user + "." + exp + "." + sig.substr(0, 40), // short signature
    "v1." + user + "." + exp + "." + sig + "AAAA",      // long signature
    "v1." + user + ".12a4." + sig,          // non-digit expiry
    "v1." + user + ".-5." + sig,
    "v1." + user + ".+5." + sig,
    "v1." + user + ". 5." + sig,
    "v1." + user + ".1e9." + sig,
    "v1." + user + ".9999999999999999999." + sig, // too long to be a time
    "v1." + std::string(2000, 'A') + "." + exp + "." + sig, // oversized
    ".",
    "...",
    "....",
  };
  for (auto& c : cases) {
    auto res = mm::verify_token(secret, c, now);
    EXPECT_EQ(res.error, token_error::malformed) << "token: " << c;
    EXPECT_TRUE(res.user.empty());
  }
}

TEST(token, error_names) {
  EXPECT_STREQ(mm::to_string(token_error::missing), "missing_token");
  EXPECT_STREQ(mm::to_string(token_error::malformed), "malformed_token");
  EXPECT_STREQ(mm::to_string(token_error::expired), "expired_token");
  EXPECT_STREQ(mm::to_string(token_error::forged), "bad_signature");
}

TEST(base64url, known_vectors) {
  // RFC 4648 test vectors, without padding.
  EXPECT_EQ(b64(""), "");
  EXPECT_EQ(b64("f"), "Zg");
  EXPECT_EQ(b64("fo"), "Zm8");
  EXPECT_EQ(b64("foo"), "Zm9v");
  EXPECT_EQ(b64("foob"), "Zm9vYg");
  EXPECT_EQ(b64("fooba"), "Zm9vYmE");
  EXPECT_EQ(b64("foobar"), "Zm9vYmFy");
  // The URL alphabet: '-' and '_' instead of '+' and '/'.
  EXPECT_EQ(b64("\xfb\xff\xbf"), "-_-_");
}

TEST(base64url, binary_round_trip) {
  std::string all;
  for (int c = 0; c < 256; ++c)
    all.push_back(static_cast<char>(c));
  uint32_t x = 12345;
  for (std::size_t len = 0; len <= 300; ++len) {
    std::string in;
    for (std::size_t k = 0; k < len; ++k) {
      x = x * 1103515245u + 12345u; // any bytes, NUL included
      in.push_back(static_cast<char>(x >> 24));
    }
    auto enc = b64(in);
    EXPECT_EQ(enc.find_first_of("+/="), std::string::npos);
    EXPECT_EQ(enc.size(), (len * 4 + 2) / 3);
    std::string out = "junk";
    ASSERT_TRUE(mm::base64url_decode(enc, out)) << len;
    EXPECT_EQ(out, in);
  }
  std::string out;
  ASSERT_TRUE(mm::base64url_decode(b64(all), out));
  EXPECT_EQ(out, all);
}

TEST(base64url, rejects_bad_input) {
  std::string out;
  EXPECT_FALSE(mm::base64url_decode("Zm9v+", out));
  EXPECT_FALSE(mm::base64url_decode("Zm/v", out));
  EXPECT_FALSE(mm::base64url_decode("Zg==", out));
  EXPECT_FALSE(mm::base64url_decode("Zm9vY", out)); // 4n+1 characters
  EXPECT_FALSE(mm::base64url_decode("Zm 9", out));
  EXPECT_TRUE(mm::base64url_decode("", out));
  EXPECT_TRUE(out.empty());
}

} // namespace
