#include "persistence/queue/queue_codec.hpp"

#include "persistence/queue/codec_util.hpp"

#include <cstdlib>

#include "core/utf8.hpp"

namespace mm {

const char* to_string(claim_outcome x) noexcept {
  switch (x) {
    case claim_outcome::matched:
      return "matched";
    case claim_outcome::queued:
      return "queued";
    default:
      return "claimed_by_other";
  }
}

} // namespace mm

namespace mm::codec {

using namespace detail;

namespace {

script_call make(script_id id, const std::string& queue,
                 std::vector<std::string> args) {
  return script_call{id, queue_keys(queue), std::move(args)};
}

} // namespace

std::string check_queue(const std::string& queue) {
  return check_id("queue", queue, max_queue_name, false);
}

std::string check_spec(const ticket_spec& spec) {
  std::string err;
  if (!(err = check_queue(spec.queue)).empty()
      || !(err = check_id("user", spec.user, max_id)).empty()
      || !(err = check_id("ticket", spec.ticket, max_ticket)).empty()
      || !(err = check_id("node", spec.node, max_node)).empty()
      || !(err = check_range("ttl_ms", spec.ttl_ms, 1, max_ttl_ms)).empty())
    return err;
  if (spec.attrs.size() > max_attrs)
    return "attrs is longer than " + std::to_string(max_attrs) + " bytes";
  if (spec.rules.size() > 1024 || spec.rk.size() > 2048
      || spec.avoid.size() > 4096)
    return "rules, rule values or avoid list too long";
  // UTF-8 without NUL: what the match stores take. They refuse it only when
  // the ticket is matched; taken into the queue, such a ticket would spoil
  // every pair it is claimed into (the commit refused, the ticket requeued
  // at the head).
  if (spec.attrs.find('\0') != std::string::npos || !valid_utf8(spec.attrs))
    return "attrs must be UTF-8 without NUL";
  return {};
}

std::vector<std::string> queue_keys(const std::string& queue) {
  auto prefix = "mm:{" + queue + "}:";
  return {prefix + "waiting", prefix + "seq",       prefix + "tickets",
          prefix + "users",   prefix + "deadlines", prefix + "index"};
}

outcome<script_call> enqueue_call(const ticket_spec& spec) {
  if (auto err = check_spec(spec); !err.empty())
    return invalid(std::move(err));
  if (spec.rules.empty())
    return make(script_id::enqueue, spec.queue,
                {spec.user, spec.ticket, spec.node, spec.attrs,
                 std::to_string(spec.ttl_ms)});
  return make(script_id::enqueue, spec.queue,
              {spec.user, spec.ticket, spec.node, spec.attrs,
               std::to_string(spec.ttl_ms), spec.rules, spec.rk, spec.avoid});
}

outcome<script_call> claim_call(const ticket_spec& spec, uint32_t scan,
                                uint32_t hold_ms, bool rescan) {
  std::string err;
  if (!(err = check_spec(spec)).empty()
      || !(err = check_range("scan", scan, 1, max_scan)).empty()
      || !(err = check_range("hold_ms", hold_ms, 1, max_hold_ms)).empty())
    return invalid(std::move(err));
  if (spec.rules.empty())
    return make(script_id::claim, spec.queue,
                {spec.user, spec.ticket, spec.node, spec.attrs,
                 std::to_string(spec.ttl_ms), std::to_string(scan),
                 std::to_string(hold_ms), rescan ? "1" : "0"});
  return make(script_id::claim, spec.queue,
              {spec.user, spec.ticket, spec.node, spec.attrs,
               std::to_string(spec.ttl_ms), std::to_string(scan),
               std::to_string(hold_ms), rescan ? "1" : "0", spec.rules, spec.rk,
               spec.avoid});
}

outcome<script_call> rescan_call(const std::vector<rescan_item>& items,
                                 uint32_t hold_ms) {
  std::string err;
  if (items.empty() || items.size() > max_rescans)
    return invalid("a rescan takes 1.." + std::to_string(max_rescans)
                   + " tickets");
  if (!(err = check_range("hold_ms", hold_ms, 1, max_hold_ms)).empty())
    return invalid(std::move(err));
  const auto& queue = items.front().spec->queue;
  std::vector<std::string> args;
  args.reserve(1 + 9 * items.size());
  args.emplace_back(std::to_string(hold_ms));
  for (const auto& [spec, scan] : items) {
    if (!(err = check_spec(*spec)).empty()
        || !(err = check_range("scan", scan, 1, max_scan)).empty())
      return invalid(std::move(err));
    if (spec->queue != queue)
      return invalid("a rescan's tickets are of one queue");
    args.emplace_back(spec->user);
    args.emplace_back(spec->ticket);
    args.emplace_back(spec->node);
    args.emplace_back(spec->attrs);
    args.emplace_back(std::to_string(spec->ttl_ms));
    args.emplace_back(std::to_string(scan));
    args.emplace_back(spec->rules);
    args.emplace_back(spec->rk);
    args.emplace_back(spec->avoid);
  }
  return make(script_id::rescan, queue, std::move(args));
}

namespace {

std::string check_ref(const ticket_ref& ref) {
  std::string err;
  if (!(err = check_queue(ref.queue)).empty()
      || !(err = check_id("user", ref.user, max_id)).empty())
    return err;
  if (ref.token.empty() || ref.token.size() > 20
      || ref.token.find_first_not_of("0123456789") != std::string::npos)
    return "token must be the decimal token the queue issued";
  return {};
}

} // namespace

outcome<script_call> cancel_call(const ticket_ref& ref) {
  if (auto err = check_ref(ref); !err.empty())
    return invalid(std::move(err));
  return make(script_id::cancel, ref.queue, {ref.user, ref.token});
}

outcome<script_call> heartbeat_call(const ticket_ref& ref, uint32_t ttl_ms) {
  std::string err;
  if (!(err = check_ref(ref)).empty()
      || !(err = check_range("ttl_ms", ttl_ms, 1, max_ttl_ms)).empty())
    return invalid(std::move(err));
  return make(script_id::heartbeat, ref.queue,
              {ref.user, ref.token, std::to_string(ttl_ms)});
}

outcome<script_call> requeue_call(const std::string& queue,
                                  const std::string& ticket) {
  std::string err;
  if (!(err = check_queue(queue)).empty()
      || !(err = check_id("ticket", ticket, max_ticket)).empty())
    return invalid(std::move(err));
  return make(script_id::requeue, queue, {ticket});
}

outcome<script_call> release_call(const std::string& queue,
                                  const std::string& ticket) {
  std::string err;
  if (!(err = check_queue(queue)).empty()
      || !(err = check_id("ticket", ticket, max_ticket)).empty())
    return invalid(std::move(err));
  return make(script_id::release, queue, {ticket});
}

outcome<script_call> release_call(const std::string& queue,
                                  const std::vector<std::string>& tickets) {
  std::string err;
  if (!(err = check_queue(queue)).empty())
    return invalid(std::move(err));
  if (tickets.empty() || tickets.size() > max_release)
    return invalid("a release takes 1.." + std::to_string(max_release)
                   + " tickets");
  for (auto& t : tickets)
    if (!(err = check_id("ticket", t, max_ticket)).empty())
      return invalid(std::move(err));
  return make(script_id::release, queue, tickets);
}

outcome<script_call> sweep_call(const std::string& queue, uint32_t batch) {
  std::string err;
  if (!(err = check_queue(queue)).empty()
      || !(err = check_range("batch", batch, 1, 1000)).empty())
    return invalid(std::move(err));
  return make(script_id::sweep, queue, {std::to_string(batch)});
}

outcome<enqueue_result> parse_enqueue(const store_reply& reply) {
  auto f = fields(reply);
  if (!f)
    return f.error();
  auto& x = *f;
  if (x[0] == "created" || x[0] == "exists") {
    if (!has(x, 5))
      return short_reply(x);
    enqueue_result r;
    r.ticket = x[1];
    r.token = x[2];
    r.score = to_int(x[3]);
    r.deadline = to_int(x[4]);
    r.created = x[0] == "created";
    r.state = has(x, 6) ? x[5] : "waiting";
    return r;
  }
  return refusal(x);
}

namespace {

outcome<claim_result> parse_claim_value(const store_value& value) {
  auto f = fields(value);
  if (!f)
    return f.error();
  auto& x = *f;
  claim_result r;
  if (x[0] == "matched") {
    if (!has(x, 10))
      return short_reply(x);
    r.outcome = claim_outcome::matched;
    r.ticket = x[1];
    r.token = x[2];
    r.partner = partner_info{x[3], x[4], x[5], x[6], to_int(x[7]), x[8]};
    r.stale_removed = static_cast<uint32_t>(to_int(x[9]));
    return r;
  }
  if (x[0] == "queued") {
    if (!has(x, 7))
      return short_reply(x);
    r.outcome = claim_outcome::queued;
    r.ticket = x[1];
    r.token = x[2];
    r.score = to_int(x[3]);
    r.deadline = to_int(x[4]);
    r.stale_removed = static_cast<uint32_t>(to_int(x[5]));
    r.more = x[6] == "1";
    if (has(x, 9)) { // a queue with rules
      r.windows = x[7];
      r.next_change_ms = to_int(x[8]);
    }
    return r;
  }
  if (x[0] == "claimed") {
    if (!has(x, 6))
      return short_reply(x);
    r.outcome = claim_outcome::claimed_by_other;
    r.ticket = x[1];
    r.token = x[2];
    r.partner.user = x[3];
    r.partner.ticket = x[4];
    r.partner.node = x[5];
    return r;
  }
  return refusal(x);
}

} // namespace

outcome<claim_result> parse_claim(const store_reply& reply) {
  if (reply.code != errc::none)
    return failure{reply.code, reply.detail};
  return parse_claim_value(reply.value);
}

outcome<std::vector<outcome<claim_result>>>
parse_rescan(const store_reply& reply, size_t n) {
  if (reply.code != errc::none)
    return failure{reply.code, reply.detail};
  const auto& v = reply.value;
  bool each = v.type == store_value::kind::array && !v.elements.empty()
              && v.elements.front().str == "each";
  if (!each) {
    auto f = fields(v);
    if (!f)
      return f.error();
    return refusal(*f);
  }
  if (v.elements.size() != n + 1)
    return failure{errc::protocol_error,
                   "rescan answered " + std::to_string(v.elements.size() - 1)
                     + " of " + std::to_string(n) + " tickets"};
  std::vector<outcome<claim_result>> out;
  out.reserve(n);
  for (size_t i = 1; i <= n; ++i)
    out.push_back(parse_claim_value(v.elements[i]));
  return out;
}

outcome<cancel_result> parse_cancel(const store_reply& reply) {
  auto f = fields(reply);
  if (!f)
    return f.error();
  auto& x = *f;
  if (x[0] == "cancelled" && has(x, 2))
    return cancel_result{cancel_outcome::cancelled, x[1], {}, {}};
  if (x[0] == "in_flight" && has(x, 4))
    return cancel_result{cancel_outcome::in_flight, x[1], x[2], x[3]};
  return refusal(x);
}

outcome<heartbeat_result> parse_heartbeat(const store_reply& reply) {
  auto f = fields(reply);
  if (!f)
    return f.error();
  auto& x = *f;
  if (x[0] == "gone")
    return heartbeat_result{};
  if (x[0] == "alive" && has(x, 4))
    return heartbeat_result{true, x[1], x[2], to_int(x[3])};
  return refusal(x);
}

outcome<requeue_result> parse_requeue(const store_reply& reply) {
  auto f = fields(reply);
  if (!f)
    return f.error();
  auto& x = *f;
  auto arg = [&](size_t i) { return i < x.size() ? x[i] : std::string{}; };
  if (x[0] == "requeued")
    return requeue_result{requeue_outcome::requeued, arg(1), to_int(arg(2))};
  if (x[0] == "waiting")
    return requeue_result{requeue_outcome::waiting, arg(1), to_int(arg(2))};
  if (x[0] == "stale")
    return requeue_result{requeue_outcome::stale, arg(1), 0};
  if (x[0] == "gone")
    return requeue_result{requeue_outcome::gone, {}, 0};
  return refusal(x);
}

outcome<release_result> parse_release(const store_reply& reply) {
  auto f = fields(reply);
  if (!f)
    return f.error();
  auto& x = *f;
  auto arg = [&](size_t i) { return i < x.size() ? x[i] : std::string{}; };
  if (x[0] == "released")
    return release_result{release_outcome::released, arg(1)};
  if (x[0] == "waiting")
    return release_result{release_outcome::waiting, arg(1)};
  if (x[0] == "gone")
    return release_result{release_outcome::gone, {}};
  return refusal(x);
}

outcome<std::vector<release_result>>
parse_release(const store_reply& reply,
              const std::vector<std::string>& tickets) {
  if (tickets.size() == 1) {
    auto one = parse_release(reply);
    if (!one)
      return one.error();
    return std::vector<release_result>{std::move(*one)};
  }
  auto f = fields(reply);
  if (!f)
    return f.error();
  auto& x = *f;
  if (x[0] != "each")
    return refusal(x);
  if (x.size() != tickets.size() + 1)
    return failure{errc::protocol_error,
                   "release answered " + std::to_string(x.size() - 1) + " of "
                     + std::to_string(tickets.size()) + " tickets"};
  std::vector<release_result> out;
  out.reserve(tickets.size());
  for (size_t i = 0; i < tickets.size(); ++i) {
    if (x[i + 1] == "released")
      out.push_back({release_outcome::released, tickets[i]});
    else if (x[i + 1] == "waiting")
      out.push_back({release_outcome::waiting, tickets[i]});
    else if (x[i + 1] == "gone")
      out.push_back({release_outcome::gone, {}});
    else
      return failure{errc::protocol_error,
                     "release answered '" + x[i + 1] + "'"};
  }
  return out;
}

outcome<sweep_result> parse_sweep(const store_reply& reply) {
  auto f = fields(reply);
  if (!f)
    return f.error();
  auto& x = *f;
  if (x[0] == "swept" && has(x, 5))
    return sweep_result{static_cast<uint32_t>(to_int(x[1])), x[2] == "1",
                        static_cast<uint64_t>(to_int(x[3])),
                        static_cast<uint64_t>(to_int(x[4]))};
  return refusal(x);
}

outcome<script_call> explain_call(const std::string& rules,
                                  const explain_side& a,
                                  const explain_side& b) {
  if (rules.empty() || rules.size() > 1024)
    return invalid("rules: 1..1024 bytes");
  for (auto* x : {&a, &b})
    if (x->rk.size() > 2048 || x->avoid.size() > 4096 || x->waited_ms < 0
        || x->user.size() > max_id)
      return invalid("explain: a side is malformed");
  return script_call{script_id::explain,
                     {},
                     {rules, a.rk, std::to_string(a.waited_ms), a.user, a.avoid,
                      b.rk, std::to_string(b.waited_ms), b.user, b.avoid}};
}

outcome<explain_result> parse_explain(const store_reply& reply) {
  auto f = fields(reply);
  if (!f)
    return f.error();
  auto& x = *f;
  if (x[0] == "compatible" && has(x, 3))
    return explain_result{true, 0, {}, x[1], x[2]};
  if (x[0] == "incompatible" && has(x, 5))
    return explain_result{false, static_cast<uint32_t>(to_int(x[1])), x[2],
                          x[3], x[4]};
  return refusal(x);
}

} // namespace mm::codec
