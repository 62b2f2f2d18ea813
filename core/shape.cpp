#include "core/shape.hpp"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace mm {

namespace {

using json = nlohmann::json;

failure bad_shape(const std::string& where, const std::string& what) {
  return failure{errc::invalid_rules, where + ", shape: " + what};
}

/// An integer field in [lo, hi]; `found` false when it is absent.
bool int_field(const json& j, const char* key, uint32_t lo, uint32_t hi,
               uint32_t& out, bool& found) {
  auto it = j.find(key);
  found = it != j.end();
  if (!found)
    return true;
  if (!it->is_number_integer() || it->get<int64_t>() < lo
      || it->get<int64_t>() > hi)
    return false;
  out = static_cast<uint32_t>(it->get<int64_t>());
  return true;
}

std::string range(uint32_t lo, uint32_t hi) {
  return "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
}

} // namespace

outcome<queue_shape>
parse_shape(const std::string& where, const std::string& json_text,
            const std::vector<std::string>& number_attributes) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const std::exception&) {
    return bad_shape(where, "not JSON");
  }
  if (!j.is_object())
    return bad_shape(where, "an object with players, teams, party_max, "
                            "fill_after_s, balance, accept_timeout_s and "
                            "backfill");
  for (auto& [k, v] : j.items())
    if (k != "players" && k != "teams" && k != "party_max"
        && k != "fill_after_s" && k != "balance" && k != "accept_timeout_s"
        && k != "backfill")
      return bad_shape(where, "unknown field '" + k + "'");
  queue_shape s;
  bool found = false;
  auto players = j.find("players");
  if (players == j.end() || !players->is_object())
    return bad_shape(where, "players: an object with min and max");
  if (!int_field(*players, "min", 2, max_match_players, s.min_players, found)
      || !found)
    return bad_shape(where, "players.min: " + range(2, max_match_players));
  if (!int_field(*players, "max", 2, max_match_players, s.max_players, found)
      || !found)
    return bad_shape(where, "players.max: " + range(2, max_match_players));
  if (players->size() != 2)
    return bad_shape(where, "players: only min and max");
  if (s.min_players > s.max_players)
    return bad_shape(where, "players.min is above players.max");
  if (auto teams = j.find("teams"); teams != j.end()) {
    if (!teams->is_object() || teams->size() != 2)
      return bad_shape(where, "teams: an object with count and size");
    if (!int_field(*teams, "count", 2, max_match_players / 2, s.teams, found)
        || !found)
      return bad_shape(where,
                       "teams.count: " + range(2, max_match_players / 2));
    if (!int_field(*teams, "size", 1, max_match_players / 2, s.team_size, found)
        || !found)
      return bad_shape(where, "teams.size: " + range(1, max_match_players / 2));
    if (s.teams * s.team_size != s.max_players)
      return bad_shape(where, "teams.count x teams.size must be players.max");
    if (s.min_players < s.teams)
      return bad_shape(where, "players.min is below teams.count (a team "
                              "would be empty)");
  }
  auto cap = s.teams > 0 ? s.team_size : s.max_players;
  if (!int_field(j, "party_max", 1, cap, s.party_max, found))
    return bad_shape(where,
                     "party_max: " + range(1, cap)
                       + (s.teams > 0 ? " (a party plays in one team)" : ""));
  uint32_t fill_s = 0;
  if (!int_field(j, "fill_after_s", 0, 3600, fill_s, found))
    return bad_shape(where, "fill_after_s: " + range(0, 3600));
  if (found && s.min_players == s.max_players)
    return bad_shape(where, "fill_after_s needs players.min below "
                            "players.max");
  s.fill_after_ms = fill_s * 1000;
  uint32_t accept_s = 0;
  if (!int_field(j, "accept_timeout_s", 0, 300, accept_s, found))
    return bad_shape(where, "accept_timeout_s: " + range(0, 300));
  s.accept_timeout_ms = accept_s * 1000;
  if (s.accept_timeout_ms > 0 && s.is_pair())
    return bad_shape(where, "accept_timeout_s needs a group shape (teams, "
                            "parties or more than 2 players): a plain pair "
                            "takes the pair claim, which has no ready check");
  if (auto b = j.find("backfill"); b != j.end()) {
    auto mode = b->is_string() ? b->get<std::string>() : std::string{};
    if (mode == "manual")
      s.backfill = queue_shape::backfill_mode::manual;
    else if (mode == "auto")
      s.backfill = queue_shape::backfill_mode::automatic;
    else if (mode != "off")
      return bad_shape(where, "backfill: \"off\", \"manual\" or \"auto\"");
    if (s.backfill != queue_shape::backfill_mode::off && s.is_pair())
      return bad_shape(where, "backfill needs a group shape: a pair's "
                              "session ends when a member leaves");
  }
  if (auto b = j.find("balance"); b != j.end()) {
    if (!b->is_string())
      return bad_shape(where, "balance: the name of a number attribute");
    s.balance = b->get<std::string>();
    if (std::find(number_attributes.begin(), number_attributes.end(), s.balance)
        == number_attributes.end())
      return bad_shape(where, "balance: '" + s.balance
                                + "' is not a number attribute of the queue");
    if (s.teams == 0)
      return bad_shape(where, "balance needs teams");
  }
  s.spec = std::to_string(s.min_players) + "," + std::to_string(s.max_players)
           + "," + std::to_string(s.teams) + "," + std::to_string(s.team_size)
           + "," + std::to_string(s.party_max) + ","
           + std::to_string(s.fill_after_ms) + ","
           + (s.balance.empty() ? "0" : "1");
  return s;
}

} // namespace mm
