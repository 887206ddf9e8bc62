--- The randomized misuse harness (issue 10): random sequences of client, ledger, policy and scheduler
--- operations, with hooks and flows that close, nest, raise, yield, mutate or drop their request and collect
--- garbage, against the project's upstream (retryfreeze-serve on a free loopback port). Nothing a script does
--- may crash the host: every operation runs under pcall, and an operation may only succeed or raise a string.
--- After each sequence the ledger it wrote must read back whole, every path and key in it one the harness
--- sent (heap garbage there is a use after free that escaped the sanitizers).
---
--- Run: RF_BUILD_DIR=build lua5.4 spec/harness/misuse.lua (ctest runs it as misuse_short for 4 s).
--- Environment: RF_MISUSE_SECONDS (default 10): how long to run; RF_MISUSE_SEED (default: the clock):
--- the seed of the random choices, printed so a failure can be replayed; RF_BUILD_DIR (default build): the
--- build whose module and retryfreeze-serve are used; RF_SERVE overrides the server.
--- Under .ci/run it runs in the sanitized build with AddressSanitizer + UBSan preloaded (.ci/run), where a
--- sanitizer report aborts the process; exit code 0 means no crash, no hang, no bad error and no bad ledger.
local root = (arg and arg[0] or ""):match("^(.*)/spec/harness/[^/]*$") or "."
local build = os.getenv("RF_BUILD_DIR") or (root .. "/build")
package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. package.path
package.cpath = build .. "/lib/lua/5.4/?.so;" .. package.cpath

local rf = require "retryfreeze"
local scheduler = require "retryfreeze.scheduler"
local upstream = require "retryfreeze.upstream"

local seconds = tonumber(os.getenv("RF_MISUSE_SECONDS") or "10")
local seed = math.tointeger(tonumber(os.getenv("RF_MISUSE_SEED") or "")) or os.time()
math.randomseed(seed)

local up = assert(upstream.start{ bindir = build .. "/bin", stall_ms = 150, max_seconds = math.ceil(seconds) + 30 })
local URL = up.url

-- Short timeouts so a sequence stays short; retries on 503, resets and timeouts.
local LOCK = assert(rf.load_string([[{"version":1,"defaults":{"maxAttempts":3,"perAttemptTimeoutMs":100,
  "totalBudgetMs":300,"retryable":["HTTP_503","CONNECT_RESET","TIMEOUT"],"backoff":{"baseMs":1,"maxMs":5}},
  "routes":[{"endpoint":"GET /echo/*"},{"endpoint":"POST /echo/*","idempotencyRequired":[]}]}]], "misuse.lock"))

local stats = { sequences = 0, operations = 0, raised = 0, responses = 0, ledger_lines = 0 }
local by_op = {}

local function pick(list) return list[math.random(#list)] end

local SCRIPTS = { "200", "503,200", "503,503,503", "reset,200", "timeout", "empty,200", "cut", "429;retry-after=0,200" }

--- A request table with fresh (collectable) strings. Some paths have no route (refused, nothing sent), some
--- carry a secret in the query, which the ledger must never show.
local function new_request(n)
  local r = { method = pick({ "GET", "POST" }), path = pick({ "/echo/", "/echo/", "/none/" }) .. n .. "" }
  if math.random() < 0.2 then r.path = r.path .. "?k=SECRET" .. n end
  if math.random() < 0.3 then r.query = "q=" .. n end
  if math.random() < 0.4 then r.body = ("b"):rep(math.random(0, 3000)) .. n end
  if math.random() < 0.5 then r.idempotency_key = "k-" .. n .. "-" .. math.random(1e6) end
  if math.random() < 0.7 then r.headers = { ["X-Fault-Script"] = pick(SCRIPTS), ["X-Pad"] = ("h"):rep(40) .. n } end
  return r
end

local sequence -- the state of the running sequence: clients, ledgers, requests

--- A hook doing one random thing to the client, its request or the heap. ctx = {client=, req=}.
local function new_hook(ctx)
  local what = math.random(12)
  return function()
    if what == 1 then error("hook raised")
    elseif what == 2 then return false
    elseif what == 3 then ctx.client:close()
    elseif what == 4 then ctx.client:request(new_request(0))
    elseif what == 5 then ctx.client:all{ new_request(1), new_request(2) }
    elseif what == 6 then coroutine.yield("from a hook")
    elseif what == 7 and ctx.req then
      ctx.req.path, ctx.req.body, ctx.req.method, ctx.req.headers, ctx.req.idempotency_key = nil, nil, nil, nil, nil
      collectgarbage()
    elseif what == 8 then collectgarbage()
    elseif what == 9 then local other = sequence.clients[math.random(#sequence.clients + 1)]
      if other then other:request(new_request(3)) end
    elseif what == 10 and sequence.ledgers[1] then sequence.ledgers[1]:close()
    elseif what == 11 then ctx.client:retry_tokens()
    end
    -- 12 and the rest: nothing
  end
end

local function some_client()
  if #sequence.clients == 0 or math.random() < 0.1 then
    local ctx = {}
    local opts = { policy = LOCK, base_url = URL, rng_seed = math.random(1000), retry_budget = math.random() < 0.3 }
    if math.random() < 0.7 then opts.ledger = sequence.ledgers[math.random(#sequence.ledgers)] end
    if math.random() < 0.5 then opts.on_attempt = new_hook(ctx) end
    local ok, c = pcall(rf.client, opts)
    if not ok then return nil end
    ctx.client = c
    sequence.clients[#sequence.clients + 1] = c
  end
  return sequence.clients[math.random(#sequence.clients)]
end

local function check_response(r)
  assert(type(r) == "table", "a response that is not a table")
  assert(math.type(r.status) == "integer" and r.status >= 0 and r.status <= 599, "bad status")
  assert(r.attempts >= 0 and r.attempts <= 16 and #r.tries <= 16, "bad attempts")
  assert(type(r.body) == "string" and type(r.outcome) == "string", "bad body or outcome")
  stats.responses = stats.responses + 1
end

local n = 0
local function next_n() n = n + 1 return n end

--- Each operation: a name and a function that may raise (a string) or return.
local OPS = {
  request = function()
    local c = some_client()
    if not c then return end
    local req = new_request(next_n())
    if math.random() < 0.4 then req.on_attempt = new_hook({ client = c, req = req }) end
    check_response(c:request(req))
  end,
  request_in_coroutine = function()
    local c = some_client()
    if not c then return end
    local co = coroutine.wrap(function() return c:request(new_request(next_n())) end)
    local r = co()
    if type(r) == "table" then check_response(r) end
  end,
  all = function()
    local c = some_client()
    if not c then return end
    local reqs = {}
    for i = 1, math.random(0, 40) do reqs[i] = new_request(next_n()) end
    if math.random() < 0.1 then reqs[#reqs + 1] = { method = "GET" } end -- a bad request: raises
    for _, r in ipairs(c:all(reqs)) do check_response(r) end
  end,
  close_client = function()
    local c = sequence.clients[math.random(#sequence.clients + 1)]
    if c then c:close() end
  end,
  drop_client = function()
    table.remove(sequence.clients, math.random(#sequence.clients + 1))
    collectgarbage()
  end,
  close_ledger = function()
    local l = sequence.ledgers[math.random(#sequence.ledgers)]
    l:close()
  end,
  open_ledger = function()
    sequence.ledgers[#sequence.ledgers + 1] = assert(rf.ledger.open(sequence.ledger_path))
  end,
  collect = function() collectgarbage() end,
  queries = function()
    local c = some_client()
    if not c then return end
    c:retry_tokens()
    c:in_flight()
    c:_run(0)
  end,
  set_scheduled = function()
    local c = some_client()
    if c then c:_set_scheduled(math.random() < 0.5) end
  end,
  decide = function()
    LOCK:decide({ method = pick({ "GET", "POST", "PUT" }), path = "/echo/" .. next_n(), status = pick({ 200, 503, 500 }),
      attempts = math.random(0, 5), elapsed_ms = math.random(0, 500) }, rf.rng(math.random(100)))
    LOCK:budget({ method = "GET", path = "/echo/1", attempts = math.random(0, 5), elapsed_ms = math.random(0, 500) })
  end,
  bad_lock = function()
    local text = pick({ "{", '{"endpoint":"GET /x"}', '{"endpoint":"GET /x","maxAttempts":"3"}', ("["):rep(1000), "" })
    assert(not rf.load_string(text, "junk"))
  end,
  scheduled = function()
    local c = some_client()
    if not c then return end
    local flows, shared = math.random(1, 12), new_request(next_n())
    local cos = {}
    scheduler.run(c, flows, math.random(1, 6), function(i)
      cos[i] = coroutine.running()
      local what = math.random(10)
      if what == 1 then error("flow raised")
      elseif what == 2 then coroutine.yield({}) -- not a request: the scheduler reports it
      elseif what == 3 then c:close()
      elseif what == 4 then c:all{ new_request(next_n()) }
      elseif what == 5 and cos[1] and cos[1] ~= coroutine.running() then coroutine.resume(cos[1])
      elseif what == 6 then
        shared.path, shared.body, shared.headers = nil, nil, nil
        collectgarbage()
      elseif what == 7 then check_response(c:request(shared))
      end
      check_response(c:request(new_request(next_n())))
    end, function() collectgarbage("step") end)
  end,
  run_requests = function() -- started without coroutines: the request table reused, mutated, its strings dropped
    local c = some_client()
    if not c then return end
    local shared = new_request(next_n())
    scheduler.run_requests(c, math.random(1, 12), math.random(1, 6), function()
      local what = math.random(8)
      if what == 1 then error("request function raised")
      elseif what == 2 then c:close()
      elseif what == 3 then return { method = "GET" } -- a bad request: refused
      elseif what == 4 then
        local fresh = new_request(next_n())
        for k in pairs(shared) do shared[k] = nil end
        for k, v in pairs(fresh) do shared[k] = v end
        collectgarbage()
      elseif what == 5 then return new_request(next_n())
      end
      return shared
    end, function() if math.random() < 0.3 then collectgarbage() end end)
  end,
  run_generated = function() -- soak's default flow from C: its callback closes, nests, raises, mutates, collects
    local c = some_client()
    if not c then return end
    local routes = { { method = "GET", pieces = { "/echo/", "" } } }
    if math.random() < 0.2 then routes[2] = { method = "GET", pieces = { "no-slash" } } end -- refused flows
    c:_run_generated{ routes = routes, key_prefix = "k-" .. next_n() .. "-", count = math.random(0, 40),
      concurrency = math.random(1, 8), progress_every = math.random(1, 5), on_progress = function()
      local what = math.random(8)
      if what == 1 then error("on_progress raised")
      elseif what == 2 then c:close()
      elseif what == 3 then c:request(new_request(next_n()))
      elseif what == 4 then routes[1].pieces[1], routes[1] = nil, nil
      elseif what == 5 then collectgarbage()
      end
    end }
  end,
}
local OP_NAMES = {}
for name in pairs(OPS) do OP_NAMES[#OP_NAMES + 1] = name end
table.sort(OP_NAMES)

--- Reads the sequence's ledger: every line a whole record, every path and key one the harness sent.
local function check_ledger(path)
  for rec in rf.ledger.read(path) do
    stats.ledger_lines = stats.ledger_lines + 1
    local ok_path = rec.path:match("^/echo/%d+$") or rec.path:match("^/none/%d+$")
      or rec.path:match("^/echo/%d+%?k=REDACTED$") or rec.path:match("^/none/%d+%?k=REDACTED$")
    assert(ok_path, "ledger path not sent by the harness: " .. string.format("%q", rec.path))
    assert(rec.key == nil or rec.key:match("^k%-%d+%-%d+$"), "ledger key not sent by the harness: " .. tostring(rec.key))
  end
end

local function run()
  local deadline = os.time() + seconds
  while os.time() < deadline or stats.sequences == 0 do
    local dir_path = os.tmpname()
    sequence = { clients = {}, ledgers = {}, ledger_path = dir_path }
    sequence.ledgers[1] = assert(rf.ledger.open(dir_path))
    for _ = 1, math.random(5, 25) do
      local name = pick(OP_NAMES)
      stats.operations = stats.operations + 1
      local ok, err = pcall(OPS[name])
      if not ok then
        if type(err) ~= "string" then error("operation " .. name .. " raised a " .. type(err) .. ", not a message") end
        stats.raised = stats.raised + 1
      end
      by_op[name] = (by_op[name] or 0) + 1
    end
    for _, c in ipairs(sequence.clients) do pcall(c.close, c) end
    for _, l in ipairs(sequence.ledgers) do l:close() end
    sequence = nil
    collectgarbage()
    check_ledger(dir_path)
    os.remove(dir_path)
    stats.sequences = stats.sequences + 1
  end
end

print(string.format("misuse: seed %d, %g s, upstream %s", seed, seconds, URL))
local ok, err = xpcall(run, debug.traceback)
up.stop()
if not ok then
  io.stderr:write(string.format("misuse: FAILED after %d sequences, %d operations (seed %d): %s\n", stats.sequences,
    stats.operations, seed, err))
  os.exit(1)
end

local parts = {}
for _, name in ipairs(OP_NAMES) do parts[#parts + 1] = name .. "=" .. (by_op[name] or 0) end
print(string.format("misuse: %d sequences, %d operations (%d raised a clear error), %d responses, %d ledger lines "
  .. "checked, 0 crashes", stats.sequences, stats.operations, stats.raised, stats.responses, stats.ledger_lines))
print("misuse: operations tried: " .. table.concat(parts, " "))
