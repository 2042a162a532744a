-- One instance's flush of one tenant's usage counts, applied at most once.
--
-- KEYS[1]  the tenant's totals, corral:v1:usage:{<tenant>} (durable).
-- KEYS[2]  this instance's flush marker for the tenant,
--          corral:v1:usage-flushed:{<tenant>}:<instance>: the last batch's
--          sequence number applied, kept for ARGV[2] seconds (a retry
--          comes within seconds).
-- KEYS[3]  the tenant's day that just aged out of retention: deleted.
-- KEYS[4..] the tenant's day hashes the batch adds to (durable).
-- ARGV[1]  the batch's sequence number; ARGV[2] the marker's TTL; ARGV[3]
--          the bound of every counter (MaxFigure); then, for KEYS[1] and
--          each of KEYS[4..] in turn: a count n and n pairs of field and
--          increment.
--
-- A batch whose sequence number is not above the marker's was applied
-- already (its reply was lost): nothing changes, and 0 is returned. Else
-- every increment is applied and the marker set in the same run, and 1 is
-- returned. A counter never passes the bound: one that would (or that
-- Redis refuses to increment as an integer overflow) is set to it, so one
-- absurd figure never fails the batch.

local seq = tonumber(ARGV[1])
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if seq <= last then
  return 0
end
local bound = ARGV[3]
local limit = tonumber(bound)
local i = 4
local function apply(key)
  local n = tonumber(ARGV[i])
  i = i + 1
  for _ = 1, n do
    local field, inc = ARGV[i], ARGV[i + 1]
    i = i + 2
    local ok, v = pcall(redis.call, 'HINCRBY', key, field, inc)
    if not ok or v > limit then
      redis.call('HSET', key, field, bound)
    end
  end
end
apply(KEYS[1])
for k = 4, #KEYS do
  apply(KEYS[k])
end
redis.call('UNLINK', KEYS[3])
redis.call('SET', KEYS[2], seq, 'EX', ARGV[2])
return 1
