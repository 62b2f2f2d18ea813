// The backfill checker of `matchctl load` (fill_check.hpp).

#include "app/matchctl/load/fill_check.hpp"

namespace mm {

bool fills_may_end(bool backfill,
                   std::chrono::steady_clock::duration since_progress,
                   std::chrono::steady_clock::duration quiet) {
  return !backfill || since_progress >= quiet;
}

void fill_ledger::heard(const std::string& user, const nlohmann::json& ev) {
  auto id = ev.value("event_id", std::string{});
  if (id.empty())
    return;
  auto& f = fills_[id];
  if (f.users.empty()) { // its first hearer describes it
    if (ev.contains("users") && ev["users"].is_array())
      for (auto& u : ev["users"])
        if (u.is_string())
          f.users.insert(u.get<std::string>());
    if (ev.contains("added") && ev["added"].is_array()) {
      f.added = ev["added"].size();
      for (auto& a : ev["added"])
        if (a.is_object())
          f.added_users.insert(a.value("user", std::string{}));
    }
    f.first = std::chrono::steady_clock::now();
  }
  f.heard_by.insert(user);
}

fill_ledger::counts fill_ledger::count(
  uint32_t max_players,
  const std::function<bool(const std::string&)>& listening) const {
  counts c;
  for (auto& [id, f] : fills_) {
    ++c.fills;
    c.seats += f.added;
    if (f.users.size() > max_players)
      ++c.over_capacity;
    for (auto& u : f.users)
      if (!f.heard_by.count(u) && !left_.count(u) && listening(u)) {
        ++c.untold;
        if (c.untold_examples.size() < 5)
          c.untold_examples.push_back(
            u + " " + id + (f.added_users.count(u) ? " added" : " member")
            + " heard " + std::to_string(f.heard_by.size()) + "/"
            + std::to_string(f.users.size()) + ", first "
            + std::to_string(
              std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - f.first)
                .count())
            + " ms ago");
      }
  }
  return c;
}

} // namespace mm
