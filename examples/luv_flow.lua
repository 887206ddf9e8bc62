--- rf.flow in a luv (libuv) event loop: N requests at once on one thread, each a coroutine; io.send is one
--- HTTP/1.1 exchange on a uv TCP handle bounded by the per-try timeout (a uv timer), io.sleep is a uv timer.
--- Runs under lua5.4 and luajit with Debian's lua-luv. Usage:
---   lua5.4 examples/luv_flow.lua LOCK PORT COUNT LEDGER   → prints "outcome count" lines, then "done N"
local uv = require "luv"
local rf = require "retryfreeze"

local lock, port, count, ledger_path = arg[1], tonumber(arg[2]), tonumber(arg[3]), arg[4]
local policy = assert(rf.load(lock))
local ledger = assert(rf.ledger.open(ledger_path))

local function now_ms() return math.floor(uv.hrtime() / 1e6) end

-- Suspends the running coroutine until resume() is called by a libuv callback.
local function await(start)
  local co = coroutine.running()
  start(function(...) coroutine.resume(co, ...) end)
  return coroutine.yield()
end

local function sleep(ms)
  await(function(resume)
    local t = uv.new_timer()
    t:start(ms, 0, function() t:close(); resume() end)
  end)
end

-- One attempt: connect, write, read until the server closes; all within attempt.timeout_ms.
local function send(attempt)
  local tcp, timer = uv.new_tcp(), uv.new_timer()
  local chunks, result = {}, nil
  return await(function(resume)
    local function finish(r)
      if result then return end
      result = r
      timer:stop(); timer:close()
      if not tcp:is_closing() then tcp:close() end
      resume(r)
    end
    timer:start(attempt.timeout_ms, 0, function() finish({ transport = "timeout", error = "per-try timeout" }) end)
    tcp:connect("127.0.0.1", port, function(err)
      if err then return finish({ transport = "connect-refused", error = err, not_sent = true }) end
      local head = { attempt.method .. " " .. attempt.path .. " HTTP/1.1", "Host: 127.0.0.1", "Connection: close" }
      for k, v in pairs(attempt.headers) do head[#head + 1] = k .. ": " .. v end
      local body = attempt.body or ""
      head[#head + 1] = "Content-Length: " .. #body
      tcp:write(table.concat(head, "\r\n") .. "\r\n\r\n" .. body)
      tcp:read_start(function(rerr, data)
        if rerr then return finish({ transport = "connect-reset", error = rerr }) end
        if data then chunks[#chunks + 1] = data; return end
        local text = table.concat(chunks) -- the server closed: the whole response is here
        local status = tonumber(text:match("^HTTP/1%.%d (%d%d%d)"))
        if not status then return finish({ transport = "got-nothing", error = "no response" }) end
        local headers = {}
        local header_block, resp_body = text:match("^(.-)\r\n\r\n(.*)$")
        for name, value in (header_block or ""):gmatch("\r\n([^:\r\n]+):%s*([^\r\n]*)") do
          headers[name:lower()] = headers[name:lower()] or value
        end
        finish({ status = status, transport = "ok", headers = headers, body = resp_body or "" })
      end)
    end)
  end)
end

local outcomes, done = {}, 0
for i = 1, count do
  coroutine.wrap(function()
    local key = (i % 3 ~= 0) and rf.new_key() or nil
    local r = rf.flow(policy, { method = "POST", path = "/v1/jobs", idempotency_key = key, body = "job " .. i },
      { send = send, sleep = sleep, now_ms = now_ms, ledger = ledger })
    outcomes[r.outcome] = (outcomes[r.outcome] or 0) + 1
    done = done + 1
  end)()
end
uv.run()
ledger:close()
local names = {}
for k in pairs(outcomes) do names[#names + 1] = k end
table.sort(names)
for _, k in ipairs(names) do print(k, outcomes[k]) end
print("done", done)
