-- One attempt at the admin token from one client, in one round trip.
-- Mirrors Memory.Attempt.
--
-- KEYS[1]  the client's wrong tokens: a sorted set, member a nonce, score
--          the time (ms); it expires a window after the last one
-- KEYS[2]  the client's lock: the time (ms) it ends, expiring then
-- ARGV[1]  "1" = the token was wrong, "0" = right
-- ARGV[2]  failures: this many wrong within the window lock the client out
-- ARGV[3]  window (ms)
-- ARGV[4]  lock (ms)
-- ARGV[5]  a nonce, this attempt's member
-- ARGV[6]  optional: now (ms), for tests only; otherwise Redis TIME, so
--          every instance shares the server's clock
-- Returns {refused (0|1), ms the lock still lasts, locked now (0|1)}.

if redis.replicate_commands then
  redis.replicate_commands() -- Redis < 5: allow writes after TIME
end

local now
if ARGV[6] then
  now = tonumber(ARGV[6])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local untl = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if untl > now then
  return {1, untl - now, 0}
end
if ARGV[1] ~= '1' then
  return {0, 0, 0}
end

local failures = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local lock = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
redis.call('ZADD', KEYS[1], now, ARGV[5])
if redis.call('ZCARD', KEYS[1]) >= failures then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], now + lock, 'PX', lock)
  return {0, 0, 1}
end
redis.call('PEXPIRE', KEYS[1], window)
return {0, 0, 0}
