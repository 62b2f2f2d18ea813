// claim_bench script: what one claim costs Redis in a queue that is released
// as the engine releases it (docs/benchmarks.md "The claim script's cost").
//
// redis-benchmark (bench/run script) can only call the claim: every matched
// pair's two records stay in the queue's keys forever, so the claim it
// measures runs against hashes and sorted sets that grow by two entries per
// match, which no engine's queue does (a group commit releases its pairs
// within milliseconds). Here each pipeline of claims is followed by ONE
// release call of the tickets it matched, as a finalizer's group commit
// makes it, and only the claims are counted: INFO commandstats is read
// before and after each pipeline of claims, so the releases' time (the same
// command, FCALL) stays out. The minimal claim runs through the same loop
// (it keeps no state for a matched pair, so it has nothing to release).

#include <cinttypes>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm::bench {

namespace {

/// A random 12-digit id with a prefix: redis-benchmark's __rand_int__ form.
std::string rand_id(std::mt19937_64& rng, char prefix) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%c%012llu", prefix,
                static_cast<unsigned long long>(rng() % 100000000ULL));
  return buf;
}

struct cost_run {
  uint64_t calls = 0;
  uint64_t usec = 0;
  uint64_t matched = 0;
  uint64_t errors = 0;
};

/// `calls` calls of `head` + per-call args in pipelines of `pipeline`;
/// with `release_fn` non-empty, each pipeline's matched tickets are
/// released in one call of it (not counted).
cost_run run_one(queue_store& conn, const std::vector<std::string>& head,
                 bool engine_args, const std::string& stat,
                 const std::string& release_fn,
                 const std::vector<std::string>& keys, uint64_t calls,
                 size_t pipeline, uint64_t seed) {
  cost_run out;
  std::mt19937_64 rng(seed);
  std::vector<store_command> batch;
  uint64_t sent = 0;
  while (sent < calls) {
    batch.clear();
    batch.push_back({"INFO", "commandstats"});
    size_t n = std::min<uint64_t>(pipeline, calls - sent);
    sent += n;
    for (size_t i = 0; i < n; ++i) {
      store_command c = head;
      c.push_back(rand_id(rng, 'u'));
      if (engine_args) {
        c.push_back(rand_id(rng, 't'));
        for (const char* a : {"n1", "", "30000", "10", "10000", "0"})
          c.emplace_back(a);
      } else {
        c.emplace_back("30000");
      }
      batch.push_back(std::move(c));
    }
    batch.push_back({"INFO", "commandstats"});
    auto r = conn.execute(batch);
    if (r.size() != batch.size()) {
      ++out.errors;
      return out;
    }
    auto before = parse_commandstats(r.front().value.str)[stat];
    auto after = parse_commandstats(r.back().value.str)[stat];
    if (after.calls != before.calls + n || after.usec < before.usec) {
      // Another client's calls, or the statistics reset: not ours to count.
      ++out.errors;
      return out;
    }
    out.calls += n;
    out.usec += after.usec - before.usec;
    store_command rel{"FCALL", release_fn, std::to_string(keys.size())};
    rel.insert(rel.end(), keys.begin(), keys.end());
    size_t base = rel.size();
    for (size_t i = 1; i + 1 < r.size(); ++i) {
      auto& v = r[i].value;
      if (r[i].code != errc::none || v.type != store_value::kind::array
          || v.elements.empty()) {
        ++out.errors;
        continue;
      }
      if (v.elements[0].str != "matched")
        continue;
      ++out.matched;
      if (release_fn.empty())
        continue; // the minimal keeps nothing for a matched pair
      if (v.elements.size() <= 4) {
        ++out.errors;
        continue;
      }
      rel.push_back(v.elements[1].str); // the caller's ticket
      rel.push_back(v.elements[4].str); // the waiter's
    }
    if (release_fn.empty() || rel.size() == base)
      continue;
    // Every ticket released (a pipeline of 64 claims matches at most 64
    // tickets, far below the release's 1,000): else the queue would grow,
    // the very thing this loop is for.
    auto rr = conn.execute({rel});
    size_t want = rel.size() - base;
    size_t released = 0;
    if (!rr.empty() && rr[0].code == errc::none) {
      auto& e = rr[0].value.elements;
      if (want == 1 && !e.empty() && e[0].str == "released")
        released = 1;
      for (size_t k = 1; want > 1 && k < e.size(); ++k)
        if (e[k].str == "released")
          ++released;
    }
    if (released != want)
      ++out.errors;
  }
  return out;
}

} // namespace

int run_script_cost(const redis_target& redis, const script_cost_options& o) {
  redis_options ro;
  ro.host = redis.host;
  ro.port = redis.port;
  auto conn = make_redis_store(ro)->connect();
  // The built library, and the variants to set beside it (another
  // library's text each, "#!lua name=X" and its functions named
  // mm_claim_<suffix> / mm_release_<suffix> after the X = mm_<suffix>).
  struct library {
    std::string label, text, claim_fn, release_fn;
  };
  std::vector<library> libs{
    {"claim_released", script_library,
     script_sources[static_cast<size_t>(script_id::claim)].function,
     script_sources[static_cast<size_t>(script_id::release)].function}};
  for (auto& [label, text] : o.variants) {
    auto at = text.find("name=mm_");
    auto end = text.find_first_of(" \n", at);
    if (at == std::string::npos || end == std::string::npos) {
      std::fprintf(stderr, "%s: no '#!lua name=mm_<suffix>' line\n",
                   label.c_str());
      return 2;
    }
    auto suffix = text.substr(at + 8, end - at - 8);
    libs.push_back({label, text, "mm_claim_" + suffix, "mm_release_" + suffix});
  }
  for (auto& lib : libs) {
    auto loaded = conn->execute({{"FUNCTION", "LOAD", "REPLACE", lib.text}});
    if (loaded.empty() || loaded[0].code != errc::none
        || loaded[0].value.type == store_value::kind::error) {
      std::fprintf(stderr, "FUNCTION LOAD of %s failed: %s\n",
                   lib.label.c_str(),
                   loaded.empty() ? "" : loaded[0].value.str.c_str());
      return 1;
    }
  }
  std::vector<std::string> keys{"mm:{steady}:waiting", "mm:{steady}:seq",
                                "mm:{steady}:tickets", "mm:{steady}:users",
                                "mm:{steady}:deadlines"};
  std::vector<std::string> min_keys{"mm:{smin}:waiting", "mm:{smin}:seq",
                                    "mm:{smin}:users"};
  auto drop = [&](const std::vector<std::string>& ks) {
    store_command c{"UNLINK"};
    c.insert(c.end(), ks.begin(), ks.end());
    conn->execute({c});
  };
  auto head_of = [](std::vector<std::string> h,
                    const std::vector<std::string>& ks) {
    h.push_back(std::to_string(ks.size()));
    h.insert(h.end(), ks.begin(), ks.end());
    return h;
  };
  struct variant {
    const char* label;
    std::vector<std::string> head;
    bool engine;
    const char* stat;
    std::string release;
    const std::vector<std::string>* ks;
  };
  std::vector<variant> variants;
  for (auto& lib : libs)
    variants.push_back({lib.label.c_str(),
                        head_of({"FCALL", lib.claim_fn}, keys), true, "fcall",
                        lib.release_fn, &keys});
  variants.insert(variants.end(),
                  {
                    {"minimal_loop",
                     head_of({"EVALSHA", o.minimal_sha}, min_keys), false,
                     "evalsha", "", &min_keys},
                  });
  if (!o.minimal_fn.empty())
    variants.push_back({"minimal_fn_loop",
                        head_of({"FCALL", o.minimal_fn}, min_keys), false,
                        "fcall", "", &min_keys});
  for (size_t round = 1; round <= o.rounds; ++round)
    for (auto& v : variants) {
      drop(*v.ks);
      auto c = run_one(*conn, v.head, v.engine, v.stat, v.release, *v.ks,
                       o.calls, o.pipeline, 7919 * round);
      drop(*v.ks);
      if (c.errors > 0 || c.calls == 0) {
        std::fprintf(stderr, "%s: %" PRIu64 " errors\n", v.label, c.errors);
        return 1;
      }
      // "label - usec_per_call matched=N": bench/run script reads the
      // label and the third field.
      std::printf("%s - %.2f matched=%" PRIu64 "\n", v.label,
                  double(c.usec) / double(c.calls), c.matched);
      std::fflush(stdout);
    }
  return 0;
}

} // namespace mm::bench
