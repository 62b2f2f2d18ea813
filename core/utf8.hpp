#pragma once

#include <string>

namespace mm {

/// Strict UTF-8 (no overlong forms, no surrogates, at most U+10FFFF): what
/// PostgreSQL accepts in a UTF8 database, so every store and the queue codec
/// refuse the same texts.
bool valid_utf8(const std::string& s) noexcept;

} // namespace mm
