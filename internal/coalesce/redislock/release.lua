-- Delete the lock only while it still holds our token, so a holder whose
-- lock expired never deletes its successor's lock.
-- KEYS[1] lock name, ARGV[1] our token.
-- Returns 1 when deleted, 0 when the lock is gone or someone else's.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
