-- Read the store's revision and its epoch, writing a fresh epoch when the
-- store has none (it is new, or lost its data).
-- KEYS[1] revision counter, KEYS[2] epoch
-- ARGV[1] an epoch id to write when there is none
-- Returns {the revision (0 when no change was applied), the epoch}.
local epoch = redis.call('GET', KEYS[2])
if not epoch then
  epoch = ARGV[1]
  redis.call('SET', KEYS[2], epoch)
end
return {tonumber(redis.call('GET', KEYS[1]) or '0'), epoch}
