-- Record keys' last use, only for keys their tenant still holds, so a use
-- noted just before a revoke does not bring the key's entry back.
-- KEYS[1] tenants hash, KEYS[2] used hash
-- ARGV: triples of key id, tenant id, last use (Unix s). A record is JSON
-- as Go writes it, so a held key appears as "id":"<key id>" (a quote inside
-- a string value is escaped, so no name can spell it).
-- A use older than the one recorded is not written: instances write their
-- own uses in any order, and a key's last use never goes back.
-- Returns how many uses were recorded.
local n = 0
for i = 1, #ARGV, 3 do
  local rec = redis.call('HGET', KEYS[1], ARGV[i + 1])
  if rec and string.find(rec, '"id":"' .. ARGV[i] .. '"', 1, true) then
    local prev = tonumber(redis.call('HGET', KEYS[2], ARGV[i]))
    if not prev or prev < tonumber(ARGV[i + 2]) then
      redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2])
      n = n + 1
    end
  end
end
return n
