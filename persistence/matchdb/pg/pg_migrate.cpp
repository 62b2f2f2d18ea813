// The PostgreSQL match store's migrations: applies the embedded ones in
// order, once each, under an advisory lock; refuses one changed after use.

#include "persistence/matchdb/pg/pg_match_store.hpp"

#include "mm_migrations.hpp" // generated from persistence/matchdb/migrations/

namespace mm::pg {

namespace {

/// Key of the advisory lock that serializes migrations ("mm-migra").
constexpr int64_t migration_lock_key = 0x6d6d2d6d69677261;

} // namespace

outcome<std::vector<std::string>> pg_match_store::apply_migrations() {
  return run<std::vector<std::string>>("apply migrations", [this] {
    std::vector<std::string> applied;
    auto lock_key = std::to_string(migration_lock_key);
    for (const auto& m : migration_sources) {
      must(exec("BEGIN"), "BEGIN");
      // Serializes concurrent starters until this transaction ends.
      must(exec_params("SELECT pg_advisory_xact_lock($1::int8)", {lock_key}),
           "advisory lock");
      must(exec("CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version int PRIMARY KEY, name text NOT NULL,"
                " checksum text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"),
           "create schema_migrations");
      auto version = std::to_string(m.version);
      auto seen
        = exec_params("SELECT checksum = md5($2), name FROM schema_migrations"
                      " WHERE version = $1::int",
                      {version, m.sql});
      must(seen, "read schema_migrations");
      if (PQntuples(seen.get()) > 0) {
        must(exec("COMMIT"), "COMMIT");
        if (text(seen.get(), 0, 0) != "t")
          throw db_refusal{failure{
            errc::protocol_error,
            std::string{"migration "} + m.name
              + " was changed after it was applied: add a new migration "
                "instead"}};
        continue;
      }
      must(exec(m.sql), std::string{"migration "} + m.name);
      must(exec_params("INSERT INTO schema_migrations (version, name,"
                       " checksum) VALUES ($1::int, $2, md5($3))",
                       {version, m.name, m.sql}),
           "record migration");
      commit();
      store_logger()->info("{}: applied migration {}", where_, m.name);
      applied.emplace_back(m.name);
    }
    // A schema newer than this binary (a node of an older version started
    // after a newer one migrated): its statements would miss what the
    // newer migrations moved (0005: ended sessions), so it does not start.
    auto newest = exec("SELECT coalesce(max(version), 0) FROM"
                       " schema_migrations");
    must(newest, "read schema_migrations");
    const int64_t known = migration_sources[migration_count - 1].version;
    if (int_of(newest.get(), 0, 0) > known)
      throw db_refusal{
        failure{errc::protocol_error,
                "the database has migration " + text(newest.get(), 0, 0)
                  + ", newer than this binary's newest ("
                  + std::to_string(known) + "): run the newer binary"}};
    return outcome<std::vector<std::string>>{std::move(applied)};
  });
}

} // namespace mm::pg
