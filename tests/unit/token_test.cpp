// Bearer tokens (app/common/token.hpp): signing, verification and base64url.

#include "app/common/token.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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
  EXPECT_EQ(
    tok.rfind("v1." + b64("alice") + "." + std::to_string(now + 60) + ".", 0),
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
  for (std::string user :
       {std::string("a"), std::string("user@example.com"),
        std::string("x.y:z-1_2"), std::string("\xff\x00\x01 binary", 10),
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
  EXPECT_EQ(mm::verify_token(secret, extended, now).error, token_error::forged);
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
    "v1." + user,                               // missing expiry and signature
    "v1." + user + "." + exp,                   // missing signature
    "v1." + user + "." + exp + ".",             // empty signature
    "v1.." + exp + "." + sig,                   // empty user
    "v1." + user + ".." + sig,                  // empty expiry
    "v1." + user + "." + exp + "." + sig + ".", // extra dot
    "v1." + user + "." + exp + "." + sig + ".x",
    "v1." + user + ".1." + exp + "." + sig,
    "v1.a*b." + exp + "." + sig,           // bad base64 in the user
    "v1." + user + "=." + exp + "." + sig, // padding is not base64url
    "v1.a." + exp + "." + sig,             // impossible base64 length
    "v1." + user + "." + exp + "." + sig.substr(0, 42) + "*",
    "v1." + user + "." + exp + "." + sig.substr(0, 40), // short signature
    "v1." + user + "." + exp + "." + sig + "AAAA",      // long signature
    "v1." + user + ".12a4." + sig,                      // non-digit expiry
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
  EXPECT_STREQ(mm::to_string(token_error::oversized), "oversized_token");
  EXPECT_STREQ(mm::to_string(token_error::bad_algorithm),
               "unsupported_algorithm");
  EXPECT_STREQ(mm::to_string(token_error::not_yet_valid),
               "token_not_yet_valid");
  EXPECT_STREQ(mm::to_string(token_error::wrong_audience), "wrong_audience");
  EXPECT_STREQ(mm::to_string(token_error::wrong_issuer), "wrong_issuer");
  EXPECT_STREQ(mm::to_string(token_error::format_disabled),
               "disabled_token_format");
}

// -- JWTs and the policy (verify_bearer) ---------------------------------------

const std::string hs256 = R"({"alg":"HS256","typ":"JWT"})";

mm::token_policy policy(int64_t leeway = 30) {
  mm::token_policy p;
  p.secrets = {secret};
  p.leeway_s = leeway;
  return p;
}

std::string claims(const std::string& user, int64_t exp,
                   const std::string& more = "") {
  return R"({"sub":")" + user + R"(","exp":)" + std::to_string(exp) + more
         + "}";
}

std::string jwt(const std::string& payload, const std::string& key = secret,
                const std::string& header = hs256) {
  return mm::sign_jwt(key, header, payload);
}

token_error check(const mm::token_policy& p, const std::string& tok) {
  return mm::verify_bearer(p, tok, now).error;
}

TEST(jwt, round_trip) {
  auto res = mm::verify_bearer(policy(), jwt(claims("alice", now + 60)), now);
  EXPECT_EQ(res.error, token_error::none) << res.detail;
  EXPECT_EQ(res.user, "alice");
  // A v1 token goes through the same policy.
  auto v1 = mm::verify_bearer(policy(), mm::sign_token(secret, "bob", now + 9),
                              now);
  EXPECT_EQ(v1.error, token_error::none);
  EXPECT_EQ(v1.user, "bob");
}

TEST(jwt, valid_until_is_the_first_expired_second) {
  // What a WebSocket keeps to check each request's expiry without a
  // signature check (api_router::handle_as): v1's expiry, a JWT's exp
  // plus the leeway, each the second verify_bearer would call expired.
  auto v1 = mm::verify_bearer(policy(), mm::sign_token(secret, "b", now + 9),
                              now);
  EXPECT_EQ(v1.valid_until, now + 9);
  EXPECT_EQ(check(policy(), mm::sign_token(secret, "b", now + 9)),
            token_error::none);
  EXPECT_EQ(mm::verify_bearer(policy(), mm::sign_token(secret, "b", now + 9),
                              v1.valid_until)
              .error,
            token_error::expired);
  auto j = mm::verify_bearer(policy(30), jwt(claims("a", now + 60)), now);
  ASSERT_EQ(j.error, token_error::none);
  EXPECT_EQ(j.valid_until, now + 90);
  EXPECT_EQ(mm::verify_bearer(policy(30), jwt(claims("a", now + 60)),
                              j.valid_until - 1)
              .error,
            token_error::none);
  EXPECT_EQ(mm::verify_bearer(policy(30), jwt(claims("a", now + 60)),
                              j.valid_until)
              .error,
            token_error::expired);
}

TEST(token, many_secrets_in_turn_on_one_thread) {
  // The keyed HMAC contexts are cached per thread and secret (a few): more
  // secrets than it keeps, in turn, each still signs and verifies alone.
  std::vector<std::string> keys;
  for (int i = 0; i < 9; ++i)
    keys.push_back("secret-number-" + std::to_string(i));
  for (int round = 0; round < 3; ++round)
    for (size_t i = 0; i < keys.size(); ++i) {
      auto tok = mm::sign_token(keys[i], "u" + std::to_string(i), now + 9);
      EXPECT_EQ(mm::verify_token(keys[i], tok, now).error, token_error::none);
      EXPECT_EQ(mm::verify_token(keys[(i + 1) % keys.size()], tok, now).error,
                token_error::forged);
    }
}

TEST(jwt, rfc7515_appendix_a1_signature) {
  // RFC 7515 A.1: the HS256 example, its key and its signature. It has no
  // sub, so it is refused malformed: but only after its signature matched.
  std::string key;
  ASSERT_TRUE(mm::base64url_decode(
    "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTw"
    "jAzZr1Z9CAow",
    key));
  const std::string tok
    = "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9"
      ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFt"
      "cGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
      ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
  mm::token_policy p;
  p.secrets = {key};
  auto res = mm::verify_bearer(p, tok, 1300819000);
  EXPECT_EQ(res.error, token_error::malformed);
  EXPECT_EQ(res.detail, "sub: required, the user id");
  p.secrets = {"not-the-key"};
  EXPECT_EQ(check(p, tok), token_error::forged);
}

TEST(jwt, only_hs256) {
  auto c = claims("alice", now + 60);
  for (std::string alg : {"none", "None", "NONE", "HS512", "HS384", "hs256",
                          "RS256", "ES256", "PS256", ""}) {
    auto header = R"({"alg":")" + alg + R"(","typ":"JWT"})";
    // Signed with the right secret all the same: the alg alone refuses it.
    EXPECT_EQ(check(policy(), jwt(c, secret, header)),
              token_error::bad_algorithm)
      << alg;
  }
  // alg none as it is sent: no signature at all.
  auto none = b64(R"({"alg":"none"})") + "." + b64(c) + ".";
  auto res = mm::verify_bearer(policy(), none, now);
  EXPECT_EQ(res.error, token_error::bad_algorithm);
  EXPECT_TRUE(res.user.empty());
  EXPECT_EQ(check(policy(), b64(R"({"alg":"none"})") + "." + b64(c)),
            token_error::malformed); // two parts
  EXPECT_EQ(check(policy(), jwt(c, secret, R"({"typ":"JWT"})")),
            token_error::malformed);
  EXPECT_EQ(check(policy(), jwt(c, secret, R"({"alg":256})")),
            token_error::malformed);
  EXPECT_EQ(check(policy(), jwt(c, secret, R"({"alg":["HS256"]})")),
            token_error::malformed);
  // Extensions matchd does not implement (e.g. unencoded payloads).
  EXPECT_EQ(
    check(policy(),
          jwt(c, secret, R"({"alg":"HS256","b64":false,"crit":["b64"]})")),
    token_error::malformed);
}

TEST(jwt, tampered) {
  auto tok = jwt(claims("alice", now + 60));
  auto p1 = tok.find('.'), p2 = tok.rfind('.');
  // Another payload under alice's signature: bob, or a later expiry.
  for (auto other : {claims("bob", now + 60), claims("alice", now + 99999),
                     claims("alice", now + 60, R"(,"aud":"x")")}) {
    auto forged = tok.substr(0, p1 + 1) + b64(other) + tok.substr(p2);
    EXPECT_EQ(check(policy(), forged), token_error::forged) << other;
  }
  // One signature character flipped; another secret.
  auto flipped = tok;
  flipped[p2 + 5] = flipped[p2 + 5] == 'A' ? 'B' : 'A';
  EXPECT_EQ(check(policy(), flipped), token_error::forged);
  EXPECT_EQ(check(policy(), jwt(claims("alice", now + 60), "other-secret")),
            token_error::forged);
  // The header is signed too.
  auto header2 = b64(R"({"alg":"HS256"})");
  EXPECT_EQ(check(policy(), header2 + tok.substr(p1)), token_error::forged);
  // A forger learns nothing about the claims: expired or not, garbage or
  // not, the answer is the signature's.
  auto old = jwt(claims("alice", now - 999), "other-secret");
  EXPECT_EQ(check(policy(), old), token_error::forged);
  auto junk = tok.substr(0, p1 + 1) + b64("not json") + tok.substr(p2);
  EXPECT_EQ(check(policy(), junk), token_error::forged);
  EXPECT_EQ(check(policy(), jwt("not json")), token_error::malformed);
}

TEST(jwt, expiry_and_leeway) {
  EXPECT_EQ(check(policy(0), jwt(claims("a", now))), token_error::expired);
  EXPECT_EQ(check(policy(0), jwt(claims("a", now + 1))), token_error::none);
  EXPECT_EQ(check(policy(30), jwt(claims("a", now - 29))), token_error::none);
  EXPECT_EQ(check(policy(30), jwt(claims("a", now - 30))),
            token_error::expired);
  // Fractional NumericDates are seconds too; absurdly far is far.
  EXPECT_EQ(check(policy(0),
                  jwt(R"({"sub":"a","exp":)" + std::to_string(now) + ".5}")),
            token_error::expired);
  EXPECT_EQ(check(policy(0), jwt(R"({"sub":"a","exp":1e300})")),
            token_error::none);
  EXPECT_EQ(check(policy(0), jwt(R"({"sub":"a","exp":99999999999999999999})")),
            token_error::none);
  EXPECT_EQ(check(policy(30), jwt(R"({"sub":"a","exp":-9223372036854775808})")),
            token_error::expired);
  for (auto bad : {R"({"sub":"a"})", R"({"sub":"a","exp":"9999999999"})",
                   R"({"sub":"a","exp":true})", R"({"sub":"a","exp":null})",
                   R"({"sub":"a","exp":[1]})"})
    EXPECT_EQ(check(policy(), jwt(bad)), token_error::malformed) << bad;
}

TEST(jwt, not_before_and_issued_at) {
  auto nbf = [](int64_t t) { return R"(,"nbf":)" + std::to_string(t); };
  auto iat = [](int64_t t) { return R"(,"iat":)" + std::to_string(t); };
  auto exp = now + 3600;
  EXPECT_EQ(check(policy(30), jwt(claims("a", exp, nbf(now + 30)))),
            token_error::none);
  EXPECT_EQ(check(policy(30), jwt(claims("a", exp, nbf(now + 31)))),
            token_error::not_yet_valid);
  EXPECT_EQ(check(policy(0), jwt(claims("a", exp, nbf(now)))),
            token_error::none);
  EXPECT_EQ(check(policy(0), jwt(claims("a", exp, nbf(now + 1)))),
            token_error::not_yet_valid);
  EXPECT_EQ(check(policy(30), jwt(claims("a", exp, iat(now - 100)))),
            token_error::none);
  EXPECT_EQ(check(policy(30), jwt(claims("a", exp, iat(now + 600)))),
            token_error::not_yet_valid);
  EXPECT_EQ(check(policy(), jwt(claims("a", exp, R"(,"nbf":"soon")"))),
            token_error::malformed);
  EXPECT_EQ(check(policy(), jwt(claims("a", exp, R"(,"iat":{})"))),
            token_error::malformed);
}

TEST(jwt, audience) {
  auto p = policy();
  p.audience = "matchmaker";
  auto exp = now + 60;
  EXPECT_EQ(check(p, jwt(claims("a", exp, R"(,"aud":"matchmaker")"))),
            token_error::none);
  EXPECT_EQ(check(p, jwt(claims("a", exp, R"(,"aud":["x","matchmaker"])"))),
            token_error::none);
  EXPECT_EQ(check(p, jwt(claims("a", exp, R"(,"aud":"chat")"))),
            token_error::wrong_audience);
  EXPECT_EQ(check(p, jwt(claims("a", exp, R"(,"aud":["chat"])"))),
            token_error::wrong_audience);
  EXPECT_EQ(check(p, jwt(claims("a", exp, R"(,"aud":[])"))),
            token_error::wrong_audience);
  EXPECT_EQ(check(p, jwt(claims("a", exp))), token_error::wrong_audience);
  EXPECT_EQ(check(p, jwt(claims("a", exp, R"(,"aud":"Matchmaker")"))),
            token_error::wrong_audience);
  EXPECT_EQ(check(p, jwt(claims("a", exp, R"(,"aud":7)"))),
            token_error::malformed);
  EXPECT_EQ(check(p, jwt(claims("a", exp, R"(,"aud":["matchmaker",7])"))),
            token_error::malformed);
  // A node without an audience refuses tokens meant for one (RFC 7519
  // 4.1.3), and takes those that name none.
  EXPECT_EQ(check(policy(), jwt(claims("a", exp, R"(,"aud":"matchmaker")"))),
            token_error::wrong_audience);
  EXPECT_EQ(check(policy(), jwt(claims("a", exp))), token_error::none);
}

TEST(jwt, issuer) {
  auto p = policy();
  p.issuer = "https://game.example";
  auto exp = now + 60;
  EXPECT_EQ(check(p, jwt(claims("a", exp, R"(,"iss":"https://game.example")"))),
            token_error::none);
  EXPECT_EQ(check(p, jwt(claims("a", exp, R"(,"iss":"https://evil.example")"))),
            token_error::wrong_issuer);
  EXPECT_EQ(check(p, jwt(claims("a", exp))), token_error::wrong_issuer);
  EXPECT_EQ(check(p,
                  jwt(claims("a", exp, R"(,"iss":["https://game.example"])"))),
            token_error::wrong_issuer);
  // Not configured: not checked.
  EXPECT_EQ(check(policy(), jwt(claims("a", exp, R"(,"iss":"anyone")"))),
            token_error::none);
}

TEST(jwt, subject_is_a_valid_user_id) {
  auto exp = std::to_string(now + 60);
  EXPECT_EQ(check(policy(), jwt(claims(std::string(128, 'u'), now + 60))),
            token_error::none);
  EXPECT_EQ(check(policy(), jwt(claims("user@example.com", now + 60))),
            token_error::none);
  for (auto sub :
       {std::string(R"("")"), std::string(R"("a/b")"), std::string(R"("a b")"),
        std::string(R"("café")"), '"' + std::string(129, 'u') + '"',
        std::string("7"), std::string("null"), std::string(R"(["a"])")}) {
    auto res = mm::verify_bearer(
      policy(), jwt(R"({"sub":)" + sub + R"(,"exp":)" + exp + "}"), now);
    EXPECT_EQ(res.error, token_error::malformed) << sub;
    EXPECT_TRUE(res.user.empty());
  }
  EXPECT_EQ(check(policy(), jwt(R"({"exp":)" + exp + "}")),
            token_error::malformed);
}

TEST(jwt, key_rollover) {
  auto p = policy();
  p.secrets = {"current-secret-0123", "next-secret-0123456"};
  auto c = claims("alice", now + 60);
  EXPECT_EQ(check(p, jwt(c, "current-secret-0123")), token_error::none);
  EXPECT_EQ(check(p, jwt(c, "next-secret-0123456")), token_error::none);
  EXPECT_EQ(check(p, jwt(c, "retired-secret-0123")), token_error::forged);
  EXPECT_EQ(check(p, mm::sign_token("current-secret-0123", "a", now + 9)),
            token_error::none);
  EXPECT_EQ(check(p, mm::sign_token("next-secret-0123456", "a", now + 9)),
            token_error::none);
  EXPECT_EQ(check(p, mm::sign_token("retired-secret-0123", "a", now + 9)),
            token_error::forged);
  // An expired token signed with the second secret is expired, not forged.
  EXPECT_EQ(check(p, mm::sign_token("next-secret-0123456", "a", now - 9)),
            token_error::expired);
  // No secret: nothing is accepted; a JWT is told its HS256 is not taken.
  p.secrets.clear();
  EXPECT_EQ(check(p, jwt(c)), token_error::bad_algorithm);
  EXPECT_EQ(check(p, mm::sign_token(secret, "a", now + 9)),
            token_error::forged);
}

TEST(jwt, size_bound) {
  EXPECT_EQ(check(policy(), ""), token_error::missing);
  // Padded with a claim up to the bound: accepted; a byte more: not.
  auto base = jwt(claims("alice", now + 60, R"(,"pad":"")"));
  auto pad_for = [&](size_t n) {
    return jwt(
      claims("alice", now + 60, R"(,"pad":")" + std::string(n, 'x') + "\""));
  };
  size_t n = 2800; // ~3.9 KB already; the loop walks the last bytes
  ASSERT_LE(pad_for(n).size(), mm::max_token_bytes);
  while (pad_for(n + 1).size() <= mm::max_token_bytes)
    ++n;
  auto at_bound = pad_for(n);
  ASSERT_LE(at_bound.size(), mm::max_token_bytes);
  EXPECT_EQ(check(policy(), at_bound), token_error::none);
  EXPECT_EQ(check(policy(), pad_for(n + 1)), token_error::oversized);
  EXPECT_EQ(check(policy(), std::string(1 << 20, 'A')), token_error::oversized);
  EXPECT_EQ(check(policy(), "v1." + std::string(5000, 'A')),
            token_error::oversized);
  EXPECT_LT(base.size(), at_bound.size());
}

TEST(jwt, malformed_forms) {
  auto tok = jwt(claims("alice", now + 60));
  auto p1 = tok.find('.'), p2 = tok.rfind('.');
  auto h = tok.substr(0, p1), pl = tok.substr(p1 + 1, p2 - p1 - 1),
       sig = tok.substr(p2 + 1);
  const std::string cases[] = {
    "x",
    ".",
    "..",
    "...",
    h,
    h + "." + pl,
    h + "." + pl + "." + sig + ".",
    h + "." + pl + "." + sig + "." + sig,
    "." + pl + "." + sig,
    h + ".." + sig,
    h + "." + pl + ".",
    h + "=." + pl + "." + sig, // padding
    h + "." + pl + "." + sig + "=",
    h + "." + pl + "." + sig.substr(0, 42), // 31 bytes
    h + "." + pl + "." + sig + "AA",        // 33 bytes
    h.substr(0, h.size() - 1) + "*." + pl + "." + sig,
    b64("[1,2]") + "." + pl + "." + sig,              // header not an object
    b64("{\"alg\":\"HS256\"") + "." + pl + "." + sig, // cut JSON
    b64("\xff\xfe") + "." + pl + "." + sig,
    "Bearer " + tok,
    " " + tok,
  };
  for (auto& c : cases) {
    auto res = mm::verify_bearer(policy(), c, now);
    EXPECT_EQ(res.error, token_error::malformed) << "token: " << c;
    EXPECT_TRUE(res.user.empty());
  }
  // The payload, once signed, must be a JSON object too.
  for (auto bad : {"[]", "\"alice\"", "{\"sub\":\"alice\",", "",
                   "{\"sub\":\"alice\",\"exp\":1}x"})
    EXPECT_EQ(check(policy(), jwt(bad)), token_error::malformed) << bad;
}

TEST(jwt, a_queues_claim_scopes_the_token) {
  auto scoped = mm::verify_bearer(
    policy(), jwt(claims("dee", now + 60, R"(,"queues":["demo","lobby"])")),
    now);
  ASSERT_EQ(scoped.error, token_error::none) << scoped.detail;
  EXPECT_TRUE(scoped.may_join("demo"));
  EXPECT_TRUE(scoped.may_join("lobby"));
  EXPECT_FALSE(scoped.may_join("default"));
  // Without the claim (or a v1 token): any queue.
  auto any = mm::verify_bearer(policy(), jwt(claims("ann", now + 60)), now);
  EXPECT_TRUE(any.may_join("default"));
  auto v1 = mm::verify_bearer(policy(), mm::sign_token(secret, "bob", now + 9),
                              now);
  EXPECT_TRUE(v1.may_join("default"));
  // A claim that is not a non-empty array of names is refused, not ignored
  // (an empty scope must not read as "any queue").
  for (auto bad : {R"(,"queues":[])", R"(,"queues":"demo")", R"(,"queues":[1])",
                   R"(,"queues":["a b"])", R"(,"queues":{})"}) {
    auto res = mm::verify_bearer(policy(), jwt(claims("eve", now + 60, bad)),
                                 now);
    EXPECT_EQ(res.error, token_error::malformed) << bad;
  }
}

TEST(jwt, formats_can_be_disabled) {
  auto p = policy();
  p.accept_v1 = false;
  EXPECT_EQ(check(p, mm::sign_token(secret, "a", now + 9)),
            token_error::format_disabled);
  EXPECT_EQ(check(p, jwt(claims("a", now + 60))), token_error::none);
  p.accept_v1 = true;
  p.accept_jwt = false;
  EXPECT_EQ(check(p, jwt(claims("a", now + 60))), token_error::format_disabled);
  EXPECT_EQ(check(p, mm::sign_token(secret, "a", now + 9)), token_error::none);
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
