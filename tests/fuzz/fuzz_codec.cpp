// Fuzz target `codec`: the queue codec (persistence/queue/queue_codec.hpp).
// Byte 0 picks the half:
//  - even: the rest is what a Redis server sent, read by hiredis's reader
//    and converted as the Redis store does (to_store_reply), then decoded by
//    every parser (bit 1 of byte 0 marks the call as failed in transport);
//  - odd: the rest is a ticket spec, one field per line (queue, user,
//    ticket, node, attrs, ttl_ms, scan, hold_ms), built into a call, run
//    through the embedded store's real scripts and its reply decoded.
//
// Invariants: nothing throws; every refusal is a named error (the codec's
// documented ones); a transport failure stays one; decoding is lossless
// where there is an encoder (a decoded reply, encoded back as the script
// would send it, decodes to the same result); a call the codec accepts
// carries the spec unchanged and the script accepts it too (the codec and
// lua/ agree), and a refusal names the bad field.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <hiredis/hiredis.h>

#include "persistence/matchdb/match_store.hpp"
#include "persistence/queue/queue_codec.hpp"
#include "persistence/queue/redis_reply.hpp"
#include "tests/fuzz/fuzz_common.hpp"

using namespace mm;

namespace {

std::string input_;

void check_refusal(const failure& f, const char* parser, bool transport) {
  if (transport) {
    if (f.code != errc::store_unavailable)
      fuzz::fail(std::string{parser} + ": a transport failure became "
                   + to_string(f.code),
                 input_);
    return;
  }
  switch (f.code) {
    case errc::invalid_argument:
    case errc::duplicate_ticket:
    case errc::stale_token:
    case errc::not_found:
    case errc::protocol_error:
      return;
    default:
      fuzz::fail(std::string{parser} + ": unexpected refusal "
                   + to_string(f.code),
                 input_);
  }
}

store_value str(const std::string& s) {
  store_value v;
  v.type = store_value::kind::string;
  v.str = s;
  return v;
}

store_reply array(const std::vector<std::string>& items) {
  store_reply r;
  r.value.type = store_value::kind::array;
  for (auto& i : items)
    r.value.elements.push_back(str(i));
  return r;
}

/// Decodes `reply` with `parse`; when it is a result, encodes it back as
/// the script would with `encode` and checks it decodes the same (`same`).
template <class Parse, class Encode, class Same>
void round_trip(const char* name, const store_reply& reply, bool transport,
                Parse parse, Encode encode, Same same) {
  auto r = parse(reply);
  if (!r) {
    check_refusal(r.error(), name, transport);
    return;
  }
  if (transport)
    fuzz::fail(std::string{name} + ": a transport failure decoded", input_);
  auto again = parse(array(encode(*r)));
  if (!again || !same(*r, *again))
    fuzz::fail(std::string{name} + ": decode(encode(x)) != x", input_);
}

std::string num(int64_t x) {
  return std::to_string(x);
}

void decode_all(const store_reply& reply, bool transport) {
  round_trip(
    "parse_enqueue", reply, transport, codec::parse_enqueue,
    [](const enqueue_result& x) {
      return std::vector<std::string>{x.created ? "created" : "exists",
                                      x.ticket,
                                      x.token,
                                      num(x.score),
                                      num(x.deadline),
                                      x.state};
    },
    [](const enqueue_result& a, const enqueue_result& b) {
      return a.ticket == b.ticket && a.token == b.token && a.score == b.score
             && a.deadline == b.deadline && a.created == b.created
             && a.state == b.state;
    });
  round_trip(
    "parse_claim", reply, transport, codec::parse_claim,
    [](const claim_result& x) -> std::vector<std::string> {
      switch (x.outcome) {
        case claim_outcome::matched:
          return {"matched",        x.ticket,
                  x.token,          x.partner.user,
                  x.partner.ticket, x.partner.node,
                  x.partner.attrs,  num(x.partner.score),
                  x.partner.token,  num(x.stale_removed)};
        case claim_outcome::queued:
          return {"queued",          x.ticket,        x.token,
                  num(x.score),      num(x.deadline), num(x.stale_removed),
                  x.more ? "1" : "0"};
        default:
          return {"claimed",      x.ticket,         x.token,
                  x.partner.user, x.partner.ticket, x.partner.node};
      }
    },
    [](const claim_result& a, const claim_result& b) {
      return a.outcome == b.outcome && a.ticket == b.ticket
             && a.token == b.token && a.score == b.score
             && a.deadline == b.deadline && a.partner.user == b.partner.user
             && a.partner.ticket == b.partner.ticket
             && a.partner.node == b.partner.node
             && a.partner.attrs == b.partner.attrs
             && a.partner.score == b.partner.score
             && a.partner.token == b.partner.token
             && a.stale_removed == b.stale_removed && a.more == b.more;
    });
  round_trip(
    "parse_sweep", reply, transport, codec::parse_sweep,
    [](const sweep_result& x) {
      return std::vector<std::string>{"swept", num(x.removed),
                                      x.more ? "1" : "0",
                                      num(static_cast<int64_t>(x.depth)),
                                      num(static_cast<int64_t>(x.tracked))};
    },
    [](const sweep_result& a, const sweep_result& b) {
      return a.removed == b.removed && a.more == b.more && a.depth == b.depth
             && a.tracked == b.tracked;
    });
  // No encoder worth writing for the rest: named refusals only.
  auto plain = [&](const char* name, auto r) {
    if (!r)
      check_refusal(r.error(), name, transport);
    else if (transport)
      fuzz::fail(std::string{name} + ": a transport failure decoded", input_);
  };
  plain("parse_cancel", codec::parse_cancel(reply));
  plain("parse_heartbeat", codec::parse_heartbeat(reply));
  plain("parse_requeue", codec::parse_requeue(reply));
  plain("parse_release", codec::parse_release(reply));
  // A rescan's reply holds one claim reply per ticket: each a result or a
  // named refusal of its own.
  auto n = reply.value.elements.empty() ? 1 : reply.value.elements.size() - 1;
  auto rescans = codec::parse_rescan(reply, n);
  plain("parse_rescan", rescans);
  if (rescans)
    for (auto& one : *rescans)
      if (!one)
        check_refusal(one.error(), "parse_rescan", false);
}

/// hiredis 0.14 allocates an announced array at once: an announced length
/// far past the input is skipped (the Redis store trusts its server's
/// lengths; this target is about what the codec makes of a reply).
bool huge_array(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '*')
      continue;
    size_t j = i + 1, digits = 0;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9' && digits < 12)
      ++j, ++digits;
    if (digits > 0 && std::stoll(s.substr(i + 1, digits)) > 65536)
      return true;
  }
  return false;
}

void replies(const std::string& bytes, bool transport) {
  if (huge_array(bytes))
    return;
  std::unique_ptr<redisReader, void (*)(redisReader*)> rd{redisReaderCreate(),
                                                          redisReaderFree};
  if (redisReaderFeed(rd.get(), bytes.data(), bytes.size()) != REDIS_OK)
    return;
  for (int n = 0; n < 8; ++n) { // pipelined replies
    void* raw = nullptr;
    if (redisReaderGetReply(rd.get(), &raw) != REDIS_OK || raw == nullptr)
      return; // a protocol error (the store drops the connection) or short
    std::unique_ptr<redisReply, void (*)(void*)> r{
      static_cast<redisReply*>(raw), freeReplyObject};
    auto reply = to_store_reply(*r);
    if (reply.code != errc::none && reply.code != errc::protocol_error)
      fuzz::fail("to_store_reply: " + std::string{to_string(reply.code)},
                 input_);
    if (transport) {
      reply = store_reply{errc::store_unavailable, "fuzz: transport", {}};
    }
    decode_all(reply, transport);
  }
}

uint32_t number(const std::string& s) {
  uint64_t x = 0;
  for (char c : s.substr(0, 10))
    if (c >= '0' && c <= '9')
      x = x * 10 + static_cast<uint64_t>(c - '0');
  return static_cast<uint32_t>(x);
}

queue_store& store() {
  // Never destroyed (see api_fixture.cpp): one data set for the process,
  // left empty after every input.
  static queue_store* s = make_embedded_store({})->connect().release();
  return *s;
}

void calls(const std::string& bytes, bool claim) {
  std::vector<std::string> f;
  size_t pos = 0;
  while (f.size() < 8) {
    auto nl = bytes.find('\n', pos);
    f.push_back(bytes.substr(pos, nl == std::string::npos ? nl : nl - pos));
    if (nl == std::string::npos)
      break;
    pos = nl + 1;
  }
  f.resize(8);
  ticket_spec spec{f[0], f[1], f[2], f[3], f[4], number(f[5])};
  auto scan = number(f[6]), hold = number(f[7]);
  auto call = claim ? codec::claim_call(spec, scan, hold, false)
                    : codec::enqueue_call(spec);
  auto spec_err = codec::check_spec(spec);
  if (!call) {
    if (call.error().code != errc::invalid_argument
        || call.error().detail.empty())
      fuzz::fail("a refused call without a named field", input_);
    if (!claim && spec_err.empty())
      fuzz::fail("enqueue_call refused a spec check_spec accepts", input_);
    return;
  }
  if (!spec_err.empty())
    fuzz::fail("a call built from a spec check_spec refuses: " + spec_err,
               input_);
  if (call->keys != codec::queue_keys(spec.queue) || call->args.size() < 5
      || call->args[0] != spec.user || call->args[1] != spec.ticket
      || call->args[2] != spec.node || call->args[3] != spec.attrs
      || call->args[4] != std::to_string(spec.ttl_ms))
    fuzz::fail("the call does not carry the spec", input_);
  for (auto& k : call->keys)
    if (k.find("{" + spec.queue + "}") == std::string::npos)
      fuzz::fail("a key outside the queue's hash tag: " + k, input_);
  // What the queue takes, the match store must take when the ticket is
  // matched: else the pair's commit is refused, and the ticket goes back to
  // the queue to spoil the next pair too.
  match_request m{spec.queue,      spec.user, "t-codec", spec.attrs,
                  spec.user + "x", "t-other", "{}"};
  if (auto bad = check_match_request(m);
      bad.code != errc::none && bad.detail.find("attrs") != std::string::npos)
    fuzz::fail("the codec accepts attrs the match store refuses: " + bad.detail,
               input_);
  auto replies = store().run({*call});
  if (replies.size() != 1)
    fuzz::fail("not one reply per call", input_);
  std::string token;
  if (claim) {
    auto r = codec::parse_claim(replies[0]);
    if (!r)
      fuzz::fail("the script refused a claim the codec built: "
                   + std::string{to_string(r.error().code)} + " "
                   + r.error().detail,
                 input_);
    if (r->outcome != claim_outcome::queued || r->ticket != spec.ticket)
      fuzz::fail("a claim in an empty queue was not queued", input_);
    token = r->token;
  } else {
    auto r = codec::parse_enqueue(replies[0]);
    if (!r)
      fuzz::fail("the script refused an enqueue the codec built: "
                   + std::string{to_string(r.error().code)} + " "
                   + r.error().detail,
                 input_);
    if (!r->created || r->ticket != spec.ticket)
      fuzz::fail("an enqueue in an empty queue was not created", input_);
    token = r->token;
  }
  // Leave the data set empty: the cancel takes the ticket out again.
  auto cancel = codec::cancel_call(ticket_ref{spec.queue, spec.user, token});
  if (!cancel)
    fuzz::fail("cancel_call refused the issued token", input_);
  auto c = codec::parse_cancel(store().run({*cancel})[0]);
  if (!c || c->outcome != cancel_outcome::cancelled || c->ticket != spec.ticket)
    fuzz::fail("the waiting ticket was not cancelled", input_);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  input_.assign(reinterpret_cast<const char*>(data), size);
  auto rest = input_.substr(1);
  if (data[0] % 2 == 0)
    replies(rest, (data[0] & 2) != 0);
  else
    calls(rest, (data[0] & 2) != 0);
  return 0;
}
