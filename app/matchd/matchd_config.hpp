#pragma once

// matchd's settings: command line > environment (MATCHD_*) > config file
// (--config, INI/TOML) > defaults, parsed with CLI11 and validated as a
// whole (one message per bad value).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/rules.hpp"

namespace mm {

struct matchd_config {
  std::string config_file;
  std::string listen = "127.0.0.1:8080";
  std::string secret;      ///< signs and verifies tokens
  std::string secret_next; ///< also verifies them (key rollover)
  /// A file whose first line is the secret (a container's secret file,
  /// instead of --secret or MATCHD_SECRET).
  std::string secret_file;
  std::string token_audience;   ///< a JWT's aud must name it
  std::string token_issuer;     ///< a JWT's iss must equal it
  uint32_t token_leeway_s = 30; ///< clock skew on a JWT's exp, nbf, iat
  /// Accepted token formats, "v1" and/or "jwt"; empty: both.
  std::vector<std::string> token_formats;
  /// An identity provider's public keys (RS256/ES256 JWTs): a JWK Set
  /// file or an http(s) URL of one, refreshed (docs/api.md). With one of
  /// them --secret may be left out: then only those JWTs are accepted.
  std::string jwks_file;
  std::string jwks_url;
  std::string jwks_ca_file; ///< https: CA bundle (empty: the system's)
  uint32_t jwks_refresh_s = 300;
  /// host:port, or several comma separated (Redis Cluster seeds); empty:
  /// the embedded queue store.
  std::string redis;
  bool redis_cluster = false;      ///< a Redis Cluster even with one seed
  std::string redis_user;          ///< AUTH user (ACL); empty: the default user
  std::string redis_password_file; ///< AUTH password from this file
  /// The AUTH password: from redis_password_file or $MATCHD_REDIS_PASSWORD.
  /// Never logged, never printed, never on the command line.
  std::string redis_password;
  std::string postgres; ///< libpq conninfo; empty: in-memory persistence
  std::string node = "node-1";
  std::string log_level = "info";
  /// The queues this node serves (declared): none given means the one
  /// queue `default`; `{"*"}` (open mode, for development and tests) means
  /// any well-formed name, bounded by `max_queues` and `queue_idle_ms`.
  std::vector<std::string> queues;
  uint32_t max_queues = 1000; ///< open mode: distinct queues at once
  /// A JSON file of match rules by queue (docs/rules.md); empty: every
  /// queue is plain FIFO. Read and checked at start.
  std::string rules_file;
  uint32_t queue_idle_ms = 60000;  ///< an empty queue is forgotten after
  uint64_t stream_maxlen = 100000; ///< MAXLEN ~ of the event stream; 0: off
  uint32_t threads = 2;            ///< CAF scheduler threads
  /// CAF's scheduler policy: "sharing" (one queue; idle threads sleep until
  /// work comes) or "stealing" (a queue per thread; idle threads poll and
  /// steal). docs/benchmarks.md, "End to end".
  std::string scheduler = "sharing";
  /// The timer thread: "lazy" (wakes only for the earliest due event,
  /// actors/lazy_clock.hpp) or "caf" (CAF's own, woken by every timer).
  std::string clock = "lazy";
  uint32_t io_threads = 2; ///< HTTP threads (docs/matchd.md)
  uint32_t max_body = 16384;
  double rate = 1000;
  uint32_t idle_timeout_ms = 30000;
  uint32_t max_connections = 20000;    ///< HTTP and WebSocket connections
  uint32_t max_ws_per_user = 8;        ///< WebSockets of one user at once
  uint32_t ws_idle_timeout_ms = 60000; ///< silent WebSocket closed after
  double ws_rate = 10;                 ///< inbound WebSocket messages/s
  uint32_t client_ttl_ms = 30000;
  uint32_t drain_timeout_ms = 10000;
  uint32_t ticket_ttl_ms = 30000;
  uint32_t heartbeat_ms = 10000;
  uint32_t rescan_batch = 50;    ///< waiting tickets' re-scans per Redis call
  uint32_t max_session_s = 3600; ///< sessions end by themselves after this
  uint32_t idle_release_ms = 60000; ///< an idle user's actors stop (0: never)
  uint32_t trim_ms = 10000; ///< free heap returned to the system (0: never)
  uint32_t worker_timeout_ms
    = 60000;                      ///< a store worker silent this long is stuck
  uint32_t parked_ttl_ms = 60000; ///< events kept for users not here
  uint32_t outbox_lease_ms = 30000; ///< a relay's hold on fetched events
  uint32_t retention_s = 7 * 86400; ///< delivered events, closed sessions
  /// Outbox time partitions: "auto" (a quarter of the retention, 60 s to a
  /// day), "off", or seconds; resolved into `outbox_partition_s` (0: off).
  std::string outbox_partition = "auto";
  uint32_t outbox_partition_s = 0;
  uint32_t redis_workers = 4;
  uint32_t pg_workers = 2;
  // Cluster (docs/cluster.md): 0 = a single node.
  uint16_t cluster_port = 0;
  std::string cluster_host = "127.0.0.1"; ///< what peers connect to
  std::string cluster_bind = "127.0.0.1"; ///< what the port binds to
  std::string cluster_cert;               ///< this node's certificate (PEM)
  std::string cluster_key;       ///< its private key (PEM, unencrypted)
  std::string cluster_ca;        ///< the CA bundle peers' certificates chain to
  bool cluster_insecure = false; ///< plaintext, loopback-only test clusters
  std::vector<std::string> peers; ///< static "id=host:port"
  bool membership = true;         ///< Redis membership records
  uint32_t member_ttl_ms = 5000;
  // The web console (docs/console.md).
  std::string console_token; ///< operator token; empty: the console is off
  /// --console-operators: the console's logins and roles (a JSON file).
  std::string console_operators;
  /// --console-audit: the audit log's file (JSON lines); empty: kept in
  /// memory only (the console shows the last 200).
  std::string console_audit;
  /// --console-history-interval: seconds between the last hour's samples
  /// (60 kept).
  uint32_t console_history_s = 60;
  std::string demo_queue;    ///< the "try it" page's queue; empty: off
  uint32_t demo_ttl_s = 600; ///< lifetime of a demo user's token

  // Derived by validation.
  bool accept_v1_tokens = true;
  bool accept_jwt_tokens = true;
  bool open_queues = false; ///< `--queues '*'`: any well-formed name
  std::shared_ptr<const rule_book> rules; ///< from `rules_file`, or null
  std::string listen_host;
  uint16_t listen_port = 0;
  /// --admin-listen: /healthz, /readyz, /metrics and the console on their
  /// own address (a bare port: on 127.0.0.1), not on --listen; empty:
  /// everything on --listen.
  std::string admin_listen;
  /// OTLP/HTTP traces of matches (docs/matchd.md "Traces"): the collector's
  /// URL (e.g. http://127.0.0.1:4318/v1/traces); empty: none.
  std::string otlp_endpoint;
  std::string otlp_ca_file;  ///< https: CA bundle (empty: the system's)
  double otlp_sample = 0.01; ///< share of matches traced
  std::string admin_host;
  uint16_t admin_port = 0;
  std::string redis_host;
  uint16_t redis_port = 0;
  std::vector<std::string> redis_seeds; ///< the other "host:port" given
};

/// The queue a node serves when its configuration names none.
inline constexpr const char* default_queue = "default";

struct config_result {
  /// 0: run; otherwise the exit code (0 for --help/--version is `exit_now`).
  int exit_code = 0;
  bool exit_now = false;
  std::string output; ///< what to print (help text or the errors)
};

/// Parses `argv`, the environment and the config file into `cfg`, then
/// validates it and fills the derived fields. --help and --version:
/// `exit_now`, exit code 0, the text in `output`. A parse error or a bad
/// value: `exit_now`, exit code 2, and `output` holds the errors (one line
/// per bad value, naming the option). Else `exit_now` is false: run.
config_result parse_matchd_config(int argc, char** argv, matchd_config& cfg);

} // namespace mm
