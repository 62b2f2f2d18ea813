#pragma once

// Public keys from an identity provider: a JWK Set (RFC 7517) of RSA keys
// (RS256, at least 2048 bits) and P-256 keys (ES256). A host's identity
// service signs tokens with its private keys; matchd holds only these.
// docs/api.md, "Tokens from an identity provider".

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace mm {

/// What verifying a signature with a key set answered.
enum class jwk_check {
  ok,
  unknown_key,     ///< no key of that kid (or, without a kid, none or many)
  wrong_algorithm, ///< the key is not for this alg (e.g. an RSA key, ES256)
  bad_signature,   ///< the signature does not verify
};

/// An immutable set of public keys; shared between threads.
class jwk_set {
 public:
  struct key; // one parsed key, OpenSSL's inside

  ~jwk_set();
  jwk_set(const jwk_set&) = delete;
  jwk_set& operator=(const jwk_set&) = delete;

  /// Parses a JWK Set's JSON text (`{"keys": [...]}`). Keys matchd cannot
  /// use are skipped and named in `skipped` (another kty or curve, `use`
  /// other than "sig", an alg other than RS256/ES256, RSA under 2048
  /// bits); a malformed key of a usable type, two keys of one kid, or a
  /// text that is not a JWK Set is an error: null and `err` set.
  static std::shared_ptr<const jwk_set>
  parse(const std::string& text, std::string& err,
        std::vector<std::string>* skipped = nullptr);

  /// How many keys were taken.
  size_t size() const noexcept;

  /// The kids of the keys, in the set's order ("" for a key without one).
  std::vector<std::string> kids() const;

  /// Verifies `sig` (JWS form: RSASSA-PKCS1-v1_5 bytes; for ES256 the 64
  /// bytes R || S) over `input` under `alg` ("RS256" | "ES256") with the
  /// key `kid`; an empty kid picks the one key for `alg` when there is
  /// exactly one. Thread-safe; idempotent.
  jwk_check verify(const std::string& kid, const std::string& alg,
                   const std::string& input, const std::string& sig) const;

 private:
  jwk_set();
  std::vector<std::unique_ptr<key>> keys_;
};

/// Where a node's key set comes from (matchd's --jwks-file/--jwks-url):
/// the token check reads the current set and reports kids it did not find
/// so a rotated set is fetched soon.
class key_source {
 public:
  virtual ~key_source();

  /// The key set in force; never null once the source started.
  virtual std::shared_ptr<const jwk_set> current() const = 0;

  /// A token named `kid` and no key has it: fetch the set again soon
  /// (rate-limited by the source). Non-blocking; idempotent.
  virtual void missed(const std::string& kid) const = 0;
};

/// A source that is always `set` (tests, and a file read once).
std::shared_ptr<key_source> fixed_keys(std::shared_ptr<const jwk_set> set);

} // namespace mm
