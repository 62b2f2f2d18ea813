#include "tests/fuzz/api_fixture.hpp"

#include <chrono>
#include <future>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

namespace mm::fuzz {

namespace {

using json = nlohmann::json;

// Never destroyed: libFuzzer and the replay main leave with exit() while the
// engine's threads run; a reachable global is no leak to ASan.
api_router* the_router = nullptr;

/// The error names of docs/api.md: the engine's (core/errc.hpp) and the
/// front door's own.
bool named_error(const std::string& name) {
  static const std::set<std::string> front{"missing_token",
                                           "malformed_token",
                                           "expired_token",
                                           "bad_signature",
                                           "unknown_route",
                                           "method_not_allowed",
                                           "malformed_json",
                                           "body_too_large",
                                           "headers_too_large",
                                           "malformed_request",
                                           "rate_limited",
                                           "too_many_websockets",
                                           "oversized_token",
                                           "unsupported_algorithm",
                                           "token_not_yet_valid",
                                           "wrong_audience",
                                           "wrong_issuer",
                                           "disabled_token_format",
                                           "bad_console_token",
                                           "demo_off",
                                           "unsupported_transfer_encoding"};
  return front.count(name) > 0 || errc_from_string(name) != errc::none;
}

} // namespace

const api_router& router() {
  if (the_router == nullptr) {
    auto ctx = std::make_shared<api_context>();
    ctx->tokens.secrets = {secret};
    ctx->metrics_text = [] { return std::string{"# metrics\n"}; };
    ctx->ready = [](std::string&) { return true; };
    ctx->queues = {"default", "voice"};
    auto port = make_port(ctx);
    the_router = new api_router(ctx, std::move(port));
  }
  return *the_router;
}

api_reply ask(const std::string& method, const std::string& target,
              const std::string& authorization, const std::string& body) {
  auto p = std::make_shared<std::promise<api_reply>>();
  auto f = p->get_future();
  router().handle(method, target, authorization, body,
                  [p](api_reply r) { p->set_value(std::move(r)); });
  if (f.wait_for(std::chrono::seconds(60)) != std::future_status::ready)
    fail("no answer in 60 s to " + method + " " + target, body);
  return f.get();
}

void check_reply(const api_reply& r, const std::string& input) {
  static const std::set<unsigned> statuses{200, 400, 401, 403, 404, 405,
                                           409, 413, 429, 431, 501, 503};
  if (statuses.count(r.status) == 0)
    fail("status " + std::to_string(r.status) + ": " + r.body, input);
  if (r.content_type != "application/json")
    return; // /metrics
  auto j = json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    fail("the answer is not a JSON object: " + r.body, input);
  if (r.status == 200)
    return;
  auto e = j.find("error");
  if (e == j.end() || !e->is_string() || !named_error(e->get<std::string>()))
    fail("a refusal without a named error: " + r.body, input);
}

std::string error_name(const api_reply& r) {
  auto j = json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_string())
    return {};
  return j["error"].get<std::string>();
}

} // namespace mm::fuzz
