#pragma once

// matchd's identity-provider keys (--jwks-file, --jwks-url): read at
// start (matchd does not start without a usable set), then again every
// --jwks-refresh seconds on a thread of their own, and soon after a token
// names a kid the set lacks (a rotation), at most once per
// `min_refresh_s`. A failed refresh keeps the set in force. docs/api.md,
// "Tokens from an identity provider".

#include <cstdint>
#include <memory>
#include <string>

#include "app/common/jwks.hpp"

namespace mm {

struct jwks_options {
  std::string file;    ///< a JWK Set file; or
  std::string url;     ///< http:// or https:// URL of one
  std::string ca_file; ///< https: CA bundle (empty: the system's)
  uint32_t refresh_s = 300;
  uint32_t min_refresh_s = 5; ///< the soonest fetch after a missed kid
  uint32_t timeout_ms = 5000; ///< one fetch, connect to last byte
};

/// Reads the set once and starts the refresher; null and `err` when the
/// first read fails or takes no key. The refresher stops when the last
/// reference goes.
std::shared_ptr<key_source> start_jwks(const jwks_options& opts,
                                       std::string& err);

} // namespace mm
