#include "app/matchd/http_request.hpp"

#include <boost/beast/websocket/rfc6455.hpp>

namespace mm::front {

namespace http = boost::beast::http;

void bound(request_parser& p, const server_limits& l) {
  p.header_limit(static_cast<uint32_t>(l.max_header));
  p.body_limit(l.max_body);
}

std::optional<api_reply> read_refusal(const boost::beast::error_code& ec,
                                      const server_limits& l) {
  if (!ec)
    return std::nullopt;
  if (ec == http::error::body_limit)
    return api_router::error(413, "body_too_large",
                             "the body exceeds " + std::to_string(l.max_body)
                               + " bytes");
  if (ec == http::error::header_limit)
    return api_router::error(431, "headers_too_large",
                             "the request head exceeds "
                               + std::to_string(l.max_header) + " bytes");
  // The parser's refusals of what was sent; not a timeout, a reset, or the
  // stream ending between requests or inside one.
  if (ec.category() == http::make_error_code(http::error::bad_target).category()
      && ec != http::error::end_of_stream && ec != http::error::partial_message
      && ec != http::error::need_more && ec != http::error::need_buffer)
    return api_router::error(400, "malformed_request",
                             "not an HTTP/1.1 request: " + ec.message());
  return std::nullopt;
}

routed_request to_routed(request& req) {
  routed_request r;
  r.method = std::string{req.method_string()};
  r.target = std::string{req.target()};
  r.authorization = std::string{req[http::field::authorization]};
  r.keep_alive = req.keep_alive();
  r.upgrade = boost::beast::websocket::is_upgrade(req);
  r.body = std::move(req.body());
  return r;
}

} // namespace mm::front
