#pragma once

// One HTTP request as the front door reads it, without the socket: how the
// parser is bounded, what a read that failed answers, and what the router is
// handed. Internal to http_server.cpp, and shared with the front door's fuzz
// target (tests/fuzz/), so the bytes a client sends meet the same code there.

#include <optional>
#include <string>

#include <boost/beast/core/error.hpp>
#include <boost/beast/http.hpp>

#include "app/matchd/api.hpp"
#include "app/matchd/http_server.hpp"

namespace mm::front {

using request = boost::beast::http::request<boost::beast::http::string_body>;
using request_parser
  = boost::beast::http::request_parser<boost::beast::http::string_body>;

/// Bounds a fresh parser by the head and body limits of `l`.
void bound(request_parser& p, const server_limits& l);

/// The answer the transport gives by itself, before closing, to a read that
/// failed with `ec`: 413 `body_too_large`, 431 `headers_too_large`, 400
/// `malformed_request`. None for no error and for a connection that just
/// ends (end of stream, timeout, reset, a half-sent request).
std::optional<api_reply> read_refusal(const boost::beast::error_code& ec,
                                      const server_limits& l);

/// The answer to a request whose framing the front door does not trust,
/// before anything of it is served (the connection is then closed, so
/// nothing read after its head is taken for another request; RFC 9112
/// 6.1, 6.3): a `Transfer-Encoding` other than exactly one `chunked` —
/// 501 `unsupported_transfer_encoding` for a coding it does not know
/// (`identity`, `gzip`, `xchunked`), 400 `malformed_request` for
/// `chunked` listed twice or not last, or `Transfer-Encoding` together
/// with `Content-Length`. None for a request framed by `Content-Length`,
/// by one `chunked`, or without a body.
std::optional<api_reply> framing_refusal(const request& req);

/// What the router is handed for one complete request.
struct routed_request {
  std::string method; ///< as sent, e.g. "POST"
  std::string target;
  std::string authorization;
  std::string body;
  bool keep_alive = false;
  bool upgrade = false; ///< a WebSocket upgrade: `admit_ws`, not `handle`
};

/// Takes the parts the router needs out of `req` (its body is moved).
routed_request to_routed(request& req);

} // namespace mm::front
