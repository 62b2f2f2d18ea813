// Rule configurations and join attributes (core/rules.hpp): every bad one
// gets a named error; good ones give the compact forms the scripts read.

#include <gtest/gtest.h>

#include "core/rules.hpp"

using namespace mm;

namespace {

std::string with_rules(const std::string& attrs, const std::string& rules) {
  return R"({"q": {"attributes": )" + attrs + R"(, "rules": )" + rules + "}}";
}

const char* attrs = R"({"skill": {"type": "number", "min": 0, "max": 5000},
                        "region": {"type": "string", "values": ["eu", "us"]},
                        "langs": {"type": "list", "max_items": 3}})";

TEST(rules, a_good_rule_set_gives_its_compact_form) {
  auto book = parse_rule_book(with_rules(attrs, R"([
    {"kind": "distance", "attribute": "skill", "base": 50, "step": 50,
     "every_s": 5, "cap": 400},
    {"kind": "equal", "attribute": "region", "relax_after_s": 30},
    {"kind": "overlap", "attribute": "langs"},
    {"kind": "avoid", "last": 3}])"));
  ASSERT_TRUE(book) << book.error().detail;
  auto& rs = book->at("q");
  EXPECT_EQ(rs.spec, "d,50,50,5000,400,100;e,30000;o,0,1;a,0");
  EXPECT_EQ(rs.avoid_last(), 3u);
  auto a = check_attributes(
    rs, R"({"skill": 1520, "region": "eu", "langs": ["ko", "en", "ko"]})");
  ASSERT_TRUE(a) << a.error().detail;
  EXPECT_EQ(a->rk, "1520|eu|ko,en|");
  EXPECT_EQ(a->json, R"({"langs":["ko","en"],"region":"eu","skill":1520.0})");
  // Big and fractional numbers keep a form the scripts read.
  auto big = parse_rule_book(with_rules(
    R"({"x": {"type": "number", "min": -1e12, "max": 1e12}})",
    R"([{"kind": "distance", "attribute": "x", "base": 1e9, "cap": 1e9}])"));
  ASSERT_TRUE(big) << big.error().detail;
  EXPECT_EQ(big->at("q").spec, "d,1000000000,0,0,1000000000,1000000000");
  auto bx = check_attributes(big->at("q"), R"({"x": -1000000000000})");
  ASSERT_TRUE(bx);
  EXPECT_EQ(bx->rk, "-1000000000000");
  auto fx = check_attributes(big->at("q"), R"({"x": 0.5})");
  ASSERT_TRUE(fx);
  EXPECT_EQ(fx->rk, "0.5");
  auto d = pair_distances(rs, a->json, R"({"skill": 1400})");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].first, "skill");
  EXPECT_EQ(d[0].second, 120);
}

TEST(rules, bad_configurations_are_named) {
  struct bad {
    std::string json, words;
  };
  std::vector<bad> cases{
    {"not json", "not JSON"},
    {"[]", "an object"},
    {R"({"a{b}": {"rules": [{"kind": "avoid"}]}})", "not a queue name"},
    {with_rules(attrs, "[]"), "1..16 rules"},
    {with_rules(attrs, R"([{"kind": "nearest", "attribute": "skill"}])"),
     "kind must be"},
    {with_rules(attrs, R"([{"kind": "distance", "attribute": "elo"}])"),
     "not declared"},
    {with_rules(attrs, R"([{"kind": "distance", "attribute": "region"}])"),
     "needs a number"},
    {with_rules(attrs, R"([{"kind": "equal", "attribute": "skill"}])"),
     "needs a string"},
    {with_rules(attrs, R"([{"kind": "overlap", "attribute": "region"}])"),
     "needs a list"},
    {with_rules(attrs, R"([{"kind": "distance", "attribute": "skill",
                            "base": 100, "cap": 50}])"),
     "cap must be"},
    {with_rules(attrs, R"([{"kind": "distance", "attribute": "skill",
                            "base": 10, "step": 5}])"),
     "step and every_s"},
    {with_rules(attrs, R"([{"kind": "distance", "attribute": "skill",
                            "base": -1}])"),
     "non-negative"},
    {with_rules(attrs, R"([{"kind": "equal", "attribute": "region",
                            "colour": 1}])"),
     "unknown field 'colour'"},
    {with_rules(attrs, R"([{"kind": "avoid"}, {"kind": "avoid"}])"),
     "at most one avoid"},
    {with_rules(attrs, R"([{"kind": "avoid", "last": 0}])"), "last must"},
    {with_rules(R"({"x": {"type": "blob"}})", R"([{"kind": "avoid"}])"),
     "type must be"},
    {with_rules(attrs, R"([{"kind": "distance", "attribute": "skill",
                            "base": 1, "cap": 5000, "band": 1}])"),
     "cells per claim"},
  };
  for (auto& c : cases) {
    auto r = parse_rule_book(c.json);
    ASSERT_FALSE(r) << c.json;
    EXPECT_EQ(r.error().code, errc::invalid_rules);
    EXPECT_NE(r.error().detail.find(c.words), std::string::npos)
      << r.error().detail << " lacks '" << c.words << "'";
  }
}

/// A queue's shape (core/shape.hpp, docs/groups.md): checked at start,
/// every bad one named.
TEST(rules, a_shape_is_checked_and_compacted) {
  auto book = parse_rule_book(R"({"q": {
    "attributes": {"skill": {"type": "number"}, "region": {"type": "string"}},
    "shape": {"players": {"min": 8, "max": 10},
              "teams": {"count": 2, "size": 5}, "party_max": 3,
              "fill_after_s": 20, "balance": "skill"}}})");
  ASSERT_TRUE(book) << book.error().detail;
  auto& rs = book->at("q");
  EXPECT_TRUE(rs.has_shape);
  EXPECT_TRUE(rs.rules.empty()) << "a shape alone: FIFO groups";
  EXPECT_EQ(rs.shape.spec, "8,10,2,5,3,20000,1");
  EXPECT_EQ(rs.shape.accept_timeout_ms, 0u) << "no ready check by default";
  EXPECT_EQ(rs.shape.backfill, queue_shape::backfill_mode::off)
    << "no backfill by default";
  for (auto [mode, want] :
       {std::pair{"off", queue_shape::backfill_mode::off},
        std::pair{"manual", queue_shape::backfill_mode::manual},
        std::pair{"auto", queue_shape::backfill_mode::automatic}}) {
    auto b = parse_rule_book(std::string{R"({"q": {"shape": {"players":
      {"min": 3, "max": 4}, "backfill": ")"}
                             + mode + R"("}}})");
    ASSERT_TRUE(b) << b.error().detail;
    EXPECT_EQ(b->at("q").shape.backfill, want) << mode;
  }
  auto pair = parse_rule_book(R"({"q": {"shape": {"players":
    {"min": 2, "max": 2}}, "rules": [{"kind": "avoid", "last": 1}]}})");
  ASSERT_TRUE(pair) << pair.error().detail;
  EXPECT_FALSE(pair->at("q").has_shape) << "2 players, parties of 1: a pair";
  for (
    const char* bad :
    {R"({"players": {"min": 1, "max": 4}})",
     R"({"players": {"min": 5, "max": 4}})",
     R"({"players": {"min": 2, "max": 65}})", R"({"players": {"min": 4}})",
     R"({"players": {"min": 4, "max": 4}, "teams": {"count": 3, "size": 2}})",
     R"({"players": {"min": 4, "max": 4}, "teams": {"count": 2, "size": 2},
             "party_max": 3})",
     R"({"players": {"min": 4, "max": 4}, "fill_after_s": 5})",
     R"({"players": {"min": 4, "max": 4}, "balance": "skill"})",
     R"({"players": {"min": 4, "max": 4}, "teams": {"count": 2, "size": 2},
             "balance": "region"})",
     R"({"players": {"min": 4, "max": 4}, "accept_timeout_s": 301})",
     R"({"players": {"min": 2, "max": 2}, "accept_timeout_s": 5})",
     R"({"players": {"min": 4, "max": 4}, "backfill": "always"})",
     R"({"players": {"min": 4, "max": 4}, "backfill": true})",
     R"({"players": {"min": 2, "max": 2}, "backfill": "auto"})",
     R"({"players": {"min": 4, "max": 4}, "colour": "red"})", R"([4])"}) {
    auto b = parse_rule_book(std::string{R"({"q": {"attributes": {"skill":
      {"type": "number"}, "region": {"type": "string"}}, "shape": )"}
                             + bad + "}}");
    ASSERT_FALSE(b) << bad;
    EXPECT_EQ(b.error().code, errc::invalid_rules) << bad;
    EXPECT_NE(b.error().detail.find("shape"), std::string::npos)
      << b.error().detail;
  }
}

TEST(rules, bad_attributes_are_named) {
  auto book = parse_rule_book(with_rules(attrs, R"([
    {"kind": "distance", "attribute": "skill", "base": 50},
    {"kind": "overlap", "attribute": "langs"}])"));
  ASSERT_TRUE(book);
  auto& rs = book->at("q");
  struct bad {
    std::string json, reason;
  };
  std::string many = "{";
  for (int i = 0; i < 17; ++i)
    many += (i ? "," : "") + std::string{"\"a"} + std::to_string(i) + "\":1";
  many += "}";
  std::vector<bad> cases{
    {"[1]", "not_an_object"},
    {"{", "not_an_object"},
    {R"({"skill": "high", "langs": ["en"]})", "wrong_type"},
    {R"({"skill": true, "langs": ["en"]})", "wrong_type"},
    {R"({"skill": 1, "langs": "en"})", "wrong_type"},
    {R"({"skill": 1, "langs": [1]})", "wrong_type"},
    {R"({"skill": 1, "langs": ["en"], "colour": "red"})", "unknown_attribute"},
    {R"({"langs": ["en"]})", "missing_attribute"},
    {R"({"skill": 1, "langs": []})", "missing_attribute"},
    {many, "too_many"},
    {R"({"skill": 1, "langs": ["a", "b", "c", "d"]})", "too_long"},
    {R"({"skill": 1, "langs": ["en"], "region": ")" + std::string(65, 'x')
       + "\"}",
     "too_long"},
    {R"({"skill": 9000, "langs": ["en"]})", "out_of_range"},
    {R"({"skill": 1, "langs": ["e n"]})", "bad_value"},
    {R"({"skill": 1, "langs": ["en"], "region": "mars"})", "bad_value"},
    {R"({"skill": 1, "langs": ["en"], "region": "e|u"})", "bad_value"},
    {R"({"skill": 1, "langs": ["\u00ff"]})", "bad_value"},
    {std::string(4097, ' '), "too_long"},
  };
  for (auto& c : cases) {
    auto r = check_attributes(rs, c.json);
    ASSERT_FALSE(r) << c.json;
    EXPECT_EQ(r.error().code, errc::invalid_attribute);
    EXPECT_EQ(r.error().detail.rfind(c.reason + ":", 0), 0u)
      << c.json << " -> " << r.error().detail;
  }
}

TEST(rules, windows_render_with_attribute_names) {
  auto book = parse_rule_book(with_rules(attrs, R"([
    {"kind": "distance", "attribute": "skill", "base": 50},
    {"kind": "equal", "attribute": "region", "relax_after_s": 1}])"));
  ASSERT_TRUE(book);
  EXPECT_EQ(windows_json(book->at("q"), "1=150;2=*"),
            R"({"region":"any","skill":150.0})");
  EXPECT_EQ(windows_json(book->at("q"), "garbage;9=1;x=2"), "{}");
}

} // namespace
