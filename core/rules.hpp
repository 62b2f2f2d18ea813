#pragma once

// Match rules of a queue (problem 11 of docs/design.md, docs/rules.md):
// declared attributes, the rules over them, their validation, and the
// compact forms the claim script reads (lua/lib/rules.lua). No CAF, no JSON
// types in this header.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/outcome.hpp"
#include "core/shape.hpp"

namespace mm {

enum class attr_type : uint8_t { number, string, list };

/// One attribute a queue declares. Joins may carry only declared ones.
struct attribute_decl {
  std::string name;
  attr_type type = attr_type::number;
  double min = -1e9; ///< number: accepted range
  double max = 1e9;
  std::vector<std::string>
    values;               ///< string, list: allowed values (empty: any)
  uint32_t max_items = 8; ///< list: at most this many values
};

enum class rule_kind : uint8_t { distance, equal, overlap, avoid };

/// One rule. A pair is compatible when every rule accepts it, and a rule
/// accepts only what BOTH users accept under their own current windows.
struct rule {
  rule_kind kind = rule_kind::equal;
  std::string attribute; ///< empty for avoid
  // distance: window(t) = min(cap, base + step * floor(t / every_ms))
  double base = 0;
  double step = 0;
  uint32_t every_ms = 0;
  double cap = 0;
  /// distance: width of the value bands waiters are indexed by (the first
  /// distance rule only; 0 elsewhere).
  double band = 0;
  /// equal, overlap, avoid: after this wait the rule no longer refuses a
  /// pair whose two users have both waited this long (0: never).
  uint32_t relax_after_ms = 0;
  uint32_t last = 0; ///< avoid: how many recent partners are avoided
};

/// The rules of one queue.
struct rule_set {
  std::vector<attribute_decl> attributes;
  std::vector<rule> rules;
  /// The compact form the claim script reads (lua/lib/rules.lua).
  std::string spec;
  /// The queue's match shape (docs/groups.md); a pair when absent.
  queue_shape shape;
  bool has_shape = false; ///< declared and not a plain pair

  /// The declaration of `name`, or null.
  const attribute_decl* find(const std::string& name) const;

  /// How many recent partners the avoid rule needs (0: no avoid rule).
  uint32_t avoid_last() const;
};

/// Rule sets by queue name. Queues without an entry are plain FIFO.
using rule_book = std::map<std::string, rule_set>;

/// Limits a rule set must keep (checked by `parse_rule_book`).
constexpr size_t max_attributes = 16;
constexpr size_t max_string_len = 64;
constexpr uint32_t max_list_items = 16;
constexpr size_t max_search_cells = 256;
constexpr size_t max_member_cells = 64;

/// Parses rule sets from JSON text:
///   {"QUEUE": {"attributes": {NAME: {"type": "number"|"string"|"list",
///     "min", "max", "values", "max_items"}}, "rules": [{"kind":
///     "distance"|"equal"|"overlap"|"avoid", "attribute", "base", "step",
///     "every_s", "cap", "band", "relax_after_s", "last"}],
///     "shape": {...}}}
/// (`shape`: core/shape.hpp, docs/groups.md; a queue with a shape may have
/// no rules). Refuses anything unusable with `invalid_rules` naming the
/// queue, rule and field. Idempotent (a pure function).
outcome<rule_book> parse_rule_book(const std::string& json_text);

/// A join's attributes, checked against its queue's rules.
struct checked_attrs {
  std::string json; ///< canonical JSON object (sorted keys), carried along
  std::string rk;   ///< the rule values, positional (lua/lib/rules.lua)
};

/// Checks `json_text` (a JSON object) against `rs`: only declared
/// attributes, of their type and range, every attribute a rule uses present,
/// at most `max_attributes`, strings of [A-Za-z0-9._@-] up to
/// `max_string_len`, lists up to the declared `max_items`. Refusals are
/// `invalid_attribute` whose detail starts with the reason: wrong_type,
/// unknown_attribute, missing_attribute, too_many, too_long,
/// out_of_range, bad_value, not_an_object. Idempotent.
outcome<checked_attrs> check_attributes(const rule_set& rs,
                                        const std::string& json_text);

/// Renders the script's windows description ("1=150;2=*;3==") with the
/// rules' attribute names as a JSON object, e.g. {"skill":150,
/// "region":"any","mode":"same"}. Parts it cannot read are left out (an
/// unreadable description gives "{}").
std::string windows_json(const rule_set& rs, const std::string& described);

/// |a - b| of each distance rule's attribute between two canonical
/// attribute objects (as `check_attributes` made them), by attribute name.
/// An attribute missing or not a number on either side is left out; text
/// that is not JSON gives an empty list. Never throws.
std::vector<std::pair<std::string, double>>
pair_distances(const rule_set& rs, const std::string& json_a,
               const std::string& json_b);

/// The avoid list as the scripts take it: users joined by ','.
std::string avoid_arg(const std::vector<std::string>& partners);

} // namespace mm
