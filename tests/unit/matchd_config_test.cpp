// matchd's settings: precedence command line > environment > config file >
// defaults, and validation that names every bad value.

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "app/matchd/matchd_config.hpp"

using namespace mm;

namespace {

struct args {
  std::vector<std::string> items;
  std::vector<char*> argv;

  args(std::initializer_list<std::string> xs) : items(xs) {
    items.insert(items.begin(), "matchd");
    for (auto& s : items)
      argv.push_back(s.data());
  }

  int argc() {
    return static_cast<int>(argv.size());
  }

  /// Appends `xs` (argv points into `items`: made again).
  void add(const std::vector<std::string>& xs) {
    items.insert(items.end(), xs.begin(), xs.end());
    argv.clear();
    for (auto& s : items)
      argv.push_back(s.data());
  }
};

std::string write_file(const std::string& name, const std::string& text) {
  auto path = std::string{::testing::TempDir()} + name;
  std::ofstream{path} << text;
  return path;
}

class matchd_config_test : public ::testing::Test {
 protected:
  void TearDown() override {
    for (auto name :
         {"MATCHD_RATE", "MATCHD_NODE", "MATCHD_SECRET", "MATCHD_LISTEN",
          "MATCHD_LOG_LEVEL", "MATCHD_QUEUES", "MATCHD_SECRET_NEXT",
          "MATCHD_TOKEN_FORMATS", "MATCHD_TOKEN_AUDIENCE",
          "MATCHD_REDIS_PASSWORD", "MATCHD_REDIS_USER"})
      ::unsetenv(name);
  }
};

TEST_F(matchd_config_test, defaults_need_only_a_secret) {
  args a{"--secret", "0123456789abcdef"};
  matchd_config cfg;
  auto res = parse_matchd_config(a.argc(), a.argv.data(), cfg);
  EXPECT_FALSE(res.exit_now) << res.output;
  EXPECT_EQ(cfg.listen_host, "127.0.0.1");
  EXPECT_EQ(cfg.listen_port, 8080);
  EXPECT_TRUE(cfg.redis.empty());    // embedded queue store
  EXPECT_TRUE(cfg.postgres.empty()); // in-memory persistence
  EXPECT_EQ(cfg.rate, 1000);
}

TEST_F(matchd_config_test, command_line_beats_environment_beats_file) {
  auto file = write_file("matchd_prec.toml", "rate = 11\nnode = \"from-file\"\n"
                                             "log-level = \"debug\"\n"
                                             "redis = \"10.0.0.1:7000\"\n");
  ::setenv("MATCHD_RATE", "22", 1);
  ::setenv("MATCHD_NODE", "from-env", 1);
  ::setenv("MATCHD_SECRET", "0123456789abcdef-env", 1);
  args a{"--config", file, "--rate", "33"};
  matchd_config cfg;
  auto res = parse_matchd_config(a.argc(), a.argv.data(), cfg);
  ASSERT_FALSE(res.exit_now) << res.output;
  EXPECT_EQ(cfg.rate, 33);                       // command line
  EXPECT_EQ(cfg.node, "from-env");               // environment over file
  EXPECT_EQ(cfg.secret, "0123456789abcdef-env"); // environment
  EXPECT_EQ(cfg.log_level, "debug");             // file
  EXPECT_EQ(cfg.redis_host, "10.0.0.1");         // file
  EXPECT_EQ(cfg.redis_port, 7000);
  EXPECT_EQ(cfg.max_body, 16384u); // default
}

TEST_F(matchd_config_test, every_bad_value_is_named_once) {
  args a{"--listen", "nowhere", "--rate",     "0",           "--log-level",
         "loud",     "--redis", "host:99999", "--heartbeat", "40000"};
  matchd_config cfg;
  auto res = parse_matchd_config(a.argc(), a.argv.data(), cfg);
  ASSERT_TRUE(res.exit_now);
  EXPECT_EQ(res.exit_code, 2);
  for (auto opt : {"--listen", "--secret", "--rate", "--log-level", "--redis",
                   "--heartbeat"})
    EXPECT_NE(res.output.find(std::string{"bad value for "} + opt),
              std::string::npos)
      << opt << " in:\n"
      << res.output;
  auto lines = std::count(res.output.begin(), res.output.end(), '\n');
  EXPECT_EQ(lines, 6) << res.output;
}

TEST_F(matchd_config_test, jwks_options) {
  // A JWK Set makes --secret optional; the demo still needs one.
  args ok{"--jwks-url", "https://id.example/jwks.json", "--jwks-refresh", "60"};
  matchd_config cfg;
  auto res = parse_matchd_config(ok.argc(), ok.argv.data(), cfg);
  ASSERT_FALSE(res.exit_now) << res.output;
  EXPECT_TRUE(cfg.secret.empty());
  EXPECT_EQ(cfg.jwks_url, "https://id.example/jwks.json");
  EXPECT_EQ(cfg.jwks_refresh_s, 60u);
  matchd_config def;
  args d{"--jwks-file", "/etc/matchd/jwks.json"};
  ASSERT_FALSE(parse_matchd_config(d.argc(), d.argv.data(), def).exit_now);
  EXPECT_EQ(def.jwks_refresh_s, 300u);
  // Each bad one named; without a set, --secret is required as before.
  args bad{"--jwks-file",    "a.json", "--jwks-url",     "ftp://x/j",
           "--jwks-refresh", "5",      "--jwks-ca-file", "ca.pem",
           "--queues",       "demo",   "--demo-queue",   "demo"};
  matchd_config cfg2;
  auto res2 = parse_matchd_config(bad.argc(), bad.argv.data(), cfg2);
  ASSERT_TRUE(res2.exit_now);
  for (auto opt :
       {"--jwks-url", "--jwks-refresh", "--jwks-ca-file", "--demo-queue"})
    EXPECT_NE(res2.output.find(std::string{"bad value for "} + opt),
              std::string::npos)
      << opt << " in:\n"
      << res2.output;
  args none{"--queues", "q"};
  matchd_config cfg3;
  auto res3 = parse_matchd_config(none.argc(), none.argv.data(), cfg3);
  ASSERT_TRUE(res3.exit_now);
  EXPECT_NE(res3.output.find("bad value for --secret"), std::string::npos);
}

TEST_F(matchd_config_test, token_options) {
  args d{"--secret", "0123456789abcdef"};
  matchd_config def;
  ASSERT_FALSE(parse_matchd_config(d.argc(), d.argv.data(), def).exit_now);
  EXPECT_TRUE(def.secret_next.empty());
  EXPECT_TRUE(def.token_audience.empty());
  EXPECT_TRUE(def.token_issuer.empty());
  EXPECT_EQ(def.token_leeway_s, 30u);
  EXPECT_TRUE(def.accept_v1_tokens);
  EXPECT_TRUE(def.accept_jwt_tokens);
  // The rollover's second secret and the JWT checks, also from the
  // environment (where secrets belong).
  ::setenv("MATCHD_SECRET_NEXT", "fedcba9876543210", 1);
  ::setenv("MATCHD_TOKEN_FORMATS", "jwt", 1);
  ::setenv("MATCHD_TOKEN_AUDIENCE", "matchmaker", 1);
  args ok{"--secret",       "0123456789abcdef",
          "--token-issuer", "https://game.example",
          "--token-leeway", "0"};
  matchd_config cfg;
  auto res = parse_matchd_config(ok.argc(), ok.argv.data(), cfg);
  ASSERT_FALSE(res.exit_now) << res.output;
  EXPECT_EQ(cfg.secret_next, "fedcba9876543210");
  EXPECT_EQ(cfg.token_audience, "matchmaker");
  EXPECT_EQ(cfg.token_issuer, "https://game.example");
  EXPECT_EQ(cfg.token_leeway_s, 0u);
  EXPECT_FALSE(cfg.accept_v1_tokens);
  EXPECT_TRUE(cfg.accept_jwt_tokens);
  ::unsetenv("MATCHD_SECRET_NEXT");
  ::unsetenv("MATCHD_TOKEN_FORMATS");
  ::unsetenv("MATCHD_TOKEN_AUDIENCE");
  // Each bad one named.
  args bad{"--secret",        "0123456789abcdef",
           "--secret-next",   "short",
           "--token-leeway",  "301",
           "--token-formats", "v1,jws"};
  matchd_config cfg2;
  auto res2 = parse_matchd_config(bad.argc(), bad.argv.data(), cfg2);
  ASSERT_TRUE(res2.exit_now);
  EXPECT_EQ(res2.exit_code, 2);
  for (auto opt : {"--secret-next", "--token-leeway", "--token-formats"})
    EXPECT_NE(res2.output.find(std::string{"bad value for "} + opt),
              std::string::npos)
      << opt << " in:\n"
      << res2.output;
  EXPECT_NE(res2.output.find("'jws'"), std::string::npos) << res2.output;
  // The demo's tokens are JWTs: a demo on a node that takes only v1 is
  // refused at start.
  args demo{"--secret", "0123456789abcdef", "--queues", "demo", "--demo-queue",
            "demo",     "--token-formats",  "v1"};
  matchd_config cfg4;
  auto res4 = parse_matchd_config(demo.argc(), demo.argv.data(), cfg4);
  ASSERT_TRUE(res4.exit_now);
  EXPECT_EQ(res4.exit_code, 2);
  EXPECT_NE(res4.output.find("bad value for --demo-queue"), std::string::npos)
    << res4.output;
  // The next secret must differ from the current one.
  args same{"--secret", "0123456789abcdef", "--secret-next",
            "0123456789abcdef"};
  matchd_config cfg3;
  auto res3 = parse_matchd_config(same.argc(), same.argv.data(), cfg3);
  ASSERT_TRUE(res3.exit_now);
  EXPECT_NE(res3.output.find("--secret-next"), std::string::npos);
}

TEST_F(matchd_config_test, queue_and_stream_bounds) {
  args d{"--secret", "0123456789abcdef"};
  matchd_config def;
  ASSERT_FALSE(parse_matchd_config(d.argc(), d.argv.data(), def).exit_now);
  // Declared, not invented: no --queues is the one queue "default".
  EXPECT_EQ(def.queues, (std::vector<std::string>{"default"}));
  EXPECT_FALSE(def.open_queues);
  EXPECT_EQ(def.max_queues, 1000u);
  EXPECT_EQ(def.queue_idle_ms, 60000u);
  EXPECT_EQ(def.stream_maxlen, 100000u);
  args ok{"--secret",        "0123456789abcdef",
          "--queues",        "voice,games.eu",
          "--max-queues",    "5",
          "--queue-idle",    "0",
          "--stream-maxlen", "0"};
  matchd_config cfg;
  auto res = parse_matchd_config(ok.argc(), ok.argv.data(), cfg);
  ASSERT_FALSE(res.exit_now) << res.output;
  EXPECT_EQ(cfg.queues, (std::vector<std::string>{"voice", "games.eu"}));
  EXPECT_EQ(cfg.max_queues, 5u);
  EXPECT_EQ(cfg.queue_idle_ms, 0u);
  EXPECT_EQ(cfg.stream_maxlen, 0u);
  // A listed name that no join could ever use is refused, not ignored.
  args bad{"--secret",     "0123456789abcdef",
           "--queues",     "voice,a{b}",
           "--max-queues", "0",
           "--queue-idle", "10"};
  matchd_config cfg2;
  auto res2 = parse_matchd_config(bad.argc(), bad.argv.data(), cfg2);
  ASSERT_TRUE(res2.exit_now);
  EXPECT_EQ(res2.exit_code, 2);
  for (auto opt : {"--queues", "--max-queues", "--queue-idle"})
    EXPECT_NE(res2.output.find(std::string{"bad value for "} + opt),
              std::string::npos)
      << opt << " in:\n"
      << res2.output;
  EXPECT_NE(res2.output.find("a{b}"), std::string::npos) << res2.output;
}

TEST_F(matchd_config_test, outbox_lease_bounds) {
  args d{"--secret", "0123456789abcdef"};
  matchd_config def;
  ASSERT_FALSE(parse_matchd_config(d.argc(), d.argv.data(), def).exit_now);
  EXPECT_EQ(def.outbox_lease_ms, 30000u);
  args ok{"--secret", "0123456789abcdef", "--heartbeat",
          "1000",     "--outbox-lease",   "5000"};
  matchd_config cfg;
  auto res = parse_matchd_config(ok.argc(), ok.argv.data(), cfg);
  ASSERT_FALSE(res.exit_now) << res.output;
  EXPECT_EQ(cfg.outbox_lease_ms, 5000u);
  // At most a heartbeat (default 10000 ms) is refused too.
  for (auto bad : {"999", "600001", "0", "10000"}) {
    args b{"--secret", "0123456789abcdef", "--outbox-lease", bad};
    matchd_config c;
    auto r = parse_matchd_config(b.argc(), b.argv.data(), c);
    ASSERT_TRUE(r.exit_now) << bad;
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.output.find("bad value for --outbox-lease"), std::string::npos)
      << r.output;
  }
}

TEST_F(matchd_config_test, queues_are_declared_open_mode_only_explicitly) {
  // '*' alone: any well-formed name (bounded by --max-queues).
  args open{"--secret", "0123456789abcdef", "--queues", "*"};
  matchd_config o;
  auto ro = parse_matchd_config(open.argc(), open.argv.data(), o);
  ASSERT_FALSE(ro.exit_now) << ro.output;
  EXPECT_TRUE(o.open_queues);
  // '*' in a list, a name twice, an empty name: named errors at start.
  for (auto list : {"voice,*", "voice,voice", ""}) {
    args bad{"--secret", "0123456789abcdef", "--queues", list};
    matchd_config b;
    auto rb = parse_matchd_config(bad.argc(), bad.argv.data(), b);
    EXPECT_TRUE(rb.exit_now) << list;
    EXPECT_EQ(rb.exit_code, 2) << list;
    EXPECT_NE(rb.output.find("bad value for --queues"), std::string::npos)
      << list << ": " << rb.output;
  }
  // The environment and the config file declare lists too.
  ::setenv("MATCHD_QUEUES", "voice,games", 1);
  args env{"--secret", "0123456789abcdef"};
  matchd_config e;
  auto re = parse_matchd_config(env.argc(), env.argv.data(), e);
  ::unsetenv("MATCHD_QUEUES"); // it would win over the file below
  ASSERT_FALSE(re.exit_now) << re.output;
  EXPECT_EQ(e.queues, (std::vector<std::string>{"voice", "games"}));
  auto file = write_file("matchd_queues.toml",
                         "queues = [\"chess\", \"go\"]\n");
  args f{"--secret", "0123456789abcdef", "--config", file};
  matchd_config fc;
  auto rf = parse_matchd_config(f.argc(), f.argv.data(), fc);
  ASSERT_FALSE(rf.exit_now) << rf.output;
  EXPECT_EQ(fc.queues, (std::vector<std::string>{"chess", "go"}));
  EXPECT_FALSE(fc.open_queues);
}

TEST_F(matchd_config_test, websocket_limits) {
  args d{"--secret", "0123456789abcdef"};
  matchd_config def;
  ASSERT_FALSE(parse_matchd_config(d.argc(), d.argv.data(), def).exit_now);
  EXPECT_EQ(def.max_ws_per_user, 8u);
  EXPECT_EQ(def.ws_idle_timeout_ms, 60000u);
  EXPECT_EQ(def.ws_rate, 10);
  // Command line > environment > file, as for every option.
  auto file = write_file("matchd_ws.toml", "max-websockets-per-user = 3\n"
                                           "ws-idle-timeout = 5000\n"
                                           "ws-rate = 7\n");
  ::setenv("MATCHD_WS_IDLE_TIMEOUT", "9000", 1);
  ::setenv("MATCHD_WS_RATE", "8", 1);
  args a{"--config", file, "--secret", "0123456789abcdef", "--ws-rate", "2.5"};
  matchd_config cfg;
  auto res = parse_matchd_config(a.argc(), a.argv.data(), cfg);
  ::unsetenv("MATCHD_WS_IDLE_TIMEOUT");
  ::unsetenv("MATCHD_WS_RATE");
  ASSERT_FALSE(res.exit_now) << res.output;
  EXPECT_EQ(cfg.max_ws_per_user, 3u);       // file
  EXPECT_EQ(cfg.ws_idle_timeout_ms, 9000u); // environment over file
  EXPECT_EQ(cfg.ws_rate, 2.5);              // command line
  args bad{"--secret",
           "0123456789abcdef",
           "--max-websockets-per-user",
           "0",
           "--ws-idle-timeout",
           "999",
           "--ws-rate",
           "0.5"};
  matchd_config cfg2;
  auto res2 = parse_matchd_config(bad.argc(), bad.argv.data(), cfg2);
  ASSERT_TRUE(res2.exit_now);
  EXPECT_EQ(res2.exit_code, 2);
  for (auto opt :
       {"--max-websockets-per-user", "--ws-idle-timeout", "--ws-rate"})
    EXPECT_NE(res2.output.find(std::string{"bad value for "} + opt),
              std::string::npos)
      << opt << " in:\n"
      << res2.output;
  EXPECT_EQ(std::count(res2.output.begin(), res2.output.end(), '\n'), 3)
    << res2.output;
}

TEST_F(matchd_config_test, unknown_keys_and_types_are_refused) {
  auto file = write_file("matchd_bad.toml", "colour = \"blue\"\n");
  args a{"--config", file, "--secret", "0123456789abcdef"};
  matchd_config cfg;
  auto res = parse_matchd_config(a.argc(), a.argv.data(), cfg);
  ASSERT_TRUE(res.exit_now);
  EXPECT_EQ(res.exit_code, 2);
  EXPECT_NE(res.output.find("colour"), std::string::npos) << res.output;
  args b{"--secret", "0123456789abcdef", "--rate", "fast"};
  matchd_config cfg2;
  auto res2 = parse_matchd_config(b.argc(), b.argv.data(), cfg2);
  ASSERT_TRUE(res2.exit_now);
  EXPECT_EQ(res2.exit_code, 2);
  EXPECT_NE(res2.output.find("rate"), std::string::npos) << res2.output;
  args c{"--config", "/nonexistent/matchd.toml", "--secret",
         "0123456789abcdef"};
  matchd_config cfg3;
  auto res3 = parse_matchd_config(c.argc(), c.argv.data(), cfg3);
  ASSERT_TRUE(res3.exit_now);
  EXPECT_NE(res3.output.find("/nonexistent/matchd.toml"), std::string::npos);
}

} // namespace

namespace {

/// A cluster port needs mutual TLS (all three files) or an explicit
/// --cluster-insecure on a loopback bind.
TEST_F(matchd_config_test, a_cluster_port_needs_tls_or_insecure_on_loopback) {
  auto parse = [](std::initializer_list<std::string> extra) {
    args a{"--secret",   "0123456789abcdef", "--redis",        "127.0.0.1:6379",
           "--postgres", "dbname=x",         "--cluster-port", "9091"};
    a.add(extra);
    matchd_config cfg;
    auto res = parse_matchd_config(a.argc(), a.argv.data(), cfg);
    return std::make_pair(res, cfg);
  };
  auto [none, c0] = parse({});
  EXPECT_TRUE(none.exit_now);
  EXPECT_NE(none.output.find("--cluster-port"), std::string::npos);
  EXPECT_NE(none.output.find("--cluster-insecure"), std::string::npos);
  auto [part, c1]
    = parse({"--cluster-cert", "n.crt", "--cluster-ca", "ca.crt"});
  EXPECT_TRUE(part.exit_now);
  EXPECT_NE(part.output.find("bad value for --cluster-key"), std::string::npos)
    << part.output;
  auto [all, c2] = parse({"--cluster-cert", "n.crt", "--cluster-key", "n.key",
                          "--cluster-ca", "ca.crt"});
  EXPECT_FALSE(all.exit_now) << all.output;
  EXPECT_EQ(c2.cluster_bind, "127.0.0.1"); // the default
  auto [both, c3]
    = parse({"--cluster-cert", "n.crt", "--cluster-key", "n.key",
             "--cluster-ca", "ca.crt", "--cluster-insecure", "true"});
  EXPECT_TRUE(both.exit_now);
  auto [insecure, c4] = parse({"--cluster-insecure", "true"});
  EXPECT_FALSE(insecure.exit_now) << insecure.output;
  auto [open, c5]
    = parse({"--cluster-insecure", "true", "--cluster-bind", "0.0.0.0"});
  EXPECT_TRUE(open.exit_now);
  EXPECT_NE(open.output.find("bad value for --cluster-insecure"),
            std::string::npos)
    << open.output;
}

/// The example configs in deploy/ must stay valid.
TEST_F(matchd_config_test, the_deploy_examples_are_valid) {
  ::setenv("MATCHD_SECRET", "0123456789abcdef-example", 1);
  for (auto file :
       {"deploy/matchd.toml", "deploy/cluster/node-1.toml",
        "deploy/cluster/node-2.toml", "deploy/cluster/node-3.toml"}) {
    args a{"--config", std::string{MM_SOURCE_DIR} + "/" + file};
    matchd_config cfg;
    auto res = parse_matchd_config(a.argc(), a.argv.data(), cfg);
    EXPECT_FALSE(res.exit_now) << file << ":\n" << res.output;
    EXPECT_FALSE(cfg.redis.empty()) << file;
    EXPECT_FALSE(cfg.postgres.empty()) << file;
  }
  args c{"--config",
         std::string{MM_SOURCE_DIR} + "/deploy/cluster/node-2.toml"};
  matchd_config cfg;
  ASSERT_FALSE(parse_matchd_config(c.argc(), c.argv.data(), cfg).exit_now);
  EXPECT_EQ(cfg.node, "node-2");
  EXPECT_EQ(cfg.cluster_port, 9092);
}

} // namespace

TEST_F(matchd_config_test, redis_seeds_cluster_and_credentials) {
  const std::string secret = "0123456789abcdef";
  {
    args a{"--secret", secret, "--redis", "10.0.0.1:7000"};
    matchd_config cfg;
    EXPECT_FALSE(parse_matchd_config(a.argc(), a.argv.data(), cfg).exit_now);
    EXPECT_FALSE(cfg.redis_cluster); // one address: one Redis
    EXPECT_TRUE(cfg.redis_password.empty());
  }
  {
    args a{"--secret", secret, "--redis",
           "redis://10.0.0.1:7000,10.0.0.2:7001,10.0.0.3:7002"};
    matchd_config cfg;
    auto res = parse_matchd_config(a.argc(), a.argv.data(), cfg);
    EXPECT_FALSE(res.exit_now) << res.output;
    EXPECT_TRUE(cfg.redis_cluster); // several: seeds of a cluster
    EXPECT_EQ(cfg.redis_host, "10.0.0.1");
    EXPECT_EQ(cfg.redis_port, 7000);
    EXPECT_EQ(cfg.redis_seeds,
              (std::vector<std::string>{"10.0.0.2:7001", "10.0.0.3:7002"}));
  }
  {
    auto file = write_file("redis-pw", "s3cret-pw\n");
    args a{"--secret",
           secret,
           "--redis",
           "h:1",
           "--redis-cluster",
           "--redis-user",
           "mm",
           "--redis-password-file",
           file};
    matchd_config cfg;
    auto res = parse_matchd_config(a.argc(), a.argv.data(), cfg);
    EXPECT_FALSE(res.exit_now) << res.output;
    EXPECT_TRUE(cfg.redis_cluster);
    EXPECT_EQ(cfg.redis_user, "mm");
    EXPECT_EQ(cfg.redis_password, "s3cret-pw");
  }
  {
    ::setenv("MATCHD_REDIS_PASSWORD", "from-env", 1);
    args a{"--secret", secret, "--redis", "h:1"};
    matchd_config cfg;
    EXPECT_FALSE(parse_matchd_config(a.argc(), a.argv.data(), cfg).exit_now);
    EXPECT_EQ(cfg.redis_password, "from-env");
    ::unsetenv("MATCHD_REDIS_PASSWORD");
  }
  // Each bad value named, and no password in what is printed.
  for (auto bad : std::vector<std::vector<std::string>>{
         {"--redis", "h:1,nope"},
         {"--redis-cluster"},
         {"--redis", "h:1", "--redis-user", "mm"},
         {"--redis", "h:1", "--redis-password-file", "/nonexistent/pw"}}) {
    args a{"--secret", secret};
    a.add(bad);
    matchd_config cfg;
    auto res = parse_matchd_config(a.argc(), a.argv.data(), cfg);
    EXPECT_TRUE(res.exit_now) << bad.back();
    EXPECT_EQ(res.exit_code, 2) << bad.back();
    EXPECT_NE(res.output.find("redis"), std::string::npos) << res.output;
  }
}

TEST_F(matchd_config_test, the_secret_from_a_file) {
  auto file = write_file("secret", "0123456789abcdef-from-file \r\n2nd\n");
  {
    args a{"--secret-file", file};
    matchd_config cfg;
    auto res = parse_matchd_config(a.argc(), a.argv.data(), cfg);
    EXPECT_FALSE(res.exit_now) << res.output;
    EXPECT_EQ(cfg.secret, "0123456789abcdef-from-file");
  }
  // Named refusals: both ways at once, an unreadable file, a short line.
  auto short_file = write_file("short", "too-short\n");
  for (auto bad : std::vector<std::vector<std::string>>{
         {"--secret-file", file, "--secret", "0123456789abcdef-flag"},
         {"--secret-file", "/nonexistent/secret"},
         {"--secret-file", short_file}}) {
    args a{"--log-level", "warn"};
    a.add(bad);
    matchd_config cfg;
    auto res = parse_matchd_config(a.argc(), a.argv.data(), cfg);
    EXPECT_TRUE(res.exit_now) << bad[1];
    EXPECT_EQ(res.exit_code, 2) << bad[1];
    EXPECT_NE(res.output.find("secret"), std::string::npos) << res.output;
    EXPECT_EQ(res.output.find("0123456789abcdef"), std::string::npos)
      << "a secret printed: " << res.output;
  }
}
