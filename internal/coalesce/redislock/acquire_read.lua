-- Take the lock unless an answer is already stored: one round trip that is
-- both the leader's double-check and its lock.
-- KEYS[1] lock name, KEYS[2..] keys to read first (the prompt's entries).
-- ARGV[1] our token, ARGV[2] TTL in milliseconds, ARGV[3..] keys to delete
-- when the lock is taken (a previous leader's leftovers, such as its live
-- stream), so everything under the lock belongs to its holder.
-- Returns {taken, values}: taken is 1 when the lock is ours; values holds
-- what the read keys hold (nil where absent). When any of them holds a
-- value the lock is not taken.
local vals = {}
local found = false
if #KEYS > 1 then
  vals = redis.call("MGET", unpack(KEYS, 2))
  for i = 1, #vals do
    if vals[i] then found = true end
  end
end
if found then
  return {0, vals}
end
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  for i = 3, #ARGV do
    redis.call("DEL", ARGV[i])
  end
  return {1, vals}
end
return {0, vals}
