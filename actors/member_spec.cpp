// A group ticket's member (actors/member_spec.hpp).

#include "actors/member_spec.hpp"

#include <cstdint>

#include <nlohmann/json.hpp>

namespace mm {

outcome<party_member> member_of(const rule_set& rs, const std::string& user,
                                const std::string& attrs_json) {
  auto c = check_attributes(rs, attrs_json);
  if (!c)
    return c.error();
  party_member m;
  m.user = user;
  m.attrs = c->json;
  m.rk = c->rk;
  const auto& balance = rs.shape.balance;
  if (!balance.empty()) {
    auto j = nlohmann::json::parse(c->json, nullptr, false);
    if (j.is_object() && j.contains(balance) && j[balance].is_number())
      m.balance
        = std::to_string(static_cast<int64_t>(j[balance].get<double>()));
  }
  return m;
}

} // namespace mm
