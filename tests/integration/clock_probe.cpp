// A probe for tests/integration/clock_skew_test.sh: run as a "node" whose wall
// clock faketime shifts, it shows that deadlines and order come from the
// store's clock, never from the node's.
//   clock_probe now                          -> this process's wall clock, ms
//   clock_probe redis PORT enqueue Q USER T  -> deadline of the new ticket
//   clock_probe redis PORT claim Q USER T    -> outcome partner_user
//   clock_probe embedded                     -> deadlines under a fixed clock

#include <cstdio>
#include <string>

#include "tests/support/store_harness.hpp"

using namespace mm;

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "now") {
    std::printf("%lld\n", static_cast<long long>(test::system_ms()));
    return 0;
  }
  if (mode == "embedded") {
    // The embedded store's clock is the injected one; the wall clock of the
    // process (shifted or not) must not show up anywhere in the results.
    embedded_options opts;
    opts.clock = [] { return int64_t{1'700'000'000'000}; };
    test::store_client c{make_embedded_store(opts)->connect()};
    auto a = c.enqueue(test::spec("q", "a", "ta", 60000));
    auto b = c.enqueue(test::spec("q", "b", "tb", 60000));
    auto k = c.claim(test::spec("q", "c", "tc", 60000));
    if (!a || !b || !k)
      return 1;
    std::printf("%lld %lld %s\n", static_cast<long long>(a->deadline),
                static_cast<long long>(b->deadline), k->partner.user.c_str());
    return 0;
  }
  if (mode == "redis" && argc == 7) {
    redis_options opts;
    opts.port = static_cast<uint16_t>(std::stoi(argv[2]));
    test::store_client c{make_redis_store(opts)->connect()};
    std::string op = argv[3];
    auto s = test::spec(argv[4], argv[5], argv[6], 60000);
    if (op == "enqueue") {
      auto r = c.enqueue(s);
      if (!r)
        return 1;
      std::printf("%lld\n", static_cast<long long>(r->deadline));
      return 0;
    }
    if (op == "claim") {
      auto r = c.claim(s);
      if (!r)
        return 1;
      std::printf("%s %s\n", to_string(r->outcome), r->partner.user.c_str());
      return 0;
    }
  }
  std::fprintf(stderr,
               "usage: see the comment at the top of clock_probe.cpp\n");
  return 2;
}
