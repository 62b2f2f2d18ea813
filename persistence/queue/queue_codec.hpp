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

/// The six keys of a queue in the scripts' KEYS order (waiting, seq,
/// tickets, users, deadlines, index; lua/lib/common.lua), all under the hash
/// tag `{queue}`, so one queue lives in one Redis Cluster slot.
std::vector<std::string> queue_keys(const std::string& queue);

// Builders: each checks every argument first and answers `invalid_argument`
// naming the bad one, so a malformed request never reaches the store. They
// only build the call; whether running it twice is safe is the script's
// (docs/queue.md).

/// enqueue.lua: files `spec` as a waiting ticket. Running it again answers
/// the same ticket (`created == false`).
outcome<script_call> enqueue_call(const ticket_spec& spec);

/// claim.lua: claims the oldest live compatible waiter for `spec`, or files
/// `spec` (claim-or-enqueue). `scan` 1..100 candidates, `hold_ms`
/// 1..600000 (the claim hold), `rescan`: a waiter scanning again. A retry
/// whose first run matched answers the same match.
outcome<script_call> claim_call(const ticket_spec& spec, uint32_t scan,
                                uint32_t hold_ms, bool rescan);

/// Tickets of one rescan call.
constexpr size_t max_rescans = 100;

/// A waiting ticket to re-scan and the candidates its scan looks at.
struct rescan_item {
  const ticket_spec* spec;
  uint32_t scan;
};

/// rescan.lua: the heartbeats of `items` (1..max_rescans tickets, all of
/// one queue), each run as `claim_call(*spec, scan, hold_ms, true)` would,
/// in order, in one call. Each ticket's re-scan is as idempotent as that
/// claim's.
outcome<script_call> rescan_call(const std::vector<rescan_item>& items,
                                 uint32_t hold_ms);

/// cancel.lua: removes the user's waiting ticket if `ref.token` (a decimal
/// number) is its current token; a claimed one stays (`in_flight`). A
/// repeat of a done cancel answers `not_found`.
outcome<script_call> cancel_call(const ticket_ref& ref);

/// heartbeat.lua: extends the presence deadline of the user's current
/// ticket to now + `ttl_ms` (1..3600000), for its current token only.
outcome<script_call> heartbeat_call(const ticket_ref& ref, uint32_t ttl_ms);

/// requeue.lua: puts a claimed (or claimer) `ticket` back at its original
/// score. A repeat answers `waiting` and changes nothing.
outcome<script_call> requeue_call(const std::string& queue,
                                  const std::string& ticket);

/// release.lua for one `ticket` of a settled pair: removes it unless it
/// waits. A repeat answers `gone`.
outcome<script_call> release_call(const std::string& queue,
                                  const std::string& ticket);

/// release.lua for many tickets of one queue in one call (1..1000 of them),
/// each as the one-ticket form.
outcome<script_call> release_call(const std::string& queue,
                                  const std::vector<std::string>& tickets);

/// sweep.lua: removes up to `batch` (1..1000) tickets past their deadline.
outcome<script_call> sweep_call(const std::string& queue, uint32_t batch);

// Parsers: each maps the script's named outcomes to its result, and the
// refusals to named errors: 'invalid' -> `invalid_argument`, 'duplicate' ->
// `duplicate_ticket`, 'stale_token' -> `stale_token`, 'not_found' ->
// `not_found`; a reply's own code (`store_unavailable`, ...) passes through;
// a script error or anything unreadable is `protocol_error`. Pure functions.

/// 'created' / 'exists' (`created == false`).
outcome<enqueue_result> parse_enqueue(const store_reply& reply);

/// 'matched', 'queued' (with `more` and, with rules, the windows) or
/// 'claimed' (`claimed_by_other`).
outcome<claim_result> parse_claim(const store_reply& reply);

/// The reply of a rescan of `n` tickets: one `parse_claim` result per
/// ticket, in order; the call's own failure (the store's, a refusal, a
/// count that differs from `n`) for the whole.
outcome<std::vector<outcome<claim_result>>>
parse_rescan(const store_reply& reply, size_t n);

/// 'cancelled' or 'in_flight' (with the state and the owning node).
outcome<cancel_result> parse_cancel(const store_reply& reply);

/// 'alive' or 'gone' (`alive == false`).
outcome<heartbeat_result> parse_heartbeat(const store_reply& reply);

/// 'requeued', 'waiting', 'stale' or 'gone'.
outcome<requeue_result> parse_requeue(const store_reply& reply);

/// 'released', 'waiting' or 'gone', for a one-ticket release.
outcome<release_result> parse_release(const store_reply& reply);

/// The reply of a release of `tickets` (one result per ticket, in order);
/// `protocol_error` when the count differs from the tickets'.
outcome<std::vector<release_result>>
parse_release(const store_reply& reply,
              const std::vector<std::string>& tickets);

/// 'swept': removed, more, depth and tracked (docs/queue.md, "Sweep").
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

/// explain.lua: the same compatibility test the claim makes, on given
/// values; touches no key. `invalid_argument` for rules outside 1..1024
/// bytes or a malformed side. Idempotent.
outcome<script_call> explain_call(const std::string& rules,
                                  const explain_side& a, const explain_side& b);

/// 'compatible' or 'incompatible' (the first refusing rule and why), with
/// each side's windows.
outcome<explain_result> parse_explain(const store_reply& reply);

} // namespace mm::codec
