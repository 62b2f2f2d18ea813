#include "app/matchd/matchd_config.hpp"
#include "app/matchd/http_once.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <CLI/CLI.hpp>

#include "actors/cluster_config.hpp"
#include "persistence/queue/queue_codec.hpp"

namespace mm {

namespace {

/// "host:port" with a port in 1..65535 (0 allowed when `any_port`).
bool split_host_port(const std::string& in, bool any_port, std::string& host,
                     uint16_t& port) {
  auto colon = in.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == in.size())
    return false;
  host = in.substr(0, colon);
  auto text = in.substr(colon + 1);
  if (text.size() > 5)
    return false;
  unsigned long n = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    n = n * 10 + static_cast<unsigned long>(c - '0');
  }
  if (n > 65535 || (n == 0 && !any_port))
    return false;
  port = static_cast<uint16_t>(n);
  return true;
}

/// The first line of the file `path` without trailing blanks or CR, into
/// `out`; false when it cannot be read or the line is empty.
bool first_line_of(const std::string& path, std::string& out) {
  std::ifstream in(path);
  if (!in || !std::getline(in, out))
    return false;
  while (!out.empty() && (out.back() == '\r' || out.back() == ' '))
    out.pop_back();
  return !out.empty();
}

std::string env_name(const std::string& long_name) {
  std::string out = "MATCHD_";
  for (char c : long_name)
    out.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(c)));
  return out;
}

} // namespace

config_result parse_matchd_config(int argc, char** argv, matchd_config& cfg) {
  config_result res;
  CLI::App app{"matchd: one node of the matchmaker engine. Without --redis and "
               "--postgres it runs on the embedded queue store and in-memory "
               "persistence (not durable)."};
  app.set_version_flag("--version", "matchd 0.1.0");
  app.add_option(
    "--config", cfg.config_file,
    "Config file (TOML/INI: key = value, keys as the long options)");
  app.add_option("--listen", cfg.listen, "HTTP/WebSocket address host:port")
    ->capture_default_str();
  app.add_option("--admin-listen", cfg.admin_listen,
                 "Serve /healthz, /readyz, /metrics and the console on this "
                 "host:port (a bare port: 127.0.0.1) and not on --listen");
  app.add_option("--secret", cfg.secret,
                 "Shared secret of the bearer tokens (at least 16 bytes)");
  app.add_option("--secret-file", cfg.secret_file,
                 "A file whose first line is --secret (e.g. a container's "
                 "secret under /run/secrets)");
  app.add_option("--secret-next", cfg.secret_next,
                 "A second accepted secret, for a key rollover: tokens "
                 "signed with either are accepted (docs/api.md)");
  app.add_option("--token-audience", cfg.token_audience,
                 "A JWT's aud must name this (empty: a JWT naming any "
                 "audience is refused)");
  app.add_option("--token-issuer", cfg.token_issuer,
                 "A JWT's iss must equal this (empty: iss not checked)");
  app
    .add_option("--token-leeway", cfg.token_leeway_s,
                "Seconds of clock skew allowed on a JWT's exp, nbf and iat")
    ->capture_default_str();
  app
    .add_option("--token-formats", cfg.token_formats,
                "Accepted token formats, comma separated: v1, jwt "
                "(default: both)")
    ->delimiter(',');
  app.add_option("--otlp-endpoint", cfg.otlp_endpoint,
                 "Export traces of matches (join, claim, commit, delivery) "
                 "as OTLP/HTTP JSON to this URL, e.g. "
                 "http://127.0.0.1:4318/v1/traces");
  app.add_option("--otlp-ca-file", cfg.otlp_ca_file,
                 "CA bundle that verifies an https --otlp-endpoint");
  app
    .add_option("--otlp-sample", cfg.otlp_sample,
                "Share of users' matches traced, 0-1")
    ->capture_default_str();
  app.add_option("--jwks-file", cfg.jwks_file,
                 "A JWK Set file of an identity provider's public keys: "
                 "RS256/ES256 JWTs signed with them are accepted");
  app.add_option("--jwks-url", cfg.jwks_url,
                 "An http(s) URL of the identity provider's JWK Set "
                 "(instead of --jwks-file)");
  app.add_option("--jwks-ca-file", cfg.jwks_ca_file,
                 "CA bundle that verifies the --jwks-url server (default: "
                 "the system's)");
  app
    .add_option("--jwks-refresh", cfg.jwks_refresh_s,
                "Seconds between reads of the JWK Set (a token naming an "
                "unknown kid makes it read within 5 s)")
    ->capture_default_str();
  app.add_option("--redis", cfg.redis,
                 "Redis host:port (default: the embedded queue store); "
                 "several comma separated: seeds of a Redis Cluster "
                 "(docs/cluster.md)");
  app.add_flag("--redis-cluster", cfg.redis_cluster,
               "The --redis address is a Redis Cluster node (implied by "
               "several addresses)");
  app.add_option("--redis-user", cfg.redis_user,
                 "Redis AUTH user (ACL; default: the default user)");
  app.add_option("--redis-password-file", cfg.redis_password_file,
                 "A file whose first line is the Redis AUTH password "
                 "(or set MATCHD_REDIS_PASSWORD; never on the command "
                 "line)");
  app.add_option("--postgres", cfg.postgres,
                 "PostgreSQL conninfo (default: in-memory persistence)");
  app.add_option("--node", cfg.node, "This node's id")->capture_default_str();
  app
    .add_option("--log-level", cfg.log_level,
                "trace, debug, info, warn, error, critical or off")
    ->capture_default_str();
  app
    .add_option("--queues", cfg.queues,
                "The queues users may join, comma separated; a join of "
                "another is refused 404 unknown_queue (default: the one "
                "queue 'default'). '*': any well-formed name, up to "
                "--max-queues at once (development and tests)")
    ->delimiter(',');
  app.add_option("--rules", cfg.rules_file,
                 "A JSON file of match rules by queue (docs/rules.md); "
                 "checked at start, every queue it names must be served");
  app
    .add_option("--max-queues", cfg.max_queues,
                "With --queues '*': distinct queues this node serves at "
                "once; a join of one more is refused too_many_queues")
    ->capture_default_str();
  app
    .add_option("--queue-idle", cfg.queue_idle_ms,
                "ms after which a queue with no ticket and no join is "
                "forgotten (no sweep, no metric label; 0: never)")
    ->capture_default_str();
  app
    .add_option("--stream-maxlen", cfg.stream_maxlen,
                "Events kept in the Redis Stream mm:events (XADD MAXLEN ~; "
                "0: uncapped)")
    ->capture_default_str();
  app.add_option("--threads", cfg.threads, "Actor scheduler threads")
    ->capture_default_str();
  app
    .add_option("--scheduler", cfg.scheduler,
                "Actor scheduler policy: sharing (idle threads sleep) or "
                "stealing (idle threads poll)")
    ->check(CLI::IsMember({"sharing", "stealing"}))
    ->capture_default_str();
  app
    .add_option("--clock", cfg.clock,
                "Actor timer thread: lazy (woken only for the earliest due "
                "timer) or caf (CAF's own)")
    ->check(CLI::IsMember({"lazy", "caf"}))
    ->capture_default_str();
  app.add_option("--io-threads", cfg.io_threads, "HTTP threads")
    ->capture_default_str();
  app.add_option("--max-body", cfg.max_body, "Largest request body in bytes")
    ->capture_default_str();
  app.add_option("--rate", cfg.rate, "Requests per second per connection")
    ->capture_default_str();
  app
    .add_option("--idle-timeout", cfg.idle_timeout_ms,
                "ms without a complete request before a connection closes")
    ->capture_default_str();
  app
    .add_option("--max-connections", cfg.max_connections,
                "Connections open at once, HTTP and WebSocket")
    ->capture_default_str();
  app
    .add_option("--max-websockets-per-user", cfg.max_ws_per_user,
                "WebSockets one user may have open on this node; one more "
                "is refused 429 too_many_websockets")
    ->capture_default_str();
  app
    .add_option("--ws-idle-timeout", cfg.ws_idle_timeout_ms,
                "ms after which a WebSocket from which nothing arrived (not "
                "even the pong to the ping sent at half of it) is closed")
    ->capture_default_str();
  app
    .add_option("--ws-rate", cfg.ws_rate,
                "Messages and pings per second a client may send on one "
                "WebSocket (burst twice that); a flood is closed (1008)")
    ->capture_default_str();
  app
    .add_option("--client-ttl", cfg.client_ttl_ms,
                "ms a waiting user may go without WebSocket or request")
    ->capture_default_str();
  app
    .add_option("--drain-timeout", cfg.drain_timeout_ms,
                "Bound of the graceful shutdown in ms")
    ->capture_default_str();
  app
    .add_option("--ticket-ttl", cfg.ticket_ttl_ms,
                "Presence window of a ticket in ms")
    ->capture_default_str();
  app
    .add_option("--heartbeat", cfg.heartbeat_ms,
                "Ticket refresh period in ms (less than --ticket-ttl)")
    ->capture_default_str();
  app
    .add_option("--rescan-batch", cfg.rescan_batch,
                "Waiting tickets of one queue re-scanned per store call at "
                "their heartbeats (1: a call each)")
    ->check(CLI::Range(1, 100))
    ->capture_default_str();
  app
    .add_option("--max-session", cfg.max_session_s,
                "Seconds after which a match session ends by itself "
                "(reason expired; 0: never)")
    ->capture_default_str();
  app
    .add_option("--idle-release", cfg.idle_release_ms,
                "ms after which a user with no live ticket, no WebSocket and "
                "no request is released from memory (0: never)")
    ->capture_default_str();
  app
    .add_option("--trim-interval", cfg.trim_ms,
                "ms between returns of free heap memory to the system "
                "(malloc_trim; 0: never)")
    ->capture_default_str();
  app
    .add_option("--worker-timeout", cfg.worker_timeout_ms,
                "ms after which a store worker that has not answered is "
                "stuck (a frozen Redis or PostgreSQL): the node stops "
                "serving, drains and exits 70 (0: never)")
    ->capture_default_str();
  app
    .add_option("--parked-ttl", cfg.parked_ttl_ms,
                "ms an event is kept for a user with no session on this node")
    ->capture_default_str();
  app
    .add_option("--outbox-lease", cfg.outbox_lease_ms,
                "ms a relay holds the events it fetched; another node's "
                "relay delivers them after this when the node died")
    ->capture_default_str();
  app
    .add_option("--retention", cfg.retention_s,
                "Seconds delivered events and closed sessions are kept "
                "(0: forever)")
    ->capture_default_str();
  app
    .add_option("--outbox-partition", cfg.outbox_partition,
                "Width in seconds of the outbox's time partitions in "
                "PostgreSQL, dropped whole past --retention; 'auto' (a "
                "quarter of --retention, 60 s to a day) or 'off' (rows "
                "deleted one by one)")
    ->capture_default_str();
  app.add_option("--redis-workers", cfg.redis_workers, "Redis connections")
    ->capture_default_str();
  app.add_option("--pg-workers", cfg.pg_workers, "PostgreSQL connections")
    ->capture_default_str();
  app
    .add_option("--cluster-port", cfg.cluster_port,
                "Publish this node's gateway on this port (0: single node)")
    ->capture_default_str();
  app
    .add_option("--cluster-host", cfg.cluster_host,
                "Address the other nodes reach this node's gateway at "
                "(advertised; see --cluster-bind)")
    ->capture_default_str();
  app
    .add_option("--cluster-bind", cfg.cluster_bind,
                "Local address the cluster port binds to (0.0.0.0: every "
                "interface)")
    ->capture_default_str();
  app.add_option("--cluster-cert", cfg.cluster_cert,
                 "This node's certificate (PEM) for the cluster's mutual TLS");
  app.add_option("--cluster-key", cfg.cluster_key,
                 "The private key of --cluster-cert (PEM, unencrypted)");
  app.add_option("--cluster-ca", cfg.cluster_ca,
                 "CA bundle (PEM) a peer's certificate must chain to");
  app
    .add_option("--cluster-insecure", cfg.cluster_insecure,
                "Plaintext cluster port without certificates (true/false; "
                "loopback --cluster-bind only: test clusters)")
    ->capture_default_str();
  app
    .add_option("--peers", cfg.peers,
                "Static peers id=host:port (comma separated)")
    ->delimiter(',');
  app
    .add_option("--membership", cfg.membership,
                "Register in and discover peers through Redis (true/false)")
    ->capture_default_str();
  app
    .add_option("--member-ttl", cfg.member_ttl_ms,
                "ms after its last heartbeat before a node counts as gone")
    ->capture_default_str();
  app.add_option("--console-token", cfg.console_token,
                 "Operator token of the web console at /console/ (at least "
                 "16 bytes; default: none, the console is off)");
  app.add_option("--console-operators", cfg.console_operators,
                 "JSON file of the console's logins: name, role (viewer or "
                 "operator) and the SHA-256 of each one's token "
                 "(docs/console.md)");
  app.add_option("--console-audit", cfg.console_audit,
                 "Append every console lookup and action to this file "
                 "(JSON lines; default: kept in memory only)");
  app
    .add_option("--console-history-interval", cfg.console_history_s,
                "Seconds between the console's samples of its counters (the "
                "last 60 are kept: an hour at the default)")
    ->check(CLI::Range(1, 3600))
    ->capture_default_str();
  app.add_option("--demo-queue", cfg.demo_queue,
                 "Serve the console's \"try it\" page: visitors join this "
                 "served queue as demo users (default: none, off)");
  app
    .add_option("--demo-ttl", cfg.demo_ttl_s,
                "Seconds a demo user's token lasts")
    ->capture_default_str();
  try {
    app.parse(argc, argv);
    // Below the command line: the environment, then the config file.
    std::map<std::string, std::vector<std::string>> file_items;
    if (!cfg.config_file.empty()) {
      std::ifstream in{cfg.config_file};
      if (!in)
        throw CLI::ValidationError("--config",
                                   "cannot read " + cfg.config_file);
      for (auto& item : CLI::ConfigTOML{}.from_config(in))
        file_items[item.name] = item.inputs;
      for (auto& kv : file_items) {
        auto opt = app.get_option_no_throw("--" + kv.first);
        if (opt == nullptr || kv.first == "config")
          throw CLI::ValidationError(cfg.config_file,
                                     "unknown key '" + kv.first + "'");
      }
    }
    for (auto* opt : app.get_options()) {
      auto name = opt->get_single_name();
      if (opt->count() > 0 || name == "config" || name == "help"
          || name == "version")
        continue;
      if (auto env = std::getenv(env_name(name).c_str()); env && *env) {
        opt->add_result(std::string{env});
        opt->run_callback();
      } else if (auto i = file_items.find(name); i != file_items.end()) {
        for (auto& v : i->second)
          opt->add_result(v);
        opt->run_callback();
      }
    }
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    res.exit_code = app.exit(e, out, err);
    res.exit_now = true;
    res.output = out.str() + err.str();
    if (res.exit_code != 0)
      res.exit_code = 2;
    return res;
  }
  // Validation: every problem, one line each.
  std::vector<std::string> bad;
  auto complain = [&](const std::string& opt, const std::string& why) {
    bad.push_back("matchd: bad value for --" + opt + " (env " + env_name(opt)
                  + "): " + why);
  };
  if (!split_host_port(cfg.listen, true, cfg.listen_host, cfg.listen_port))
    complain("listen", "'" + cfg.listen + "' is not host:port");
  if (!cfg.admin_listen.empty()) {
    auto a = cfg.admin_listen;
    if (a.find_first_not_of("0123456789") == std::string::npos)
      a = "127.0.0.1:" + a; // loopback unless told otherwise
    if (!split_host_port(a, true, cfg.admin_host, cfg.admin_port))
      complain("admin-listen",
               "'" + cfg.admin_listen + "' is not host:port or a port");
    else if (cfg.admin_port != 0 && cfg.admin_port == cfg.listen_port)
      complain("admin-listen", "the same port as --listen");
  }
  const bool jwks = !cfg.jwks_file.empty() || !cfg.jwks_url.empty();
  if (!cfg.jwks_file.empty() && !cfg.jwks_url.empty())
    complain("jwks-url", "give --jwks-file or --jwks-url, not both");
  if (!cfg.jwks_url.empty() && cfg.jwks_url.rfind("https://", 0) != 0
      && cfg.jwks_url.rfind("http://", 0) != 0)
    complain("jwks-url", "must be an http:// or https:// URL");
  if (!cfg.jwks_ca_file.empty() && cfg.jwks_url.rfind("https://", 0) != 0)
    complain("jwks-ca-file", "only with an https:// --jwks-url");
  if (!cfg.otlp_endpoint.empty()) {
    std::string why;
    if (!valid_http_url(cfg.otlp_endpoint, why))
      complain("otlp-endpoint", why);
  }
  if (!(cfg.otlp_sample >= 0 && cfg.otlp_sample <= 1))
    complain("otlp-sample", "must be 0-1");
  if (!cfg.otlp_ca_file.empty() && cfg.otlp_endpoint.rfind("https://", 0) != 0)
    complain("otlp-ca-file", "only with an https:// --otlp-endpoint");
  if (cfg.jwks_refresh_s < 10 || cfg.jwks_refresh_s > 86400)
    complain("jwks-refresh", "must be 10-86400 seconds");
  if (!cfg.secret_file.empty()) {
    if (!cfg.secret.empty())
      complain("secret-file", "either --secret or --secret-file");
    else if (!first_line_of(cfg.secret_file, cfg.secret))
      complain("secret-file",
               "cannot read a secret from '" + cfg.secret_file + "'");
  }
  // Without a secret (and with keys) only the identity provider's JWTs
  // are accepted: v1 and HS256 tokens match no secret.
  if (!(cfg.secret.empty() && jwks) && cfg.secret.size() < 16) {
    complain("secret", "required, at least 16 bytes (the host application "
                       "signs tokens with it), unless --jwks-file or "
                       "--jwks-url is given");
  }
  if (!cfg.secret_next.empty() && cfg.secret.empty())
    complain("secret-next", "only beside --secret");
  if (!cfg.secret_next.empty()) {
    if (cfg.secret_next.size() < 16)
      complain("secret-next", "at least 16 bytes");
    else if (cfg.secret_next == cfg.secret)
      complain("secret-next", "is the same as --secret");
  }
  if (cfg.outbox_partition == "auto") {
    uint32_t quarter = cfg.retention_s / 4;
    cfg.outbox_partition_s
      = cfg.retention_s == 0 ? 86400 : std::clamp<uint32_t>(quarter, 60, 86400);
  } else if (cfg.outbox_partition == "off") {
    cfg.outbox_partition_s = 0;
  } else {
    char* end = nullptr;
    errno = 0;
    auto v = std::strtoul(cfg.outbox_partition.c_str(), &end, 10);
    if (cfg.outbox_partition.empty() || *end != '\0' || errno != 0
        || !std::isdigit(static_cast<unsigned char>(cfg.outbox_partition[0]))
        || v < 1 || v > 30 * 86400)
      complain("outbox-partition",
               "'" + cfg.outbox_partition
                 + "' is not auto, off or 1-2592000 seconds");
    else
      cfg.outbox_partition_s = static_cast<uint32_t>(v);
  }
  if (cfg.token_leeway_s > 300)
    complain("token-leeway", "must be 0-300 seconds");
  if (cfg.token_audience.size() > 256)
    complain("token-audience", "at most 256 bytes");
  if (cfg.token_issuer.size() > 256)
    complain("token-issuer", "at most 256 bytes");
  if (!cfg.token_formats.empty()) {
    cfg.accept_v1_tokens = cfg.accept_jwt_tokens = false;
    for (auto& f : cfg.token_formats) {
      if (f == "v1")
        cfg.accept_v1_tokens = true;
      else if (f == "jwt")
        cfg.accept_jwt_tokens = true;
      else
        complain("token-formats", "'" + f + "' is not v1 or jwt");
    }
  }
  if (!cfg.redis.empty()) {
    std::vector<std::string> parts;
    std::string cur;
    for (char c : cfg.redis + ",") {
      if (c != ',') {
        cur += c;
        continue;
      }
      if (cur.compare(0, 8, "redis://") == 0)
        cur = cur.substr(8);
      if (!cur.empty())
        parts.push_back(cur);
      cur.clear();
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      std::string host;
      uint16_t port = 0;
      if (!split_host_port(parts[i], false, host, port)) {
        complain("redis", "'" + parts[i] + "' is not host:port");
      } else if (i == 0) {
        cfg.redis_host = host;
        cfg.redis_port = port;
      } else {
        cfg.redis_seeds.push_back(host + ":" + std::to_string(port));
      }
    }
    if (parts.empty())
      complain("redis", "no host:port given");
    if (parts.size() > 1)
      cfg.redis_cluster = true;
  } else if (cfg.redis_cluster) {
    complain("redis-cluster", "needs --redis");
  }
  if (!cfg.redis_password_file.empty()) {
    if (!first_line_of(cfg.redis_password_file, cfg.redis_password))
      complain("redis-password-file",
               "cannot read a password from '" + cfg.redis_password_file + "'");
  } else if (const char* pw = std::getenv("MATCHD_REDIS_PASSWORD");
             pw != nullptr && *pw != '\0') {
    cfg.redis_password = pw;
  }
  if (!cfg.redis_user.empty() && cfg.redis_password.empty())
    complain("redis-user", "needs a password (--redis-password-file or "
                           "MATCHD_REDIS_PASSWORD)");
  if (cfg.node.empty() || cfg.node.size() > 64)
    complain("node", "must be 1-64 bytes");
  static const char* levels[] = {"trace", "debug",    "info", "warn",
                                 "error", "critical", "off"};
  if (std::find(std::begin(levels), std::end(levels), cfg.log_level)
      == std::end(levels))
    complain("log-level", "'" + cfg.log_level
                            + "' is not one of trace, debug, info, warn, "
                              "error, critical, off");
  if (cfg.threads < 1 || cfg.threads > 64)
    complain("threads", "must be 1-64");
  if (cfg.io_threads < 1 || cfg.io_threads > 64)
    complain("io-threads", "must be 1-64");
  if (cfg.max_body < 256 || cfg.max_body > (1u << 20))
    complain("max-body", "must be 256-1048576 bytes");
  if (!(cfg.rate >= 1 && cfg.rate <= 1e6))
    complain("rate", "must be 1-1000000 requests per second");
  if (cfg.idle_timeout_ms < 100)
    complain("idle-timeout", "must be at least 100 ms");
  if (cfg.max_connections < 1)
    complain("max-connections", "must be at least 1");
  if (cfg.max_ws_per_user < 1 || cfg.max_ws_per_user > 1000)
    complain("max-websockets-per-user", "must be 1-1000");
  if (cfg.ws_idle_timeout_ms < 1000 || cfg.ws_idle_timeout_ms > 3600000)
    complain("ws-idle-timeout", "must be 1000-3600000 ms");
  if (!(cfg.ws_rate >= 1 && cfg.ws_rate <= 10000))
    complain("ws-rate", "must be 1-10000 messages per second");
  if (cfg.drain_timeout_ms < 100 || cfg.drain_timeout_ms > 600000)
    complain("drain-timeout", "must be 100-600000 ms");
  if (cfg.ticket_ttl_ms < 1000)
    complain("ticket-ttl", "must be at least 1000 ms");
  const bool heartbeat_ok = cfg.heartbeat_ms >= 100
                            && cfg.heartbeat_ms < cfg.ticket_ttl_ms;
  if (!heartbeat_ok)
    complain("heartbeat", "must be at least 100 ms and less than --ticket-ttl");
  if (cfg.client_ttl_ms != 0 && cfg.client_ttl_ms < 1000)
    complain("client-ttl", "must be 0 (off) or at least 1000 ms");
  if (cfg.idle_release_ms != 0 && cfg.idle_release_ms < 1000)
    complain("idle-release", "must be 0 (never) or at least 1000 ms");
  if (cfg.worker_timeout_ms != 0 && cfg.worker_timeout_ms < 1000)
    complain("worker-timeout", "must be 0 (never) or at least 1000 ms");
  if (cfg.trim_ms != 0 && cfg.trim_ms < 1000)
    complain("trim-interval", "must be 0 (never) or at least 1000 ms");
  if (cfg.parked_ttl_ms < 1000 || cfg.parked_ttl_ms > 3600000)
    complain("parked-ttl", "must be 1000-3600000 ms");
  // An unrouted event is delivered again one lease later, when the users'
  // nodes have mapped them again at their next heartbeat: the lease must
  // outlast a heartbeat (docs/cluster.md, "When Redis forgets").
  if (cfg.outbox_lease_ms < 1000 || cfg.outbox_lease_ms > 600000
      || (heartbeat_ok && cfg.outbox_lease_ms <= cfg.heartbeat_ms))
    complain("outbox-lease", "must be 1000-600000 ms and more than "
                             "--heartbeat");
  if (cfg.redis_workers < 1 || cfg.redis_workers > 64)
    complain("redis-workers", "must be 1-64");
  if (cfg.pg_workers < 1 || cfg.pg_workers > 64)
    complain("pg-workers", "must be 1-64");
  if (cfg.cluster_port != 0) {
    if (cfg.redis.empty() || cfg.postgres.empty())
      complain("cluster-port", "a cluster shares its stores: give --redis and "
                               "--postgres too");
    if (cfg.cluster_port == cfg.listen_port)
      complain("cluster-port", "must differ from the --listen port");
    if (cfg.cluster_host.empty())
      complain("cluster-host", "required with --cluster-port");
    if (cfg.cluster_bind.empty())
      complain("cluster-bind", "required with --cluster-port (0.0.0.0: every "
                               "interface)");
    bool any_tls = !cfg.cluster_cert.empty() || !cfg.cluster_key.empty()
                   || !cfg.cluster_ca.empty();
    if (any_tls) {
      for (auto [opt, val] : {std::pair{"cluster-cert", &cfg.cluster_cert},
                              std::pair{"cluster-key", &cfg.cluster_key},
                              std::pair{"cluster-ca", &cfg.cluster_ca}})
        if (val->empty())
          complain(opt, "required with the other two of --cluster-cert, "
                        "--cluster-key, --cluster-ca");
      if (cfg.cluster_insecure)
        complain("cluster-insecure", "contradicts --cluster-cert");
    } else if (!cfg.cluster_insecure) {
      complain("cluster-port", "needs --cluster-cert, --cluster-key and "
                               "--cluster-ca (mutual TLS between the nodes; "
                               "deploy/cluster-certs.sh makes them), or "
                               "--cluster-insecure for a loopback-only test "
                               "cluster");
    } else if (!loopback_address(cfg.cluster_bind)) {
      complain("cluster-insecure", "needs a loopback --cluster-bind, not '"
                                     + cfg.cluster_bind + "'");
    }
  } else if (!cfg.peers.empty()) {
    complain("peers", "needs --cluster-port");
  }
  for (auto& p : cfg.peers) {
    auto eq = p.find('=');
    std::string h;
    uint16_t port = 0;
    if (eq == std::string::npos || eq == 0
        || !split_host_port(p.substr(eq + 1), false, h, port))
      complain("peers", "'" + p + "' is not id=host:port");
  }
  if (cfg.member_ttl_ms < 1000)
    complain("member-ttl", "must be at least 1000 ms");
  // Queues are declared: none named is the one default queue; '*' alone
  // is open mode (bounded by --max-queues and --queue-idle).
  if (cfg.queues.empty())
    cfg.queues.emplace_back(default_queue);
  cfg.open_queues = cfg.queues.size() == 1 && cfg.queues.front() == "*";
  if (!cfg.open_queues) {
    std::vector<std::string> seen;
    for (auto& q : cfg.queues) {
      if (q == "*")
        complain("queues", "'*' (any name) stands alone, not in a list");
      else if (auto why = codec::check_queue(q); !why.empty())
        complain("queues", "'" + q + "': " + why);
      else if (std::find(seen.begin(), seen.end(), q) != seen.end())
        complain("queues", "'" + q + "' is named twice");
      else
        seen.push_back(q);
    }
  }
  if (!cfg.rules_file.empty()) {
    std::ifstream in(cfg.rules_file);
    std::stringstream text;
    text << in.rdbuf();
    if (!in)
      complain("rules", "cannot read '" + cfg.rules_file + "'");
    else if (auto book = parse_rule_book(text.str()); !book)
      complain("rules", std::string{"invalid_rules: "} + book.error().detail);
    else {
      for (auto& [q, rs] : *book)
        if (!cfg.open_queues
            && std::find(cfg.queues.begin(), cfg.queues.end(), q)
                 == cfg.queues.end())
          complain("rules", "invalid_rules: rules for queue '" + q
                              + "', which --queues does not serve");
      cfg.rules = std::make_shared<const rule_book>(std::move(*book));
    }
  }
  if (!cfg.console_token.empty() && cfg.console_token.size() < 16)
    complain("console-token", "at least 16 bytes (or none: the console is "
                              "off)");
  if (!cfg.demo_queue.empty()) {
    if (auto why = codec::check_queue(cfg.demo_queue); !why.empty())
      complain("demo-queue", "'" + cfg.demo_queue + "': " + why);
    else if (!cfg.open_queues
             && std::find(cfg.queues.begin(), cfg.queues.end(), cfg.demo_queue)
                  == cfg.queues.end())
      complain("demo-queue",
               "'" + cfg.demo_queue + "' is not one of the served --queues");
    else if (!cfg.accept_jwt_tokens)
      complain("demo-queue", "demo tokens are JWTs confined to the demo "
                             "queue: --token-formats must include jwt");
    else if (cfg.secret.empty())
      complain("demo-queue", "demo tokens are signed with --secret: give one");
  }
  if (cfg.demo_ttl_s < 60 || cfg.demo_ttl_s > 86400)
    complain("demo-ttl", "must be 60-86400 seconds");
  if (cfg.max_queues < 1 || cfg.max_queues > 1000000)
    complain("max-queues", "must be 1-1000000");
  if (cfg.queue_idle_ms != 0 && cfg.queue_idle_ms < 1000)
    complain("queue-idle", "must be 0 (never) or at least 1000 ms");
  if (!bad.empty()) {
    res.exit_code = 2;
    res.exit_now = true;
    for (auto& line : bad)
      res.output += line + "\n";
  }
  return res;
}

} // namespace mm
