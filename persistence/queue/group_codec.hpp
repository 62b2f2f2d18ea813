#pragma once

// The calls of the group scripts (lua/group_*.lua) and the typed reading of
// their replies (docs/groups.md). Like queue_codec.hpp: pure functions, no
// I/O; every check refuses with `invalid_argument` before a call is made.

#include <string>
#include <vector>

#include "core/outcome.hpp"
#include "messages/group_types.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm::codec {

/// The five keys of a queue with a shape, under its hash tag:
/// mm:{q}:gwait, mm:{q}:seq, mm:{q}:gtix, mm:{q}:gdl, mm:{q}:gpend
/// (lua/lib/groups.lua).
std::vector<std::string> group_keys(const std::string& queue);

/// group_claim.lua: files `spec`'s ticket unless it waits already, then
/// makes the match the oldest `scan` (1..100) waiting tickets allow,
/// claimed for `hold_ms` (1..600000). Refuses a spec without members, with
/// more than 64, with a member twice, or whose ids, attrs or rule strings
/// the scripts would refuse. Idempotent per ticket: a retry answers the
/// group its first run made while that group is unsettled.
outcome<script_call> group_claim_call(const group_ticket_spec& spec,
                                      uint32_t scan, uint32_t hold_ms);

/// The reply of group_claim. `duplicate_ticket` (a member is in another
/// live ticket; the detail names the user), `invalid_argument`.
outcome<group_claim_result> parse_group_claim(const store_reply& reply);

/// group_cancel.lua: a member's leave of its waiting ticket, by the
/// ticket's `token`. Idempotent.
outcome<script_call> group_cancel_call(const std::string& queue,
                                       const std::string& user,
                                       const std::string& token);

/// The reply of group_cancel: `in_flight` false and the ticket when it was
/// removed; `in_flight` true and the group when a claim holds it.
/// `stale_token`, `not_found`.
outcome<group_cancel_result> parse_group_cancel(const store_reply& reply);

/// backfill_cancel.lua: ends session `session_id`'s backfill request
/// (docs/groups.md "Backfill"): removed while it waits; a claimed one is
/// its group's claimer's to settle. Idempotent.
outcome<script_call> backfill_cancel_call(const std::string& queue,
                                          const std::string& session_id);

/// The reply of backfill_cancel: removed (`in_flight` false), or claimed
/// (`in_flight`, `group`); `not_found` when there is no request.
outcome<group_cancel_result>
parse_backfill_cancel(const std::string& session_id, const store_reply& reply);

/// group_release.lua: removes a settled group's tickets. Idempotent.
outcome<script_call> group_release_call(const std::string& queue,
                                        const std::string& group);

/// group_requeue.lua: undoes a group; every ticket back at its original
/// place except `leaving` (removed). Idempotent.
outcome<script_call>
group_requeue_call(const std::string& queue, const std::string& group,
                   const std::vector<std::string>& leaving);

/// The replies of group_release and group_requeue: how many tickets went
/// back (requeue) and how many were removed; `gone` when the group was
/// settled before.
outcome<group_settle_result> parse_group_settle(const store_reply& reply);

/// group_answer.lua: `a.user`'s answer to proposal `a.proposal` (a group
/// id of `a.queue`); an empty answer only reads. Idempotent: the first
/// answer stands.
outcome<script_call> group_answer_call(const proposal_answer& a);

/// The reply of group_answer: the proposal as the member sees it.
/// `not_found` once it ended (settled, or past its deadline), `forbidden`
/// for a user in none of its tickets.
outcome<proposal_state> parse_group_answer(const proposal_answer& a,
                                           const store_reply& reply);

/// The most answers one group_answer call takes.
inline constexpr size_t max_answers = 300;

/// group_answer.lua with several answers (1..max_answers) of one queue,
/// applied in order as if each were its own call (one read of each
/// proposal). Idempotent as each answer is.
outcome<script_call>
group_answers_call(const std::vector<proposal_answer>& answers);

/// The reply of a group_answers_call: one outcome per answer, in order,
/// each as parse_group_answer gives it; an error for the whole call when
/// the reply is not one of 8 fields per answer.
outcome<std::vector<outcome<proposal_state>>>
parse_group_answers(const std::vector<proposal_answer>& answers,
                    const store_reply& reply);

/// group_decide.lua: decides proposals `groups` (1..1000) of `queue`;
/// a settled one is settled by the call. Idempotent.
outcome<script_call> group_decide_call(const std::string& queue,
                                       const std::vector<std::string>& groups);

/// The reply of group_decide: one decision per group, in order.
outcome<std::vector<proposal_decision>>
parse_group_decide(const std::vector<std::string>& groups,
                   const store_reply& reply);

} // namespace mm::codec
