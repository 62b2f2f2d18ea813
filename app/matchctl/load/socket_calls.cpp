// Requests of `matchctl load --socket` (app/matchctl/load/virtual_users.hpp):
// a join, cancel or end goes on the user's own WebSocket with a request id
// and is answered by a reply frame (docs/api.md "Requests on the
// WebSocket"); the callbacks get the same http_result an HTTP request would
// give, so the rest of the virtual user does not know which transport
// answered.

#include <chrono>
#include <utility>

#include <boost/asio/error.hpp>
#include <nlohmann/json.hpp>

#include "app/matchctl/load/active_user.hpp"
#include "app/matchctl/load/virtual_users.hpp"

namespace mm::load {

using json = nlohmann::json;

void virtual_users::call(uint32_t i, boost::beast::http::verb method,
                         std::string target, std::string body, json&& ws_msg,
                         http_callback cb) {
  auto* a = active(i);
  if (!opts_.socket || a == nullptr || !a->ws || !a->ws->is_open()) {
    pool_of(i).request(method, std::move(target), a ? a->auth : std::string{},
                       std::move(body), std::move(cb));
    return;
  }
  auto id = ++a->next_call;
  ws_msg["id"] = id;
  if (!a->ws->send(
        ws_msg.dump(-1, ' ', false, json::error_handler_t::replace))) {
    pool_of(i).request(method, std::move(target), a->auth, std::move(body),
                       std::move(cb));
    return;
  }
  auto& pc = a->calls[id];
  pc.cb = std::move(cb);
  pc.timer = std::make_unique<asio::steady_timer>(io_);
  pc.timer->expires_after(request_timeout);
  pc.timer->async_wait([this, i, id](const error_code& ec) {
    if (ec)
      return; // answered or dropped
    auto* a = active(i);
    if (a == nullptr)
      return;
    auto it = a->calls.find(id);
    if (it == a->calls.end())
      return;
    auto cb = std::move(it->second.cb);
    a->calls.erase(it);
    http_result res;
    res.ec = asio::error::timed_out;
    cb(std::move(res));
  });
}

void virtual_users::on_reply(uint32_t i, const json& j) {
  auto* a = active(i);
  auto id = j.find("id");
  if (a == nullptr || id == j.end() || !id->is_number_unsigned()) {
    count_error("ws_bad_reply");
    return;
  }
  auto it = a->calls.find(id->get<uint32_t>());
  if (it == a->calls.end()) {
    count_error("ws_unexpected_reply"); // late after its timeout, or twice
    return;
  }
  auto cb = std::move(it->second.cb);
  it->second.timer->cancel();
  a->calls.erase(it);
  http_result res;
  auto status = j.find("status");
  res.status = status != j.end() && status->is_number_unsigned()
                 ? status->get<unsigned>()
                 : 0;
  auto body = j.find("body");
  if (body != j.end())
    res.body = body->dump(-1, ' ', false, json::error_handler_t::replace);
  cb(std::move(res));
}

void virtual_users::fail_calls(uint32_t i, error_code ec) {
  auto* a = active(i);
  if (a == nullptr || a->calls.empty())
    return;
  // The callbacks may release the user: nothing of `a` is used after them.
  auto calls = std::move(a->calls);
  a->calls.clear();
  for (auto& [id, pc] : calls) {
    pc.timer->cancel();
    http_result res;
    res.ec = ec;
    pc.cb(std::move(res));
  }
}

} // namespace mm::load
