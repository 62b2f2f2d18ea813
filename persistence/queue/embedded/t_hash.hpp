#pragma once

// The hash value type of the embedded data set; its commands (HGET HMGET HSET
// HDEL HEXISTS HLEN HGETALL) are in t_hash.cpp.

#include <string>
#include <unordered_map>

namespace mm::embedded {

using hash_type = std::unordered_map<std::string, std::string>;

} // namespace mm::embedded
