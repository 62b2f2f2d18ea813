// Tokens from an identity provider (app/common/jwks.hpp): RS256 and ES256
// JWTs checked against a JWK Set; the kid selects the key; a wrong kid,
// key or alg is refused by name. Keys are made here with OpenSSL.

#include "app/common/jwks.hpp"
#include "app/common/token.hpp"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace {

using mm::token_error;
using json = nlohmann::json;

constexpr int64_t now = 1700000000;

/// A private key of the test, with its public JWK.
struct test_key {
  std::shared_ptr<EVP_PKEY> pkey;
  std::string alg, kid;

  std::string bn_param(const char* name) const {
    BIGNUM* bn = nullptr;
    EVP_PKEY_get_bn_param(pkey.get(), name, &bn);
    std::string out(static_cast<size_t>(BN_num_bytes(bn)), '\0');
    BN_bn2bin(bn, reinterpret_cast<unsigned char*>(out.data()));
    BN_free(bn);
    return out;
  }

  json jwk() const {
    if (alg == "RS256")
      return {{"kty", "RSA"},
              {"kid", kid},
              {"use", "sig"},
              {"alg", "RS256"},
              {"n", mm::base64url_encode(bn_param(OSSL_PKEY_PARAM_RSA_N))},
              {"e", mm::base64url_encode(bn_param(OSSL_PKEY_PARAM_RSA_E))}};
    unsigned char pub[65];
    size_t len = 0;
    EVP_PKEY_get_octet_string_param(pkey.get(), OSSL_PKEY_PARAM_PUB_KEY, pub,
                                    sizeof(pub), &len);
    std::string p(reinterpret_cast<char*>(pub), len);
    return {{"kty", "EC"},
            {"kid", kid},
            {"crv", "P-256"},
            {"x", mm::base64url_encode(p.substr(1, 32))},
            {"y", mm::base64url_encode(p.substr(33, 32))}};
  }

  /// The JWS signature of `input` (ES256: R || S).
  std::string sign(const std::string& input) const {
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> md{EVP_MD_CTX_new(),
                                                          EVP_MD_CTX_free};
    EVP_DigestSignInit(md.get(), nullptr, EVP_sha256(), nullptr, pkey.get());
    size_t len = 0;
    auto in = reinterpret_cast<const unsigned char*>(input.data());
    EVP_DigestSign(md.get(), nullptr, &len, in, input.size());
    std::string sig(len, '\0');
    EVP_DigestSign(md.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                   in, input.size());
    sig.resize(len);
    if (alg == "RS256")
      return sig;
    auto p = reinterpret_cast<const unsigned char*>(sig.data());
    ECDSA_SIG* s = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size()));
    std::string raw(64, '\0');
    BN_bn2binpad(ECDSA_SIG_get0_r(s),
                 reinterpret_cast<unsigned char*>(raw.data()), 32);
    BN_bn2binpad(ECDSA_SIG_get0_s(s),
                 reinterpret_cast<unsigned char*>(raw.data()) + 32, 32);
    ECDSA_SIG_free(s);
    return raw;
  }

  /// A JWT of `claims` signed by this key; `header` defaults to alg + kid.
  std::string jwt(const json& claims, json header = nullptr) const {
    if (header.is_null())
      header = {{"alg", alg}, {"kid", kid}, {"typ", "JWT"}};
    auto body = mm::base64url_encode(header.dump()) + "."
                + mm::base64url_encode(claims.dump());
    return body + "." + mm::base64url_encode(sign(body));
  }
};

test_key rsa(const std::string& kid, unsigned bits = 2048) {
  return {std::shared_ptr<EVP_PKEY>(EVP_RSA_gen(bits), EVP_PKEY_free), "RS256",
          kid};
}

test_key ec(const std::string& kid) {
  return {std::shared_ptr<EVP_PKEY>(EVP_EC_gen("P-256"), EVP_PKEY_free),
          "ES256", kid};
}

std::string jwks_of(const std::vector<const test_key*>& ks) {
  json keys = json::array();
  for (auto* k : ks)
    keys.push_back(k->jwk());
  return json{{"keys", keys}}.dump();
}

json claims(const std::string& sub) {
  return {{"sub", sub}, {"exp", now + 60}};
}

/// A policy of the keys `ks` only (no shared secret).
mm::token_policy policy_of(const std::vector<const test_key*>& ks) {
  std::string err;
  auto set = mm::jwk_set::parse(jwks_of(ks), err);
  EXPECT_TRUE(set) << err;
  mm::token_policy p;
  p.keys = mm::fixed_keys(set);
  return p;
}

/// A source that remembers the kids it missed.
struct counting_source : mm::key_source {
  std::shared_ptr<const mm::jwk_set> set;
  mutable std::vector<std::string> missed_kids;
  std::shared_ptr<const mm::jwk_set> current() const override {
    return set;
  }
  void missed(const std::string& kid) const override {
    missed_kids.push_back(kid);
  }
};

class jwks : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    r1_ = new test_key(rsa("r1"));
    r2_ = new test_key(rsa("r2"));
    e1_ = new test_key(ec("e1"));
  }
  static void TearDownTestSuite() {
    delete r1_;
    delete r2_;
    delete e1_;
  }
  static test_key* r1_;
  static test_key* r2_;
  static test_key* e1_;
};

test_key* jwks::r1_ = nullptr;
test_key* jwks::r2_ = nullptr;
test_key* jwks::e1_ = nullptr;

TEST_F(jwks, rs256_and_es256_are_accepted_with_their_keys) {
  auto p = policy_of({r1_, e1_});
  for (auto* k : {r1_, e1_}) {
    auto res = mm::verify_bearer(p, k->jwt(claims("alice")), now);
    EXPECT_EQ(res.error, token_error::none) << k->kid << ": " << res.detail;
    EXPECT_EQ(res.user, "alice");
  }
  // The claims are checked as for HS256: expiry, scope.
  auto old = claims("alice");
  old["exp"] = now - 100;
  EXPECT_EQ(mm::verify_bearer(p, r1_->jwt(old), now).error,
            token_error::expired);
  auto scoped = claims("bob");
  scoped["queues"] = {"q1"};
  auto res = mm::verify_bearer(p, e1_->jwt(scoped), now);
  ASSERT_EQ(res.error, token_error::none);
  EXPECT_TRUE(res.may_join("q1"));
  EXPECT_FALSE(res.may_join("default"));
}

TEST_F(jwks, the_kid_selects_the_key) {
  auto p = policy_of({r1_, r2_});
  EXPECT_EQ(mm::verify_bearer(p, r2_->jwt(claims("a")), now).error,
            token_error::none);
  // Signed by r2 but naming r1: r1 does not verify it.
  auto lying = r2_->jwt(claims("a"), {{"alg", "RS256"}, {"kid", "r1"}});
  EXPECT_EQ(mm::verify_bearer(p, lying, now).error, token_error::forged);
  // A kid nobody has: named, and the source is told so it can refresh.
  auto src = std::make_shared<counting_source>();
  src->set = p.keys->current();
  p.keys = src;
  auto stranger = rsa("r9");
  auto res = mm::verify_bearer(p, stranger.jwt(claims("a")), now);
  EXPECT_EQ(res.error, token_error::unknown_key);
  EXPECT_STREQ(mm::to_string(res.error), "unknown_key");
  ASSERT_EQ(src->missed_kids.size(), 1u);
  EXPECT_EQ(src->missed_kids[0], "r9");
  // No kid: only a set with one key of the alg says which.
  auto bare = r1_->jwt(claims("a"), {{"alg", "RS256"}});
  EXPECT_EQ(mm::verify_bearer(p, bare, now).error, token_error::unknown_key);
  auto one = policy_of({r1_, e1_});
  EXPECT_EQ(mm::verify_bearer(one, bare, now).error, token_error::none);
}

TEST_F(jwks, a_wrong_key_or_alg_is_refused) {
  auto p = policy_of({r1_, e1_});
  // Another RSA key under r1's kid.
  auto forger = rsa("r1");
  EXPECT_EQ(mm::verify_bearer(p, forger.jwt(claims("a")), now).error,
            token_error::forged);
  // The EC key's kid with alg RS256: the key is not for that alg.
  auto mixed = r1_->jwt(claims("a"), {{"alg", "RS256"}, {"kid", "e1"}});
  EXPECT_EQ(mm::verify_bearer(p, mixed, now).error, token_error::bad_algorithm);
  // HS256 signed with the RSA modulus as a secret (the old confusion
  // attack): this node has no secret, HS256 is refused outright.
  auto n = r1_->jwk()["n"].get<std::string>();
  auto hs = mm::sign_jwt(n, R"({"alg":"HS256","kid":"r1"})",
                         claims("a").dump());
  EXPECT_EQ(mm::verify_bearer(p, hs, now).error, token_error::bad_algorithm);
  for (std::string alg : {"RS384", "PS256", "ES384", "EdDSA", "none"}) {
    auto t = r1_->jwt(claims("a"), {{"alg", alg}, {"kid", "r1"}});
    EXPECT_EQ(mm::verify_bearer(p, t, now).error, token_error::bad_algorithm)
      << alg;
  }
  // A tampered payload.
  auto good = r1_->jwt(claims("alice"));
  auto dot = good.find('.');
  auto evil = good.substr(0, dot + 1)
              + mm::base64url_encode(claims("mallory").dump())
              + good.substr(good.rfind('.'));
  EXPECT_EQ(mm::verify_bearer(p, evil, now).error, token_error::forged);
  // ES256 signatures are 64 bytes R || S, not DER.
  auto e = e1_->jwt(claims("a"));
  auto body = e.substr(0, e.rfind('.'));
  auto der_sig = body + "." + mm::base64url_encode(std::string(70, 'x'));
  EXPECT_EQ(mm::verify_bearer(p, der_sig, now).error, token_error::forged);
  // Without keys, RS256 is refused as before.
  mm::token_policy hs_only;
  hs_only.secrets = {"0123456789abcdef"};
  EXPECT_EQ(mm::verify_bearer(hs_only, r1_->jwt(claims("a")), now).error,
            token_error::bad_algorithm);
}

TEST_F(jwks, sets_are_parsed_strictly_and_skip_what_they_cannot_use) {
  std::string err;
  std::vector<std::string> skipped;
  auto small = rsa("small", 1024);
  auto text = json{{"keys",
                    {r1_->jwk(),
                     {{"kty", "oct"}, {"kid", "h"}, {"k", "c2VjcmV0"}},
                     {{"kty", "RSA"},
                      {"kid", "enc"},
                      {"use", "enc"},
                      {"n", r1_->jwk()["n"]},
                      {"e", "AQAB"}},
                     {{"kty", "EC"}, {"kid", "p384"}, {"crv", "P-384"}},
                     small.jwk()}}}
                .dump();
  auto set = mm::jwk_set::parse(text, err, &skipped);
  ASSERT_TRUE(set) << err;
  EXPECT_EQ(set->size(), 1u);
  EXPECT_EQ(set->kids(), std::vector<std::string>{"r1"});
  EXPECT_EQ(skipped.size(), 4u);
  for (
    std::string bad :
    {"", "[]", "{}", R"({"keys": {}})", R"({"keys": [1]})",
     R"({"keys": [{"kty": "RSA", "kid": "x", "n": "!!", "e": "AQAB"}]})",
     R"({"keys": [{"kty": "EC", "crv": "P-256", "x": "AAAA", "y": "AAAA"}]})"}) {
    EXPECT_FALSE(mm::jwk_set::parse(bad, err)) << bad;
    EXPECT_FALSE(err.empty());
  }
  // A point off the curve.
  auto off = e1_->jwk();
  off["y"] = mm::base64url_encode(std::string(32, '\x01'));
  EXPECT_FALSE(mm::jwk_set::parse(json{{"keys", {off}}}.dump(), err));
  // Two keys of one kid.
  auto twice = json{{"keys", {r1_->jwk(), r1_->jwk()}}}.dump();
  EXPECT_FALSE(mm::jwk_set::parse(twice, err));
}

} // namespace
