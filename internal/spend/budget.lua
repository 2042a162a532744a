-- One budget decision or settlement for one tenant, atomically, on Redis's
-- clock (TIME), so every instance agrees on the spend and on the UTC day.
--
-- KEYS[1]  the tenant's spend hash, corral:v1:spend:{<tenant>}; durable (no
--          TTL). Fields: d = the current UTC day (YYYY-MM-DD), m = the
--          current month (YYYY-MM), d:<day>:s / d:<day>:r = the day's spent
--          and reserved nano-dollars, m:<month>:s / m:<month>:r the month's.
--          When the day (month) rolls over, the old period's fields are
--          deleted: retention is this script, not a TTL.
-- KEYS[2]  the tenant's reservation deadlines, corral:v1:spend:{<tenant>}:held,
--          a sorted set of reservation ids scored by the Unix second after
--          which each is released on its own: an instance that dies
--          mid-call never settles, and its reservation must not count
--          until the period rolls. Every run releases the expired ones
--          first (at most 64 a run), so all instances see the same figures.
-- ARGV[1]  "reserve" | "settle" | "read" | "flush"
-- reserve: ARGV[2] day limit, ARGV[3] month limit (0 = none), ARGV[4] the
--          estimate to reserve, ARGV[5] the reservation's id. Refused
--          (nothing reserved) when spent + reserved has reached a limit; else
--          field x:<id> = "<day> <month> <amount>" records the reservation
--          and KEYS[2] its deadline, now + ARGV[7] seconds.
-- settle:  ARGV[2] the reservation's id ("" = none), ARGV[3] the actual
--          cost. The reservation is released where it still exists (a
--          period that rolled over took it along), once: a release retried
--          for a reservation whose reply was lost, that never arrived, or
--          that expired, finds no x:<id> and releases nothing. The cost is
--          spent in today's periods.
-- flush:   ARGV[2] an instance id, ARGV[3] its flush sequence number, ARGV[4]
--          the spend it made while Redis was unreachable. Applied once:
--          field i:<instance> keeps the last sequence applied, so a flush
--          retried after a lost reply is not counted twice.
-- ARGV[6]  optional: the time in Unix seconds, replacing TIME (tests).
-- ARGV[7]  reserve: how long the reservation holds, in seconds.
--
-- Returns {allowed (1|0), day, month, day spent, day reserved, month spent,
-- month reserved, now, day spent, day reserved, month spent, month
-- reserved}: the figures before this call's change (expired reservations
-- already released), then after it.

local now
if ARGV[6] and ARGV[6] ~= '' then
  now = tonumber(ARGV[6])
else
  now = tonumber(redis.call('TIME')[1])
end

-- civil date of a Unix day (Howard Hinnant's days_from_civil, inverted)
local z = math.floor(now / 86400) + 719468
local era = math.floor(z / 146097)
local doe = z - era * 146097
local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
local y = yoe + era * 400
local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
local mp = math.floor((5 * doy + 2) / 153)
local d = doy - math.floor((153 * mp + 2) / 5) + 1
local m = mp < 10 and mp + 3 or mp - 9
if m <= 2 then y = y + 1 end
local day = string.format('%04d-%02d-%02d', y, m, d)
local month = string.format('%04d-%02d', y, m)

local key = KEYS[1]
local function roll(field, current, prefix)
  local old = redis.call('HGET', key, field)
  if old ~= current then
    if old then
      redis.call('HDEL', key, prefix .. old .. ':s', prefix .. old .. ':r')
    end
    redis.call('HSET', key, field, current)
  end
end
roll('d', day, 'd:')
roll('m', month, 'm:')

local ds, dr = 'd:' .. day .. ':s', 'd:' .. day .. ':r'
local ms, mr = 'm:' .. month .. ':s', 'm:' .. month .. ':r'
local held = KEYS[2]

-- release gives back reservation id's amount where its period is still
-- the current one, never below zero, and forgets it.
local function release(id)
  local rec = redis.call('HGET', key, 'x:' .. id)
  redis.call('ZREM', held, id)
  if not rec then return end
  redis.call('HDEL', key, 'x:' .. id)
  local rDay, rMonth, reserved = string.match(rec, '^(%S+) (%S+) (%d+)$')
  reserved = tonumber(reserved)
  local v = redis.call('HMGET', key, dr, mr)
  local resD, resM = tonumber(v[1] or 0), tonumber(v[2] or 0)
  if rDay == day then redis.call('HINCRBY', key, dr, -math.min(reserved, resD)) end
  if rMonth == month then redis.call('HINCRBY', key, mr, -math.min(reserved, resM)) end
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', held, '-inf', '(' .. now, 'LIMIT', 0, 64)) do
  release(id)
end

local v = redis.call('HMGET', key, ds, dr, ms, mr)
local spentD, resD = tonumber(v[1] or 0), tonumber(v[2] or 0)
local spentM, resM = tonumber(v[3] or 0), tonumber(v[4] or 0)
local allowed = 1

local op = ARGV[1]
if op == 'reserve' then
  local limD, limM, est = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  if (limD > 0 and spentD + resD >= limD) or (limM > 0 and spentM + resM >= limM) then
    allowed = 0
  elseif est > 0 then
    redis.call('HINCRBY', key, dr, est)
    redis.call('HINCRBY', key, mr, est)
    redis.call('HSET', key, 'x:' .. ARGV[5], day .. ' ' .. month .. ' ' .. est)
    redis.call('ZADD', held, now + math.max(tonumber(ARGV[7]) or 0, 1), ARGV[5])
  end
elseif op == 'settle' then
  local id, actual = ARGV[2], tonumber(ARGV[3])
  if id ~= '' then release(id) end
  if actual > 0 then
    redis.call('HINCRBY', key, ds, actual)
    redis.call('HINCRBY', key, ms, actual)
  end
elseif op == 'flush' then
  local inst, seq, amount = 'i:' .. ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
  local last = tonumber(redis.call('HGET', key, inst) or 0)
  if seq > last then
    redis.call('HSET', key, inst, seq)
    if amount > 0 then
      redis.call('HINCRBY', key, ds, amount)
      redis.call('HINCRBY', key, ms, amount)
    end
  else
    allowed = 0 -- already applied
  end
end
local a = redis.call('HMGET', key, ds, dr, ms, mr)
return {allowed, day, month, spentD, resD, spentM, resM, now,
  tonumber(a[1] or 0), tonumber(a[2] or 0), tonumber(a[3] or 0), tonumber(a[4] or 0)}
