#include "actors/relay_events.hpp"

#include <exception>

#include <nlohmann/json.hpp>

#include "messages/engine_types.hpp"
#include "persistence/matchdb/match_types.hpp"

namespace mm::relay_detail {

bool parse_event(const outbox_event& ev, match_event& out, std::string& why) {
  out.event_id = ev.event_id;
  out.session_id = ev.aggregate_id;
  out.payload = ev.payload;
  out.type = ev.type; // every type has the same users shape
  try {
    auto j = nlohmann::json::parse(ev.payload);
    out.queue = j.at("queue").get<std::string>();
    const auto& users = j.at("users");
    // A pair, or a group session's members (the first two as the pair).
    if (!users.is_array() || users.size() < 2) {
      why = "users holds fewer than two members";
      return false;
    }
    out.user_a = users[0].at("user").get<std::string>();
    out.ticket_a = users[0].at("ticket").get<std::string>();
    out.user_b = users[1].at("user").get<std::string>();
    out.ticket_b = users[1].at("ticket").get<std::string>();
    out.others.clear();
    for (size_t i = 2; i < users.size(); ++i)
      out.others.push_back(users[i].at("user").get<std::string>());
    return true;
  } catch (const std::exception& e) {
    why = e.what();
    return false;
  }
}

std::vector<std::string> xadd(const std::string& stream, uint64_t maxlen,
                              const outbox_event& ev, const match_event& m) {
  std::vector<std::string> cmd{"XADD", stream};
  if (maxlen > 0)
    cmd.insert(cmd.end(), {"MAXLEN", "~", std::to_string(maxlen)});
  cmd.insert(cmd.end(), {"*", "event_id", ev.event_id, "type", ev.type,
                         "session_id", m.session_id, "queue", m.queue, "user_a",
                         m.user_a, "ticket_a", m.ticket_a, "user_b", m.user_b,
                         "ticket_b", m.ticket_b, "payload", ev.payload});
  return cmd;
}

} // namespace mm::relay_detail
