-- release: removes a claimed or claiming ticket once its pair is settled (the
-- match was committed, or the claimer goes back to claim-or-enqueue). It never
-- removes a waiting ticket: that is what cancel is for.
-- Idempotent: a ticket already gone answers 'gone'.
-- KEYS: the five queue keys documented in lib/common.lua.
-- ARGV[1] ticket id
-- Replies:
--   {'released', ticket}
--   {'waiting', ticket}
--   {'gone'}
--   {'invalid', what}
local ticket = ARGV[1]
if not valid_id(ticket, MAX_TICKET) then return invalid('ticket') end
local rec = load_ticket(ticket)
if not rec then return {'gone'} end
if rec.state == 'waiting' then return {'waiting', ticket} end
remove_ticket(rec)
return {'released', ticket}
