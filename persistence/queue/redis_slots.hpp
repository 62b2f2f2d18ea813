#pragma once

// Redis Cluster's key-to-slot rule and slot map, as the cluster
// specification defines them: a key's slot is CRC16 (XMODEM) of its hash
// tag modulo 16384, and CLUSTER SLOTS names the primary of every slot. No
// I/O here: the routing store (redis_cluster_store.cpp) asks, this file
// answers, and tests/unit/redis_slots_test.cpp checks it against a real
// cluster's CLUSTER KEYSLOT.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/outcome.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm::redis_slots {

constexpr uint16_t slot_count = 16384;

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the checksum
/// Redis Cluster hashes keys with. crc16("123456789") == 0x31C3.
uint16_t crc16(std::string_view data) noexcept;

/// The part of `key` that is hashed: the text between the first '{' and the
/// first '}' after it when that is not empty, else the whole key.
std::string_view hash_tag(std::string_view key) noexcept;

/// The slot of `key` (0..16383).
uint16_t key_slot(std::string_view key) noexcept;

/// A node address.
struct address {
  std::string host;
  uint16_t port = 0;
  /// "host:port", as `parse_address` reads it (an IPv6 host unbracketed).
  std::string text() const {
    return host + ":" + std::to_string(port);
  }
  bool operator==(const address& o) const noexcept {
    return port == o.port && host == o.host;
  }
};

/// Parses "host:port" (a bracketed IPv6 host is accepted). Returns nullopt
/// for anything else.
std::optional<address> parse_address(std::string_view text);

/// A MOVED or ASK error reply: the slot and the node that serves it now.
struct redirect {
  bool ask = false; ///< ASK: this one command, after ASKING; MOVED: for good
  uint16_t slot = 0;
  address to;
};

/// Parses "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381". Any other
/// text (or a malformed one) is nullopt.
std::optional<redirect> parse_redirect(std::string_view error);

/// True for the errors after which the same command succeeds later without
/// a change of route: TRYAGAIN (a multi-key command during a slot's
/// migration), CLUSTERDOWN, LOADING, MASTERDOWN.
bool transient_error(std::string_view error) noexcept;

/// Which primary serves each slot.
class slot_map {
 public:
  /// Replaces the map with a CLUSTER SLOTS reply. Fails with protocol_error
  /// for a reply of another shape or one that leaves a slot uncovered; the
  /// map is then unchanged.
  outcome<bool> assign(const store_value& cluster_slots_reply);

  /// Moves one slot to `to` (a MOVED reply); does nothing before the first
  /// assign. Idempotent.
  void move(uint16_t slot, const address& to);

  /// The primary of `slot`; nullopt before the first assign.
  std::optional<address> node_of(uint16_t slot) const;

  /// Every primary currently in the map, each once.
  const std::vector<address>& nodes() const noexcept {
    return nodes_;
  }

  /// True before the first successful assign.
  bool empty() const noexcept {
    return nodes_.empty();
  }

 private:
  uint16_t index_of(const address& a);

  std::vector<address> nodes_;
  /// Index into nodes_ per slot; only meaningful when nodes_ is not empty.
  std::array<uint16_t, slot_count> owner_{};
};

/// The slot a command is routed by: its first key (the element after the
/// command name) for the commands this engine sends, nullopt for a command
/// without a key (PING, INFO, DBSIZE, SCRIPT, CLUSTER, ...), which any
/// primary can answer.
std::optional<uint16_t> command_slot(const store_command& command);

/// The slot a script call is routed by: its first key; nullopt without keys.
std::optional<uint16_t> call_slot(const script_call& call);

} // namespace mm::redis_slots
