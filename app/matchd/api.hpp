#pragma once

// The client API of matchd (docs/api.md) without transport and without CAF:
// the HTTP server hands each request to `api_router`, which authenticates,
// validates and answers it through an `engine_port`.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "app/common/token.hpp"
#include "core/outcome.hpp"

namespace mm {

/// A ticket as the API shows it (the client's ticket id, not a healed one).
struct ticket_view {
  std::string user;
  std::string queue;
  std::string ticket;
  std::string
    state; ///< claiming, queued, finalizing, matched, cancelled, failed
  std::string session_id;
  std::string detail;
  std::string windows; ///< queues with rules: JSON object (docs/rules.md)
};

/// What a swipe answered.
struct swipe_view {
  bool mutual = false;    ///< both like each other (now or before)
  std::string session_id; ///< mutual: the pair's one match session
  bool created = false;   ///< this swipe created that match
};

/// What ending a match session answered.
struct end_view {
  std::string session_id;
  std::string queue;
  std::string ended_by; ///< "" when the session expired
  std::string reason;
  bool ended_now = false; ///< false: it had ended before this request
};

/// A party as the API shows it (docs/groups.md, "Parties").
struct party_view {
  std::string party;
  std::string code;
  std::string leader;
  std::vector<std::string> members;
  std::string phase; ///< open, claiming, queued, finalizing, matched
  std::string queue;
  std::string ticket;
  std::string session_id;
  std::string detail;
  uint64_t version = 0;
};

/// A proposal (the ready check, docs/groups.md) as a member sees it.
struct proposal_view {
  std::string proposal;
  std::string queue;
  std::string answer;      ///< the member's standing answer ("" none yet)
  int64_t deadline_ms = 0; ///< Unix ms; 0 once every member accepted
  uint32_t players = 0;
  uint32_t accepted = 0;
  bool declined = false;
  bool complete = false;
};

/// A session's backfill request (docs/groups.md "Backfill").
struct backfill_view {
  std::string session_id;
  std::string queue;
  std::string state; ///< waiting (asked), full (no seat open)
  uint32_t players = 0;
  uint32_t max_players = 0;
};

/// What a member's leave of a group session answered.
struct leave_view {
  std::string session_id;
  std::string queue;
  uint32_t remaining = 0; ///< members still in the session
  bool left_now = false;  ///< false: the user had left before
  bool ended = false;     ///< the session is over
};

/// A leader's request to queue a party.
struct party_ticket {
  std::string queue;
  std::string ticket;
  /// Each member's attributes (JSON object text) by user.
  std::map<std::string, std::string> attrs;
  uint32_t give_up_after_s = 0;
};

using ticket_cb = std::function<void(outcome<ticket_view>)>;
using party_cb = std::function<void(outcome<party_view>)>;
using leave_cb = std::function<void(outcome<leave_view>)>;
using proposal_cb = std::function<void(outcome<proposal_view>)>;
using backfill_cb = std::function<void(outcome<backfill_view>)>;
using end_cb = std::function<void(outcome<end_view>)>;
using swipe_cb = std::function<void(outcome<swipe_view>)>;

/// What the API needs from the engine. Callbacks may run on any thread.
class engine_port {
 public:
  virtual ~engine_port();

  /// Claim-or-enqueue of `user`'s join `ticket` to `queue` (`attrs` as the
  /// client sent them; `give_up_after_s` 0: no limit). `cb` gets the
  /// ticket's state, or a refusal such as duplicate_ticket, in_session,
  /// unknown_queue, too_many_queues, invalid_attribute or
  /// store_unavailable (docs/api.md, "Errors"). Idempotent per (user,
  /// ticket): the same join again answers the ticket's current state.
  virtual void join(const std::string& user, const std::string& queue,
                    const std::string& ticket, const std::string& attrs,
                    uint32_t give_up_after_s, ticket_cb cb)
    = 0;

  /// Cancels the user's join `ticket`; answers only when certain: state
  /// `cancelled`, or `matched` when the cancel came too late. `not_found`
  /// for a ticket that is not the user's current or last one. Idempotent.
  virtual void
  cancel(const std::string& user, const std::string& ticket, ticket_cb cb)
    = 0;

  /// The state of the user's current or last `ticket`; `not_found` for
  /// another ticket, or once the node forgot the user. Changes no ticket.
  virtual void
  state(const std::string& user, const std::string& ticket, ticket_cb cb)
    = 0;

  /// Records `from`'s LIKE of `to` (`like` false: DISLIKE); a mutual like
  /// creates the pair's one match (I4 of docs/design.md). Idempotent: a
  /// repeat answers as the first one did, with `created` false.
  virtual void
  swipe(const std::string& from, const std::string& to, bool like, swipe_cb cb)
    = 0;

  /// `user` ends its match session `session` with `reason`. Idempotent:
  /// every end of one session answers its one final state. `forbidden`
  /// when the user is not a member, `not_found` for an unknown session.
  virtual void end(const std::string& user, const std::string& session,
                   const std::string& reason, end_cb cb)
    = 0;

  /// `user` leaves its group session `session` (the others play on while
  /// enough stay). Idempotent. `forbidden` for a non-member, `not_found`
  /// for an unknown session. The default refuses (`not_found`).
  virtual void leave(const std::string& user, const std::string& session,
                     const std::string& reason, leave_cb cb);

  /// Parties (docs/groups.md). Each answers the party as `user` sees it or
  /// a refusal: `in_party`, `duplicate_ticket` (create, join);
  /// `forbidden` (a wrong code, not a member, not the leader);
  /// `not_found` (an unknown party); `party_too_large`, `in_session`,
  /// `invalid_attribute`, `invalid_argument` (queue); `in_flight` (a join
  /// while the party is queued). The defaults refuse (`not_found`).
  /// Create: not idempotent. Join, leave, queue (per queue and ticket),
  /// cancel and state: idempotent.
  virtual void party_create(const std::string& user, party_cb cb);
  virtual void party_join(const std::string& user, const std::string& party,
                          const std::string& code, party_cb cb);
  virtual void party_leave(const std::string& user, const std::string& party,
                           party_cb cb);
  virtual void party_queue(const std::string& user, const std::string& party,
                           const party_ticket& t, party_cb cb);
  virtual void party_cancel(const std::string& user, const std::string& party,
                            party_cb cb);
  virtual void party_state(const std::string& user, const std::string& party,
                           party_cb cb);
  /// `user` answers proposal `proposal` of `queue`: "accept" or "decline".
  /// Idempotent: the first answer stands (a later one answers it).
  /// `not_found` once the proposal ended (or never was), `forbidden` for a
  /// user who is not its member. The default refuses (`not_found`).
  virtual void proposal_answer(const std::string& user,
                               const std::string& queue,
                               const std::string& proposal,
                               const std::string& answer, proposal_cb cb);
  /// `user`, a member of group session `session`, asks for players for its
  /// open seats. Idempotent (one request per session). `not_found` (no
  /// such session, or it ended), `forbidden` (not a member now),
  /// `invalid_argument` (a pair's session, or a queue without backfill).
  /// The default refuses (`not_found`).
  virtual void backfill(const std::string& user, const std::string& session,
                        backfill_cb cb);

  // -- the console's (docs/console.md "Acting") -------------------------------

  /// True when `user` has a client link on this node (it asked something
  /// or has a WebSocket open here). The default: false.
  virtual bool has_user(const std::string& user) const;
  /// The state of `user`'s current or last join as this node knows it
  /// (`not_found` for a user without a link here). Changes nothing; makes
  /// no link. The default refuses (`not_found`).
  virtual void inspect(const std::string& user, ticket_cb cb);
  /// `cancel`, the user's WebSockets told `reason` (an operator's cancel).
  /// Idempotent. The default is `cancel`.
  virtual void cancel_because(const std::string& user,
                              const std::string& ticket,
                              const std::string& reason, ticket_cb cb);
  /// Every live node's console counters as JSON text {"node": this,
  /// "nodes": [{"node", "stats" | "error"}...]} (docs/console.md, "The
  /// cluster"), each peer bounded by its forward timeout. Reads only. The
  /// default: `not_found`.
  virtual void cluster_stats(std::function<void(outcome<std::string>)> cb);
  /// The session `session` as the database holds it, live or ended, as
  /// JSON text (queue, status, times, reason, members with their tickets,
  /// teams, attributes and whether they are still in it), from any node
  /// (`not_found` when there is none). Reads only. The default:
  /// `not_found`.
  virtual void find_session(const std::string& session,
                            std::function<void(outcome<std::string>)> cb);
};

/// Queues an operator paused on this node (the console): their joins,
/// alone or as a party, are refused 503 `queue_paused`; who waits stays.
/// Thread-safe.
class paused_queues {
 public:
  /// Whether `queue` is paused.
  bool has(const std::string& queue) const;
  /// Pauses (`paused` true) or resumes `queue`; answers whether that
  /// changed anything. Idempotent.
  bool set(const std::string& queue, bool paused);
  /// The paused queues, sorted.
  std::vector<std::string> list() const;

 private:
  mutable std::mutex mtx_;
  std::set<std::string> names_;
};

/// A reply to a request: status and JSON body.
struct api_reply {
  /// Status `s`, body `b` of content type `type`.
  api_reply(unsigned s = 200, std::string b = {},
            std::string type = "application/json")
    : status(s), body(std::move(b)), content_type(std::move(type)) {
    // nop
  }

  unsigned status = 200;
  std::string body;
  std::string content_type = "application/json";
  /// More response headers (the console's security and cache headers).
  std::vector<std::pair<std::string, std::string>> headers;
};

using reply_fn = std::function<void(api_reply)>;

/// The non-engine parts the router needs.
struct api_context {
  token_policy tokens;               ///< what bearer tokens are accepted
  std::shared_ptr<class hub> events; ///< signs of life are recorded here
  std::function<std::string()> metrics_text; ///< Prometheus exposition
  std::function<bool(std::string&)> ready;   ///< false + why when not ready
  /// True + why when the node has seen the queue store fail and not answer
  /// since (its last probe failed, or the probe under way hangs): a join,
  /// which always needs it, is then answered 503 `store_unavailable` at
  /// once instead of waiting out the store's timeouts. May be empty
  /// (never).
  std::function<bool(std::string&)> store_down;
  std::atomic<bool> draining{false};
  /// The queues joins may name; empty: any well-formed name (the engine
  /// bounds them). A join of another queue is refused 404 `unknown_queue`
  /// before it reaches the engine. Set before the server starts.
  std::unordered_set<std::string> queues;
  /// Counts each answered HTTP request (for /metrics): its route template
  /// (e.g. "/v1/users/{user}/tickets"; "unmatched" for no route), method,
  /// status and seconds from arrival to answer. May be empty.
  std::function<void(const std::string& route, const std::string& method,
                     unsigned status, double seconds)>
    count_request;
  /// The web console's routes (/console/..., /v1/console/...); null: none
  /// (they answer 404 unknown_route like any other unknown path).
  std::shared_ptr<class console_routes> console;
  /// Queues paused by an operator (never null).
  std::shared_ptr<paused_queues> paused = std::make_shared<paused_queues>();
};

/// One route of the router's table. docs/openapi.yaml describes each one
/// (openapi_test holds the two to each other).
struct api_route {
  const char* method; ///< "GET", "POST", "DELETE"
  const char* path;   ///< an OpenAPI path template: "/v1/users/{user}/swipes"
  bool websocket;     ///< answered only as a WebSocket upgrade
  bool token;         ///< needs a bearer token
};

/// Every route the router answers, in the order it matches them.
const std::vector<api_route>& api_routes();

/// The OpenAPI 3 description of the API (docs/openapi.yaml as JSON,
/// compiled in at build time; served at /openapi.json).
const std::string& openapi_json();

/// A WebSocket upgrade that passed authentication.
struct ws_admission {
  bool ok = false;
  token_check who;   ///< what the token said (user, queues, valid_until)
  api_reply refusal; ///< when !ok
};

/// Which routes a listener answers (matchd's --admin-listen).
enum class api_surface {
  all,        ///< one listener: the API and the operations (no --admin-listen)
  public_api, ///< the API, /openapi.json and the demo; not the operations
  admin,      ///< /healthz, /readyz, /metrics, /openapi.json, the console
};

/// Authenticates, validates and answers the API's requests (docs/api.md).
class api_router {
 public:
  /// Answers with the settings of `ctx` and the engine behind `port`.
  /// A listener of `surface` answers only its routes; the others are 404
  /// `unknown_route` naming the listener that has them.
  api_router(std::shared_ptr<api_context> ctx,
             std::shared_ptr<engine_port> port,
             api_surface surface = api_surface::all);

  /// Answers one HTTP request (method in upper case, e.g. "POST"; target is
  /// path plus query). `done` is called exactly once, maybe on another
  /// thread; an exception (here or in an engine callback) becomes a 500
  /// `internal` answer and never leaves. In the order checked:
  /// - console paths: `console_routes::serve`, when the console is on;
  /// - 404 `unknown_route`, 405 `method_not_allowed`;
  /// - /healthz 200; /readyz 200, or 503 `shutting_down` or
  ///   `store_unavailable`; /metrics and /openapi.json 200;
  /// - user routes: 401 (the token's error name), 403 `forbidden` (another
  ///   user's path), 400 `invalid_argument` or `malformed_json`; a join
  ///   also 503 `shutting_down` (draining) and 404 `unknown_queue`;
  /// - then the engine's answer: 200 with the ticket, swipe or end, or its
  ///   refusal (`status_of`).
  /// Idempotent exactly when the route is (docs/api.md).
  void handle(const std::string& method, const std::string& target,
              const std::string& authorization, const std::string& body,
              reply_fn done) const;

  /// `handle` for a caller whose token was verified before (a WebSocket's,
  /// at its upgrade or its last `auth`): only its expiry is checked again
  /// (401 `expired_token` once `who.valid_until` has passed), so a request
  /// on an open socket costs no signature check. Everything else as
  /// `handle`.
  void handle_as(const std::string& method, const std::string& target,
                 const token_check& who, const std::string& body,
                 reply_fn done) const;

  /// Checks a WebSocket upgrade to `target`; the token comes from
  /// `authorization` ("Bearer ...") or else the `access_token` query
  /// parameter. Refuses 404 `unknown_route` (not the events route), 503
  /// `shutting_down` (draining), 401 with the token's error name, 403
  /// `forbidden` (another user's path) or 400 `invalid_argument` (a bad user
  /// id); else `ok` with what the token said (`who.user` is the user).
  /// Changes nothing.
  ws_admission admit_ws(const std::string& target,
                        const std::string& authorization) const;

  /// The JSON error body for `name`/`detail`.
  static api_reply error(unsigned status, const std::string& name,
                         const std::string& detail);

  /// The HTTP status of an engine refusal: 400 (invalid_argument,
  /// invalid_attribute), 403 (forbidden), 404 (not_found, unknown_queue),
  /// 409 (in_session, duplicate_ticket, conflict, too_many_queues and the
  /// other lost races), 503 (store_unavailable, store_auth_failed,
  /// shutting_down), 500 for anything else.
  static unsigned status_of(errc code) noexcept;

  /// The settings the router answers with.
  const std::shared_ptr<api_context>& context() const {
    return ctx_;
  }

 private:
  /// `handle` without its exception boundary; `reply` answers at most once.
  /// `known` is the caller's verified token, or nullptr: the router then
  /// verifies `authorization`.
  void serve(const std::string& method, const std::string& target,
             const std::string& authorization, const token_check* known,
             const std::string& body, const reply_fn& reply) const;

  /// `handle` and `handle_as`: the exception boundary around `serve`.
  void guarded_serve(const std::string& method, const std::string& target,
                     const std::string& authorization, const token_check* known,
                     const std::string& body, reply_fn done) const;

  /// A 404 when `path` is not on this listener's surface; else none.
  std::optional<api_reply> off_surface(const std::string& path) const;

  std::shared_ptr<api_context> ctx_;
  std::shared_ptr<engine_port> port_;
  api_surface surface_;
};

/// The label of a request in the HTTP metrics: its route's path template
/// ("/v1/users/{user}/tickets", "/console/{asset}"), or "unmatched".
/// Bounded: never a path a client wrote. Idempotent.
std::string route_label(const std::string& method, const std::string& path);

/// True for 1-128 bytes of [A-Za-z0-9_.:@-] (users, queues, tickets).
bool valid_api_id(const std::string& id) noexcept;

/// The JSON text of `t` as the API answers it: empty fields left out,
/// `windows` as a JSON object.
std::string to_json(const ticket_view& t);

} // namespace mm
