#pragma once

// hiredis replies as store values: what the Redis store hands the codec
// (redis_queue_store.cpp). Declared here for the codec's fuzz target, which
// feeds raw RESP through hiredis's reader (tests/fuzz/).

#include "persistence/queue/queue_store.hpp"

struct redisReply;

namespace mm {

/// Converts `r` and its elements; a reply type hiredis knows but the store
/// does not is `protocol_error` with a nil value.
store_reply to_store_reply(const redisReply& r);

} // namespace mm
