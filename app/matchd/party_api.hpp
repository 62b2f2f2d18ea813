#pragma once

// The party routes of the client API (docs/api.md, "Parties") and a
// member's leave of a group session: validation and answers, after the
// router authenticated the user. Internal to matchd's API.

#include <functional>
#include <string>
#include <vector>

#include "app/matchd/api_util.hpp"

namespace mm::api_detail {

/// The routes this file answers.
enum class party_route {
  create,        ///< POST /v1/users/{user}/parties
  state,         ///< GET  /v1/users/{user}/parties/{party}
  join,          ///< POST /v1/users/{user}/parties/{party}/members {"code"}
  leave,         ///< POST /v1/users/{user}/parties/{party}/leave
  queue,         ///< POST /v1/users/{user}/parties/{party}/tickets
  cancel,        ///< POST /v1/users/{user}/parties/{party}/cancel
  leave_session, ///< POST /v1/users/{user}/sessions/{session}/leave
  accept,   ///< POST /v1/users/{user}/proposals/{proposal}/accept {"queue"}
  decline,  ///< POST /v1/users/{user}/proposals/{proposal}/decline {"queue"}
  backfill, ///< POST /v1/users/{user}/sessions/{session}/backfill
};

/// Answers `route` for `user` (checked already) with path parameters
/// `params` (params[0] the user) and `body` (a JSON object; {} for an empty
/// body). 400 `invalid_argument` for malformed fields or ids, else the
/// engine's answer through `port`. `queues`: the queues a party may name
/// (empty: any; another is 404 `unknown_queue`). `may_join`: whether the
/// caller's token may join a queue (its scope); a queue request outside it
/// is 403 `forbidden`.
void serve_party(engine_port& port, party_route route, const std::string& user,
                 const std::vector<std::string>& params, const json& body,
                 const api_context& ctx,
                 const std::function<bool(const std::string&)>& may_join,
                 const reply_fn& reply);

/// The JSON text of a party as the API answers it.
std::string to_json(const party_view& p);

} // namespace mm::api_detail
