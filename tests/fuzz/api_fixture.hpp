#pragma once

// What the front-door targets share: matchd's router over a real engine
// (embedded queue store, in-memory match store: the node matchd runs without
// --redis/--postgres), started once per process, and the checks every answer
// must pass. No CAF here; api_fixture.cpp holds the actor system.

#include <string>

#include "app/api.hpp"
#include "tests/fuzz/fuzz_common.hpp"

namespace mm::fuzz {

/// The router of the process's one node (queues "default" and "voice"
/// declared). Started on first use.
const api_router& router();

/// Answers one request as the server would; fails when no answer comes in
/// 60 s (every request is answered, exactly once).
api_reply ask(const std::string& method, const std::string& target,
              const std::string& authorization, const std::string& body);

/// Fails unless `r` is a well-formed answer: a status the API documents,
/// never 500 (an exception reached a handler boundary), a JSON object body
/// (valid UTF-8) and, for a refusal, a named error.
void check_reply(const api_reply& r, const std::string& input);

/// The JSON object of `r.body` (checked by `check_reply` first).
std::string error_name(const api_reply& r);

} // namespace mm::fuzz
