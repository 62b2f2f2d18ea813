-- claim_fast.lua: the claim of the common case in few calls and no tables
-- (docs/benchmarks.md "The claim script's cost"): a user without a ticket
-- in a queue without rules, not a re-scan. lua/claim.lua tries it first;
-- it reads and writes the records of lib/common.lua's layout as strings,
-- exactly as the general path would write them, and hands every other case
-- to the general path before it changed anything but the stale waiters it
-- removed (which it counts for it).
local function claim_fast(user, ticket, node, attrs, ttl, scan, hold, now)
  local ptr = '#' .. user
  local got = redis.call('HMGET', K_TICKETS, ptr, ticket)
  if got[1] or got[2] then return nil, 0 end
  local stale, looked = 0, 0
  local u, t, n, sc, tok, st, dl, h, pu, pt, pn, ps, ptk, si, rs, rk, av, ce, al, rest
  while looked < scan do
    local head = redis.call('ZPOPMIN', K_WAITING)
    local id = head[1]
    if not id then break end
    looked = looked + 1
    local raw = redis.call('HGET', K_TICKETS, id)
    if raw then
      u, t, n, sc, tok, st, dl, h, pu, pt, pn, ps, ptk, si, rs, rk, av, ce, al, rest = string.match(raw, LAYOUT)
      if not u or u == user then
        -- another layout, or this user's own older ticket: the general path
        redis.call('ZADD', K_WAITING, head[2], id)
        return nil, stale
      end
      if (tonumber(dl) or 0) < now then
        remove_ticket(decode(raw), true)
        stale = stale + 1
        u = nil
      else
        break
      end
    end
  end
  local seq = int_s(redis.call('INCR', K_SEQ))
  local dl_s = int_s(now + ttl)
  local stale_s = stale == 0 and '0' or int_s(stale)
  if u then
    local at_s = int_s(now + hold)
    al = tonumber(al) or 0
    local pattrs = string.sub(rest, 1, al)
    redis.call('HSET', K_TICKETS, t,
      '\1' .. u .. '\0' .. t .. '\0' .. n .. '\0' .. sc .. '\0' .. tok
      .. '\0claimed\0' .. dl .. '\0' .. at_s .. '\0' .. user .. '\0' .. ticket
      .. '\0' .. node .. '\0' .. seq .. '\0' .. seq .. '\0' .. si .. '\0' .. rs
      .. '\0' .. rk .. '\0' .. av .. '\0' .. ce .. '\0' .. al .. '\0' .. pattrs
      .. attrs,
      ticket,
      '\1' .. user .. '\0' .. ticket .. '\0' .. node .. '\0' .. seq .. '\0'
      .. seq .. '\0claimer\0' .. dl_s .. '\0' .. at_s .. '\0' .. u .. '\0' .. t
      .. '\0' .. n .. '\0' .. sc .. '\0' .. tok .. '\0' .. now
      .. '\0\0\0\0\0' .. #attrs .. '\0' .. attrs .. pattrs,
      ptr, ticket)
    redis.call('ZADD', K_DEADLINES, at_s, t, at_s, ticket)
    return {'matched', ticket, seq, u, t, n, pattrs, sc, tok, stale_s}
  end
  redis.call('HSET', K_TICKETS, ticket,
    '\1' .. user .. '\0' .. ticket .. '\0' .. node .. '\0' .. seq .. '\0' .. seq
    .. '\0waiting\0' .. dl_s .. '\0' .. '0\0\0\0\0\0\0' .. now .. '\0\0\0\0\0'
    .. #attrs .. '\0' .. attrs,
    ptr, ticket)
  redis.call('ZADD', K_WAITING, seq, ticket)
  redis.call('ZADD', K_DEADLINES, dl_s, ticket)
  local more = '0'
  if looked >= scan then more = '1' end
  return {'queued', ticket, seq, seq, dl_s, stale_s, more}
end
