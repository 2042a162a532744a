-- Apply one admin change if the tenant's record is still the one read.
-- KEYS[1] tenants hash, KEYS[2] audit list, KEYS[3] revision counter,
-- KEYS[4] last-use hash, KEYS[5] epoch
-- ARGV[1] tenant id
-- ARGV[2] "1" if a record was read, ARGV[3] that record
-- ARGV[4] "1" to write ARGV[5] as the new record, "0" to remove it
-- ARGV[6] the audit event, ARGV[7] the change channel, ARGV[8] events kept
-- ARGV[9] an epoch id to write when the store has none (it lost its data)
-- ARGV[10..] the ids of keys the change removed (their last use goes too)
-- Returns {the new revision (at least 1), the epoch} when applied, {0, the
-- epoch} when the record changed since it was read.
local epoch = redis.call('GET', KEYS[5])
if not epoch then
  epoch = ARGV[9]
  redis.call('SET', KEYS[5], epoch)
end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[2] == '1' then
  if cur ~= ARGV[3] then return {0, epoch} end
elseif cur then
  return {0, epoch}
end
if ARGV[4] == '1' then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[5])
else
  redis.call('HDEL', KEYS[1], ARGV[1])
end
for i = 10, #ARGV do
  redis.call('HDEL', KEYS[4], ARGV[i])
end
redis.call('LPUSH', KEYS[2], ARGV[6])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[8]) - 1)
local rev = redis.call('INCR', KEYS[3])
redis.call('PUBLISH', ARGV[7], ARGV[1])
return {rev, epoch}
