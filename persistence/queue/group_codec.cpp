#include "persistence/queue/group_codec.hpp"

#include <set>

#include "core/utf8.hpp"
#include "persistence/queue/codec_util.hpp"
#include "persistence/queue/queue_codec.hpp"

namespace mm::codec {

using namespace detail;

std::vector<std::string> group_keys(const std::string& queue) {
  auto tag = "mm:{" + queue + "}:";
  return {tag + "gwait", tag + "seq", tag + "gtix", tag + "gdl", tag + "gpend"};
}

namespace {

/// The largest party a ticket may carry (the most a shape allows).
constexpr size_t max_members = 64;

script_call make_group(script_id id, const std::string& queue,
                       std::vector<std::string> args) {
  return script_call{id, group_keys(queue), std::move(args)};
}

std::string check_member(const party_member& m) {
  std::string err;
  if (!(err = check_id("user", m.user, max_id)).empty())
    return err;
  if (m.rk.size() > 2048 || m.avoid.size() > 4096 || m.balance.size() > 32)
    return "rule values, avoid list or balance value too long";
  if (m.rk.find('\0') != std::string::npos
      || m.avoid.find('\0') != std::string::npos)
    return "rule values and avoid lists hold no NUL";
  if (m.balance.find_first_not_of("-0123456789.") != std::string::npos)
    return "balance must be a number";
  if (m.attrs.size() > max_attrs)
    return "attrs is longer than " + std::to_string(max_attrs) + " bytes";
  if (m.attrs.find('\0') != std::string::npos || !valid_utf8(m.attrs))
    return "attrs must be UTF-8 without NUL";
  return {};
}

} // namespace

outcome<script_call> group_claim_call(const group_ticket_spec& spec,
                                      uint32_t scan, uint32_t hold_ms) {
  std::string err;
  const bool backfill = !spec.teams.empty();
  if (backfill != is_backfill_ticket(spec.ticket))
    return invalid("a backfill request's ticket is '~' + its session, and "
                   "has its members' teams");
  if (!(err = check_queue(spec.queue)).empty()
      || !(err = check_id("ticket",
                          backfill ? spec.ticket.substr(1) : spec.ticket,
                          backfill ? max_ticket - 1 : max_ticket))
            .empty()
      || !(err = check_id("node", spec.node, max_node)).empty()
      || !(err = check_range("ttl_ms", spec.ttl_ms, 1, max_ttl_ms)).empty()
      || !(err = check_range("scan", scan, 1, max_scan)).empty()
      || !(err = check_range("hold_ms", hold_ms, 1, max_hold_ms)).empty()
      || !(err = check_range("members", spec.members.size(), 1, max_members))
            .empty())
    return invalid(std::move(err));
  if (spec.shape.empty() || spec.shape.size() > 64 || spec.rules.size() > 1024)
    return invalid("a shape (and at most 1024 bytes of rules) is needed");
  std::set<std::string> users;
  std::vector<std::string> args{spec.ticket,
                                spec.node,
                                std::to_string(spec.ttl_ms),
                                std::to_string(scan),
                                std::to_string(hold_ms),
                                spec.rules,
                                spec.shape,
                                std::to_string(spec.members.size())};
  for (auto& m : spec.members) {
    if (!(err = check_member(m)).empty())
      return invalid("member " + m.user + ": " + err);
    if (!users.insert(m.user).second)
      return invalid("member " + m.user + " is in the party twice");
    args.insert(args.end(), {m.user, m.rk, m.avoid, m.balance, m.attrs});
  }
  if (spec.rescan || spec.accept_ms > 0 || backfill)
    args.emplace_back(spec.rescan ? "1" : "");
  if (spec.accept_ms > 0) {
    if (!(err = check_range("accept_ms", spec.accept_ms, 1, max_hold_ms))
           .empty())
      return invalid(std::move(err));
    args.push_back(std::to_string(spec.accept_ms));
  } else if (backfill) {
    args.emplace_back();
  }
  if (backfill) {
    if (spec.teams.size() != spec.members.size() || spec.former.size() > 64)
      return invalid("one team per member, and at most 64 former members");
    std::string bf;
    for (auto t : spec.teams)
      bf += (bf.empty() ? "" : ",") + std::to_string(t);
    bf += ';';
    for (size_t i = 0; i < spec.former.size(); ++i) {
      if (!(err = check_id("former member", spec.former[i], max_id)).empty())
        return invalid(std::move(err));
      bf += (i > 0 ? "," : "") + spec.former[i];
    }
    args.push_back(std::move(bf));
  }
  return make_group(script_id::group_claim, spec.queue, std::move(args));
}

outcome<group_claim_result> parse_group_claim(const store_reply& reply) {
  auto f = fields(reply);
  if (!f)
    return f.error();
  auto& x = *f;
  group_claim_result r;
  if (x[0] == "queued") {
    if (!has(x, 7))
      return short_reply(x);
    r.outcome = group_claim_outcome::queued;
    r.ticket = x[1];
    r.token = x[2];
    r.score = to_int(x[3]);
    r.deadline = to_int(x[4]);
    r.stale_removed = static_cast<uint32_t>(to_int(x[5]));
    r.more = x[6] == "1";
    return r;
  }
  if (x[0] == "claimed") {
    if (!has(x, 4))
      return short_reply(x);
    r.outcome = group_claim_outcome::claimed_by_other;
    r.ticket = x[1];
    r.token = x[2];
    r.group = x[3];
    r.in_group = true;
    return r;
  }
  if (x[0] == "gone") {
    if (!has(x, 2))
      return short_reply(x);
    r.outcome = group_claim_outcome::gone;
    r.ticket = x[1];
    return r;
  }
  if (x[0] == "removed") {
    if (!has(x, 3))
      return short_reply(x);
    r.outcome = group_claim_outcome::removed;
    r.ticket = x[1];
    r.detail = x[2];
    return r;
  }
  if (x[0] == "duplicate") {
    if (!has(x, 3))
      return short_reply(x);
    return failure{errc::duplicate_ticket,
                   "user " + x[1] + " is in ticket " + x[2]};
  }
  if (x[0] != "matched")
    return refusal(x);
  // matched, group, stale, own state, token, score, deadline, k, tickets...
  if (!has(x, 8))
    return short_reply(x);
  r.outcome = group_claim_outcome::matched;
  r.group = x[1];
  r.stale_removed = static_cast<uint32_t>(to_int(x[2]));
  r.in_group = x[3] == "claimed";
  r.held = x[3] == "held";
  r.token = x[4];
  r.score = to_int(x[5]);
  r.deadline = to_int(x[6]);
  auto k = static_cast<size_t>(to_int(x[7]));
  size_t i = 8;
  for (size_t t = 0; t < k; ++t) {
    if (!has(x, i + 6))
      return short_reply(x);
    matched_ticket m;
    m.ticket = x[i];
    m.node = x[i + 1];
    m.score = to_int(x[i + 2]);
    m.token = x[i + 3];
    m.team = static_cast<uint32_t>(to_int(x[i + 4]));
    auto n = static_cast<size_t>(to_int(x[i + 5]));
    i += 6;
    if (n == 0 || n > max_members || !has(x, i + 2 * n))
      return short_reply(x);
    for (size_t j = 0; j < n; ++j, i += 2)
      m.members.push_back(matched_member{x[i], x[i + 1]});
    r.tickets.push_back(std::move(m));
  }
  return r;
}

outcome<script_call> group_cancel_call(const std::string& queue,
                                       const std::string& user,
                                       const std::string& token) {
  std::string err;
  if (!(err = check_queue(queue)).empty()
      || !(err = check_id("user", user, max_id)).empty())
    return invalid(std::move(err));
  if (token.empty() || token.size() > 20
      || token.find_first_not_of("0123456789") != std::string::npos)
    return invalid("token must be the decimal token the queue issued");
  return make_group(script_id::group_cancel, queue, {user, token});
}

outcome<group_cancel_result> parse_group_cancel(const store_reply& reply) {
  auto f = fields(reply);
  if (!f)
    return f.error();
  auto& x = *f;
  if (x[0] == "cancelled" && has(x, 2))
    return group_cancel_result{false, x[1], {}};
  if (x[0] == "in_flight" && has(x, 3))
    return group_cancel_result{true, x[1], x[2]};
  return refusal(x);
}

outcome<script_call> backfill_cancel_call(const std::string& queue,
                                          const std::string& session_id) {
  std::string err;
  if (!(err = check_queue(queue)).empty()
      || !(err = check_id("session", session_id, max_ticket - 1)).empty())
    return invalid(std::move(err));
  return make_group(script_id::backfill_cancel, queue,
                    {backfill_ticket(session_id)});
}

outcome<group_cancel_result>
parse_backfill_cancel(const std::string& session_id, const store_reply& reply) {
  auto f = fields(reply);
  if (!f)
    return f.error();
  auto& x = *f;
  if (x[0] == "cancelled")
    return group_cancel_result{false, backfill_ticket(session_id), {}};
  if (x[0] == "in_flight" && has(x, 2))
    return group_cancel_result{true, backfill_ticket(session_id), x[1]};
  return refusal(x);
}

outcome<script_call> group_release_call(const std::string& queue,
                                        const std::string& group) {
  std::string err;
  if (!(err = check_queue(queue)).empty()
      || !(err = check_id("group", group, max_id)).empty())
    return invalid(std::move(err));
  return make_group(script_id::group_release, queue, {group});
}

outcome<script_call>
group_requeue_call(const std::string& queue, const std::string& group,
                   const std::vector<std::string>& leaving) {
  std::string err;
  if (!(err = check_queue(queue)).empty()
      || !(err = check_id("group", group, max_id)).empty())
    return invalid(std::move(err));
  std::vector<std::string> args{group};
  for (auto& t : leaving) {
    if (!(err = is_backfill_ticket(t)
                  ? check_id("ticket", t.substr(1), max_ticket - 1)
                  : check_id("ticket", t, max_ticket))
           .empty())
      return invalid(std::move(err));
    args.push_back(t);
  }
  return make_group(script_id::group_requeue, queue, std::move(args));
}

outcome<group_settle_result> parse_group_settle(const store_reply& reply) {
  auto f = fields(reply);
  if (!f)
    return f.error();
  auto& x = *f;
  if (x[0] == "gone")
    return group_settle_result{true, 0, 0};
  if (x[0] == "released" && has(x, 2))
    return group_settle_result{false, 0, static_cast<uint32_t>(to_int(x[1]))};
  if (x[0] == "requeued" && has(x, 3))
    return group_settle_result{false, static_cast<uint32_t>(to_int(x[1])),
                               static_cast<uint32_t>(to_int(x[2]))};
  return refusal(x);
}

namespace {

std::string check_answer(const proposal_answer& a) {
  std::string err;
  if (!(err = check_queue(a.queue)).empty()
      || !(err = check_id("proposal", a.proposal, max_id)).empty()
      || !(err = check_id("user", a.user, max_id)).empty())
    return err;
  if (a.answer != "accept" && a.answer != "decline" && !a.answer.empty())
    return "answer must be accept or decline";
  return {};
}

/// One answer's 8 fields of group_answer's reply, from `x[i]` on.
outcome<proposal_state> answer_at(const proposal_answer& a,
                                  const std::vector<std::string>& x, size_t i) {
  if (x[i] == "ended")
    return failure{errc::not_found, "proposal " + a.proposal + " of queue "
                                      + a.queue + " ended (or never was)"};
  if (x[i] == "not_member")
    return failure{errc::forbidden,
                   a.user + " is not a member of proposal " + a.proposal};
  if (x[i] != "answered")
    return short_reply(x);
  proposal_state st;
  st.queue = a.queue;
  st.proposal = a.proposal;
  st.user = a.user;
  st.answer = x[i + 1];
  st.claimer = x[i + 2];
  st.deadline = to_int(x[i + 3]);
  st.players = static_cast<uint32_t>(to_int(x[i + 4]));
  st.accepted = static_cast<uint32_t>(to_int(x[i + 5]));
  st.declined = x[i + 6] == "1";
  st.complete = x[i + 7] == "1";
  return st;
}

} // namespace

outcome<script_call> group_answer_call(const proposal_answer& a) {
  return group_answers_call({a});
}

outcome<script_call>
group_answers_call(const std::vector<proposal_answer>& answers) {
  if (answers.empty() || answers.size() > max_answers)
    return invalid("1 to " + std::to_string(max_answers)
                   + " answers in one call");
  std::vector<std::string> args;
  args.reserve(3 * answers.size());
  for (auto& a : answers) {
    if (auto err = check_answer(a); !err.empty())
      return invalid(std::move(err));
    if (a.queue != answers.front().queue)
      return invalid("the answers of one call are of one queue");
    args.insert(args.end(), {a.proposal, a.user, a.answer});
  }
  return make_group(script_id::group_answer, answers.front().queue,
                    std::move(args));
}

outcome<proposal_state> parse_group_answer(const proposal_answer& a,
                                           const store_reply& reply) {
  auto all = parse_group_answers({a}, reply);
  if (!all)
    return all.error();
  return std::move(all->front());
}

outcome<std::vector<outcome<proposal_state>>>
parse_group_answers(const std::vector<proposal_answer>& answers,
                    const store_reply& reply) {
  auto f = fields(reply);
  if (!f)
    return f.error();
  auto& x = *f;
  if (x[0] == "invalid")
    return refusal(x);
  if (x.size() != 8 * answers.size())
    return short_reply(x);
  std::vector<outcome<proposal_state>> out;
  out.reserve(answers.size());
  for (size_t i = 0; i < answers.size(); ++i)
    out.emplace_back(answer_at(answers[i], x, 8 * i));
  return out;
}

outcome<script_call> group_decide_call(const std::string& queue,
                                       const std::vector<std::string>& groups) {
  std::string err;
  if (!(err = check_queue(queue)).empty()
      || !(err = check_range("groups", groups.size(), 1, 1000)).empty())
    return invalid(std::move(err));
  for (auto& g : groups)
    if (!(err = check_id("group", g, max_id)).empty())
      return invalid(std::move(err));
  return make_group(script_id::group_decide, queue, groups);
}

outcome<std::vector<proposal_decision>>
parse_group_decide(const std::vector<std::string>& groups,
                   const store_reply& reply) {
  auto f = fields(reply);
  if (!f)
    return f.error();
  auto& x = *f;
  if (x[0] == "invalid")
    return refusal(x);
  auto n = static_cast<size_t>(to_int(x[0]));
  if (n != groups.size())
    return short_reply(x);
  std::vector<proposal_decision> out;
  size_t i = 1;
  for (size_t g = 0; g < n; ++g) {
    if (!has(x, i + 2))
      return short_reply(x);
    proposal_decision d;
    d.group = groups[g];
    d.status = x[i];
    auto k = static_cast<size_t>(to_int(x[i + 1]));
    i += 2;
    if (k > max_members || !has(x, i + 2 * k))
      return short_reply(x);
    for (size_t j = 0; j < k; ++j, i += 2) {
      d.tickets.push_back(x[i]);
      d.outcomes.push_back(x[i + 1]);
    }
    out.push_back(std::move(d));
  }
  return out;
}

} // namespace mm::codec
