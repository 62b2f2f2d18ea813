// The PostgreSQL match store's group commit: one statement per batch, the
// one-by-one fallback in savepoints, and the cancel checkpoints.
//
// Group commit (docs/benchmarks-history.md, "Group commit"): a batch runs as
// ONE statement — sessions, members and outbox rows of every request in
// data-modifying CTEs — inside a batch savepoint, one transaction and one
// WAL flush for the batch. Only when that statement is refused (a user already
// active: the unique partial index) does the batch roll back to the
// savepoint and run each request in a savepoint of its own, so the refused
// ones fail alone and the rest still commit in the same transaction.
//
// Cancel checkpoints (problem 5 of docs/design.md): after the rows are written
// (after the batch statement, or after each request's own statement in the
// fallback) the caller's check is asked `after_create`; right before COMMIT it
// is asked `before_commit` for the survivors, again after every round that
// withdrew some. A request withdrawn in the fallback rolls back to its own
// savepoint; otherwise its rows are deleted inside the transaction (the
// survivors keep their rows and locks, so no competitor can take their users in
// between, as it could after a rollback and re-insert). Rows that were inserted
// and deleted by one transaction are never visible to anyone.
//
// Mutual likes (problem 6 of docs/design.md): the commit statement first
// inserts the pair rows of the batch's mutual requests into `mutual_matches`
// (ON CONFLICT DO NOTHING, in pair order) and writes a mutual request's
// session, members (inactive: no one-active-session guard) and event only when
// its pair row went in. A pair committed concurrently by another connection
// makes the insert wait for that transaction; when it committed, the insert
// does nothing and the next statement (READ COMMITTED: a new snapshot) reads
// its session, so two connections never create two matches or two events for a
// pair (how swipes of one pair are serialized: pg_swipes.cpp).

#include "persistence/matchdb/pg/pg_match_store.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace mm::pg {

namespace {

/// How often one request is tried inside a batch when a deadlock or a
/// conflicting session that closed meanwhile refused it. A deadlock can only
/// happen between two batches that both fell back to one-by-one (the batch
/// statement inserts members in one global order); a second try helps when
/// the cycle ran through this request's own rows, otherwise the request is
/// refused as a conflict rather than waiting out the deadlock timeout again.
constexpr int max_request_tries = 2;

} // namespace

/// One request of a batch, prepared before the transaction starts so that
/// a second attempt reuses its session id.
struct pending {
  size_t index = 0; ///< position in the caller's vector
  std::string id;
  std::string key;
  /// Requests of a batch with the same fate key share a withdrawal: the
  /// pair for mutual requests, the match key otherwise.
  std::string fate;
  bool mutual = false;
  std::pair<std::string, std::string> pair; ///< (min, max) of the users
  const match_request* req = nullptr;       ///< the caller's request
  std::string event_id;                     ///< of its match.created event
  std::string payload;                      ///< of its match.created event
};

namespace {

/// The commit statement's parameters for the requests `sent` (todo
/// indexes, in the order the statement numbers them from 1): the text
/// columns as binary arrays (commit_binary), then the mutual flags and the
/// lease as text.
std::vector<std::string> commit_params(const std::vector<pending>& todo,
                                       const std::vector<size_t>& sent,
                                       const std::string& lease) {
  constexpr size_t text_columns = 13;
  constexpr size_t payload_column = 10; // $11
  // Room for the usual sizes (ids, keys, payloads): no regrowth per match.
  std::vector<binary_text_array> cols;
  for (size_t c = 0; c < text_columns; ++c)
    cols.emplace_back(sent.size() * (c == payload_column ? 320 : 48));
  std::string mutual = "{";
  for (auto k : sent) {
    const auto& p = todo[k];
    const auto& r = *p.req;
    // In the statement's order ($1..$13).
    const std::string* row[text_columns]
      = {&p.id,       &p.event_id,   &p.key,        &r.queue,    &r.user_a,
         &r.ticket_a, &r.attrs_a,    &r.user_b,     &r.ticket_b, &r.attrs_b,
         &p.payload,  &p.pair.first, &p.pair.second};
    for (size_t c = 0; c < text_columns; ++c)
      cols[c].add(*row[c]);
    if (mutual.size() > 1)
      mutual += ',';
    mutual += p.mutual ? 't' : 'f';
  }
  std::vector<std::string> out;
  out.reserve(text_columns + 2);
  for (auto& c : cols)
    out.push_back(c.take());
  out.push_back(mutual + '}');
  out.push_back(lease);
  return out;
}

/// The parameters commit_params sends in binary: $1..$13.
constexpr uint32_t commit_binary = (1u << 13) - 1;

} // namespace

std::vector<outcome<match_record>>
pg_match_store::do_commit_matches(const std::vector<match_request>& requests,
                                  const commit_check& check) {
  std::vector<outcome<match_record>> out;
  out.reserve(requests.size());
  std::vector<pending> todo;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& req = requests[i];
    // Placeholder until the transaction answers.
    out.emplace_back(errc::store_unavailable, "not committed");
    pending p;
    p.index = i;
    p.id = new_session_id();
    p.key = match_key(req);
    p.mutual = req.mutual;
    p.pair = pair_bounds(req.user_a, req.user_b);
    p.fate = req.mutual ? "m\n" + p.pair.first + "\n" + p.pair.second
                        : "k\n" + p.key;
    p.req = &req;
    p.event_id = match_created_event_id(p.id);
    p.payload = match_created_payload(p.id, req);
    todo.push_back(std::move(p));
  }
  if (todo.empty())
    return out;
  // Outlives a lost connection: a withdrawn request is not written again
  // when `run` repeats the transaction, and answers `cancelled` whatever
  // becomes of the transaction.
  std::vector<std::optional<failure>> withdrawn(todo.size());
  auto res = run<std::vector<outcome<match_record>>>("commit matches", [&] {
    return commit_batch(requests, todo, check, withdrawn);
  });
  for (size_t k = 0; k < todo.size(); ++k) {
    if (res)
      out[todo[k].index] = std::move((*res)[k]);
    else if (withdrawn[k])
      out[todo[k].index] = *withdrawn[k];
    else
      out[todo[k].index] = res.error();
  }
  return out;
}

struct pg_match_store::batch_state {
  explicit batch_state(size_t n) : res(n), fresh(n, false) {}

  std::vector<std::optional<outcome<match_record>>> res;
  /// Rows written by this transaction and not withdrawn: the requests the
  /// checkpoints ask about.
  std::vector<bool> fresh;
};

std::vector<outcome<match_record>>
pg_match_store::commit_batch(const std::vector<match_request>& requests,
                             const std::vector<pending>& todo,
                             const commit_check& check,
                             std::vector<std::optional<failure>>& withdrawn) {
  batch_state b{todo.size()};
  std::vector<size_t> sent; // todo indexes, as the statement numbers them
  for (size_t k = 0; k < todo.size(); ++k) {
    if (withdrawn[k])
      b.res[k].emplace(*withdrawn[k]); // by an earlier attempt
    else
      sent.push_back(k);
  }
  must(exec("BEGIN; SAVEPOINT mm_batch"), "BEGIN");
  auto lease = std::to_string(commit_lease_ms_);
  if (!sent.empty()) {
    // A retry in the batch (its key taken) refuses it: one by one then.
    auto r = exec_prepared(st_commit_new, commit_params(todo, sent, lease),
                           commit_binary);
    auto state = sqlstate_of(r.get());
    if (ok(r.get())) {
      take_inserted(r.get(), todo, sent, b);
      if (check) {
        std::vector<size_t> gone;
        for (size_t k = 0; k < todo.size(); ++k) {
          if (b.fresh[k] && !check(commit_stage::after_create, k)) {
            withdraw(todo, k, commit_stage::after_create, b, withdrawn);
            gone.push_back(k);
          }
        }
        remove_withdrawn(todo, gone);
      }
    } else if (state.compare(0, 2, "22") != 0 && state.compare(0, 2, "23") != 0
               && state.compare(0, 2, "40") != 0) {
      must(r, "commit matches"); // not about one request: fail the batch
    } else {
      // Somebody in the batch was refused: go one by one.
      store_logger()->debug("{}: batch of {} refused ({}); committing one "
                            "by one",
                            where_, sent.size(),
                            trimmed(PQresultErrorMessage(r.get())));
      must(exec("ROLLBACK TO SAVEPOINT mm_batch"), "ROLLBACK TO SAVEPOINT");
      for (size_t k = 0; k < todo.size(); ++k)
        if (!b.res[k]) // not withdrawn, also not as a duplicate
          commit_one(requests[todo[k].index], todo, k, check, b, withdrawn,
                     lease);
    }
  }
  take_retried(todo, b);
  // The last checkpoint, repeated until a round withdraws nobody: each
  // round that withdraws removes one request at least, so this ends.
  while (check) {
    std::vector<size_t> gone;
    for (size_t k = 0; k < todo.size(); ++k) {
      if (b.fresh[k] && !check(commit_stage::before_commit, k)) {
        withdraw(todo, k, commit_stage::before_commit, b, withdrawn);
        gone.push_back(k);
      }
    }
    if (gone.empty())
      break;
    remove_withdrawn(todo, gone);
  }
  if (std::find(b.fresh.begin(), b.fresh.end(), true) != b.fresh.end()) {
    // NOTIFY + COMMIT in one round trip; leased events are ours to deliver
    // (set_commit_lease): nobody else needs waking.
    commit(commit_lease_ms_ == 0);
  } else {
    // Nothing to keep (all refused, withdrawn or retries): no NOTIFY.
    must(exec("ROLLBACK"), "ROLLBACK");
  }
  std::vector<outcome<match_record>> out;
  out.reserve(b.res.size());
  for (auto& x : b.res)
    out.push_back(std::move(*x));
  return out;
}

void pg_match_store::commit_one(const match_request& req,
                                const std::vector<pending>& todo, size_t k,
                                const commit_check& check, batch_state& b,
                                std::vector<std::optional<failure>>& withdrawn,
                                const std::string& lease) {
  const std::vector<size_t> sent{k};
  auto params = commit_params(todo, sent, lease);
  for (int tries = 1;; ++tries) {
    must(exec("SAVEPOINT mm_req"), "SAVEPOINT");
    auto r = exec_prepared(st_commit, params, commit_binary);
    if (ok(r.get())) {
      // No row: committed before, `take_retried` reads it.
      if (PQntuples(r.get()) > 0 && check
          && !check(commit_stage::after_create, k)) {
        must(exec("ROLLBACK TO SAVEPOINT mm_req; RELEASE SAVEPOINT mm_req"),
             "ROLLBACK TO SAVEPOINT");
        withdraw(todo, k, commit_stage::after_create, b, withdrawn);
        return;
      }
      must(exec("RELEASE SAVEPOINT mm_req"), "RELEASE SAVEPOINT");
      take_inserted(r.get(), todo, sent, b);
      return;
    }
    auto state = sqlstate_of(r.get());
    auto constraint = field_of(r.get(), PG_DIAG_CONSTRAINT_NAME);
    auto why = to_failure(r.get(), "commit match");
    must(exec("ROLLBACK TO SAVEPOINT mm_req; RELEASE SAVEPOINT mm_req"),
         "ROLLBACK TO SAVEPOINT");
    if (state == "23505" && constraint == one_active_index) {
      auto detail = conflict_detail(req);
      if (!detail.empty()) {
        b.res[k].emplace(errc::conflict, std::move(detail));
        return;
      }
      // The other session closed meanwhile: the request may fit now.
      why = failure{errc::conflict, "a user of the pair was in an active "
                                    "session that closed meanwhile"};
    } else if (state == "40P01" || state == "40001") {
      why = failure{errc::conflict,
                    "contended by a concurrent commit: " + why.detail};
    } else {
      b.res[k].emplace(std::move(why));
      return;
    }
    if (tries >= max_request_tries) {
      b.res[k].emplace(std::move(why));
      return;
    }
  }
}

void pg_match_store::withdraw(const std::vector<pending>& todo, size_t k,
                              commit_stage stage, batch_state& b,
                              std::vector<std::optional<failure>>& withdrawn) {
  failure f{errc::cancelled, std::string{"withdrawn at "} + to_string(stage)};
  for (size_t j = 0; j < todo.size(); ++j) {
    if (j == k || todo[j].fate != todo[k].fate || withdrawn[j])
      continue;
    auto& x = b.res[j];
    if (!x || (*x && !(*x)->created)) {
      x.emplace(f);
      withdrawn[j] = f;
    }
  }
  b.fresh[k] = false;
  withdrawn[k] = f;
  b.res[k].emplace(std::move(f));
}

void pg_match_store::remove_withdrawn(const std::vector<pending>& todo,
                                      const std::vector<size_t>& gone) {
  if (gone.empty())
    return;
  std::vector<std::string> ids;
  std::vector<std::string> event_ids;
  for (auto k : gone) {
    ids.push_back(todo[k].id);
    event_ids.push_back(todo[k].event_id);
  }
  auto arg = binary_array(ids);
  auto events_arg = binary_array(event_ids);
  auto r = exec_prepared(st_withdraw, {&arg, &events_arg}, 0b11);
  must(r, "withdraw matches");
  auto removed = static_cast<size_t>(int_of(r.get(), 0, 0));
  auto events = static_cast<size_t>(int_of(r.get(), 0, 1));
  // One match.created each: a session gone with its event left would be
  // announced after all.
  if (removed != gone.size() || events != gone.size())
    throw db_refusal{failure{errc::protocol_error,
                             "withdrawing " + std::to_string(gone.size())
                               + " match(es) removed " + std::to_string(removed)
                               + " session(s) and " + std::to_string(events)
                               + " event(s)"}};
}

std::string pg_match_store::conflict_detail(const match_request& req) {
  auto r = exec_prepared(st_conflicts, {&req.user_a, &req.user_b});
  must(r, "read conflicts");
  std::string detail;
  for (const auto* user : {&req.user_a, &req.user_b}) {
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      if (text(r.get(), i, 0) != *user)
        continue;
      if (!detail.empty())
        detail += "; ";
      detail += "user '" + *user + "' is already in active session "
                + text(r.get(), i, 1);
    }
  }
  return detail;
}

void pg_match_store::take_inserted(const PGresult* r,
                                   const std::vector<pending>& todo,
                                   const std::vector<size_t>& sent,
                                   batch_state& b) {
  for (int i = 0; i < PQntuples(r); ++i) {
    auto k = sent.at(static_cast<size_t>(int_of(r, i, 0)) - 1);
    const auto& req = *todo[k].req;
    match_record rec;
    rec.session_id = text(r, i, 1);
    rec.queue = req.queue;
    rec.user_a = req.user_a;
    rec.ticket_a = req.ticket_a;
    rec.user_b = req.user_b;
    rec.ticket_b = req.ticket_b;
    rec.status = session_status::active;
    rec.created_at = int_of(r, i, 2);
    rec.created = true;
    b.res[k].emplace(std::move(rec));
    b.fresh[k] = true;
  }
}

void pg_match_store::take_retried(const std::vector<pending>& todo,
                                  batch_state& b) {
  auto keys = nlohmann::json::array();
  auto pairs = nlohmann::json::array();
  for (size_t k = 0; k < todo.size(); ++k) {
    if (b.res[k])
      continue;
    keys.push_back(todo[k].key);
    if (todo[k].mutual)
      pairs.push_back({todo[k].pair.first, todo[k].pair.second});
  }
  if (keys.empty())
    return;
  auto arg = keys.dump();
  auto r = exec_prepared(st_by_key, {&arg});
  must(r, "read committed sessions");
  std::unordered_map<std::string, match_record> found;
  for (int i = 0; i < PQntuples(r.get()); ++i)
    found.emplace(text(r.get(), i, 10), read_session(r.get(), i));
  std::unordered_map<std::string, match_record> by_pair; // by fate key
  if (!pairs.empty()) {
    auto parg = pairs.dump();
    auto pr = exec_prepared(st_by_pair, {&parg});
    must(pr, "read mutual matches");
    for (int i = 0; i < PQntuples(pr.get()); ++i)
      by_pair.emplace("m\n" + text(pr.get(), i, session_cols) + "\n"
                        + text(pr.get(), i, session_cols + 1),
                      read_session(pr.get(), i));
  }
  for (size_t k = 0; k < todo.size(); ++k) {
    if (b.res[k])
      continue;
    const match_record* hit = nullptr;
    if (todo[k].mutual)
      if (auto i = by_pair.find(todo[k].fate); i != by_pair.end())
        hit = &i->second;
    if (hit == nullptr)
      if (auto i = found.find(todo[k].key); i != found.end())
        hit = &i->second;
    if (hit == nullptr) {
      b.res[k].emplace(errc::protocol_error,
                       "commit inserted nothing and found no session for "
                       "the request");
      continue;
    }
    auto rec = *hit;
    // Our own id: an earlier attempt of this very call committed it (its
    // checkpoints were asked then; it is not fresh: never withdrawn now).
    rec.created = rec.session_id == todo[k].id;
    b.res[k].emplace(std::move(rec));
  }
}

} // namespace mm::pg
