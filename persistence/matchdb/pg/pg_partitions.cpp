// The PostgreSQL match store's partition maintenance: the outbox's time
// windows created ahead and dropped past the retention
// (migrations/0004_outbox_partitions.sql, docs/persistence.md).

#include "persistence/matchdb/pg/pg_match_store.hpp"

#include <cstdlib>
#include <string>
#include <vector>

namespace mm::pg {

namespace {

/// Key of the advisory lock that serializes maintenance across nodes
/// ("mm-part" in ASCII).
constexpr const char* lock_key = "7885011451212148";

/// A DDL statement waits at most this long for its locks, and gives up
/// (retried at the next maintenance): commits queue behind a waiting
/// ACCESS EXCLUSIVE request, so the wait is their stall at most.
constexpr const char* ddl_lock_timeout = "500ms";

struct window {
  int64_t lo = 0;
  int64_t hi = 0;
  std::string name;
};

std::string window_name(int64_t lo, int64_t hi) {
  return "outbox_p" + std::to_string(lo) + "_" + std::to_string(hi);
}

/// `outbox_p<lo>_<hi>` -> the window; false for any other name.
bool parse_window(const std::string& name, window& out) {
  static const std::string prefix = "outbox_p";
  if (name.compare(0, prefix.size(), prefix) != 0)
    return false;
  const char* p = name.c_str() + prefix.size();
  char* end = nullptr;
  auto lo = std::strtoll(p, &end, 10);
  if (end == p || *end != '_')
    return false;
  p = end + 1;
  auto hi = std::strtoll(p, &end, 10);
  if (end == p || *end != '\0' || hi <= lo)
    return false;
  out = window{lo, hi, name};
  return true;
}

} // namespace

outcome<partition_report>
pg_match_store::do_maintain_partitions(uint32_t width_s, uint32_t retention_s,
                                       uint32_t ahead) {
  return run<partition_report>("maintain partitions", [&] {
    partition_report rep;
    auto got = exec(std::string{"SELECT pg_try_advisory_lock("} + lock_key
                    + ")");
    must(got, "partition lock");
    if (text(got.get(), 0, 0) != "t") {
      rep.skipped = true; // another node is at it
      return outcome<partition_report>{rep};
    }
    auto release = [this] {
      exec(std::string{"RESET lock_timeout; SELECT pg_advisory_unlock("}
           + lock_key + ")");
    };
    try {
      must(exec(std::string{"SET lock_timeout = '"} + ddl_lock_timeout + "'"),
           "lock timeout");
      auto now_r = exec("SELECT floor(extract(epoch FROM now()))::int8");
      must(now_r, "database clock");
      const int64_t now = int_of(now_r.get(), 0, 0);
      auto list = exec("SELECT c.relname FROM pg_inherits i"
                       " JOIN pg_class c ON c.oid = i.inhrelid"
                       " WHERE i.inhparent = 'outbox'::regclass");
      must(list, "list partitions");
      std::vector<window> have;
      for (int i = 0; i < PQntuples(list.get()); ++i) {
        window w;
        if (parse_window(text(list.get(), i, 0), w))
          have.push_back(w);
      }
      auto overlaps = [&have](int64_t lo, int64_t hi) {
        for (auto& w : have)
          if (w.lo < hi && lo < w.hi)
            return true;
        return false;
      };
      // Ahead: from the current window on.
      const int64_t w = width_s;
      bool lock_busy = false;
      for (int64_t k = now / w; k <= now / w + ahead && !lock_busy; ++k) {
        const int64_t lo = k * w;
        const int64_t hi = lo + w;
        if (overlaps(lo, hi) || refused_windows_.count(lo) > 0)
          continue;
        auto name = window_name(lo, hi);
        auto r = exec("CREATE TABLE IF NOT EXISTS " + name
                      + " PARTITION OF outbox FOR VALUES FROM (to_timestamp("
                      + std::to_string(lo) + ")) TO (to_timestamp("
                      + std::to_string(hi) + "))");
        if (ok(r.get())) {
          have.push_back(window{lo, hi, name});
          ++rep.created;
          continue;
        }
        auto state = sqlstate_of(r.get());
        if (state == "23514") {
          // Rows of this window are in the default partition already (the
          // window was current when the outbox was migrated, or no node
          // maintained for a while): they stay there, pruned row by row.
          // Not tried again: each try scans the default partition.
          refused_windows_.insert(lo);
          store_logger()->info("{}: outbox window {} left to the default "
                               "partition, which holds rows of it",
                               where_, name);
        } else if (state == "55P03") {
          lock_busy = true; // the next maintenance tries again
        } else if (state != "42P17") { // 42P17: another width's window
          must(r, "create " + name);
        }
      }
      // Past the retention: dropped whole, unless an event there still
      // waits for its delivery.
      for (auto i = have.begin(); retention_s > 0 && !lock_busy
                                  && i != have.end();) {
        if (i->hi + int64_t{retention_s} > now) {
          ++i;
          continue;
        }
        // One transaction: the parent locked first (the order of every
        // writer: parent, then partition), so no transaction still writing
        // into the window is left when it is looked into, and none can
        // start before it is gone. Commits wait for it a moment.
        must(exec("BEGIN"), "BEGIN");
        auto locked = exec("LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE");
        if (!ok(locked.get())) {
          rollback_quietly();
          if (sqlstate_of(locked.get()) == "55P03") {
            lock_busy = true; // the next maintenance tries again
            break;
          }
          must(locked, "lock outbox");
        }
        auto pending = exec("SELECT EXISTS (SELECT 1 FROM " + i->name
                            + " WHERE delivered_at IS NULL)");
        must(pending, "look into " + i->name);
        if (text(pending.get(), 0, 0) == "t") {
          rollback_quietly();
          ++rep.kept;
          ++i;
          continue;
        }
        must(exec("DROP TABLE " + i->name), "drop " + i->name);
        commit();
        store_logger()->info("{}: dropped outbox partition {}", where_,
                             i->name);
        ++rep.dropped;
        i = have.erase(i);
      }
      rep.partitions = static_cast<uint32_t>(have.size());
    } catch (const db_refusal&) {
      rollback_quietly();
      release();
      throw;
    }
    release();
    return outcome<partition_report>{rep};
  });
}

} // namespace mm::pg
