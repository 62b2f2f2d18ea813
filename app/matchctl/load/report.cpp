// The report of `matchctl load` (app/matchctl/load/report.hpp): summing the
// records up, the text report and the JSON file.

#include "app/matchctl/load/report.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/stats.hpp"

namespace mm::load {

namespace {

using json = nlohmann::json;
using uf = user_record::flag;

/// "state:detail" with the parts that differ per user (quoted names, ids,
/// numbers) left out, so that the report can count the kinds.
std::string detail_shape(const std::string& state, const std::string& detail) {
  std::string out = state + ":";
  std::size_t pos = 0;
  bool first = true;
  while (pos < detail.size() && detail[pos] != ';' && out.size() < 64) {
    auto end = detail.find_first_of(" ;", pos);
    if (end == std::string::npos)
      end = detail.size();
    auto word = detail.substr(pos, end - pos);
    if (!word.empty()
        && word.find_first_of("0123456789'\"") == std::string::npos) {
      out += (first ? "" : " ") + word;
      first = false;
    }
    pos = end;
    if (pos < detail.size() && detail[pos] == ' ')
      ++pos;
  }
  if (first)
    out += detail.empty() ? "-" : "?";
  return out;
}

distribution distribution_of(std::vector<double> v) {
  distribution d;
  d.p50 = percentile(v, 0.50, rank_rule::nearest);
  d.p95 = percentile(v, 0.95, rank_rule::nearest);
  d.p99 = percentile(v, 0.99, rank_rule::nearest);
  d.max = percentile(v, 1.0, rank_rule::nearest); // the largest
  return d;
}

std::string fixed1(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::string fixed2(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

std::string to_text(const distribution& d) {
  return "p50 " + fixed1(d.p50) + " ms, p95 " + fixed1(d.p95) + " ms, p99 "
         + fixed1(d.p99) + " ms, max " + fixed1(d.max) + " ms";
}

json to_json(const distribution& d) {
  return json{{"p50", d.p50}, {"p95", d.p95}, {"p99", d.p99}, {"max", d.max}};
}

/// One line about one user, for the examples of violations.
std::string describe_user(const load_options& opts,
                          const std::vector<user_record>& recs, uint32_t u) {
  static const char* names[]
    = {"started",       "ws_open",           "join_sent",      "join_ok",
       "join_refused",  "join_error",        "cancel_planned", "cancel_sent",
       "cancel_acked",  "cancel_late",       "got_event",      "told_matched",
       "ended",         "shutdown_notice",   "ws_failed",      "done",
       "final_waiting", "final_unreachable", "final_unknown",  "multi_session",
       "bad_event",     "end_sent",          "session_over",   "lived",
       "gave_up",       "told_stale"};
  auto& r = recs[u];
  std::string text = opts.user_name(u) + " [";
  for (std::size_t b = 0; b < std::size(names); ++b)
    if (r.flags & (1u << b))
      text += std::string(text.back() == '[' ? "" : " ") + names[b];
  text += "]";
  if (!r.session.empty())
    text += " event " + r.session + " partner "
            + (r.partner >= 0 ? opts.user_name(r.partner) : "?");
  if (!r.told_session.empty())
    text += " told " + r.told_session;
  if (!r.detail.empty())
    text += " " + r.detail;
  if (opts.cycles > 1) {
    auto& c = r.counts;
    text += " cycle " + std::to_string(r.cycle) + " ticket " + r.ticket
            + " (completed " + std::to_string(c.completed) + ", matches "
            + std::to_string(c.matches) + ", ends seen "
            + std::to_string(c.ends_seen) + ")";
  }
  auto ms = [](int64_t us) {
    return us < 0 ? std::string("-") : fixed1(us / 1000.0);
  };
  return text + " t0 " + ms(r.t0_us) + " join " + ms(r.join_us) + " event "
         + ms(r.event_us) + " ms";
}

} // namespace

load_summary summarize(const load_options& opts,
                       const std::vector<user_record>& recs,
                       const run_extras& run) {
  load_summary s;
  bool cycles = opts.cycles > 1;
  std::unordered_map<std::string, bool> session_ids;
  for (std::size_t i = 0; i < recs.size(); ++i) {
    auto& r = recs[i];
    if (!r.has(uf::started))
      continue;
    auto& c = r.counts;
    s.started++;
    if (c.joins_ok > 0)
      s.joined++;
    s.joins_sent += c.joins_sent;
    s.joins_ok += c.joins_ok;
    s.joins_refused += c.joins_refused;
    if (!cycles) {
      if (r.has(uf::got_event))
        session_ids.emplace(r.session, true);
      if (!r.told_session.empty())
        session_ids.emplace(r.told_session, true);
    }
    // A join answered "matched" whose event never came counts too.
    bool told_only = r.has(uf::told_matched) && !r.has(uf::got_event);
    uint64_t matches = c.matches + (told_only ? 1 : 0);
    if (matches > 0) {
      s.matched += matches;
      s.matched_users.push_back(opts.user_name(i));
    }
    if (c.cancels_sent > 0) {
      s.cancel_requested += c.cancels_sent;
      s.cancel_requested_users.push_back(opts.user_name(i));
    }
    if (c.cancels_acked > 0) {
      s.cancelled += c.cancels_acked;
      s.cancelled_users.push_back(opts.user_name(i));
    }
    s.cancel_too_late += c.cancels_late;
    bool matched_now = r.has(uf::got_event) || r.has(uf::told_matched);
    if (r.has(uf::final_waiting) && !matched_now) {
      s.waiting++;
      s.waiting_users.push_back(opts.user_name(i));
    }
    if (r.has(uf::shutdown_notice))
      s.notices++;
    if (r.has(uf::final_unreachable))
      s.unreachable++;
    if (r.has(uf::ended) && !r.has(uf::cancel_acked)) {
      s.ended++;
      auto colon = r.detail.find(':');
      s.ended_details[detail_shape(r.detail.substr(0, colon),
                                   colon == std::string::npos
                                     ? std::string()
                                     : r.detail.substr(colon + 1))]++;
    }
    if (r.has(uf::ws_failed))
      s.ws_failed++;
    s.cycles_completed += c.completed;
  }
  for (auto& e : run.extras)
    session_ids.emplace(e.session, true);
  s.sessions = cycles ? run.sessions_seen : session_ids.size();
  auto per_s = [&](double n, int64_t until_us) {
    auto from_us = run.first_join_us;
    return from_us >= 0 && until_us > from_us ? n / ((until_us - from_us) / 1e6)
                                              : 0;
  };
  s.matches_per_s = per_s(static_cast<double>(s.sessions), run.last_event_us);
  s.cycles_planned = static_cast<uint64_t>(opts.users) * opts.cycles;
  s.sessions_ended = run.sessions_ended;
  s.cycles_per_s = per_s(static_cast<double>(s.cycles_completed),
                         run.last_cycle_us);
  for (auto& [k, v] : run.errors)
    s.error_total += v;
  s.availability = s.joins_sent > 0 ? static_cast<double>(s.joins_ok)
                                        / static_cast<double>(s.joins_sent)
                                    : 0.0;
  s.time_to_match = distribution_of(run.match_ms);
  s.ws_connect = distribution_of(run.connect_ms);
  s.join = distribution_of(run.join_ms);
  return s;
}

void print_report(std::ostream& out, const load_options& opts,
                  const std::vector<user_record>& recs, const run_extras& run,
                  const load_summary& s, const checker_result& c) {
  out << "users            " << s.started << " started of " << opts.users
      << ", " << s.joined << " joined\n";
  out << "matched          " << s.matched
      << (opts.cycles > 1 ? " user-matches in " : " users in ") << s.sessions
      << " sessions, " << fixed1(s.matches_per_s) << " matches/s\n";
  if (opts.cycles > 1)
    out << "cycles           " << s.cycles_completed << " of "
        << s.cycles_planned << " completed, " << s.sessions_ended
        << " sessions ended, " << fixed1(s.cycles_per_s) << " cycles/s\n";
  out << "cancelled        " << s.cancelled << " of " << s.cancel_requested
      << " requested, " << s.cancel_too_late << " too late\n";
  out << "waiting          " << s.waiting << "\n";
  out << "ended by server  " << s.ended << " (" << s.notices
      << " shutdown notices), unreachable " << s.unreachable << "\n";
  if (!s.ended_details.empty()) {
    out << "ended as        ";
    for (auto& [k, v] : s.ended_details)
      out << " " << k << "=" << v;
    out << "\n";
  }
  out << "time to match    " << to_text(s.time_to_match) << "\n";
  out << "ws connect       " << to_text(s.ws_connect) << "\n";
  out << "join answer      " << to_text(s.join) << "\n";
  out << "duration         " << fixed1(run.duration_s) << " s\n";
  if (run.duplicates > 0)
    out << "duplicate events " << run.duplicates << " (deduplicated)\n";
  if (c.unobserved > 0)
    out << "unobserved       " << c.unobserved
        << " matches of users whose WebSocket had failed\n";
  for (auto& [kind, u] : c.examples)
    out << "example " << kind << ": " << describe_user(opts, recs, u) << "\n";
  out << "errors           " << s.error_total;
  for (auto& [k, v] : run.errors)
    out << " " << k << "=" << v;
  out << "\n";
  // The last two lines are for scripts: keep their form.
  out << "availability=" << fixed2(s.availability) << " joins=" << s.joins_sent
      << " answered=" << s.joins_ok << " min=" << fixed2(opts.min_availability)
      << "\n";
  out << "verdict=" << c.verdict() << " users=" << s.started
      << " matched=" << s.matched << " cancelled=" << s.cancelled
      << " waiting=" << s.waiting << " errors=" << s.error_total
      << " matches_per_s=" << fixed1(s.matches_per_s)
      << " p50_ms=" << fixed1(s.time_to_match.p50)
      << " p95_ms=" << fixed1(s.time_to_match.p95)
      << " p99_ms=" << fixed1(s.time_to_match.p99)
      << " double_bookings=" << c.double_bookings
      << " lost_users=" << c.lost_users
      << " undelivered_events=" << c.undelivered_events
      << " cancelled_but_matched=" << c.cancelled_but_matched;
  if (opts.cycles > 1)
    out << " cycles=" << s.cycles_completed
        << " sessions_ended=" << s.sessions_ended
        << " cycles_per_s=" << fixed1(s.cycles_per_s)
        << " overlapping_sessions=" << c.overlapping_sessions
        << " missing_session_ended=" << c.missing_session_ended
        << " end_mismatches=" << c.end_mismatches
        << " in_session_after_end=" << c.in_session_after_end;
  out << std::endl;
}

bool write_json(const std::string& file, const load_options& opts,
                const run_extras& run, const load_summary& s,
                const checker_result& c) {
  json report{
    {"users", opts.users},
    {"started", s.started},
    {"joined", s.joined},
    {"matched", s.matched},
    {"sessions", s.sessions},
    {"cancel_requested", s.cancel_requested},
    {"cancelled", s.cancelled},
    {"cancel_too_late", s.cancel_too_late},
    {"waiting", s.waiting},
    {"shutdown_notices", s.notices},
    {"unreachable", s.unreachable},
    {"ended_by_server", s.ended},
    {"ended_details", s.ended_details},
    {"ws_failed", s.ws_failed},
    {"duplicate_events", run.duplicates},
    {"unobserved_matches", c.unobserved},
    {"errors", run.errors},
    {"duration_s", run.duration_s},
    {"matches_per_s", s.matches_per_s},
    {"joins_sent", s.joins_sent},
    {"joins_ok", s.joins_ok},
    {"availability", s.availability},
    {"time_to_match_ms", to_json(s.time_to_match)},
    {"ws_connect_ms", to_json(s.ws_connect)},
    {"join_ms", to_json(s.join)},
    {"checker",
     {{"double_bookings", c.double_bookings},
      {"lost_users", c.lost_users},
      {"undelivered_events", c.undelivered_events},
      {"cancelled_but_matched", c.cancelled_but_matched},
      {"verdict", c.verdict()}}},
    {"matched_users", s.matched_users},
    {"cancelled_users", s.cancelled_users},
    {"waiting_users", s.waiting_users},
    {"cancel_requested_users", s.cancel_requested_users},
  };
  auto& lost = report["lost_users"] = json::array();
  for (auto u : c.lost)
    lost.push_back(opts.user_name(u));
  if (opts.cycles > 1) {
    report["cycles"] = json{{"planned", s.cycles_planned},
                            {"completed", s.cycles_completed},
                            {"sessions_ended", s.sessions_ended},
                            {"cycles_per_s", s.cycles_per_s},
                            {"hold_ms", opts.hold_ms}};
    auto& checker = report["checker"];
    checker["overlapping_sessions"] = c.overlapping_sessions;
    checker["missing_session_ended"] = c.missing_session_ended;
    checker["end_mismatches"] = c.end_mismatches;
    checker["in_session_after_end"] = c.in_session_after_end;
  }
  std::ofstream f(file);
  f << report.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  f.close();
  return static_cast<bool>(f);
}

} // namespace mm::load
