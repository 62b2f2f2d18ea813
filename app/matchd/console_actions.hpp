#pragma once

// What an operator does from the console (docs/console.md "Acting"): look
// a user up, cancel a user's ticket, end a user's session, pause or resume
// a queue, drain or resume the node; and read the audit log. Each answer
// is a JSON body; every lookup and action, allowed or refused, is written
// to the audit log with who asked. No CAF, no Beast.

#include <atomic>
#include <memory>
#include <string>

#include "app/matchd/api.hpp"
#include "app/matchd/console_operators.hpp"

namespace mm {

/// What the console's actions act on (matchd sets them).
struct console_hooks {
  std::shared_ptr<engine_port> port;     ///< null: no lookups or actions
  std::shared_ptr<paused_queues> paused; ///< null: queues cannot pause
  std::atomic<bool>* draining = nullptr; ///< null: the node cannot drain
};

/// True for the paths `serve_console_action` answers: /v1/console/whoami,
/// /v1/console/audit, /v1/console/users/..., /v1/console/queues/...,
/// /v1/console/node/....
bool is_console_action(const std::string& path) noexcept;

/// Answers one console action or lookup of `who` (already authenticated):
/// - GET whoami: {name, role}; GET audit: {entries: the ring, oldest first};
/// - GET users/{user}: the user's join as this node knows it;
/// - POST users/{user}/tickets/{ticket}/cancel, users/{user}/sessions/
///   {session}/end, queues/{queue}/pause|resume, node/drain|resume:
///   operators only (403 `forbidden_role` for a viewer).
/// 404 `user_not_here` for a user without a link on this node (act on the
/// node it is connected to), 404 `unknown_queue`, 405 for another method,
/// the engine's refusals as the API names them. Every answer but whoami's
/// and audit's is audited. Cancel, end, pause, resume and drain are
/// idempotent.
void serve_console_action(const console_operator& who,
                          const std::string& method, const std::string& path,
                          const console_hooks& hooks,
                          const std::vector<std::string>& queues,
                          std::shared_ptr<console_audit> audit,
                          const reply_fn& reply);

} // namespace mm
