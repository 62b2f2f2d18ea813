#pragma once

// What the front-door targets share: matchd's router over an engine port,
// made once per process, and the checks every answer must pass. The port is
// the real engine (engine_real.cpp: embedded queue store, in-memory match
// store, as matchd runs without --redis/--postgres) or, with
// MM_FUZZ_MODEL_ENGINE, a model without CAF (engine_model.cpp) for a quick
// build. No CAF here.

#include <memory>
#include <string>

#include "app/matchd/api.hpp"
#include "tests/fuzz/fuzz_common.hpp"

namespace mm::fuzz {

/// The engine behind the router (engine_real.cpp or engine_model.cpp);
/// `ctx` is the router's, the port may set its hub.
std::shared_ptr<engine_port> make_port(const std::shared_ptr<api_context>& ctx);

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
