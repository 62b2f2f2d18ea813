#pragma once

// Turns typed queue requests into script calls and script replies into typed
// results. Shared by every queue store, since all of them run lua/.

#include <string>

#include "core/outcome.hpp"
#include "messages/queue_types.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm::codec {

/// Limits enforced before a call reaches the store (the scripts check again).
constexpr size_t max_queue_name = 64;
constexpr size_t max_id = 128;
/// Store tickets carry user, client ticket, nonce and heal number
/// (core/ticket_id.hpp).
constexpr size_t max_ticket = 300;
constexpr size_t max_node = 64;
constexpr size_t max_attrs = 4096;
constexpr uint32_t max_ttl_ms = 3600000;
constexpr uint32_t max_scan = 100;
constexpr uint32_t max_hold_ms = 600000;
constexpr size_t max_release = 1000; ///< tickets of one release call

/// Checks a queue name: [A-Za-z0-9._:-], 1..64 bytes (no hash-tag braces).
/// Returns an empty string when valid, else what is wrong.
std::string check_queue(const std::string& queue);

/// Checks every field of a spec; empty when valid.
std::string check_spec(const ticket_spec& spec);

/// The five keys of a queue, all under the hash tag `{queue}`.
std::vector<std::string> queue_keys(const std::string& queue);

/// Builders. Each validates first and returns `invalid_argument` naming the
/// bad field, so a malformed request never reaches the store.
outcome<script_call> enqueue_call(const ticket_spec& spec);
outcome<script_call> claim_call(const ticket_spec& spec, uint32_t scan,
                                uint32_t hold_ms, bool rescan);
outcome<script_call> cancel_call(const ticket_ref& ref);
outcome<script_call> heartbeat_call(const ticket_ref& ref, uint32_t ttl_ms);
outcome<script_call> requeue_call(const std::string& queue,
                                  const std::string& ticket);
outcome<script_call> release_call(const std::string& queue,
                                  const std::string& ticket);
/// Many tickets of one queue in one call (1..1000 of them).
outcome<script_call> release_call(const std::string& queue,
                                  const std::vector<std::string>& tickets);
outcome<script_call> sweep_call(const std::string& queue, uint32_t batch);

/// Parsers: map the script's named outcomes to results or named errors
/// ('invalid' -> invalid_argument, 'duplicate' -> duplicate_ticket,
/// 'stale_token' -> stale_token, 'not_found' -> not_found, transport
/// failures -> store_unavailable, anything unreadable -> protocol_error).
outcome<enqueue_result> parse_enqueue(const store_reply& reply);
outcome<claim_result> parse_claim(const store_reply& reply);
outcome<cancel_result> parse_cancel(const store_reply& reply);
outcome<heartbeat_result> parse_heartbeat(const store_reply& reply);
outcome<requeue_result> parse_requeue(const store_reply& reply);
outcome<release_result> parse_release(const store_reply& reply);
/// The reply of a release of `tickets` (one result per ticket, in order).
outcome<std::vector<release_result>>
parse_release(const store_reply& reply,
              const std::vector<std::string>& tickets);
outcome<sweep_result> parse_sweep(const store_reply& reply);

/// One side of a dry run of a queue's rules (lua/explain.lua).
struct explain_side {
  std::string rk;        ///< rule values (core/rules.hpp check_attributes)
  int64_t waited_ms = 0; ///< how long this side has waited
  std::string user;
  std::string avoid; ///< recent partners, ','-separated
};

struct explain_result {
  bool compatible = false;
  uint32_t rule = 0; ///< incompatible: the first refusing rule (1-based)
  std::string reason;
  std::string windows_a; ///< as claim_result::windows
  std::string windows_b;
};

/// The same compatibility test the claim makes, on given values; touches
/// no key. Idempotent.
outcome<script_call> explain_call(const std::string& rules,
                                  const explain_side& a, const explain_side& b);
outcome<explain_result> parse_explain(const store_reply& reply);

} // namespace mm::codec
