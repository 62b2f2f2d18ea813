// The PostgreSQL match store's connection: connecting, reconnecting, running
// statements (prepared on first use) and ending transactions.

#include "persistence/matchdb/pg/pg_match_store.hpp"

#include <algorithm>
#include <cstring>

namespace mm::pg {

namespace {

/// libpq prints server notices ("relation already exists, skipping") to
/// stderr by default; they are expected here.
void quiet_notices(void*, const char*) {
  // nop
}

} // namespace

pg_match_store::pg_match_store(pg_options opts, std::string where)
  : opts_(std::move(opts)), where_(std::move(where)) {
  // One eager attempt; when the database is down the store stays
  // disconnected and tries again on each call.
  if (!connect_now())
    store_logger()->debug("{} not reachable yet ({}); will retry on use",
                          where_, last_error_);
}

bool pg_match_store::connect_now() {
  conn_.reset();
  prepared_.fill(false);
  listening_ = false;
  // libpq: whole seconds, and values below 2 are raised to 2 anyway.
  auto timeout = std::to_string(
    std::max<uint32_t>(2, (opts_.connect_timeout_ms + 999) / 1000));
  // The conninfo comes last: its own settings win (expand_dbname = 1).
  const char* keys[] = {"connect_timeout",
                        "keepalives",
                        "keepalives_idle",
                        "keepalives_interval",
                        "keepalives_count",
                        "dbname",
                        nullptr};
  const char* values[] = {timeout.c_str(),        "1",    "10", "5", "3",
                          opts_.conninfo.c_str(), nullptr};
  conn_ptr c{PQconnectdbParams(keys, values, 1)};
  if (!c) {
    last_error_ = "cannot allocate a libpq connection";
    return false;
  }
  if (PQstatus(c.get()) != CONNECTION_OK) {
    last_error_ = trimmed(PQerrorMessage(c.get()));
    return false;
  }
  PQsetNoticeProcessor(c.get(), quiet_notices, nullptr);
  // READ COMMITTED whatever the server's default: after waiting on the
  // unique index for a concurrent commit, the next statement must see it,
  // and SKIP LOCKED must not raise serialization failures.
  // UTF-8 whatever the conninfo or the server says: every text the store
  // sends is UTF-8 (checked), and the server reads a binary array's text
  // in the client's encoding.
  std::string set = "SET client_encoding = 'UTF8'; "
                    "SET default_transaction_isolation = 'read committed'";
  if (opts_.statement_timeout_ms > 0) {
    auto ms = std::to_string(opts_.statement_timeout_ms);
    set += "; SET statement_timeout = " + ms;
    // A COMMIT held up on its way (a stalled or killed node) must not land
    // long after the node decided to send it: the commit bound
    // (match_store_factory::commit_bound_ms) counts on this.
    set += "; SET idle_in_transaction_session_timeout = " + ms;
  }
  result_ptr r{PQexec(c.get(), set.c_str())};
  if (!r || !ok(r.get())) {
    last_error_ = r ? trimmed(PQresultErrorMessage(r.get()))
                    : trimmed(PQerrorMessage(c.get()));
    return false;
  }
  conn_ = std::move(c);
  return true;
}

void pg_match_store::rollback_quietly() noexcept {
  if (!conn_ || PQtransactionStatus(conn_.get()) == PQTRANS_IDLE)
    return;
  result_ptr r{PQexec(conn_.get(), "ROLLBACK")};
  if (!r || !ok(r.get()))
    conn_.reset();
}

result_ptr pg_match_store::checked(result_ptr r) {
  if (!r || PQstatus(conn_.get()) != CONNECTION_OK)
    throw connection_lost{trimmed(PQerrorMessage(conn_.get()))};
  if (PQresultStatus(r.get()) == PGRES_FATAL_ERROR) {
    auto state = sqlstate_of(r.get());
    // No SQLSTATE: libpq's own failure, i.e. the connection broke.
    if (state.empty() || state.compare(0, 2, "08") == 0 || state == "57P01"
        || state == "57P02" || state == "57P03")
      throw connection_lost{trimmed(PQresultErrorMessage(r.get()))};
  }
  return r;
}

result_ptr pg_match_store::exec(const std::string& sql) {
  return checked(result_ptr{PQexec(conn_.get(), sql.c_str())});
}

result_ptr
pg_match_store::exec_params(const char* sql,
                            std::initializer_list<std::string> params) {
  std::vector<const char*> values;
  for (const auto& p : params)
    values.push_back(p.c_str());
  return checked(
    result_ptr{PQexecParams(conn_.get(), sql, static_cast<int>(values.size()),
                            nullptr, values.data(), nullptr, nullptr, 0)});
}

namespace {

/// libpq's parallel arrays for a statement's parameters.
struct param_arrays {
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;

  void add(const std::string& p, uint32_t binary) {
    values.push_back(p.data());
    lengths.push_back(static_cast<int>(p.size()));
    formats.push_back(static_cast<int>((binary >> formats.size()) & 1u));
  }
};

} // namespace

result_ptr pg_match_store::exec_prepared(
  stmt s, std::initializer_list<const std::string*> params, uint32_t binary) {
  param_arrays a;
  for (const auto* p : params)
    a.add(*p, binary);
  return send_prepared(s, static_cast<int>(a.values.size()), a.values.data(),
                       a.lengths.data(), a.formats.data());
}

result_ptr pg_match_store::exec_prepared(stmt s,
                                         const std::vector<std::string>& params,
                                         uint32_t binary) {
  param_arrays a;
  for (const auto& p : params)
    a.add(p, binary);
  return send_prepared(s, static_cast<int>(a.values.size()), a.values.data(),
                       a.lengths.data(), a.formats.data());
}

result_ptr
pg_match_store::send_prepared(stmt s, int n, const char* const* values,
                              const int* lengths, const int* formats) {
  if (!prepared_[s]) {
    auto r = checked(result_ptr{PQprepare(conn_.get(), statements[s].name,
                                          statements[s].sql, n, nullptr)});
    must(r, std::string{"prepare "} + statements[s].name);
    prepared_[s] = true;
  }
  // Lengths matter to the binary parameters only: libpq reads a text one
  // up to its NUL, which std::string keeps.
  return checked(result_ptr{PQexecPrepared(conn_.get(), statements[s].name, n,
                                           values, lengths, formats, 0)});
}

void pg_match_store::must(const result_ptr& r, const std::string& what) {
  if (!ok(r.get()))
    throw db_refusal{to_failure(r.get(), what)};
}

void pg_match_store::commit(bool notify) {
  auto r = exec(notify ? std::string{"NOTIFY "} + outbox_channel + "; COMMIT"
                       : std::string{"COMMIT"});
  must(r, "COMMIT");
  // COMMIT of a failed transaction "succeeds" as ROLLBACK.
  if (std::strcmp(PQcmdStatus(r.get()), "COMMIT") != 0)
    throw db_refusal{
      failure{errc::protocol_error, "the transaction was rolled back"}};
}

} // namespace mm::pg
