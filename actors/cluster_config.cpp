#include "actors/cluster_config.hpp"

#include <cctype>
#include <set>

namespace mm {

namespace {

/// The id rule of the queue scripts (lua/lib/common.lua, valid_id):
/// [A-Za-z0-9._:@-], 1..64 bytes for a node.
bool valid_node_id(const std::string& id) {
  if (id.empty() || id.size() > 64)
    return false;
  for (unsigned char c : id)
    if (!std::isalnum(c) && c != '.' && c != '_' && c != ':' && c != '@'
        && c != '-')
      return false;
  return true;
}

failure invalid(std::string what) {
  return failure{errc::invalid_argument, std::move(what)};
}

} // namespace

outcome<std::pair<std::string, uint16_t>>
parse_address(const std::string& text) {
  std::string host;
  std::string port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size()
        || text[close + 1] != ':')
      return invalid("address '" + text + "': expected [host]:port");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos)
      return invalid("address '" + text + "': expected host:port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string::npos)
      return invalid("address '" + text
                     + "': an IPv6 host needs brackets ([host]:port)");
  }
  if (host.empty())
    return invalid("address '" + text + "': empty host");
  if (port.empty() || port.size() > 5)
    return invalid("address '" + text + "': bad port");
  uint32_t n = 0;
  for (char c : port) {
    if (c < '0' || c > '9')
      return invalid("address '" + text + "': bad port");
    n = n * 10 + static_cast<uint32_t>(c - '0');
  }
  if (n == 0 || n > 65535)
    return invalid("address '" + text + "': port out of range");
  return std::make_pair(std::move(host), static_cast<uint16_t>(n));
}

std::string format_address(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos)
    return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

outcome<peer_address> parse_peer(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos)
    return invalid("peer '" + text + "': expected id=host:port");
  peer_address out;
  out.node = text.substr(0, eq);
  if (!valid_node_id(out.node))
    return invalid("peer '" + text
                   + "': the node id must be 1..64 of [A-Za-z0-9._:@-]");
  auto addr = parse_address(text.substr(eq + 1));
  if (!addr)
    return invalid("peer '" + text + "': " + addr.error().detail);
  out.host = std::move(addr->first);
  out.port = addr->second;
  return out;
}

failure check_cluster_config(const cluster_config& cfg,
                             const std::string& node) {
  if (!valid_node_id(node))
    return invalid("node id '" + node + "': must be 1..64 of [A-Za-z0-9._:@-]");
  if (!cfg.enabled()) {
    if (!cfg.peers.empty())
      return invalid("cluster peers need a cluster port");
    return {};
  }
  if (cfg.host.empty())
    return invalid("cluster host is empty");
  std::set<std::string> seen;
  for (auto& text : cfg.peers) {
    auto p = parse_peer(text);
    if (!p)
      return p.error();
    if (p->node == node)
      return invalid("peer '" + text + "' names this node");
    if (!seen.insert(p->node).second)
      return invalid("peer '" + p->node + "' is listed twice");
  }
  if (cfg.heartbeat_ms == 0 || cfg.member_ttl_ms <= cfg.heartbeat_ms)
    return invalid("cluster heartbeat_ms must be > 0 and below "
                   "member_ttl_ms");
  if (cfg.member_ttl_ms > 3600000)
    return invalid("cluster member_ttl_ms is above 3600000");
  if (cfg.reconnect_ms == 0 || cfg.forward_timeout_ms == 0
      || cfg.cancel_timeout_ms == 0)
    return invalid("cluster reconnect_ms, forward_timeout_ms and "
                   "cancel_timeout_ms must be > 0");
  if (cfg.tls()
      && (cfg.tls_cert.empty() || cfg.tls_key.empty() || cfg.tls_ca.empty()))
    return invalid("cluster TLS needs all three of certificate, key and CA "
                   "(or none)");
  if (cfg.tls() && cfg.insecure)
    return invalid("cluster TLS and insecure are exclusive");
  if (!cfg.tls() && cfg.auto_connect) {
    if (!cfg.insecure)
      return invalid("a cluster port without TLS: give a certificate, key "
                     "and CA (docs/cluster.md), or insecure for a "
                     "loopback-only test cluster");
    if (!loopback_address(cfg.bind))
      return invalid(
        "an insecure cluster port must bind to a loopback "
        "address, not '"
        + (cfg.bind.empty() ? std::string{"every interface"} : cfg.bind) + "'");
  }
  return {};
}

std::vector<store_command> cluster_leave_commands(const std::string& node) {
  return {{"ZREM", cluster_keys::beats, node},
          {"HDEL", cluster_keys::nodes, node}};
}

} // namespace mm
