#include "app/matchd/http_request.hpp"

#include <cctype>
#include <vector>

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

namespace {

/// The comma-separated codings of every Transfer-Encoding field, in order,
/// trimmed and lower-cased; an empty element stays (it is malformed).
std::vector<std::string> codings_of(const request& req) {
  std::vector<std::string> out;
  auto range = req.equal_range(http::field::transfer_encoding);
  for (auto it = range.first; it != range.second; ++it) {
    auto v = it->value();
    size_t pos = 0;
    while (true) {
      auto comma = v.find(',', pos);
      auto part = v.substr(pos, comma == v.npos ? v.npos : comma - pos);
      std::string c;
      for (char ch : part)
        if (ch != ' ' && ch != '\t')
          c += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      out.push_back(std::move(c));
      if (comma == v.npos)
        break;
      pos = comma + 1;
    }
  }
  return out;
}

} // namespace

std::optional<api_reply> framing_refusal(const request& req) {
  if (req.find(http::field::transfer_encoding) == req.end())
    return std::nullopt;
  if (req.find(http::field::content_length) != req.end())
    return api_router::error(400, "malformed_request",
                             "Transfer-Encoding together with Content-Length");
  auto codings = codings_of(req);
  for (auto& c : codings)
    if (c != "chunked")
      return api_router::error(501, "unsupported_transfer_encoding",
                               "the only transfer coding accepted is a single "
                               "'chunked'");
  if (codings.size() != 1)
    return api_router::error(400, "malformed_request",
                             "'chunked' may be listed once, as the last "
                             "transfer coding");
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
