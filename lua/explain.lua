-- explain: a dry run of a queue's rules for two tickets (docs/rules.md):
-- the same compatibility test the claim makes, on values given here. Reads
-- and writes no key.
-- ARGV[1] rules (lib/rules.lua)
-- ARGV[2..5] side a: rule values, ms waited, user, recent partners
-- ARGV[6..9] side b: the same
-- Replies:
--   {'compatible', windows_a, windows_b}
--   {'incompatible', rule (1-based), reason, windows_a, windows_b}
--   {'invalid', what}
local rs = ARGV[1]
if type(rs) ~= 'string' or rs == '' or #rs > 1024 then return invalid('rules') end
local rules = parse_rules(rs)
local function side(k)
  local wait = int_arg(ARGV[k + 1], 0, 1000000000000)
  if not wait or type(ARGV[k]) ~= 'string' then return nil end
  return {vals = split(ARGV[k], '|'), wait = wait, user = ARGV[k + 2] or '',
          avoid = split(ARGV[k + 3] or '', ',')}
end
local a, b = side(2), side(6)
if not a or not b then return invalid('side') end
local ok, i, why = compatible(rules, a, b)
local wa, wb = describe_windows(rules, a.wait), describe_windows(rules, b.wait)
if ok then return {'compatible', wa, wb} end
return {'incompatible', num(i), why, wa, wb}
