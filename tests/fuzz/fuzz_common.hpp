#pragma once

// What every target shares: the token secret, and how a broken invariant is
// reported: what broke and the input, then abort(), which libFuzzer (and the
// replay main) turn into a failure that keeps the input.

#include <cstdio>
#include <cstdlib>
#include <string>

namespace mm::fuzz {

/// The secret the corpus's tokens are signed with (make_corpus.py).
inline const std::string secret = "fuzz-secret";

[[noreturn]] inline void fail(const std::string& what,
                              const std::string& input) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::fprintf(stderr, "input (%zu bytes): ", input.size());
  for (unsigned char c : input.substr(0, 512))
    std::fprintf(stderr, c >= 32 && c < 127 ? "%c" : "\\x%02x", c);
  std::fprintf(stderr, "\n");
  std::abort();
}

} // namespace mm::fuzz
