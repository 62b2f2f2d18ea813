#pragma once

// A user of a group ticket as the claim reads it (lua/lib/groups.lua):
// checked attributes, rule values and balance value. Shared by a party's
// ticket and a session's backfill request. No CAF here.

#include <string>

#include "core/outcome.hpp"
#include "core/rules.hpp"
#include "messages/group_types.hpp"

namespace mm {

/// `user` with the attributes `attrs_json` (a JSON object) checked against
/// `rs` (`check_attributes`: `invalid_attribute` naming the reason), its
/// rule values, and its value of the shape's balance attribute (none when
/// the shape balances nothing). Idempotent (a pure function).
outcome<party_member> member_of(const rule_set& rs, const std::string& user,
                                const std::string& attrs_json);

} // namespace mm
