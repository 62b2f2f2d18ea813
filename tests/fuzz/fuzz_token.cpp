// Fuzz target `token`: bearer tokens (app/common/token.hpp). The input is a token
// verified as it is; it is also read as "user\nexpiry" to be signed.
//
// Invariants: nothing throws; a refusal is one of the four named errors; an
// accepted token names a non-empty user and is exactly the token the secret
// signs for that user and expiry (no second spelling of one token); with
// another secret it is forged; signing any user and verifying gives the user
// back; base64url decoding is canonical (decode then encode is identity).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "app/common/token.hpp"
#include "tests/fuzz/fuzz_common.hpp"

using namespace mm;

namespace {

constexpr int64_t now = 1767225600; // 2026-01-01

void check_named(token_error e, const std::string& input) {
  // The 401 names of docs/api.md.
  static const std::set<std::string> named{
    "missing_token",        "malformed_token", "expired_token",
    "bad_signature",        "oversized_token", "unsupported_algorithm",
    "token_not_yet_valid",  "wrong_audience",  "wrong_issuer",
    "disabled_token_format"};
  std::string name = to_string(e);
  if (e != token_error::none && named.count(name) == 0)
    fuzz::fail("unnamed token error " + name, input);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  // 1. The input as a token.
  auto c = verify_token(fuzz::secret, input, now);
  check_named(c.error, input);
  if (c.error == token_error::none) {
    if (c.user.empty())
      fuzz::fail("a token accepted without a user", input);
    auto dot = input.rfind('.');
    auto exp_dot = input.rfind('.', dot - 1);
    auto expiry = std::strtoll(
      input.substr(exp_dot + 1, dot - exp_dot - 1).c_str(), nullptr, 10);
    if (sign_token(fuzz::secret, c.user, expiry) != input)
      fuzz::fail("an accepted token is not the one signed for its user", input);
    if (verify_token(fuzz::secret + "x", input, now).error
        != token_error::forged)
      fuzz::fail("a token accepted under another secret", input);
  } else if (c.error == token_error::missing && !input.empty()) {
    fuzz::fail("missing_token for a non-empty token", input);
  }
  // 2. The input as what a host signs: user, then expiry.
  auto nl = input.find('\n');
  std::string user = input.substr(0, nl);
  int64_t expiry = 0;
  if (nl != std::string::npos) {
    for (char ch : input.substr(nl + 1, 18))
      if (ch >= '0' && ch <= '9')
        expiry = expiry * 10 + (ch - '0');
  }
  auto t = sign_token(fuzz::secret, user, expiry);
  auto back = verify_token(fuzz::secret, t, now);
  check_named(back.error, input);
  if (!user.empty() && t.size() <= 1024) {
    auto want = expiry > now ? token_error::none : token_error::expired;
    if (back.error != want || (want == token_error::none && back.user != user))
      fuzz::fail(std::string{"sign then verify gave "} + to_string(back.error),
                 input);
  }
  // A signed token with one byte changed is never accepted for that user.
  if (back.error == token_error::none && size > 0) {
    auto changed = t;
    auto& ch = changed[data[0] % changed.size()];
    ch = static_cast<char>(ch ^ (1 + data[size - 1] % 255));
    auto m = verify_token(fuzz::secret, changed, now);
    check_named(m.error, input);
    if (m.error == token_error::none && m.user == user)
      fuzz::fail("a changed token still accepted", input);
  }
  // 3. base64url: canonical both ways.
  std::string decoded;
  if (base64url_decode(input, decoded)) {
    if (base64url_encode(decoded) != input)
      fuzz::fail("base64url decoding is not canonical", input);
  }
  if (!base64url_decode(base64url_encode(input), decoded) || decoded != input)
    fuzz::fail("base64url does not round-trip", input);
  return 0;
}
