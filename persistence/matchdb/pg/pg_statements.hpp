#pragma once

// The prepared statements of the PostgreSQL match store: their names in
// `stmt` order, and the table of names and SQL text (pg_statements.cpp).

#include <cstddef>

namespace mm::pg {

enum stmt : size_t {
  st_commit,
  st_withdraw,
  st_by_key,
  st_by_pair,
  st_swipe,
  st_mutual_of,
  st_conflicts,
  st_close,
  st_active_of,
  st_active_of_many,
  st_by_id,
  st_lock_session,
  st_lock_sessions,
  st_ended_of,
  st_end,
  st_expire_pick,
  st_prune_outbox,
  st_prune_sessions,
  st_prune_history,
  st_fetch,
  st_mark,
  st_commit_group,
  st_busy_of,
  st_roster,
  st_leave,
  st_add_members,
  st_commit_new,
  st_count,
};

struct statement {
  const char* name;
  const char* sql;
};

/// By `stmt`; each connection prepares an entry on its first use.
extern const statement statements[st_count];

} // namespace mm::pg
