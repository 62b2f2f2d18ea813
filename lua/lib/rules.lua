-- rules.lua: match rules inside the atomic claim (problem 11 of
-- docs/design.md; docs/rules.md). The build prepends it to every script,
-- after common.lua. Queues without rules never reach this code.
--
-- A rule set arrives as one string made by core/rules.cpp, rules separated
-- by ';', fields by ',':
--   d,<base>,<step>,<every ms>,<cap>,<band>  distance: |a - b| <= window;
--                          band > 0: this rule indexes waiters by value band
--   e,<relax ms>           equal strings (relax ms 0: never relaxed)
--   o,<relax ms>,<index>   overlap of string lists (index 1: indexed)
--   a,<relax ms>           avoid recent partners (no attribute)
-- A ticket's rule values ('rk') are positional, one per rule, separated by
-- '|': a number, a string, or a list joined by ','; empty for 'a'. Values
-- use [%w._@-] only (checked by the engine), so the separators are safe.
--
-- Compatibility is symmetric: BOTH users must accept the pair under their
-- own current windows ("the shorter waiter's window decides"), which is
-- also what makes the index exact: every compatible waiter lies in a cell
-- that the claimer's own windows select.

local function split(s, sep)
  local out = {}
  if s == nil or s == '' then return out end
  local pos = 1
  while true do
    local i = string.find(s, sep, pos, true)
    if not i then
      out[#out + 1] = string.sub(s, pos)
      return out
    end
    out[#out + 1] = string.sub(s, pos, i - 1)
    pos = i + 1
  end
end

local function parse_rules(s)
  local rules = {}
  for _, r in ipairs(split(s, ';')) do
    local f = split(r, ',')
    local rule = {kind = f[1]}
    if f[1] == 'd' then
      rule.base, rule.step, rule.every = tonumber(f[2]), tonumber(f[3]),
        tonumber(f[4])
      rule.cap, rule.band = tonumber(f[5]), tonumber(f[6])
    else
      rule.relax = tonumber(f[2]) or 0
      rule.index = f[3] == '1'
    end
    rules[#rules + 1] = rule
  end
  return rules
end

-- The window of a distance rule after `wait` ms.
local function window(rule, wait)
  local w = rule.base
  if rule.every > 0 and rule.step > 0 then
    w = w + rule.step * math.floor(wait / rule.every)
  end
  if w > rule.cap then w = rule.cap end
  return w
end

local function relaxed(rule, wait)
  return rule.relax > 0 and wait >= rule.relax
end

-- Ms until any window or relaxation of a ticket that waited `wait` ms
-- changes next; -1 when nothing changes any more.
local function next_change(rules, wait)
  local best = -1
  local function consider(t)
    if t > wait and (best < 0 or t - wait < best) then best = t - wait end
  end
  for _, r in ipairs(rules) do
    if r.kind == 'd' then
      if r.every > 0 and r.step > 0 and window(r, wait) < r.cap then
        consider((math.floor(wait / r.every) + 1) * r.every)
      end
    elseif r.relax > 0 then
      consider(r.relax)
    end
  end
  return best
end

-- "skill=150;region=*" for the ticket's state (docs/rules.md).
local function describe_windows(rules, wait)
  local parts = {}
  for i, r in ipairs(rules) do
    if r.kind == 'd' then
      parts[#parts + 1] = i .. '=' .. num(window(r, wait))
    elseif relaxed(r, wait) then
      parts[#parts + 1] = i .. '=*'
    else
      parts[#parts + 1] = i .. '=='
    end
  end
  return table.concat(parts, ';')
end

local function contains(list, x)
  for _, v in ipairs(list) do
    if v == x then return true end
  end
  return false
end

-- One side of a pair: {user, vals (split rk), wait ms, avoid (list)}.
-- Returns true, or false and the 1-based index of the first rule that
-- refuses, with a short reason.
local function compatible(rules, a, b)
  for i, r in ipairs(rules) do
    if r.kind == 'd' then
      local x, y = tonumber(a.vals[i]), tonumber(b.vals[i])
      local w = math.min(window(r, a.wait), window(r, b.wait))
      if not x or not y or math.abs(x - y) > w then
        return false, i, 'distance ' .. tostring(x and y and math.abs(x - y))
          .. ' > window ' .. num(w)
      end
    elseif r.kind == 'e' then
      if a.vals[i] ~= b.vals[i]
          and not (relaxed(r, a.wait) and relaxed(r, b.wait)) then
        return false, i, 'different values, not both relaxed'
      end
    elseif r.kind == 'o' then
      local ok = relaxed(r, a.wait) and relaxed(r, b.wait)
      if not ok then
        local theirs = split(b.vals[i], ',')
        for _, v in ipairs(split(a.vals[i], ',')) do
          if contains(theirs, v) then ok = true break end
        end
      end
      if not ok then return false, i, 'no value in common' end
    elseif r.kind == 'a' then
      if (contains(a.avoid, b.user) or contains(b.avoid, a.user))
          and not (relaxed(r, a.wait) and relaxed(r, b.wait)) then
        return false, i, 'recent partners'
      end
    end
  end
  return true
end

-- Cartesian product of the per-rule component lists: the cell names.
local function product(lists)
  local cells = {''}
  for _, comps in ipairs(lists) do
    local next_cells = {}
    for _, c in ipairs(cells) do
      for _, v in ipairs(comps) do
        next_cells[#next_cells + 1] = c .. '|' .. v
      end
    end
    cells = next_cells
  end
  return cells
end

-- The index cells of a ticket: as a waiter (`search` false: the cells it
-- is filed under, one band) or as a claimer (`search` true: the cells it
-- must look in, every band its window covers). Its equal values and list
-- values, plus '*' where that rule has relaxed for it, are the same in
-- both; so every compatible waiter is in a cell its claimer reads.
local function cells_of(rules, vals, wait, search)
  local lists = {}
  for i, r in ipairs(rules) do
    if r.kind == 'e' or (r.kind == 'o' and r.index) then
      local comps = r.kind == 'e' and {vals[i]} or split(vals[i], ',')
      if relaxed(r, wait) then comps[#comps + 1] = '*' end
      lists[#lists + 1] = comps
    elseif r.kind == 'd' and r.band > 0 then
      local v = tonumber(vals[i])
      local w = search and window(r, wait) or 0
      local comps = {}
      for b = math.floor((v - w) / r.band), math.floor((v + w) / r.band) do
        comps[#comps + 1] = 'b' .. num(b)
      end
      lists[#lists + 1] = comps
    end
  end
  return product(lists)
end

-- Index members sort by cell, then FIFO score (fixed width), then ticket.
local function index_member(cell, score, ticket)
  return cell .. ':' .. string.format('%016.0f', score) .. ':' .. ticket
end

index_add = function(rec, now)
  if not rec.rs or rec.rs == '' then return end
  local rules = parse_rules(rec.rs)
  local cells = cells_of(rules, split(rec.rk, '|'), now - rec.since, false)
  for _, c in ipairs(cells) do
    redis.call('ZADD', K_IDX, 0, index_member(c, rec.score, rec.ticket))
  end
  rec.cells = table.concat(cells, ',')
end

index_remove = function(rec)
  if not rec.cells or rec.cells == '' then return end
  for _, c in ipairs(split(rec.cells, ',')) do
    redis.call('ZREM', K_IDX, index_member(c, rec.score, rec.ticket))
  end
  rec.cells = ''
end
