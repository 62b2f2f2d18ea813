// The public entry point of the PostgreSQL match store: make_pg_match_store
// and its factory, which names the target in logs without the password.

#include "persistence/matchdb/match_store.hpp"

#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include <libpq-fe.h>

#include "persistence/matchdb/pg/pg_match_store.hpp"

namespace mm {

namespace {

class pg_factory final : public match_store_factory {
 public:
  explicit pg_factory(pg_options opts) : opts_(std::move(opts)) {
    where_ = "postgres";
    // Describe the target without a password.
    char* err = nullptr;
    if (PQconninfoOption* o = PQconninfoParse(opts_.conninfo.c_str(), &err)) {
      for (auto* i = o; i->keyword != nullptr; ++i)
        if (i->val != nullptr && *i->val != '\0'
            && (std::strcmp(i->keyword, "host") == 0
                || std::strcmp(i->keyword, "hostaddr") == 0
                || std::strcmp(i->keyword, "port") == 0
                || std::strcmp(i->keyword, "dbname") == 0
                || std::strcmp(i->keyword, "user") == 0))
          where_ += std::string{" "} + i->keyword + "=" + i->val;
      PQconninfoFree(o);
    }
    if (err != nullptr)
      PQfreemem(err);
  }

  std::unique_ptr<match_store> connect() override {
    return std::make_unique<pg::pg_match_store>(opts_, where_);
  }

  std::string describe() const override {
    return where_;
  }

  uint32_t commit_bound_ms() const override {
    // A COMMIT reaches the server within the idle-in-transaction timeout
    // after the statement before it, or the server ends the transaction;
    // once there it runs under the statement timeout. Without a statement
    // timeout nothing bounds it.
    if (opts_.statement_timeout_ms == 0)
      return UINT32_MAX;
    return 2 * opts_.statement_timeout_ms;
  }

 private:
  pg_options opts_;
  std::string where_;
};

} // namespace

std::shared_ptr<match_store_factory> make_pg_match_store(pg_options opts) {
  return std::make_shared<pg_factory>(std::move(opts));
}

} // namespace mm
