#pragma once

// The cluster section of `engine_config` and its helpers (docs/cluster.md).
// No CAF here: matchd's flag parsing and the host's configuration code can
// use it without paying for CAF headers.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/errc.hpp"
#include "core/outcome.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm {

/// Where a node's gateway is published.
struct peer_address {
  std::string node; ///< the node id (as in `engine_config::node`)
  std::string host; ///< host name or address, without brackets
  uint16_t port = 0;
};

/// Settings of a node's part in a cluster: several nodes sharing one queue
/// store (Redis) and one database, routing match events and in-flight
/// cancels between them through their `node_gateway`s.
struct cluster_config {
  /// The port the node's gateway is published on (over TLS with
  /// `caf::openssl::publish` when `tls()`, else `sys.middleman().publish`),
  /// and advertised to the other nodes.
  /// 0: no cluster — a single node, exactly as without this section.
  uint16_t port = 0;
  /// The host the other nodes connect to (advertised as "host:port"; not
  /// what the port binds to: that is `bind`).
  std::string host = "127.0.0.1";
  /// The local address the published port binds to (loopback by default:
  /// a node reachable from other machines sets it, e.g. to the address of
  /// its cluster network, or "0.0.0.0"); empty: every interface.
  std::string bind = "127.0.0.1";
  /// Mutual TLS between the nodes (docs/cluster.md, "Security"): this
  /// node's certificate chain (PEM), its private key (PEM, unencrypted)
  /// and the CA bundle (PEM, one or more CAs) a peer's certificate must
  /// chain to. All three or none. CAF's OpenSSL module reads them from the
  /// actor system's config (`openssl.certificate`, `openssl.key`,
  /// `openssl.cafile`): `use_cluster_tls` (actors/cluster_tls.hpp) loads the
  /// module and sets them before the actor system is made.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  /// Without TLS the engine refuses to publish (`auto_connect`) unless this
  /// is set; then `bind` must be a loopback address (any process on the
  /// machine can still talk to the port: test clusters only).
  bool insecure = false;
  /// Static peers, "id=host:port" each (IPv6: "id=[::1]:4242"). Always
  /// considered live, never forgotten; combine freely with `membership`.
  std::vector<std::string> peers;
  /// Membership through the queue store: this node writes `node ->
  /// host:port` with a heartbeat deadline (server clock) every
  /// `heartbeat_ms`, and learns the other live nodes from the same records.
  bool membership = true;
  uint32_t heartbeat_ms = 1000; ///< membership refresh period
  /// A node whose record was not refreshed for this long is forgotten (its
  /// users count as connected nowhere). More than `heartbeat_ms`.
  uint32_t member_ttl_ms = 5000;
  /// After a failed connection attempt to a peer, wait this long before the
  /// next one (calls meanwhile fail fast as "unreachable").
  uint32_t reconnect_ms = 1000;
  /// Bound of one routed event delivery to a peer, connection included.
  uint32_t forward_timeout_ms = 3000;
  /// Bound of one routed in-flight cancel (the peer's finalizer may take
  /// its `cancel_wait_ms` to decide): more than that.
  uint32_t cancel_timeout_ms = 20000;
  /// Publish the gateway on `port` at start and connect to peers lazily with
  /// `remote_actor` from a detached worker (the default). Off: the host (or
  /// a deterministic test) publishes `engine::gateway()` itself and
  /// introduces peers with `peer_atom`.
  bool auto_connect = true;
  /// When a session registers, look up the user's active match in the
  /// database and hand its `match.created` event to the session (a user
  /// reconnecting, maybe on another node, gets what it missed; the event id
  /// is the original one, so clients dedupe). Only in a cluster: on a
  /// single node the directory keeps what a user missed, and the lookup
  /// costs one database query per session start.
  bool replay_on_register = true;
  /// Bound on one job of a store worker; a worker silent for longer is
  /// stuck (actors/worker_bound.hpp) and the gateway stops. 0: no bound.
  /// Set by the engine from `engine_config::worker_timeout_ms`.
  uint32_t worker_timeout_ms = 60000;

  /// True when this node is part of a cluster (`port != 0`).
  bool enabled() const noexcept {
    return port != 0;
  }

  /// True when the nodes talk over mutual TLS (any `tls_*` set; the check
  /// wants all three).
  bool tls() const noexcept {
    return !tls_cert.empty() || !tls_key.empty() || !tls_ca.empty();
  }
};

/// Parses "id=host:port" (IPv6 hosts in brackets). Fails with
/// `invalid_argument` naming what is wrong.
outcome<peer_address> parse_peer(const std::string& text);

/// Parses "host:port" (IPv6 hosts in brackets) into host and port. Fails
/// with `invalid_argument`.
outcome<std::pair<std::string, uint16_t>>
parse_address(const std::string& text);

/// "host:port", with brackets around an IPv6 host.
std::string format_address(const std::string& host, uint16_t port);

/// True for "localhost", 127.0.0.0/8 and ::1 (as written, not resolved).
inline bool loopback_address(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]")
    return true;
  // 127.a.b.c, digits and dots only.
  if (host.compare(0, 4, "127.") != 0)
    return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.')
      ++dots;
    else if (c < '0' || c > '9')
      return false;
  }
  return dots == 3;
}

/// Checks a cluster section for node `node`: valid node id, parsable and
/// distinct static peers (none named `node`), `heartbeat_ms` below
/// `member_ttl_ms`, non-zero bounds, no static peers without `port`; the
/// three `tls_*` all or none, and with `auto_connect` and no TLS,
/// `insecure` with a loopback `bind`. Does not open the files
/// (`check_cluster_tls` does). `code == errc::none` when valid.
failure check_cluster_config(const cluster_config& cfg,
                             const std::string& node);

/// The membership and routing keys in the queue store; one hash tag, so
/// the cluster scripts run unchanged on Redis Cluster.
namespace cluster_keys {
constexpr const char* nodes = "mm:{cluster}:nodes"; ///< node -> host:port
constexpr const char* beats = "mm:{cluster}:beats"; ///< node -> deadline
constexpr const char* users = "mm:{cluster}:users"; ///< user -> node
} // namespace cluster_keys

/// The commands that take `node`'s membership record out at once (a clean
/// stop; a crashed node lapses after `member_ttl_ms`). Idempotent.
std::vector<store_command> cluster_leave_commands(const std::string& node);

} // namespace mm
