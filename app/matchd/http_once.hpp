#pragma once

// One HTTP(S) request to a configured endpoint, blocking, with a deadline:
// the JWK Set's read (jwks_source) and the traces' export (tracing). Over
// https the server is verified against a CA file or the system's CAs and
// must name the URL's host. Boost.Beast over Boost.Asio's OpenSSL stream.

#include <cstdint>
#include <string>

namespace mm {

struct http_once_request {
  std::string method = "GET"; ///< GET or POST
  std::string url;            ///< http://host[:port]/path or https://...
  std::string ca_file;        ///< https: CA bundle (empty: the system's)
  std::string body;           ///< POST
  std::string content_type = "application/json";
  uint32_t timeout_ms = 5000; ///< connect to last byte
};

struct http_once_result {
  unsigned status = 0; ///< 0: no answer (`error` says why)
  std::string body;    ///< at most 1 MiB
  std::string error;
};

/// Sends `req` and waits for the answer or the deadline. Never throws.
http_once_result http_once(const http_once_request& req);

/// True for an http:// or https:// URL with a host (and a numeric port).
bool valid_http_url(const std::string& url, std::string& err);

} // namespace mm
