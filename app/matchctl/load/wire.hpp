#pragma once

// What the virtual users of `matchctl load` read from matchd's answers and
// events: error names, transport failures, string fields.

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "app/common/http_client.hpp"

namespace mm::load {

/// The error name of a non-2xx answer: its `error` field, else http_<status>.
std::string error_name(const http_result& res);

/// A short name of a transport failure ("timeout", "eof", ...).
std::string transport_name(const error_code& ec);

/// The string field `key` of an object, empty when absent or not a string.
std::string str_field(const nlohmann::json& j, const char* key);

} // namespace mm::load
