-- One GCRA decision in one round trip. Mirrors gcra.decide in gcra.go.
--
-- KEYS[1]  the bucket; its value is the theoretical arrival time (TAT) as
--          "<unix seconds>.<9-digit nanoseconds>", absent when the bucket is full
-- ARGV[1]  inc: cost of the units in ns, floor(n*period/rate)
-- ARGV[2]  burst: how far (ns) TAT may run ahead of now, floor(burst*period/rate)
-- ARGV[3]  "1" = take unconditionally (ChargeN), "0" = only if it fits (AllowN)
-- ARGV[4]  maxAhead: cap on TAT-now in ns (30 days)
-- ARGV[5], ARGV[6]  optional: now as seconds and nanoseconds, for tests only;
--          otherwise Redis TIME, so every instance shares the server's clock
-- Returns {allowed (0|1), TAT-now in ns after the decision}.
--
-- Lua numbers are float64. Times are split into seconds and nanoseconds and
-- only differences (below 2^53 ns, about 104 days) are formed, so every
-- number here is an exact integer.

if redis.replicate_commands then
  redis.replicate_commands() -- Redis < 5: allow writes after TIME
end

local key = KEYS[1]
local inc = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local force = ARGV[3] == '1'
local max_ahead = tonumber(ARGV[4])

local now_s, now_ns
if ARGV[5] then
  now_s, now_ns = tonumber(ARGV[5]), tonumber(ARGV[6])
else
  local t = redis.call('TIME')
  now_s, now_ns = tonumber(t[1]), tonumber(t[2]) * 1000
end

local ahead = 0
local tat = redis.call('GET', key)
if tat then
  local s, ns = string.match(tat, '^(%d+)%.(%d+)$')
  if s then
    ahead = (tonumber(s) - now_s) * 1e9 + (tonumber(ns) - now_ns)
  end
  if ahead < 0 then
    ahead = 0
  end
end

local after = math.min(ahead + inc, max_ahead)
if not force and after > burst then
  return {0, ahead}
end

if inc > 0 then
  -- new TAT = now + after, normalised to whole seconds and nanoseconds
  local abs = now_ns + after
  local q = math.floor(abs / 1e9)
  local r = abs - q * 1e9
  if r < 0 then
    q, r = q - 1, r + 1e9
  elseif r >= 1e9 then
    q, r = q + 1, r - 1e9
  end
  -- expire when the bucket is full again: an idle tenant costs nothing
  redis.call('SET', key, string.format('%d.%09d', now_s + q, r), 'PX', math.ceil(after / 1e6))
end
return {1, after}
