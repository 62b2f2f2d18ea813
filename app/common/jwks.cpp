#include "app/common/jwks.hpp"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include <nlohmann/json.hpp>

#include "app/common/token.hpp"

namespace mm {

struct jwk_set::key {
  std::string kid;
  std::string alg; // RS256 | ES256
  EVP_PKEY* pkey = nullptr;

  key() = default;
  key(const key&) = delete;
  key& operator=(const key&) = delete;
  ~key() {
    EVP_PKEY_free(pkey);
  }
};

namespace {

using json = nlohmann::json;

/// The most keys a set may hold (providers publish two or three).
constexpr size_t max_keys = 64;

template <class T, void (*Free)(T*)>
struct deleter {
  void operator()(T* p) const noexcept {
    Free(p);
  }
};

using bn_ptr = std::unique_ptr<BIGNUM, deleter<BIGNUM, BN_free>>;
using bld_ptr = std::unique_ptr<OSSL_PARAM_BLD,
                                deleter<OSSL_PARAM_BLD, OSSL_PARAM_BLD_free>>;
using params_ptr
  = std::unique_ptr<OSSL_PARAM, deleter<OSSL_PARAM, OSSL_PARAM_free>>;
using pctx_ptr
  = std::unique_ptr<EVP_PKEY_CTX, deleter<EVP_PKEY_CTX, EVP_PKEY_CTX_free>>;
using mdctx_ptr
  = std::unique_ptr<EVP_MD_CTX, deleter<EVP_MD_CTX, EVP_MD_CTX_free>>;
using sig_ptr = std::unique_ptr<ECDSA_SIG, deleter<ECDSA_SIG, ECDSA_SIG_free>>;

/// The base64url member `name` of `k` decoded, or false.
bool member_bytes(const json& k, const char* name, std::string& out) {
  auto i = k.find(name);
  return i != k.end() && i->is_string()
         && base64url_decode(i->get<std::string>(), out) && !out.empty();
}

/// A public key made of OpenSSL parameters, or null.
EVP_PKEY* from_params(const char* type, OSSL_PARAM_BLD* bld) {
  params_ptr params{OSSL_PARAM_BLD_to_param(bld)};
  pctx_ptr ctx{EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr)};
  EVP_PKEY* pkey = nullptr;
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1
      || EVP_PKEY_fromdata(ctx.get(), &pkey, EVP_PKEY_PUBLIC_KEY, params.get())
           != 1)
    return nullptr;
  return pkey;
}

EVP_PKEY* rsa_key(const json& k, std::string& err) {
  std::string n, e;
  if (!member_bytes(k, "n", n) || !member_bytes(k, "e", e)) {
    err = "an RSA key needs n and e (base64url)";
    return nullptr;
  }
  bn_ptr bn{BN_bin2bn(reinterpret_cast<const unsigned char*>(n.data()),
                      static_cast<int>(n.size()), nullptr)};
  bn_ptr be{BN_bin2bn(reinterpret_cast<const unsigned char*>(e.data()),
                      static_cast<int>(e.size()), nullptr)};
  bld_ptr bld{OSSL_PARAM_BLD_new()};
  if (!bn || !be || !bld
      || OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn.get()) != 1
      || OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, be.get())
           != 1) {
    err = "an RSA key OpenSSL does not take";
    return nullptr;
  }
  auto* pkey = from_params("RSA", bld.get());
  if (pkey == nullptr)
    err = "an RSA key OpenSSL does not take";
  return pkey;
}

EVP_PKEY* ec_key(const json& k, std::string& err) {
  std::string x, y;
  if (!member_bytes(k, "x", x) || !member_bytes(k, "y", y) || x.size() != 32
      || y.size() != 32) {
    err = "a P-256 key needs x and y of 32 bytes each (base64url)";
    return nullptr;
  }
  auto point = std::string(1, '\x04') + x + y; // uncompressed
  bld_ptr bld{OSSL_PARAM_BLD_new()};
  if (!bld
      || OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME,
                                         "prime256v1", 0)
           != 1
      || OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY,
                                          point.data(), point.size())
           != 1) {
    err = "a P-256 key OpenSSL does not take";
    return nullptr;
  }
  auto* pkey = from_params("EC", bld.get());
  if (pkey == nullptr) {
    err = "a P-256 key OpenSSL does not take";
    return nullptr;
  }
  // A point off the curve would make every check meaningless.
  pctx_ptr check{EVP_PKEY_CTX_new_from_pkey(nullptr, pkey, nullptr)};
  if (!check || EVP_PKEY_public_check(check.get()) != 1) {
    EVP_PKEY_free(pkey);
    err = "a P-256 key whose point is not on the curve";
    return nullptr;
  }
  return pkey;
}

/// A JWS ES256 signature (R || S, 32 bytes each) in DER, as OpenSSL
/// verifies it; empty when it is not 64 bytes.
std::string es256_der(const std::string& sig) {
  if (sig.size() != 64)
    return {};
  auto* p = reinterpret_cast<const unsigned char*>(sig.data());
  sig_ptr s{ECDSA_SIG_new()};
  BIGNUM* r = BN_bin2bn(p, 32, nullptr);
  BIGNUM* ss = BN_bin2bn(p + 32, 32, nullptr);
  if (!s || r == nullptr || ss == nullptr
      || ECDSA_SIG_set0(s.get(), r, ss) != 1) {
    BN_free(r);
    BN_free(ss);
    return {};
  }
  unsigned char* der = nullptr;
  int len = i2d_ECDSA_SIG(s.get(), &der);
  if (len <= 0)
    return {};
  std::string out(reinterpret_cast<char*>(der), static_cast<size_t>(len));
  OPENSSL_free(der);
  return out;
}

} // namespace

jwk_set::jwk_set() = default;
jwk_set::~jwk_set() = default;

std::shared_ptr<const jwk_set>
jwk_set::parse(const std::string& text, std::string& err,
               std::vector<std::string>* skipped) {
  auto j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("keys") || !j["keys"].is_array()) {
    err = "not a JWK Set: an object with a keys array";
    return nullptr;
  }
  if (j["keys"].size() > max_keys) {
    err = "more than " + std::to_string(max_keys) + " keys";
    return nullptr;
  }
  std::shared_ptr<jwk_set> out{new jwk_set};
  size_t index = 0;
  for (auto& k : j["keys"]) {
    auto where = "key " + std::to_string(index++);
    if (!k.is_object()) {
      err = where + ": not an object";
      return nullptr;
    }
    auto str = [&k](const char* name) {
      auto i = k.find(name);
      return i != k.end() && i->is_string() ? i->get<std::string>()
                                            : std::string{};
    };
    auto kty = str("kty"), kid = str("kid"), use = str("use"), alg = str("alg"),
         crv = str("crv");
    if (!kid.empty())
      where += " (kid " + kid + ")";
    auto skip = [&](const std::string& why) {
      if (skipped)
        skipped->push_back(where + ": " + why);
    };
    if (!use.empty() && use != "sig") {
      skip("use " + use);
      continue;
    }
    std::string want;
    if (kty == "RSA")
      want = "RS256";
    else if (kty == "EC" && crv == "P-256")
      want = "ES256";
    if (want.empty()) {
      skip("kty " + kty + (crv.empty() ? "" : " crv " + crv)
           + " (RSA and EC P-256 are taken)");
      continue;
    }
    if (!alg.empty() && alg != want) {
      skip("alg " + alg + " (RS256 and ES256 are taken)");
      continue;
    }
    auto x = std::make_unique<key>();
    x->kid = kid;
    x->alg = want;
    x->pkey = want == "RS256" ? rsa_key(k, err) : ec_key(k, err);
    if (x->pkey == nullptr) {
      err = where + ": " + err;
      return nullptr;
    }
    if (want == "RS256" && EVP_PKEY_get_bits(x->pkey) < 2048) {
      skip("RSA under 2048 bits");
      continue;
    }
    for (auto& other : out->keys_)
      if (other->kid == kid) {
        err = where + ": a second key of that kid";
        return nullptr;
      }
    out->keys_.push_back(std::move(x));
  }
  return out;
}

size_t jwk_set::size() const noexcept {
  return keys_.size();
}

std::vector<std::string> jwk_set::kids() const {
  std::vector<std::string> out;
  for (auto& k : keys_)
    out.push_back(k->kid);
  return out;
}

jwk_check jwk_set::verify(const std::string& kid, const std::string& alg,
                          const std::string& input,
                          const std::string& sig) const {
  const key* found = nullptr;
  if (!kid.empty()) {
    for (auto& k : keys_)
      if (k->kid == kid)
        found = k.get();
  } else {
    // No kid: only a set with one key for the alg says which.
    for (auto& k : keys_)
      if (k->alg == alg) {
        if (found != nullptr)
          return jwk_check::unknown_key;
        found = k.get();
      }
  }
  if (found == nullptr)
    return jwk_check::unknown_key;
  if (found->alg != alg)
    return jwk_check::wrong_algorithm;
  std::string der;
  const std::string* s = &sig;
  if (alg == "ES256") {
    der = es256_der(sig);
    if (der.empty())
      return jwk_check::bad_signature;
    s = &der;
  }
  mdctx_ptr md{EVP_MD_CTX_new()};
  if (!md
      || EVP_DigestVerifyInit(md.get(), nullptr, EVP_sha256(), nullptr,
                              found->pkey)
           != 1)
    return jwk_check::bad_signature;
  auto ok = EVP_DigestVerify(
    md.get(), reinterpret_cast<const unsigned char*>(s->data()), s->size(),
    reinterpret_cast<const unsigned char*>(input.data()), input.size());
  return ok == 1 ? jwk_check::ok : jwk_check::bad_signature;
}

key_source::~key_source() = default;

namespace {

class fixed_source : public key_source {
 public:
  explicit fixed_source(std::shared_ptr<const jwk_set> set)
    : set_(std::move(set)) {}

  std::shared_ptr<const jwk_set> current() const override {
    return set_;
  }

  void missed(const std::string&) const override {
    // Nothing to fetch.
  }

 private:
  std::shared_ptr<const jwk_set> set_;
};

} // namespace

std::shared_ptr<key_source> fixed_keys(std::shared_ptr<const jwk_set> set) {
  return std::make_shared<fixed_source>(std::move(set));
}

} // namespace mm
