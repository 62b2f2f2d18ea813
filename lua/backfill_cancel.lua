-- backfill_cancel: ends a session's backfill request (docs/groups.md
-- "Backfill"): the session ended, filled up, or nobody wants more players.
-- A waiting request is removed; a claimed one is left to its group's
-- claimer, whose commit of the fill is refused by the database when the
-- session is over (then the request is removed with the group's requeue).
-- KEYS: the five group keys documented in lib/groups.lua.
-- ARGV[1] the request's ticket id ('~' .. session id)
-- Replies: {'cancelled'} | {'in_flight', group} | {'not_found'}
--        | {'invalid', what}
-- Idempotent: a request removed before answers 'not_found'.
gbind(KEYS)
local ticket = ARGV[1]
if not valid_gticket(ticket) or not is_backfill(ticket) then
  return invalid('ticket')
end
local t = gload(ticket)
if not t then return {'not_found'} end
if t.state == 'claimed' then return {'in_flight', t.group} end
gremove(t)
return {'cancelled'}
