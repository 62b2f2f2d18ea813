// docs/openapi.yaml against the router (issue 14, item 4): every route of
// the router's table (mm::api_routes, what dispatch reads) is described,
// every described operation is in the table, and each one, probed on a
// real matchd, is answered by its route (never 404 unknown_route or 405);
// /openapi.json serves the description; docs/api.md names the same routes.

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "app/matchd/api.hpp"
#include "tests/support/matchd_process.hpp"
#include "tests/support/raw_conn.hpp"

namespace {

using json = nlohmann::json;
using op = std::pair<std::string, std::string>; // method, path template

std::string upper(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

json spec() {
  return json::parse(mm::openapi_json());
}

/// The described operations, and those marked x-websocket.
std::set<op> described(std::set<op>* websockets = nullptr) {
  static const std::set<std::string> methods{
    "get", "put", "post", "delete", "patch", "head", "options", "trace"};
  std::set<op> out;
  auto doc = spec(); // the document outlives the loop over its items
  for (auto& [path, item] : doc.at("paths").items())
    for (auto& [m, operation] : item.items())
      if (methods.count(m) > 0) {
        out.emplace(upper(m), path);
        if (websockets && operation.value("x-websocket", false))
          websockets->emplace(upper(m), path);
      }
  return out;
}

std::set<op> served(std::set<op>* websockets = nullptr) {
  std::set<op> out;
  for (auto& r : mm::api_routes()) {
    out.emplace(r.method, r.path);
    if (websockets && r.websocket)
      websockets->emplace(r.method, r.path);
  }
  return out;
}

std::string show(const std::set<op>& ops) {
  std::string s;
  for (auto& [m, p] : ops)
    s += "  " + m + " " + p + "\n";
  return s;
}

std::set<op> minus(const std::set<op>& a, const std::set<op>& b) {
  std::set<op> out;
  for (auto& x : a)
    if (b.count(x) == 0)
      out.insert(x);
  return out;
}

/// A concrete path for a template: each {name} becomes "probe-name".
/// (A console file must be one that exists: index.html.)
std::string concrete(const std::string& tmpl) {
  auto out = std::regex_replace(tmpl, std::regex(R"(\{([^}]+)\})"), "probe-$1");
  return std::regex_replace(out, std::regex("probe-asset"), "index.html");
}

std::string error_of(const mm::test::raw_response& r) {
  auto j = json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("error") && j["error"].is_string()
           ? j["error"].get<std::string>()
           : std::string{};
}

mm::test::raw_response send(uint16_t port, const std::string& request) {
  mm::test::raw_conn c{port};
  EXPECT_TRUE(c.send(request));
  auto r = c.read_response(std::chrono::seconds(5));
  if (!r)
    throw std::runtime_error("no answer to " + request);
  return *r;
}

std::string plain_request(const std::string& method,
                          const std::string& target) {
  return method + " " + target
         + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           "Content-Length: 2\r\nConnection: close\r\n\r\n{}";
}

TEST(openapi, the_table_and_the_description_are_the_same_routes) {
  std::set<op> ws_served, ws_described;
  auto s = served(&ws_served);
  auto d = described(&ws_described);
  ASSERT_GE(s.size(), 11u); // the table is read, not empty
  ASSERT_GE(d.size(), 11u); // so is the description
  EXPECT_TRUE(minus(s, d).empty())
    << "served but not described in docs/openapi.yaml:\n"
    << show(minus(s, d));
  EXPECT_TRUE(minus(d, s).empty())
    << "described but not in the router's table (app/matchd/api.cpp):\n"
    << show(minus(d, s));
  EXPECT_EQ(ws_served, ws_described)
    << "x-websocket marks the WebSocket routes";
}

TEST(openapi, the_description_is_sound) {
  auto j = spec();
  EXPECT_EQ(j.at("openapi").get<std::string>().substr(0, 2), "3.");
  // Every operation says whether it needs the bearer token: the table's
  // token flag is the description's security.
  for (auto& r : mm::api_routes()) {
    std::string m = r.method;
    for (auto& c : m)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto& o = j["paths"][r.path][m];
    bool open = o.contains("security") && o["security"].empty();
    EXPECT_EQ(open, !r.token) << r.method << " " << r.path;
    if (r.token) {
      EXPECT_TRUE(o["responses"].contains("401")) << r.method << " " << r.path;
    }
  }
}

TEST(openapi, every_described_route_answers_on_a_real_matchd) {
  // With the console and the demo on: their routes are described too.
  mm::test::matchd_process node{
    {"--secret", "openapi-secret-0123456789", "--console-token",
     "openapi-console-0123456789", "--demo-queue", "default"},
    "openapi_test.matchd.log"};
  std::set<op> websockets;
  auto ops = described(&websockets);
  ASSERT_EQ(ops.size(), mm::api_routes().size()); // every one is probed
  for (auto& [method, tmpl] : ops) {
    auto target = concrete(tmpl);
    auto r = websockets.count({method, tmpl}) > 0
               ? send(node.port(),
                      mm::test::raw_conn::upgrade_request(target, ""))
               : send(node.port(), plain_request(method, target));
    auto what = method + " " + target + " answered " + std::to_string(r.status)
                + " " + r.body;
    EXPECT_FALSE(r.status == 404 && error_of(r) == "unknown_route") << what;
    EXPECT_NE(r.status, 405u) << what;
    EXPECT_NE(r.status, 0u) << what;
    // The token routes refuse the missing token: the route was reached.
    bool token = false;
    for (auto& x : mm::api_routes())
      if (x.method == method && x.path == tmpl)
        token = x.token;
    if (token) {
      EXPECT_EQ(error_of(r), "missing_token") << what;
    } else {
      // (301: GET /console sends the browser to /console/.)
      EXPECT_TRUE(r.status == 200 || r.status == 301 || r.status == 503)
        << what;
    }
  }
  // The probe can fail: a route that is not there, a method that is not.
  auto none = send(node.port(), plain_request("GET", "/v1/nothing/here"));
  EXPECT_EQ(none.status, 404u);
  EXPECT_EQ(error_of(none), "unknown_route");
  auto put = send(node.port(), plain_request("PUT", "/v1/users/probe/swipes"));
  EXPECT_EQ(put.status, 405u);
  auto ws_none = send(node.port(),
                      mm::test::raw_conn::upgrade_request("/v1/nothing", ""));
  EXPECT_EQ(error_of(ws_none), "unknown_route");
  // /openapi.json is the compiled-in description.
  auto doc = send(node.port(), plain_request("GET", "/openapi.json"));
  ASSERT_EQ(doc.status, 200u);
  EXPECT_NE(doc.head.find("application/json"), std::string::npos);
  EXPECT_EQ(json::parse(doc.body, nullptr, false), spec());
}

TEST(openapi, docs_api_md_names_the_same_routes) {
  std::ifstream in{MM_SOURCE_DIR "/docs/api.md"};
  ASSERT_TRUE(in.good());
  // Route headings and bullets: "### ... — `POST /v1/...`", "- `GET /healthz`".
  std::regex route(R"(`(GET|POST|DELETE|PUT|PATCH) (/[^`\s]*)`)");
  std::set<op> named;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("###", 0) != 0 && line.rfind("- ", 0) != 0)
      continue;
    for (std::sregex_iterator i{line.begin(), line.end(), route}, end; i != end;
         ++i)
      named.emplace((*i)[1], (*i)[2]);
  }
  auto d = described();
  ASSERT_GE(named.size(), 11u); // the page was read
  EXPECT_TRUE(minus(d, named).empty()) << "described but not in docs/api.md:\n"
                                       << show(minus(d, named));
  EXPECT_TRUE(minus(named, d).empty()) << "in docs/api.md but not described:\n"
                                       << show(minus(named, d));
}

} // namespace
