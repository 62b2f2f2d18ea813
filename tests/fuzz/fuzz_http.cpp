// Fuzz target `http`: the bytes a client sends to matchd's HTTP port, read as
// http_server.cpp reads them (the same bounded Beast parser, the same
// refusals) and answered by the real router and engine. Pipelined requests
// are answered in turn while the connection is kept alive.
//
// Invariants: nothing throws; every read ends in an answer, a named refusal
// (400/413/431) or a connection the client ended; every answer passes
// check_reply (no 500, JSON with a named error); a WebSocket upgrade is
// admitted only for the user of a valid token, and refused with a name.

#include <cstddef>
#include <cstdint>
#include <string>

#include <boost/asio/buffer.hpp>

#include "app/matchd/http_request.hpp"
#include "tests/fuzz/api_fixture.hpp"

using namespace mm;
namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const server_limits limits; // matchd's defaults
  size_t pos = 0;
  for (int n = 0; n < 16; ++n) { // requests on this connection
    front::request_parser p;
    front::bound(p, limits);
    p.eager(true); // as http::async_read does
    boost::beast::error_code ec;
    while (!p.is_done()) {
      if (pos < size) {
        auto used = p.put(boost::asio::buffer(data + pos, size - pos), ec);
        pos += used;
        if (ec == http::error::need_more) {
          ec = {};
          if (used > 0)
            continue; // the rest may complete it
        } else if (ec) {
          break;
        } else {
          continue;
        }
      }
      // Everything sent was read and the client closed its side.
      if (p.got_some())
        p.put_eof(ec);
      else
        ec = http::error::end_of_stream;
      break;
    }
    if (ec == http::error::end_of_stream)
      return 0; // closed between requests
    if (auto refusal = front::read_refusal(ec, limits)) {
      fuzz::check_reply(*refusal, input);
      if (refusal->status != 400 && refusal->status != 413
          && refusal->status != 431)
        fuzz::fail("transport refusal " + std::to_string(refusal->status),
                   input);
      return 0; // answered, then closed
    }
    if (ec) {
      if (ec != http::error::partial_message)
        fuzz::fail("a read failed without an answer: " + ec.message(), input);
      return 0; // a half-sent request: dropped
    }
    if (!p.is_done())
      fuzz::fail("the parser stopped before the end of a request", input);
    auto req = p.release();
    if (auto refusal = front::framing_refusal(req)) {
      fuzz::check_reply(*refusal, input);
      if (refusal->status != 400 && refusal->status != 501)
        fuzz::fail("framing refusal " + std::to_string(refusal->status), input);
      return 0; // answered, then closed: nothing after it is read
    }
    auto in = front::to_routed(req);
    if (in.upgrade) {
      auto adm = fuzz::router().admit_ws(in.target, in.authorization);
      if (adm.ok) {
        if (!valid_api_id(adm.who.user))
          fuzz::fail("a WebSocket admitted for user '" + adm.who.user + "'",
                     input);
        return 0; // the connection is a WebSocket now
      }
      fuzz::check_reply(adm.refusal, input);
      if (adm.refusal.status == 200)
        fuzz::fail("a refused upgrade answered 200", input);
      return 0;
    }
    auto r = fuzz::ask(in.method, in.target, in.authorization, in.body);
    fuzz::check_reply(r, input);
    if (!in.keep_alive)
      return 0;
  }
  return 0;
}
