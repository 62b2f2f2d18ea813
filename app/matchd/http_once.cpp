#include "app/matchd/http_once.hpp"

#include <chrono>
#include <exception>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace mm {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

struct url_parts {
  bool tls = false;
  std::string host, port, target;
};

bool parse_url(const std::string& url, url_parts& u, std::string& err) {
  std::string rest;
  if (url.rfind("https://", 0) == 0) {
    u.tls = true;
    u.port = "443";
    rest = url.substr(8);
  } else if (url.rfind("http://", 0) == 0) {
    u.port = "80";
    rest = url.substr(7);
  } else {
    err = "the URL must be http:// or https://";
    return false;
  }
  auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  u.target = slash == std::string::npos ? "/" : rest.substr(slash);
  if (authority.find('@') != std::string::npos) {
    err = "the URL must not carry credentials";
    return false;
  }
  auto colon = authority.rfind(':');
  if (colon != std::string::npos
      && authority.find(']', colon) == std::string::npos) {
    u.port = authority.substr(colon + 1);
    authority.resize(colon);
  }
  if (authority.size() > 2 && authority.front() == '['
      && authority.back() == ']')
    authority = authority.substr(1, authority.size() - 2);
  u.host = authority;
  if (u.host.empty() || u.port.empty()
      || u.port.find_first_not_of("0123456789") != std::string::npos) {
    err = "the URL has no host or a bad port";
    return false;
  }
  return true;
}

} // namespace

bool valid_http_url(const std::string& url, std::string& err) {
  url_parts u;
  return parse_url(url, u, err);
}

http_once_result http_once(const http_once_request& r) {
  http_once_result out;
  const auto& url = r.url;
  const auto& ca_file = r.ca_file;
  auto timeout_ms = r.timeout_ms;
  url_parts u;
  if (!parse_url(url, u, out.error))
    return out;
  try {
    asio::io_context ioc;
    ssl::context ctx{ssl::context::tls_client};
    if (u.tls) {
      if (ca_file.empty())
        ctx.set_default_verify_paths();
      else
        ctx.load_verify_file(ca_file);
      ctx.set_verify_mode(ssl::verify_peer);
    }
    tcp::resolver resolver{ioc};
    beast::tcp_stream plain{ioc};
    beast::ssl_stream<beast::tcp_stream> tls{ioc, ctx};
    http::request<http::string_body> req{
      r.method == "POST" ? http::verb::post : http::verb::get, u.target, 11};
    req.set(http::field::host, u.host);
    req.set(http::field::user_agent, "matchd");
    req.set(http::field::accept, "application/json");
    if (r.method == "POST") {
      req.set(http::field::content_type, r.content_type);
      req.body() = r.body;
      req.prepare_payload();
    }
    beast::flat_buffer buf;
    http::response_parser<http::string_body> res;
    res.body_limit(1 << 20);
    bool done = false;
    error_code failed;
    auto finish = [&](error_code ec) {
      failed = ec;
      done = true;
    };
    auto exchange = [&](auto& stream) {
      http::async_write(stream, req, [&](error_code ec, size_t) {
        if (ec)
          return finish(ec);
        http::async_read(stream, buf, res,
                         [&](error_code ec2, size_t) { finish(ec2); });
      });
    };
    resolver.async_resolve(
      u.host, u.port, [&](error_code ec, tcp::resolver::results_type found) {
        if (ec)
          return finish(ec);
        auto& lowest = u.tls ? beast::get_lowest_layer(tls) : plain;
        lowest.async_connect(found, [&](error_code ec2, const tcp::endpoint&) {
          if (ec2)
            return finish(ec2);
          if (!u.tls)
            return exchange(plain);
          // SNI, and the certificate must name the host.
          SSL_set_tlsext_host_name(tls.native_handle(), u.host.c_str());
          tls.set_verify_callback(ssl::host_name_verification(u.host));
          tls.async_handshake(ssl::stream_base::client, [&](error_code ec3) {
            if (ec3)
              return finish(ec3);
            exchange(tls);
          });
        });
      });
    ioc.run_for(std::chrono::milliseconds(timeout_ms));
    if (!done) {
      out.error = url + ": no answer within " + std::to_string(timeout_ms)
                  + " ms";
      return out;
    }
    if (failed) {
      out.error = url + ": " + failed.message();
      return out;
    }
    out.status = res.get().result_int();
    out.body = std::move(res.get().body());
    if (out.status / 100 != 2)
      out.error = url + ": HTTP " + std::to_string(out.status);
    return out;
  } catch (const std::exception& e) {
    out.error = url + ": " + e.what();
    return out;
  }
}

} // namespace mm
