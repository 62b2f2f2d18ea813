// rules_bench: what match rules cost and what they buy (bench/run rules,
// docs/benchmarks.md "Rules").
//
// 1. Quality, on simulated time: a seeded population (skill ~ N(1500, 300),
//    four regions with unequal shares, two modes) arrives at a steady rate
//    into one queue of the embedded store, whose clock the bench moves. Every
//    waiter looks again as a session does: every heartbeat (1 s) and at the
//    moment the claim says its windows change. A claimed pair leaves at once
//    (release of both records), as a committed match does. Three variants:
//    (a) FIFO, (b) rules without widening, (c) rules with widening. Printed:
//    matches/s (simulated), time-to-match p50/p95/p99, mean and p95 skill
//    gap, share matched within 30 s.
// 2. Claim throughput, on real time: the same arrivals as claim calls as
//    fast as the store takes them (pipelined in batches of 64), FIFO vs
//    rules with widening, on the embedded store and (with --redis-port) on
//    Redis, with Redis's own CPU per call from INFO commandstats.
// Last line: rules_claims_ratio_to_fifo=X.XX (Redis when given, else the
// embedded store).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/rules.hpp"
#include "core/stats.hpp"
#include "persistence/queue/queue_codec.hpp"
#include "persistence/queue/queue_store.hpp"

using namespace mm;

namespace {

const char* rules_strict = R"({"q": {
  "attributes": {"skill": {"type": "number", "min": -10000, "max": 10000},
                 "region": {"type": "string"}, "mode": {"type": "string"}},
  "rules": [
    {"kind": "distance", "attribute": "skill", "base": 50},
    {"kind": "equal", "attribute": "region"},
    {"kind": "equal", "attribute": "mode"}]}})";

const char* rules_widening = R"({"q": {
  "attributes": {"skill": {"type": "number", "min": -10000, "max": 10000},
                 "region": {"type": "string"}, "mode": {"type": "string"}},
  "rules": [
    {"kind": "distance", "attribute": "skill", "base": 50, "step": 50,
     "every_s": 5, "cap": 400},
    {"kind": "equal", "attribute": "region", "relax_after_s": 30},
    {"kind": "equal", "attribute": "mode"}]}})";

constexpr int64_t cap_time_ms = 35000; // 50 + 50 x 7 = 400 at 35 s

struct person {
  double skill;
  std::string region;
  std::string mode;
};

std::vector<person> population(size_t n, uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::normal_distribution<double> skill{1500, 300};
  std::discrete_distribution<int> region{50, 30, 15, 5};
  std::bernoulli_distribution ranked{0.7};
  const char* regions[] = {"eu", "us", "asia", "sa"};
  std::vector<person> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i)
    out.push_back(person{std::round(skill(rng)), regions[region(rng)],
                         ranked(rng) ? "ranked" : "casual"});
  return out;
}

struct variant {
  const char* name;
  std::shared_ptr<rule_set> rules; // null: FIFO
};

std::shared_ptr<rule_set> load(const char* json) {
  auto book = parse_rule_book(json);
  if (!book) {
    std::fprintf(stderr, "rules: %s\n", book.error().detail.c_str());
    std::exit(2);
  }
  return std::make_shared<rule_set>(book->at("q"));
}

ticket_spec make_spec(const std::string& queue, size_t i, const person& p,
                      const rule_set* rs) {
  ticket_spec s;
  s.queue = queue;
  s.user = "u" + std::to_string(i);
  s.ticket = "t" + std::to_string(i);
  s.node = "bench";
  s.ttl_ms = 3600000;
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                R"({"skill": %.0f, "region": "%s", "mode": "%s"})", p.skill,
                p.region.c_str(), p.mode.c_str());
  if (rs == nullptr) {
    s.attrs = buf;
    return s;
  }
  auto a = check_attributes(*rs, buf);
  if (!a) {
    std::fprintf(stderr, "attrs: %s\n", a.error().detail.c_str());
    std::exit(2);
  }
  s.attrs = a->json;
  s.rk = a->rk;
  s.rules = rs->spec;
  return s;
}

double pct(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  return percentile(v, p / 100.0, rank_rule::lower);
}

// -- 1. quality on simulated time -------------------------------------------

void quality(const variant& v, const std::vector<person>& people,
             double rate_per_s) {
  auto now = std::make_shared<int64_t>(1'700'000'000'000);
  int64_t t0 = *now;
  embedded_options opts;
  opts.clock = [now] { return *now; };
  auto conn = make_embedded_store(opts)->connect();
  auto run1 = [&](outcome<script_call> c) {
    std::vector<script_call> calls{std::move(*c)};
    return conn->run(calls).at(0);
  };
  const std::string q = "q";
  const int64_t heartbeat_ms = 1000;
  std::vector<int64_t> arrived(people.size(), -1);
  std::vector<bool> done(people.size(), false);
  std::multimap<int64_t, size_t> looks; // when -> user
  std::vector<double> ttm_s, gaps;
  size_t matches = 0;
  auto spec_of = [&](size_t i) {
    return make_spec(q, i, people[i], v.rules.get());
  };
  auto on_reply = [&](size_t i, const store_reply& rep) {
    auto r = codec::parse_claim(rep);
    if (!r) {
      std::fprintf(stderr, "claim: %s\n", r.error().detail.c_str());
      std::exit(1);
    }
    if (r->outcome == claim_outcome::matched) {
      size_t j = std::stoul(r->partner.ticket.substr(1));
      done[i] = done[j] = true;
      ++matches;
      for (auto k : {i, j})
        ttm_s.push_back(static_cast<double>(*now - arrived[k]) / 1000.0);
      gaps.push_back(std::fabs(people[i].skill - people[j].skill));
      run1(codec::release_call(q, "t" + std::to_string(i)));
      run1(codec::release_call(q, "t" + std::to_string(j)));
    } else if (r->outcome == claim_outcome::queued) {
      auto next = heartbeat_ms;
      if (r->next_change_ms > 0)
        next = std::min(next, r->next_change_ms);
      looks.emplace(*now + next, i);
    }
  };
  auto step_ms = static_cast<int64_t>(std::llround(1000.0 / rate_per_s));
  int64_t arrivals_end = static_cast<int64_t>(people.size()) * step_ms;
  int64_t end = arrivals_end + 60000; // the last arrivals may wait a minute
  size_t next = 0;
  auto wall0 = std::chrono::steady_clock::now();
  while (true) {
    int64_t t_arrival
      = next < people.size() ? static_cast<int64_t>(next) * step_ms : INT64_MAX;
    int64_t t_look = looks.empty() ? INT64_MAX : looks.begin()->first - t0;
    int64_t t = std::min(t_arrival, t_look);
    if (t == INT64_MAX || t > end)
      break;
    *now = t0 + t;
    if (t_arrival <= t_look) {
      arrived[next] = *now;
      on_reply(next, run1(codec::claim_call(spec_of(next), 32, 600000, false)));
      ++next;
    } else {
      auto i = looks.begin()->second;
      looks.erase(looks.begin());
      if (!done[i])
        on_reply(i, run1(codec::claim_call(spec_of(i), 32, 600000, true)));
    }
  }
  auto wall
    = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0)
        .count();
  size_t within30 = std::count_if(ttm_s.begin(), ttm_s.end(),
                                  [](double x) { return x <= 30.0; });
  double mean_gap = gaps.empty()
                      ? 0
                      : std::accumulate(gaps.begin(), gaps.end(), 0.0)
                          / gaps.size();
  std::printf("quality %-9s users=%zu matches=%zu matches_per_s=%.1f "
              "ttm_p50_s=%.2f ttm_p95_s=%.2f ttm_p99_s=%.2f "
              "gap_mean=%.1f gap_p95=%.1f matched_within_30s=%.3f "
              "unmatched=%zu wall_s=%.1f\n",
              v.name, people.size(), matches,
              matches / (static_cast<double>(arrivals_end) / 1000.0),
              pct(ttm_s, 50), pct(ttm_s, 95), pct(ttm_s, 99), mean_gap,
              pct(gaps, 95), static_cast<double>(within30) / people.size(),
              people.size() - 2 * matches, wall);
  if (std::string{v.name} == "widening")
    std::printf("quality_goal widening_ttm_p95_s=%.2f cap_time_s=%.1f\n",
                pct(ttm_s, 95), cap_time_ms / 1000.0);
}

// -- 2. claim throughput on real time ---------------------------------------

double redis_usec_per_call(queue_store& conn) {
  auto r = conn.execute({{"INFO", "commandstats"}}).at(0);
  auto& s = r.value.str;
  auto at = s.find("cmdstat_fcall:");
  if (at == std::string::npos)
    return 0;
  auto u = s.find("usec_per_call=", at);
  return u == std::string::npos ? 0 : std::atof(s.c_str() + u + 14);
}

double throughput(const char* store, queue_store_factory& factory,
                  const variant& v, const std::vector<person>& people,
                  bool redis) {
  auto conn = factory.connect();
  auto q = std::string{"rb-"} + v.name + "-"
           + std::to_string(
             std::chrono::steady_clock::now().time_since_epoch().count()
             % 1000000000);
  if (redis)
    conn->execute({{"CONFIG", "RESETSTAT"}});
  size_t matched = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < people.size(); i += 64) {
    std::vector<script_call> calls;
    for (size_t k = i; k < std::min(people.size(), i + 64); ++k)
      calls.push_back(*codec::claim_call(
        make_spec(q, k, people[k], v.rules.get()), 32, 600000, false));
    for (auto& rep : conn->run(calls)) {
      auto r = codec::parse_claim(rep);
      if (!r) {
        std::fprintf(stderr, "claim: %s\n", r.error().detail.c_str());
        std::exit(1);
      }
      matched += r->outcome == claim_outcome::matched;
    }
  }
  double secs
    = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
        .count();
  double per_s = people.size() / secs;
  double usec = redis ? redis_usec_per_call(*conn) : 0;
  std::printf("claims %-8s %-9s calls=%zu matched=%zu calls_per_s=%.0f "
              "redis_usec_per_call=%.2f\n",
              store, v.name, people.size(), matched, per_s, usec);
  // Leave nothing behind.
  store_command unlink{"UNLINK"};
  for (auto& k : codec::queue_keys(q))
    unlink.push_back(k);
  conn->execute({unlink});
  return per_s;
}

} // namespace

int main(int argc, char** argv) {
  uint16_t redis_port = 0;
  size_t users = 12000, claim_users = 40000;
  double rate = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--redis-port"))
      redis_port = static_cast<uint16_t>(std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--users"))
      users = std::strtoul(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--claim-users"))
      claim_users = std::strtoul(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--rate"))
      rate = std::atof(argv[i + 1]);
  }
  std::vector<variant> variants{{"fifo", nullptr},
                                {"strict", load(rules_strict)},
                                {"widening", load(rules_widening)}};
  auto people = population(users, 42);
  std::printf("# population: %zu users, %.0f/s, skill N(1500,300), regions "
              "eu/us/asia/sa 50/30/15/5 %%, modes ranked/casual 70/30 %%\n",
              users, rate);
  for (auto& v : variants)
    quality(v, people, rate);
  auto arrivals = population(claim_users, 7);
  auto embedded = make_embedded_store({});
  double e_fifo = throughput("embedded", *embedded, variants[0], arrivals,
                             false);
  double e_rules = throughput("embedded", *embedded, variants[2], arrivals,
                              false);
  double ratio = e_rules / e_fifo;
  if (redis_port != 0) {
    redis_options ro;
    ro.port = redis_port;
    auto redis = make_redis_store(ro);
    // Twice each, ABBA, each counting with its better run.
    double f1 = throughput("redis", *redis, variants[0], arrivals, true);
    double r1 = throughput("redis", *redis, variants[2], arrivals, true);
    double r2 = throughput("redis", *redis, variants[2], arrivals, true);
    double f2 = throughput("redis", *redis, variants[0], arrivals, true);
    ratio = std::max(r1, r2) / std::max(f1, f2);
  }
  std::printf("embedded_rules_claims_ratio_to_fifo=%.2f\n", e_rules / e_fifo);
  std::printf("rules_claims_ratio_to_fifo=%.2f\n", ratio);
  return 0;
}
