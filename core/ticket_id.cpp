#include "core/ticket_id.hpp"

#include <mutex>
#include <random>

namespace mm {

bool valid_client_id(const std::string& id) noexcept {
  if (id.empty() || id.size() > max_client_id)
    return false;
  for (char c : id) {
    auto ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == ':'
              || c == '@' || c == '-';
    if (!ok)
      return false;
  }
  return true;
}

std::string make_store_ticket(const std::string& nonce, uint32_t heal,
                              const std::string& user,
                              const std::string& ticket) {
  std::string out;
  out.reserve(nonce.size() + user.size() + ticket.size() + 16);
  out += nonce;
  out += '.';
  out += std::to_string(heal);
  out += ':';
  out += std::to_string(user.size());
  out += ':';
  out += user;
  out += ':';
  out += ticket;
  return out;
}

namespace {

/// Reads decimal digits at `pos` up to `stop`; false when there are none.
bool read_number(const std::string& s, size_t& pos, char stop, uint64_t& out) {
  auto start = pos;
  out = 0;
  while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
    if (pos - start >= 10)
      return false;
    out = out * 10 + static_cast<uint64_t>(s[pos] - '0');
    ++pos;
  }
  if (pos == start || pos >= s.size() || s[pos] != stop)
    return false;
  ++pos;
  return true;
}

} // namespace

std::optional<store_ticket_parts> parse_store_ticket(const std::string& id) {
  store_ticket_parts out;
  auto dot = id.find('.');
  if (dot == std::string::npos || dot == 0)
    return std::nullopt;
  for (size_t i = 0; i < dot; ++i) {
    auto c = id[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return std::nullopt;
  }
  out.nonce = id.substr(0, dot);
  size_t pos = dot + 1;
  uint64_t heal = 0;
  uint64_t len = 0;
  if (!read_number(id, pos, ':', heal) || heal > UINT32_MAX
      || !read_number(id, pos, ':', len) || len == 0 || pos + len >= id.size()
      || id[pos + len] != ':')
    return std::nullopt;
  out.heal = static_cast<uint32_t>(heal);
  out.user = id.substr(pos, len);
  out.ticket = id.substr(pos + len + 1);
  if (out.ticket.empty())
    return std::nullopt;
  return out;
}

std::string client_ticket_of(const std::string& id, const std::string& user) {
  auto p = parse_store_ticket(id);
  if (!p || p->user != user)
    return id;
  return p->ticket;
}

std::string make_nonce() {
  static std::mutex mtx;
  static std::mt19937_64 gen{std::random_device{}()};
  uint64_t x;
  {
    std::lock_guard<std::mutex> guard{mtx};
    x = gen();
  }
  static const char* digits = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, x >>= 4)
    out[static_cast<size_t>(i)] = digits[x & 0xf];
  return out;
}

} // namespace mm
