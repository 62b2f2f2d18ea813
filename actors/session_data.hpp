#pragma once

// The session actor's state and the steps its files share (actors/session.cpp
// holds the behaviours and the join/claim path, actors/session_cancel.cpp
// the cancel and give-up path). Internal: include only from those two.

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <caf/actor_clock.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/session.hpp"
#include "core/seen_ids.hpp"

namespace spdlog {
class logger;
} // namespace spdlog

namespace mm::session_detail {

/// The sessions' logger ("session").
std::shared_ptr<spdlog::logger> ses_log();

using state_promise = caf::typed_response_promise<session_state>;

struct session_data {
  session_config cfg;
  session_links links;
  session_state st;
  std::string base_user;
  std::string attrs;
  // A queue with rules (docs/rules.md): the rule set, our rule values, when
  // our windows change next (ms, -1: never) and our recent partners, newest
  // last (at most 32; the avoid rule takes the last N).
  const rule_set* rules = nullptr;
  std::string rk;
  int64_t next_change_ms = -1;
  std::vector<std::string> recent;
  std::string partner_attrs; // of the pair we claimed (pair distance metric)
  std::string base_ticket;   // the client's ticket (idempotency key)
  // What the queue, the finalizer and the database know the join by: made
  // from the user, the client's ticket, a nonce per join and the self-heal
  // number (core/ticket_id.hpp), so two users' `t-1`, or one user's `t-1`
  // of today and of yesterday, never meet below the session.
  std::string store_ticket;
  std::string nonce;
  std::set<std::string> tickets; // every store ticket of this join
  uint64_t gen = 0;              // timers of an older state are ignored
  uint32_t heals = 0;
  uint32_t cancel_rounds = 0; // queue <-> finalizer rounds of a cancel
  bool cancel_requested = false;
  // A store outage: the claim (a re-scan or not) or the cancel at the queue
  // goes again after this delay (0: the store answers).
  uint32_t store_backoff_ms = 0;
  bool claim_rescan = false;
  bool join_counted = false; // this join is in metrics->joins
  // When this join reached us, for the time-to-match histogram; reset
  // once observed, so a join is observed once (epoch: not observed).
  caf::actor_clock::time_point join_started;
  std::string owner_node; // whose finalizer owns our claimed pair
  // A cancel whose owner node could not be asked (session_cancel.cpp):
  // decided from the queue and the database, never from a timeout alone.
  struct owner_wait {
    uint64_t gen = 0;                   // the state it belongs to (0: none yet)
    caf::actor_clock::time_point since; // the owner first could not be asked
    std::string first; // why it could not be asked, that first time
    std::string why;   // what keeps the cancel undecided now
    // The queue showed the ticket held by no claim; from `settle_by` on
    // (that moment + the commit bound) every commit is visible or never.
    bool gone = false;
    caf::actor_clock::time_point settle_by;
  } owner;
  // When the last claim (or re-scan) was asked for: claim_pair::claimed_at.
  caf::actor_clock::time_point claim_sent;
  // Our waiting ticket is in the broker's heartbeats (actors/waiter_roster).
  bool watching = false;
  // The user has no active match session: this actor saw it end, or the
  // database said so. Until then a join asks the database first.
  bool free_known = false;
  uint64_t join_no = 0; // the give-up timer belongs to one join
  uint32_t give_up_after_s = 0;
  bool giving_up = false; // our own cancel: the join timed out
  std::vector<state_promise> join_waiters;
  std::vector<state_promise> cancel_waiters;
  seen_ids seen{1024}; // event ids (at-least-once delivery)
  // Idle release: the last request or state change, the armed timer, and
  // ends whose answer is still out (someone waits on us).
  caf::actor_clock::time_point last_touch;
  bool idle_armed = false;
  caf::actor_addr holder; ///< holds a connection of the user open (pin_atom)
  uint32_t ends_pending = 0;
  // A join of a queue with a shape runs as a party of one (the party hub's,
  // actors/session_party.cpp): its id, and the newest version of it seen.
  std::string party;
  uint64_t party_version = 0;
  // Party events that came before the hub's answer named the party (they
  // travel another way): replayed once it did. At most 8.
  std::vector<match_event> party_early;
  static inline const char* name = "session";
};

using ses_ptr = session_actor::stateful_pointer<session_data>;

/// The store's view of our join (the claim and re-scan argument).
ticket_spec spec_of(const session_data& d);

/// When a waiting ticket looks again, in ms of the actor clock: every
/// heartbeat, and on a queue with rules also when its windows change
/// (actors/session_rules.cpp).
int64_t next_look_at_ms(const session_data& d,
                        caf::actor_clock::time_point now);

/// Keeps what a claim or re-scan answered about our windows.
void note_windows(session_data& d, const claim_result& r);

/// A partner of ours: the avoid rule keeps the newest ones.
void note_partner(session_data& d, const std::string& partner);

/// True for the phases a join ends in.
bool terminal(session_phase p);

/// True for the phases of a join that is under way.
bool live(session_phase p);

/// Enters `phase` (and its behavior), invalidating older timers.
void enter(ses_ptr self, session_phase phase);

/// Ends the join in `phase` (matched/cancelled/failed/timed_out).
void finish(ses_ptr self, session_phase phase, std::string session_id,
            std::string detail);

/// Ends the join `failed` with the rendered error.
void fail(ses_ptr self, const caf::error& err);

/// Delays of the retries after a store outage: doubling from min to max.
constexpr uint32_t store_retry_min_ms = 100;
constexpr uint32_t store_retry_max_ms = 2000;

/// The bound on a request to the broker (every request has one: a broker
/// that is gone never answers what it held).
inline caf::timespan store_timeout(const session_data& d) {
  return std::chrono::milliseconds(d.cfg.route_timeout_ms);
}

/// Arms the retry timer (retry_atom, gen) with the next backoff delay.
void retry_store_later(ses_ptr self);

/// Cancels the waiting ticket; a claimed one is decided by the finalizer.
void cancel_at_queue(ses_ptr self);

/// Asks the finalizer that owns our pair (this node's or, through the
/// gateway, another's) for its verdict on our cancel.
void ask_finalizer_to_cancel(ses_ptr self);

/// The local finalizer gave no cancel verdict (it is gone, or silent for
/// all of the cancel's rounds): the database decides, matched or `failed`.
void verdict_from_database(ses_ptr self, uint64_t gen, std::string why);

/// Claims (or, with `rescan`, re-scans) for the join's current store ticket.
void start_claim(ses_ptr self, bool rescan);

/// The grace time after "ticket gone" passed (state `gen`): the database
/// says whether the user was matched meanwhile (then `matched`), else the
/// join is enqueued again under a new store ticket (I2 of docs/design.md).
/// Asks again after the grace time when the database cannot answer.
void heal(ses_ptr self, uint64_t gen);

/// The join's give_up_after_s passed (timer of join `join_no`).
void give_up(ses_ptr self, uint64_t join_no);

/// Timer of a cancel whose owner node could not be asked (state `gen`):
/// asks the owner again, then the queue and the database.
void owner_recheck(ses_ptr self, uint64_t gen);

/// What a state does with a join request (actors/session_join.cpp).
using join_fn = std::function<void(join_request&, state_promise)>;

/// A new join (idle and done states): checks that the user is in no active
/// session, then the ticket and the attributes; a refusal changes nothing.
join_fn start_join(ses_ptr self);

/// A join while another one is going on: the same one again answers the
/// current state (idempotent), another one is refused (`duplicate_ticket`).
join_fn join_while_busy(ses_ptr self);

using cancel_fn = std::function<void(state_promise)>;
using timer_fn = std::function<void(uint64_t)>;

/// The behavior every state shares, with the state's own join, cancel and
/// grace timer handlers (actors/session.cpp).
session_actor::behavior_type make(ses_ptr self, join_fn on_join,
                                  cancel_fn on_cancel, timer_fn on_grace);

/// A timer of a state that is gone.
void ignore_timer(uint64_t);

/// The live states of a join that runs as a party of one
/// (actors/session_party.cpp).
session_actor::behavior_type grouped_b(ses_ptr self);

/// Starts a join of a queue with a shape: a party of one at the party hub
/// for this ticket; the session mirrors its party's phases. `attrs` as
/// the client sent them (the party checks them).
void join_as_party(ses_ptr self, join_request& r, state_promise rp);

/// A party.updated event for this user: mirrored when it is the party of
/// the join under way.
void party_event(ses_ptr self, const match_event& ev);

/// A group session's events that concern this user alone: its
/// match.created (the user is in that session now, whatever its own join
/// did) and a session.member_left naming it (free at once). True when
/// `ev` was one of them (actors/session_party.cpp).
bool group_event(ses_ptr self, const match_event& ev);

/// The user's session `session_id` ended (its `session.ended` event, our
/// own end or leave): if it is the one we are matched in, the user is free
/// again (`reason` goes into the state's detail).
void session_over(ses_ptr self, const std::string& session_id,
                  const std::string& reason);

} // namespace mm::session_detail
