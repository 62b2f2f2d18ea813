#pragma once

// `matchctl explain`: a dry run of a queue's rules for two tickets — why
// they would (not) be paired now (docs/rules.md). Runs the claim's own
// compatibility test (lua/explain.lua) on the embedded store in-process, so
// it needs no server and answers exactly what a claim would decide.

#include <cstdint>
#include <ostream>
#include <string>

namespace mm {

struct explain_options {
  std::string rules_file; ///< the node's --rules file
  std::string queue;
  struct side {
    std::string attrs;   ///< JSON object, as a join would send it
    double waited_s = 0; ///< how long this ticket has waited
    std::string user = "a";
    std::string avoid; ///< its recent partners, ','-separated
  } a, b;
};

/// Prints one JSON object to `out`: {"compatible": bool, "rule": N,
/// "attribute": NAME, "reason": TEXT, "windows_a": {...}, "windows_b":
/// {...}} or {"error": NAME, "detail": TEXT}. Returns the exit code: 0
/// compatible, 1 incompatible, 2 bad input. Idempotent.
int run_explain(const explain_options& opts, std::ostream& out);

} // namespace mm
