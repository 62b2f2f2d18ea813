#include "app/matchctl/explain.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/rules.hpp"
#include "persistence/queue/queue_codec.hpp"
#include "persistence/queue/queue_store.hpp"

namespace mm {

namespace {

using json = nlohmann::json;

int refuse(std::ostream& out, const failure& f) {
  out << json{{"error", to_string(f.code)}, {"detail", f.detail}}.dump()
      << "\n";
  return 2;
}

} // namespace

int run_explain(const explain_options& opts, std::ostream& out) {
  std::ifstream in(opts.rules_file);
  std::stringstream text;
  text << in.rdbuf();
  if (!in)
    return refuse(out, {errc::invalid_argument,
                        "cannot read '" + opts.rules_file + "'"});
  auto book = parse_rule_book(text.str());
  if (!book)
    return refuse(out, book.error());
  auto it = book->find(opts.queue);
  if (it == book->end())
    return refuse(out, {errc::unknown_queue,
                        "no rules for queue '" + opts.queue + "'"});
  auto& rs = it->second;
  codec::explain_side sides[2];
  const explain_options::side* given[2] = {&opts.a, &opts.b};
  for (int i = 0; i < 2; ++i) {
    auto checked = check_attributes(rs, given[i]->attrs);
    if (!checked)
      return refuse(out, checked.error());
    if (!std::isfinite(given[i]->waited_s) || given[i]->waited_s < 0
        || given[i]->waited_s > 1e9)
      return refuse(out, {errc::invalid_argument, "waited: seconds >= 0"});
    sides[i] = codec::explain_side{
      checked->rk,
      static_cast<int64_t>(std::llround(given[i]->waited_s * 1000)),
      given[i]->user, given[i]->avoid};
  }
  auto call = codec::explain_call(rs.spec, sides[0], sides[1]);
  if (!call)
    return refuse(out, call.error());
  auto conn = make_embedded_store({})->connect();
  auto res = codec::parse_explain(conn->run({*call}).at(0));
  if (!res)
    return refuse(out, res.error());
  json j{{"compatible", res->compatible},
         {"windows_a", json::parse(windows_json(rs, res->windows_a))},
         {"windows_b", json::parse(windows_json(rs, res->windows_b))}};
  if (!res->compatible) {
    j["rule"] = res->rule;
    if (res->rule >= 1 && res->rule <= rs.rules.size()) {
      auto& r = rs.rules[res->rule - 1];
      j["attribute"] = r.kind == rule_kind::avoid ? "avoid" : r.attribute;
    }
    j["reason"] = res->reason;
  }
  out << j.dump() << "\n";
  return res->compatible ? 0 : 1;
}

} // namespace mm
