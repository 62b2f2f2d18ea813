// The PostgreSQL match store's partition maintenance: the time windows of
// the outbox (by created_at) and of the ended sessions' history (by
// closed_at), created ahead and dropped past the retention
// (migrations/0004_outbox_partitions.sql, 0005_session_history.sql,
// docs/persistence.md).

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

/// A table partitioned by time windows, and what keeps a window past the
/// retention: an event still to deliver (its own, or one that names a
/// session of it: an event names an existing session until delivered).
struct partitioned {
  const char* parent;
  /// "SELECT EXISTS (...)" around the window's name.
  const char* pending_before;
  const char* pending_after;
};

// From the few pending events (outbox_pending), one primary-key probe each
// into the window (a semi-join could hash the whole window under the lock).
constexpr partitioned tables[] = {
  {"outbox",
   "SELECT EXISTS (SELECT 1 FROM outbox_pending p CROSS JOIN LATERAL ("
   "SELECT 1 FROM ",
   " o WHERE o.id = p.id AND o.created_at = p.created_at LIMIT 1) x)"},
  {"session_history",
   "SELECT EXISTS (SELECT 1 FROM outbox_pending o CROSS JOIN LATERAL ("
   "SELECT 1 FROM ",
   " h WHERE h.id = o.aggregate_id LIMIT 1) x)"},
};

struct window {
  int64_t lo = 0;
  int64_t hi = 0;
  std::string name;
};

std::string window_name(const std::string& parent, int64_t lo, int64_t hi) {
  return parent + "_p" + std::to_string(lo) + "_" + std::to_string(hi);
}

/// `<parent>_p<lo>_<hi>` -> the window; false for any other name.
bool parse_window(const std::string& parent, const std::string& name,
                  window& out) {
  const std::string prefix = parent + "_p";
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
    auto got
      = exec(std::string{"SELECT pg_try_advisory_lock("} + lock_key + ")");
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
      // One table: answers false when a lock could not be had in time (the
      // next maintenance tries again).
      auto one_table = [&](const partitioned& t) {
        const std::string parent = t.parent;
        auto list = exec("SELECT c.relname FROM pg_inherits i"
                         " JOIN pg_class c ON c.oid = i.inhrelid"
                         " WHERE i.inhparent = '"
                         + parent + "'::regclass");
        must(list, "list partitions of " + parent);
        std::vector<window> have;
        for (int i = 0; i < PQntuples(list.get()); ++i) {
          window w;
          if (parse_window(parent, text(list.get(), i, 0), w))
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
          auto name = window_name(parent, lo, hi);
          if (overlaps(lo, hi) || refused_windows_.count(name) > 0)
            continue;
          auto r = exec("CREATE TABLE IF NOT EXISTS " + name + " PARTITION OF "
                        + parent + " FOR VALUES FROM (to_timestamp("
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
            // window was current when the table was migrated, or no node
            // maintained for a while): they stay there, pruned row by row.
            // Not tried again: each try scans the default partition.
            refused_windows_.insert(name);
            store_logger()->info("{}: window {} left to the default "
                                 "partition, which holds rows of it",
                                 where_, name);
          } else if (state == "55P03") {
            lock_busy = true;
          } else if (state != "42P17") { // 42P17: another width's window
            must(r, "create " + name);
          }
        }
        // Past the retention: dropped whole, unless an event that it holds
        // or names still waits for its delivery.
        for (auto i = have.begin();
             retention_s > 0 && !lock_busy && i != have.end();) {
          if (i->hi + int64_t{retention_s} > now) {
            ++i;
            continue;
          }
          // One transaction: the parent locked first (the order of every
          // writer: parent, then partition), so no transaction still
          // writing into the window is left when it is looked into, and
          // none can start before it is gone. Writers wait for it a moment.
          must(exec("BEGIN"), "BEGIN");
          auto locked
            = exec("LOCK TABLE " + parent + " IN ACCESS EXCLUSIVE MODE");
          if (!ok(locked.get())) {
            rollback_quietly();
            if (sqlstate_of(locked.get()) == "55P03") {
              lock_busy = true;
              break;
            }
            must(locked, "lock " + parent);
          }
          auto pending = exec(t.pending_before + i->name + t.pending_after);
          must(pending, "look into " + i->name);
          if (text(pending.get(), 0, 0) == "t") {
            rollback_quietly();
            ++rep.kept;
            ++i;
            continue;
          }
          // The drop locks the default partition too, which prune locks
          // directly (not through the parent): it may time out as well.
          auto dropped = exec("DROP TABLE " + i->name);
          if (!ok(dropped.get())) {
            rollback_quietly();
            if (sqlstate_of(dropped.get()) == "55P03") {
              lock_busy = true;
              break;
            }
            must(dropped, "drop " + i->name);
          }
          commit();
          store_logger()->info("{}: dropped partition {}", where_, i->name);
          ++rep.dropped;
          i = have.erase(i);
        }
        rep.partitions += static_cast<uint32_t>(have.size());
        return !lock_busy;
      };
      for (const auto& t : tables)
        if (!one_table(t))
          break;
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
