#include "core/rules.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

namespace mm {

namespace {

using json = nlohmann::json;

// Integers as plain digits, others as the shortest round-trip text; Lua's
// tonumber reads both back.
std::string num(double x) {
  char buf[64];
  if (x == std::floor(x) && std::fabs(x) < 1e15) {
    std::snprintf(buf, sizeof(buf), "%.0f", x);
    return buf;
  }
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), x);
  if (ec != std::errc{})
    return "0";
  return std::string(buf, end);
}

bool valid_value(const std::string& s) {
  if (s.empty() || s.size() > max_string_len)
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
           || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '@'
           || c == '-';
  });
}

failure bad_rules(const std::string& where, const std::string& what) {
  return failure{errc::invalid_rules, where + ": " + what};
}

// Reads an optional non-negative number field; false on a wrong type.
bool opt_number(const json& j, const char* key, double& out, double lo,
                double hi) {
  auto it = j.find(key);
  if (it == j.end())
    return true;
  if (!it->is_number() || it->is_boolean())
    return false;
  double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi)
    return false;
  out = v;
  return true;
}

outcome<attribute_decl> parse_decl(const std::string& where,
                                   const std::string& name, const json& j) {
  attribute_decl d;
  d.name = name;
  if (!valid_value(name))
    return bad_rules(where, "attribute names use [A-Za-z0-9._@-], 1..64");
  if (!j.is_object())
    return bad_rules(where, "a declaration is an object");
  static const std::set<std::string> known{"type", "min", "max", "values",
                                           "max_items"};
  for (auto& [k, v] : j.items())
    if (!known.count(k))
      return bad_rules(where, "unknown field '" + k + "'");
  auto t = j.find("type");
  if (t == j.end() || !t->is_string())
    return bad_rules(where, "type must be number, string or list");
  auto type = t->get<std::string>();
  if (type == "number")
    d.type = attr_type::number;
  else if (type == "string")
    d.type = attr_type::string;
  else if (type == "list")
    d.type = attr_type::list;
  else
    return bad_rules(where, "type must be number, string or list");
  if (!opt_number(j, "min", d.min, -1e12, 1e12)
      || !opt_number(j, "max", d.max, -1e12, 1e12) || d.min > d.max)
    return bad_rules(where, "min/max must be numbers, min <= max");
  double items = d.max_items;
  if (!opt_number(j, "max_items", items, 1, max_list_items)
      || items != std::floor(items))
    return bad_rules(where, "max_items must be an integer in 1.."
                              + std::to_string(max_list_items));
  d.max_items = static_cast<uint32_t>(items);
  if (auto v = j.find("values"); v != j.end()) {
    if (!v->is_array() || v->empty() || v->size() > 1024)
      return bad_rules(where, "values must be a list of 1..1024 strings");
    for (auto& x : *v) {
      if (!x.is_string() || !valid_value(x.get<std::string>()))
        return bad_rules(where, "values use [A-Za-z0-9._@-], 1..64 bytes");
      d.values.push_back(x.get<std::string>());
    }
  }
  return d;
}

outcome<rule> parse_rule(const std::string& where, const json& j,
                         const std::vector<attribute_decl>& decls) {
  if (!j.is_object())
    return bad_rules(where, "a rule is an object");
  static const std::set<std::string> known{"kind", "attribute",     "base",
                                           "step", "every_s",       "cap",
                                           "band", "relax_after_s", "last"};
  for (auto& [k, v] : j.items())
    if (!known.count(k))
      return bad_rules(where, "unknown field '" + k + "'");
  rule r;
  auto k = j.find("kind");
  if (k == j.end() || !k->is_string())
    return bad_rules(where, "kind must be distance, equal, overlap or avoid");
  auto kind = k->get<std::string>();
  attr_type want = attr_type::number;
  if (kind == "distance") {
    r.kind = rule_kind::distance;
  } else if (kind == "equal") {
    r.kind = rule_kind::equal;
    want = attr_type::string;
  } else if (kind == "overlap") {
    r.kind = rule_kind::overlap;
    want = attr_type::list;
  } else if (kind == "avoid") {
    r.kind = rule_kind::avoid;
  } else {
    return bad_rules(where, "kind must be distance, equal, overlap or avoid");
  }
  double relax = 0;
  if (!opt_number(j, "relax_after_s", relax, 0, 86400))
    return bad_rules(where, "relax_after_s must be a number of seconds, "
                            "0..86400");
  r.relax_after_ms = static_cast<uint32_t>(std::llround(relax * 1000));
  if (r.kind == rule_kind::avoid) {
    if (j.count("attribute"))
      return bad_rules(where, "avoid takes no attribute");
    double last = 1;
    if (!opt_number(j, "last", last, 1, 32) || last != std::floor(last))
      return bad_rules(where, "last must be an integer in 1..32");
    r.last = static_cast<uint32_t>(last);
    return r;
  }
  auto a = j.find("attribute");
  if (a == j.end() || !a->is_string())
    return bad_rules(where, "attribute is required");
  r.attribute = a->get<std::string>();
  auto d = std::find_if(decls.begin(), decls.end(),
                        [&](auto& x) { return x.name == r.attribute; });
  if (d == decls.end())
    return bad_rules(where, "attribute '" + r.attribute + "' is not declared");
  if (d->type != want)
    return bad_rules(where, kind + " needs a "
                              + (want == attr_type::number   ? "number"
                                 : want == attr_type::string ? "string"
                                                             : "list")
                              + " attribute");
  if (r.kind == rule_kind::distance) {
    if (relax != 0)
      return bad_rules(where, "distance widens by step/every_s/cap, "
                              "relax_after_s is for equal/overlap/avoid");
    double every = 0;
    if (!opt_number(j, "base", r.base, 0, 1e12)
        || !opt_number(j, "step", r.step, 0, 1e12)
        || !opt_number(j, "every_s", every, 0, 86400))
      return bad_rules(where, "base, step, every_s must be non-negative "
                              "numbers");
    r.every_ms = static_cast<uint32_t>(std::llround(every * 1000));
    r.cap = r.base;
    if (!opt_number(j, "cap", r.cap, 0, 1e12) || r.cap < r.base)
      return bad_rules(where, "cap must be a number >= base");
    if ((r.step > 0) != (r.every_ms > 0))
      return bad_rules(where, "step and every_s go together");
    if (!opt_number(j, "band", r.band, 0, 1e12))
      return bad_rules(where, "band must be a positive number");
  } else if (j.count("base") || j.count("step") || j.count("every_s")
             || j.count("cap") || j.count("band") || j.count("last")) {
    return bad_rules(where, "only distance takes base/step/every_s/cap/band");
  }
  return r;
}

// The compact rule string of lua/lib/rules.lua; also picks the indexes and
// checks that the index stays bounded.
outcome<std::string> make_spec(const std::string& where, rule_set& rs) {
  std::string out;
  bool banded = false, list_indexed = false;
  size_t search = 1, member = 1;
  for (auto& r : rs.rules) {
    if (!out.empty())
      out += ';';
    switch (r.kind) {
      case rule_kind::distance: {
        if (!banded) {
          banded = true;
          if (r.band <= 0)
            r.band = std::max(r.base, r.cap / 4);
          if (r.band <= 0)
            r.band = 1;
          search *= static_cast<size_t>(2 * r.cap / r.band) + 2;
        } else {
          r.band = 0;
        }
        out += "d," + num(r.base) + "," + num(r.step) + ","
               + std::to_string(r.every_ms) + "," + num(r.cap) + ","
               + num(r.band);
        break;
      }
      case rule_kind::equal:
        out += "e," + std::to_string(r.relax_after_ms);
        if (r.relax_after_ms > 0) {
          search *= 2;
          member *= 2;
        }
        break;
      case rule_kind::overlap: {
        bool index = !list_indexed;
        list_indexed = true;
        out += "o," + std::to_string(r.relax_after_ms) + (index ? ",1" : ",0");
        if (index) {
          auto items = rs.find(r.attribute)->max_items
                       + (r.relax_after_ms > 0 ? 1 : 0);
          search *= items;
          member *= items;
        }
        break;
      }
      case rule_kind::avoid:
        out += "a," + std::to_string(r.relax_after_ms);
        break;
    }
    if (search > max_search_cells || member > max_member_cells)
      return bad_rules(
        where, "the index would need up to " + std::to_string(search)
                 + " cells per claim and " + std::to_string(member)
                 + " per ticket (at most " + std::to_string(max_search_cells)
                 + " / " + std::to_string(max_member_cells)
                 + "): widen the band, shorten max_items or "
                   "relax fewer rules");
  }
  return out;
}

outcome<rule_set> parse_rule_set(const std::string& queue, const json& j) {
  auto where = "queue '" + queue + "'";
  if (!j.is_object())
    return bad_rules(where, "must be an object with attributes and rules");
  for (auto& [k, v] : j.items())
    if (k != "attributes" && k != "rules" && k != "shape")
      return bad_rules(where, "unknown field '" + k + "'");
  rule_set rs;
  auto attrs = j.find("attributes");
  if (attrs != j.end()) {
    if (!attrs->is_object() || attrs->size() > max_attributes)
      return bad_rules(where, "attributes: an object of at most "
                                + std::to_string(max_attributes));
    for (auto& [name, decl] : attrs->items()) {
      auto d = parse_decl(where + ", attribute '" + name + "'", name, decl);
      if (!d)
        return d.error();
      rs.attributes.push_back(std::move(*d));
    }
  }
  if (auto shape = j.find("shape"); shape != j.end()) {
    std::vector<std::string> numbers;
    for (auto& d : rs.attributes)
      if (d.type == attr_type::number)
        numbers.push_back(d.name);
    auto s = parse_shape(where, shape->dump(), numbers);
    if (!s)
      return s.error();
    rs.shape = std::move(*s);
    rs.has_shape = !rs.shape.is_pair();
  }
  auto rules = j.find("rules");
  if (rules == j.end() && rs.has_shape)
    return rs; // a shape alone: FIFO groups
  if (rules == j.end() || !rules->is_array() || rules->empty()
      || rules->size() > 16)
    return bad_rules(where, "rules: a list of 1..16 rules");
  bool avoid = false;
  for (size_t i = 0; i < rules->size(); ++i) {
    auto r = parse_rule(where + ", rule " + std::to_string(i + 1), (*rules)[i],
                        rs.attributes);
    if (!r)
      return r.error();
    if (r->kind == rule_kind::avoid) {
      if (avoid)
        return bad_rules(where, "at most one avoid rule");
      avoid = true;
    }
    rs.rules.push_back(std::move(*r));
  }
  auto spec = make_spec(where, rs);
  if (!spec)
    return spec.error();
  rs.spec = std::move(*spec);
  return rs;
}

failure bad_attr(const std::string& reason, const std::string& what) {
  return failure{errc::invalid_attribute, reason + ": " + what};
}

} // namespace

const attribute_decl* rule_set::find(const std::string& name) const {
  for (auto& d : attributes)
    if (d.name == name)
      return &d;
  return nullptr;
}

uint32_t rule_set::avoid_last() const {
  for (auto& r : rules)
    if (r.kind == rule_kind::avoid)
      return r.last;
  return 0;
}

outcome<rule_book> parse_rule_book(const std::string& json_text) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const std::exception& e) {
    return bad_rules("rules", std::string{"not JSON: "} + e.what());
  }
  if (!j.is_object())
    return bad_rules("rules", "an object of queue name -> rule set");
  rule_book book;
  for (auto& [queue, rs] : j.items()) {
    if (queue.empty() || queue.size() > 64
        || queue.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
                                   "OPQRSTUVWXYZ0123456789._:-")
             != std::string::npos)
      return bad_rules("rules", "'" + queue + "' is not a queue name");
    auto parsed = parse_rule_set(queue, rs);
    if (!parsed)
      return parsed.error();
    book.emplace(queue, std::move(*parsed));
  }
  return book;
}

outcome<checked_attrs> check_attributes(const rule_set& rs,
                                        const std::string& json_text) {
  if (json_text.size() > 4096)
    return bad_attr("too_long", "attrs: at most 4096 bytes");
  json j;
  try {
    j = json::parse(json_text.empty() ? std::string{"{}"} : json_text);
  } catch (const std::exception&) {
    return bad_attr("not_an_object", "attrs must be a JSON object");
  }
  if (!j.is_object())
    return bad_attr("not_an_object", "attrs must be a JSON object");
  if (j.size() > max_attributes)
    return bad_attr("too_many", "at most " + std::to_string(max_attributes)
                                  + " attributes");
  json canon = json::object();
  for (auto& [name, v] : j.items()) {
    auto* d = rs.find(name);
    if (d == nullptr)
      return bad_attr("unknown_attribute",
                      "'" + (valid_value(name) ? name : std::string{"?"})
                        + "' is not an attribute of this queue");
    switch (d->type) {
      case attr_type::number: {
        if (!v.is_number() || v.is_boolean())
          return bad_attr("wrong_type", name + " must be a number");
        double x = v.get<double>();
        if (!std::isfinite(x) || x < d->min || x > d->max)
          return bad_attr("out_of_range", name + " must be in " + num(d->min)
                                            + ".." + num(d->max));
        canon[name] = x;
        break;
      }
      case attr_type::string: {
        if (!v.is_string())
          return bad_attr("wrong_type", name + " must be a string");
        auto s = v.get<std::string>();
        if (s.size() > max_string_len)
          return bad_attr("too_long", name + ": at most "
                                        + std::to_string(max_string_len)
                                        + " bytes");
        if (!valid_value(s))
          return bad_attr("bad_value", name
                                         + " uses [A-Za-z0-9._@-], "
                                           "1..64 bytes");
        if (!d->values.empty()
            && std::find(d->values.begin(), d->values.end(), s)
                 == d->values.end())
          return bad_attr("bad_value", name
                                         + ": not one of the declared "
                                           "values");
        canon[name] = s;
        break;
      }
      case attr_type::list: {
        if (!v.is_array())
          return bad_attr("wrong_type", name + " must be a list of strings");
        if (v.size() > d->max_items)
          return bad_attr("too_long", name + ": at most "
                                        + std::to_string(d->max_items)
                                        + " values");
        std::vector<std::string> items;
        for (auto& x : v) {
          if (!x.is_string())
            return bad_attr("wrong_type", name + " must be a list of strings");
          auto s = x.get<std::string>();
          if (!valid_value(s))
            return bad_attr("bad_value", name
                                           + ": values use "
                                             "[A-Za-z0-9._@-], 1..64 bytes");
          if (!d->values.empty()
              && std::find(d->values.begin(), d->values.end(), s)
                   == d->values.end())
            return bad_attr("bad_value",
                            name + ": '" + s + "' is not a declared value");
          if (std::find(items.begin(), items.end(), s) == items.end())
            items.push_back(std::move(s));
        }
        canon[name] = items;
        break;
      }
    }
  }
  checked_attrs out;
  for (size_t i = 0; i < rs.rules.size(); ++i) {
    auto& r = rs.rules[i];
    if (i > 0)
      out.rk += '|';
    if (r.kind == rule_kind::avoid)
      continue;
    auto it = canon.find(r.attribute);
    if (it == canon.end() || (it->is_array() && it->empty()))
      return bad_attr("missing_attribute",
                      r.attribute + " is required by the queue's rules");
    if (it->is_number()) {
      out.rk += num(it->get<double>());
    } else if (it->is_string()) {
      out.rk += it->get<std::string>();
    } else {
      bool first = true;
      for (auto& x : *it) {
        if (!first)
          out.rk += ',';
        first = false;
        out.rk += x.get<std::string>();
      }
    }
  }
  out.json = canon.dump();
  return out;
}

std::string windows_json(const rule_set& rs, const std::string& described) {
  json out = json::object();
  size_t pos = 0;
  while (pos < described.size()) {
    auto end = described.find(';', pos);
    if (end == std::string::npos)
      end = described.size();
    auto part = described.substr(pos, end - pos);
    pos = end + 1;
    auto eq = part.find('=');
    if (eq == std::string::npos)
      continue;
    size_t i = 0;
    auto [p, ec] = std::from_chars(part.data(), part.data() + eq, i);
    if (ec != std::errc{} || i == 0 || i > rs.rules.size())
      continue;
    auto& r = rs.rules[i - 1];
    auto value = part.substr(eq + 1);
    auto key = r.kind == rule_kind::avoid ? std::string{"avoid"} : r.attribute;
    if (r.kind == rule_kind::distance) {
      double w = 0;
      auto [q, ec2] = std::from_chars(value.data(), value.data() + value.size(),
                                      w);
      if (ec2 == std::errc{})
        out[key] = w;
    } else {
      out[key] = value == "*" ? "any" : "same";
    }
  }
  return out.dump();
}

std::vector<std::pair<std::string, double>>
pair_distances(const rule_set& rs, const std::string& json_a,
               const std::string& json_b) {
  std::vector<std::pair<std::string, double>> out;
  try {
    auto a = json::parse(json_a);
    auto b = json::parse(json_b);
    for (auto& r : rs.rules) {
      if (r.kind != rule_kind::distance)
        continue;
      auto x = a.find(r.attribute);
      auto y = b.find(r.attribute);
      if (x != a.end() && y != b.end() && x->is_number() && y->is_number())
        out.emplace_back(r.attribute,
                         std::fabs(x->get<double>() - y->get<double>()));
    }
  } catch (const std::exception&) {
    // not attributes of this rule set: nothing to report
  }
  return out;
}

std::string avoid_arg(const std::vector<std::string>& partners) {
  std::string out;
  for (auto& p : partners) {
    if (!out.empty())
      out += ',';
    out += p;
  }
  return out;
}

} // namespace mm
