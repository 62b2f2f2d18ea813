-- 0006_groups: group matches (problem 15 of docs/design.md): one session of
-- 2..64 members in teams, committed whole (match_store::commit_group), that
-- members leave one by one until too few stay (leave_session).
--
-- A group's session is a row of match_sessions like a pair's: user_a/user_b
-- are its first two members (so every reader of the pair columns still gets
-- a valid answer), match_key is the group's key (queue and the claim's group
-- id, group_key: it holds no tab, so it never collides with a pair's key),
-- and `group_id` / `min_players` mark it as a group (both NULL for a pair).
-- Its roster lives in session_members, one row per member as for a pair, so
-- the one-active-session index (I1) guards every member and an end frees
-- them all (members go by ON DELETE CASCADE when the session moves to the
-- history, or are set inactive by close_session). A member row of a group
-- also carries what the session's events name: the member's `ticket`, its
-- `team`, its `attrs` and `ord`, its position in the request (the roster's
-- order); a pair's member rows leave them NULL (its tickets and attrs are in
-- the session row, as before). A member that leaves is set inactive: free
-- to match again at once, still listed in the roster.
--
-- An ended session moves to session_history (0005) and its member rows go:
-- the move (mm_end) writes a group's roster into `members` (a JSON array of
-- {user, ticket, attrs, team, active}, in request order; `active`: whether
-- the member was still in when the session ended) with `group_id` and
-- `min_players`; NULL for a pair, whose two users are in the row itself.
-- The view all_sessions shows the three new columns too (for a live group,
-- the roster from session_members).
--
-- Lock cost: each ALTER TABLE ... ADD COLUMN takes its table's ACCESS
-- EXCLUSIVE lock for a catalog change only — no default, so no rewrite and
-- no scan, on a big table as on an empty one (session_history's partitions
-- get the columns the same way) — but it waits for the transactions that
-- use the table and commits queue behind it meanwhile: apply it when no
-- long transaction runs. No index: a group's roster is found by the primary
-- key of session_members (session_id first).
ALTER TABLE match_sessions
  ADD COLUMN group_id text,
  ADD COLUMN min_players smallint;

ALTER TABLE session_members
  ADD COLUMN team smallint,
  ADD COLUMN ticket text,
  ADD COLUMN attrs text,
  ADD COLUMN ord smallint;

ALTER TABLE session_history
  ADD COLUMN group_id text,
  ADD COLUMN min_players smallint,
  ADD COLUMN members jsonb;

-- The columns of 0005's view, then the new ones (CREATE OR REPLACE VIEW may
-- only append).
CREATE OR REPLACE VIEW all_sessions AS
  SELECT s.id, s.match_key, s.queue, s.user_a, s.ticket_a, s.attrs_a,
         s.user_b, s.ticket_b, s.attrs_b, s.status, s.created_at,
         s.closed_at, s.close_reason, s.ended_by, s.group_id, s.min_players,
         CASE WHEN s.group_id IS NOT NULL THEN (
           SELECT jsonb_agg(jsonb_build_object(
                    'user', m.user_id, 'ticket', m.ticket, 'attrs', m.attrs,
                    'team', m.team, 'active', m.active) ORDER BY m.ord)
           FROM session_members m WHERE m.session_id = s.id)
         END AS members
  FROM match_sessions s
  UNION ALL
  SELECT id, match_key, queue, user_a, ticket_a, attrs_a, user_b, ticket_b,
         attrs_b, status, created_at, closed_at, close_reason, ended_by,
         group_id, min_players, members
  FROM session_history;
