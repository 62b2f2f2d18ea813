#include "app/matchd/party_api.hpp"

namespace mm {

// -- engine_port's defaults: an engine without parties ------------------------

namespace {

failure no_parties() {
  return failure{errc::not_found, "parties are not served here"};
}

} // namespace

void engine_port::leave(const std::string&, const std::string&,
                        const std::string&, leave_cb cb) {
  cb(no_parties());
}

void engine_port::party_create(const std::string&, party_cb cb) {
  cb(no_parties());
}

void engine_port::party_join(const std::string&, const std::string&,
                             const std::string&, party_cb cb) {
  cb(no_parties());
}

void engine_port::party_leave(const std::string&, const std::string&,
                              party_cb cb) {
  cb(no_parties());
}

void engine_port::party_queue(const std::string&, const std::string&,
                              const party_ticket&, party_cb cb) {
  cb(no_parties());
}

void engine_port::party_cancel(const std::string&, const std::string&,
                               party_cb cb) {
  cb(no_parties());
}

void engine_port::party_state(const std::string&, const std::string&,
                              party_cb cb) {
  cb(no_parties());
}

void engine_port::proposal_answer(const std::string&, const std::string&,
                                  const std::string&, const std::string&,
                                  proposal_cb cb) {
  cb(no_parties());
}

void engine_port::backfill(const std::string&, const std::string&,
                           backfill_cb cb) {
  cb(no_parties());
}

namespace api_detail {

std::string to_json(const party_view& p) {
  json j{{"party", p.party},     {"code", p.code},   {"leader", p.leader},
         {"members", p.members}, {"phase", p.phase}, {"version", p.version}};
  for (auto [key, value] :
       {std::pair{"queue", &p.queue}, std::pair{"ticket", &p.ticket},
        std::pair{"session_id", &p.session_id}, std::pair{"detail", &p.detail}})
    if (!value->empty())
      j[key] = *value;
  return text(j);
}

namespace {

/// A member's accept or decline of a proposal: {"queue"} names its queue
/// (a proposal id is a group id of one queue).
void answer_proposal(engine_port& port, party_route route,
                     const std::string& user,
                     const std::vector<std::string>& params, const json& body,
                     const api_context& ctx, const reply_fn& reply) {
  const auto& id = params.at(1);
  if (!valid_api_id(id)) {
    reply(bad_id("proposal"));
    return;
  }
  api_reply err;
  std::string queue;
  if (!string_field(body, "queue", true, queue, err)) {
    reply(err);
    return;
  }
  if (!valid_api_id(queue)) {
    reply(bad_id("queue"));
    return;
  }
  if (!ctx.queues.empty() && ctx.queues.count(queue) == 0) {
    reply(
      api_router::error(404, "unknown_queue", "unknown queue '" + queue + "'"));
    return;
  }
  auto answer = route == party_route::accept ? "accept" : "decline";
  port.proposal_answer(
    user, queue, id, answer,
    guarded<outcome<proposal_view>>(reply, [reply](outcome<proposal_view> r) {
      if (!r) {
        reply(refusal(r.error()));
        return;
      }
      json out{{"proposal", r->proposal}, {"queue", r->queue},
               {"answer", r->answer},     {"deadline_ms", r->deadline_ms},
               {"players", r->players},   {"accepted", r->accepted},
               {"declined", r->declined}, {"complete", r->complete}};
      reply(api_reply{200, text(out)});
    }));
}

/// Parses the leader's ticket: queue, ticket, attrs (an object of each
/// member's attribute object), give_up_after_s. False with `err` set.
bool read_ticket(const json& body, const api_context& ctx, party_ticket& t,
                 api_reply& err) {
  if (!string_field(body, "queue", true, t.queue, err)
      || !string_field(body, "ticket", true, t.ticket, err))
    return false;
  if (!valid_api_id(t.queue)) {
    err = bad_id("queue");
    return false;
  }
  if (!ctx.queues.empty() && ctx.queues.count(t.queue) == 0) {
    err = api_router::error(404, "unknown_queue",
                            "unknown queue '" + t.queue + "'");
    return false;
  }
  if (ctx.paused->has(t.queue)) {
    err = api_router::error(503, "queue_paused",
                            "queue '" + t.queue + "' is paused by an operator");
    return false;
  }
  if (!valid_api_id(t.ticket)) {
    err = bad_id("ticket");
    return false;
  }
  if (auto a = body.find("attrs"); a != body.end()) {
    if (!a->is_object()) {
      err = api_router::error(400, "invalid_argument",
                              "attrs: an object of each member's attributes");
      return false;
    }
    for (auto& [member, value] : a->items()) {
      auto one = value.is_object() ? text(value) : std::string{};
      if (!valid_api_id(member) || one.empty() || one.size() > 4096
          || one.find('\0') != std::string::npos) {
        err = api_router::error(400, "invalid_argument",
                                "attrs." + member
                                  + ": an object of at most 4096 bytes");
        return false;
      }
      t.attrs[member] = std::move(one);
    }
  }
  if (auto g = body.find("give_up_after_s"); g != body.end()) {
    if (!g->is_number_integer() || g->get<int64_t>() < 1
        || g->get<int64_t>() > 86400) {
      err = api_router::error(400, "invalid_argument",
                              "give_up_after_s: an integer from 1 to 86400");
      return false;
    }
    t.give_up_after_s = static_cast<uint32_t>(g->get<int64_t>());
  }
  return true;
}

} // namespace

void serve_party(engine_port& port, party_route route, const std::string& user,
                 const std::vector<std::string>& params, const json& body,
                 const api_context& ctx,
                 const std::function<bool(const std::string&)>& may_join,
                 const reply_fn& reply) {
  auto on_party
    = guarded<outcome<party_view>>(reply, [reply](outcome<party_view> res) {
        if (res)
          reply(api_reply{200, to_json(*res)});
        else
          reply(refusal(res.error()));
      });
  if (route == party_route::create) {
    port.party_create(user, on_party);
    return;
  }
  if (route == party_route::accept || route == party_route::decline) {
    answer_proposal(port, route, user, params, body, ctx, reply);
    return;
  }
  const auto& id = params.at(1); // the party, or the session
  auto on_session = route == party_route::leave_session
                    || route == party_route::backfill;
  if (!valid_api_id(id)) {
    reply(bad_id(on_session ? "session" : "party"));
    return;
  }
  api_reply err;
  switch (route) {
    case party_route::backfill:
      port.backfill(user, id,
                    guarded<outcome<backfill_view>>(
                      reply, [reply](outcome<backfill_view> r) {
                        if (!r) {
                          reply(refusal(r.error()));
                          return;
                        }
                        json out{{"session_id", r->session_id},
                                 {"queue", r->queue},
                                 {"state", r->state},
                                 {"players", r->players},
                                 {"max_players", r->max_players}};
                        reply(api_reply{200, text(out)});
                      }));
      return;
    case party_route::state:
      port.party_state(user, id, on_party);
      return;
    case party_route::join: {
      std::string code;
      if (!string_field(body, "code", true, code, err)) {
        reply(err);
        return;
      }
      if (code.empty() || code.size() > 64) {
        reply(api_router::error(400, "invalid_argument", "code: 1-64 bytes"));
        return;
      }
      port.party_join(user, id, code, on_party);
      return;
    }
    case party_route::leave:
      port.party_leave(user, id, on_party);
      return;
    case party_route::cancel:
      port.party_cancel(user, id, on_party);
      return;
    case party_route::queue: {
      if (ctx.draining.load()) {
        reply(api_router::error(503, "shutting_down", "the node is draining"));
        return;
      }
      party_ticket t;
      if (!read_ticket(body, ctx, t, err)) {
        reply(err);
        return;
      }
      if (!may_join(t.queue)) {
        reply(api_router::error(403, "forbidden",
                                "this token may not join queue '" + t.queue
                                  + "' (its queues claim)"));
        return;
      }
      port.party_queue(user, id, t, on_party);
      return;
    }
    default:
      break;
  }
  // leave_session
  std::string reason = "left";
  if (!string_field(body, "reason", false, reason, err)) {
    reply(err);
    return;
  }
  if (reason.empty() || reason.size() > 256) {
    reply(api_router::error(400, "invalid_argument", "reason: 1-256 bytes"));
    return;
  }
  port.leave(
    user, id, reason,
    guarded<outcome<leave_view>>(reply, [reply](outcome<leave_view> r) {
      if (!r) {
        reply(refusal(r.error()));
        return;
      }
      json out{{"session_id", r->session_id},
               {"queue", r->queue},
               {"remaining", r->remaining},
               {"left_now", r->left_now},
               {"state", r->ended ? "ended" : "active"}};
      reply(api_reply{200, text(out)});
    }));
}

} // namespace api_detail

} // namespace mm
