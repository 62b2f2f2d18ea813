// What the virtual users read from matchd (app/matchctl/load/wire.hpp).

#include "app/matchctl/load/wire.hpp"

#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <nlohmann/json.hpp>

namespace mm::load {

using json = nlohmann::json;

std::string error_name(const http_result& res) {
  auto body = json::parse(res.body, nullptr, false);
  if (body.is_object()) {
    auto it = body.find("error");
    if (it != body.end() && it->is_string())
      return it->get<std::string>();
  }
  return "http_" + std::to_string(res.status);
}

std::string transport_name(const error_code& ec) {
  if (ec == boost::beast::error::timeout)
    return "timeout";
  if (ec == asio::error::connection_refused)
    return "connection_refused";
  if (ec == asio::error::operation_aborted)
    return "aborted";
  if (ec == asio::error::connection_reset)
    return "connection_reset";
  if (ec == asio::error::eof || ec == boost::beast::http::error::end_of_stream)
    return "eof";
  return "transport";
}

std::string str_field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it != j.end() && it->is_string())
    return it->get<std::string>();
  return {};
}

} // namespace mm::load
