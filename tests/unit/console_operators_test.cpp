// The console's logins and audit ring (app/matchd/console_operators.hpp):
// each token finds its own login and role, any other finds none; a
// malformed file adds nothing and names the entry; the ring keeps the
// newest entries only.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "app/matchd/console_operators.hpp"

using namespace mm;

namespace {

std::string write_file(const std::string& name, const std::string& text) {
  auto path = ::testing::TempDir() + name;
  std::ofstream{path} << text;
  return path;
}

std::string entry(const std::string& name, const std::string& role,
                  const std::string& token) {
  return R"({"name": ")" + name + R"(", "role": ")" + role
         + R"(", "token_sha256": ")" + console_operators::hash(token) + "\"}";
}

} // namespace

TEST(console_operators, each_token_is_its_own_login) {
  auto path = write_file(
    "ops.json", "{\"operators\": [" + entry("alice", "operator", "tok-a") + ", "
                  + entry("victor", "viewer", "tok-v") + "]}");
  console_operators ops;
  std::string err;
  ASSERT_TRUE(ops.load(path, err)) << err;
  auto a = ops.find("tok-a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->name, "alice");
  EXPECT_EQ(a->role, console_role::operator_);
  auto v = ops.find("tok-v");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->role, console_role::viewer);
  EXPECT_FALSE(ops.find("tok-a "));
  EXPECT_FALSE(ops.find(""));
  ops.add_shared("shared-token-0123456789");
  auto c = ops.find("shared-token-0123456789");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->name, "console");
  EXPECT_EQ(c->role, console_role::operator_);
}

TEST(console_operators, a_malformed_file_adds_nothing) {
  console_operators ops;
  std::string err;
  for (auto [text, why] :
       {std::pair{std::string{"[]"}, "not a JSON object"},
        std::pair{"{\"operators\": [" + entry("a b", "viewer", "t") + "]}",
                  "name must be"},
        std::pair{"{\"operators\": [" + entry("x", "admin", "t") + "]}",
                  "role must be"},
        std::pair{std::string{R"({"operators": [{"name": "x", "role": "viewer",
                   "token_sha256": "abc"}]})"},
                  "64 hex digits"},
        std::pair{"{\"operators\": [" + entry("x", "viewer", "t1") + ", "
                    + entry("x", "operator", "t2") + "]}",
                  "unique"}}) {
    auto path = write_file("bad.json", text);
    err.clear();
    EXPECT_FALSE(ops.load(path, err)) << text;
    EXPECT_NE(err.find(why), std::string::npos) << err;
  }
  EXPECT_TRUE(ops.empty());
  EXPECT_FALSE(ops.load(::testing::TempDir() + "missing.json", err));
}

TEST(console_audit, the_ring_keeps_the_newest) {
  console_audit audit;
  std::string err;
  auto path = ::testing::TempDir() + "audit.log";
  std::remove(path.c_str());
  ASSERT_TRUE(audit.open(path, err)) << err;
  for (size_t i = 0; i < console_audit::ring_size + 5; ++i)
    audit.write("{\"n\":" + std::to_string(i) + "}");
  auto ring = nlohmann::json::parse(audit.recent_json());
  ASSERT_EQ(ring.size(), console_audit::ring_size);
  EXPECT_EQ(ring.front()["n"], 5);
  EXPECT_EQ(ring.back()["n"], console_audit::ring_size + 4);
  std::ifstream in{path};
  size_t lines = 0;
  for (std::string l; std::getline(in, l);)
    ++lines;
  EXPECT_EQ(lines, console_audit::ring_size + 5); // the file keeps all
}
