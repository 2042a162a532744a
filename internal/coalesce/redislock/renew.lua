-- Extend the lock's TTL only while it still holds our token.
-- KEYS[1] lock name, ARGV[1] our token, ARGV[2] TTL in milliseconds.
-- Returns 1 when extended, 0 when the lock is gone or someone else's.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
