#include "persistence/queue/redis_slots.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace mm::redis_slots {

uint16_t crc16(std::string_view data) noexcept {
  uint16_t crc = 0;
  for (unsigned char c : data) {
    crc ^= static_cast<uint16_t>(c) << 8;
    for (int i = 0; i < 8; ++i)
      crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<uint16_t>(crc << 1);
  }
  return crc;
}

std::string_view hash_tag(std::string_view key) noexcept {
  auto open = key.find('{');
  if (open == std::string_view::npos)
    return key;
  auto close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1)
    return key;
  return key.substr(open + 1, close - open - 1);
}

uint16_t key_slot(std::string_view key) noexcept {
  return static_cast<uint16_t>(crc16(hash_tag(key)) & (slot_count - 1));
}

namespace {

std::optional<uint16_t> parse_u16(std::string_view s, uint32_t max) {
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || v > max || s.empty())
    return std::nullopt;
  return static_cast<uint16_t>(v);
}

bool starts_with(std::string_view s, std::string_view p) noexcept {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

} // namespace

std::optional<address> parse_address(std::string_view text) {
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    return std::nullopt;
  auto host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  auto port = parse_u16(text.substr(colon + 1), 65535);
  if (!port || *port == 0 || host.empty())
    return std::nullopt;
  return address{std::string{host}, *port};
}

std::optional<redirect> parse_redirect(std::string_view error) {
  redirect r;
  if (starts_with(error, "MOVED "))
    error.remove_prefix(6);
  else if (starts_with(error, "ASK "))
    error.remove_prefix(4), r.ask = true;
  else
    return std::nullopt;
  auto space = error.find(' ');
  if (space == std::string_view::npos)
    return std::nullopt;
  auto slot = parse_u16(error.substr(0, space), slot_count - 1);
  auto to = parse_address(error.substr(space + 1));
  if (!slot || !to)
    return std::nullopt;
  r.slot = *slot;
  r.to = std::move(*to);
  return r;
}

bool transient_error(std::string_view error) noexcept {
  return starts_with(error, "TRYAGAIN") || starts_with(error, "CLUSTERDOWN")
         || starts_with(error, "LOADING") || starts_with(error, "MASTERDOWN");
}

uint16_t slot_map::index_of(const address& a) {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i] == a)
      return static_cast<uint16_t>(i);
  nodes_.push_back(a);
  return static_cast<uint16_t>(nodes_.size() - 1);
}

outcome<bool> slot_map::assign(const store_value& reply) {
  using kind = store_value::kind;
  auto bad = [](const std::string& why) {
    return outcome<bool>{errc::protocol_error, "CLUSTER SLOTS: " + why};
  };
  if (reply.type != kind::array)
    return bad("not an array");
  std::vector<address> nodes;
  std::array<int32_t, slot_count> owner;
  owner.fill(-1);
  for (const auto& range : reply.elements) {
    // [first, last, [host, port, id, ...], replica...]
    if (range.type != kind::array || range.elements.size() < 3
        || range.elements[0].type != kind::integer
        || range.elements[1].type != kind::integer
        || range.elements[2].type != kind::array
        || range.elements[2].elements.size() < 2)
      return bad("a range of an unknown shape");
    auto first = range.elements[0].integer;
    auto last = range.elements[1].integer;
    if (first < 0 || last < first || last >= slot_count)
      return bad("a range outside 0..16383");
    const auto& primary = range.elements[2].elements;
    if (primary[0].type != kind::string || primary[1].type != kind::integer
        || primary[1].integer <= 0 || primary[1].integer > 65535)
      return bad("a node without host and port");
    address a{primary[0].str, static_cast<uint16_t>(primary[1].integer)};
    if (a.host.empty() || a.host == "?")
      return bad("a node that announces no address");
    auto it = std::find(nodes.begin(), nodes.end(), a);
    auto idx = static_cast<int32_t>(it - nodes.begin());
    if (it == nodes.end())
      nodes.push_back(std::move(a));
    for (auto s = first; s <= last; ++s)
      owner[static_cast<size_t>(s)] = idx;
  }
  for (auto o : owner)
    if (o < 0)
      return bad("a slot no node serves (cluster not ready)");
  nodes_ = std::move(nodes);
  for (size_t s = 0; s < slot_count; ++s)
    owner_[s] = static_cast<uint16_t>(owner[s]);
  return true;
}

void slot_map::move(uint16_t slot, const address& to) {
  if (nodes_.empty())
    return; // the next assign decides
  owner_[slot % slot_count] = index_of(to);
}

std::optional<address> slot_map::node_of(uint16_t slot) const {
  if (nodes_.empty())
    return std::nullopt;
  return nodes_[owner_[slot % slot_count]];
}

std::optional<uint16_t> command_slot(const store_command& command) {
  if (command.size() < 2)
    return std::nullopt;
  std::string name = command[0];
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return std::toupper(c); });
  static constexpr std::string_view keyless[]
    = {"PING",   "INFO",   "DBSIZE", "FLUSHALL", "FLUSHDB", "SCRIPT", "CLUSTER",
       "CONFIG", "TIME",   "CLIENT", "COMMAND",  "ASKING",  "AUTH",   "HELLO",
       "ECHO",   "SELECT", "DEBUG",  "MEMORY",   "LATENCY", "SLOWLOG"};
  for (auto k : keyless)
    if (name == k)
      return std::nullopt;
  return key_slot(command[1]);
}

std::optional<uint16_t> call_slot(const script_call& call) {
  if (call.keys.empty())
    return std::nullopt;
  return key_slot(call.keys.front());
}

} // namespace mm::redis_slots
