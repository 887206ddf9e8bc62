--- A plain Lua script (lua5.4, luajit, lua5.3, lua5.1): the blocking libcurl client under a lock, one ledger
--- line per request. Usage: luajit examples/plain_client.lua LOCK URL COUNT LEDGER → "outcome count" lines.
local rf = require "retryfreeze"

local lock, url, count, ledger_path = arg[1], arg[2], tonumber(arg[3]), arg[4]
local policy = assert(rf.load(lock))
local ledger = assert(rf.ledger.open(ledger_path))
local client = rf.client{ policy = policy, base_url = url, ledger = ledger }
local outcomes = {}
for i = 1, count do
  local r = client:request{ method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key(), body = "job " .. i }
  outcomes[r.outcome] = (outcomes[r.outcome] or 0) + 1
end
client:close() -- explicit: <close> exists only in Lua 5.4
ledger:close()
local names = {}
for k in pairs(outcomes) do names[#names + 1] = k end
table.sort(names)
for _, k in ipairs(names) do print(k, outcomes[k]) end
