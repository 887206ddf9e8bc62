--- The randomized misuse harness: random sequences of client, ledger, retry budget, policy, step, rf.flow,
--- scheduler, ledger reader and JSON operations, against the project's upstream (retryfreeze-serve on a free
--- loopback port). Hooks and flows close, nest, raise, yield, mutate or drop their request and collect garbage; and
--- every table argument at every position (requests, client:all's list, options, headers, facts, routes, rf.flow's
--- io, io.send's results, hooks' return values) is sometimes a hostile table: an empty proxy whose __index, __len,
--- __pairs and __newindex, or a table whose __index, __len and __gc, run a hostile act (close the client, a ledger or
--- a retry budget, finish the step, collect garbage, re-enter the client, yield or raise; protected or not).
--- Finalizer storms make acts run from __gc at random allocations inside the binding's C functions, with the
--- collector running back to back. Nothing a script does may crash the host: every operation runs under pcall, and
--- an operation may only succeed or raise a string. After each sequence the ledger it wrote must read back whole,
--- every path and key in it one the harness sent (heap garbage there is a use after free that escaped the
--- sanitizers).
---
--- Run: RF_BUILD_DIR=build lua5.4 spec/harness/misuse.lua, or luajit (ctest runs it as misuse_short for 4 s, and
--- under LuaJIT as misuse_short_luajit).
--- Environment: RF_MISUSE_SECONDS (default 10): how long to run; RF_MISUSE_SEED (default: the clock): the seed of
--- the random choices, printed so a failure can be replayed; RF_BUILD_DIR (default build): the build whose module
--- and retryfreeze-serve are used; RF_SERVE overrides the server.
--- Under .ci/run it runs in the sanitized build with AddressSanitizer + UBSan preloaded (.ci/run), where a
--- sanitizer report aborts the process; exit code 0 means no crash, no hang, no bad error and no bad ledger.
local root = (arg and arg[0] or ""):match("^(.*)/spec/harness/[^/]*$") or "."
local build = os.getenv("RF_BUILD_DIR") or (root .. "/build")
package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. package.path
-- The module of the running Lua (ctest runs it under the build's main Lua, and under LuaJIT); on 5.1 and LuaJIT the
-- harness uses the 5.3 library (math.type, …) from lua-compat53, as the specs do.
package.cpath = build .. "/lib/lua/" .. (rawget(_G, "jit") and "luajit" or _VERSION:match("%d+%.%d+")) .. "/?.so;"
  .. package.cpath
if _VERSION < "Lua 5.3" then require "compat53" end

local rf = require "retryfreeze"
local core = require "retryfreeze.core"
local json = require "retryfreeze.json"
local scheduler = require "retryfreeze.scheduler"
local upstream = require "retryfreeze.upstream"

local seconds = tonumber(os.getenv("RF_MISUSE_SECONDS") or "10")
local seed = math.tointeger(tonumber(os.getenv("RF_MISUSE_SEED") or "")) or os.time()
math.randomseed(seed)

local up = assert(upstream.start{ bindir = build .. "/bin", stall_ms = 150, max_seconds = math.ceil(seconds) + 30 })
local URL = up.url

-- Short timeouts so a sequence stays short; retries on 503, resets and timeouts; a retry budget for the clients,
-- flows and steps that take one.
local LOCK = assert(rf.load_string([[{"version":1,"retryBudget":{"maxTokens":10,"tokenRatio":0.1},
  "defaults":{"maxAttempts":3,"perAttemptTimeoutMs":100,
  "totalBudgetMs":300,"retryable":["HTTP_503","CONNECT_RESET","TIMEOUT"],"backoff":{"baseMs":1,"maxMs":5}},
  "routes":[{"endpoint":"GET /echo/*","propagation":{}},{"endpoint":"POST /echo/*","idempotencyRequired":[]}]}]],
  "misuse.lock"))

local stats = { sequences = 0, operations = 0, raised = 0, responses = 0, ledger_lines = 0, hostile_tables = 0,
  metamethods = 0, acts = 0, storm_acts = 0 }
local by_op, by_act = {}, {}

local function pick(list) return list[math.random(#list)] end

local SCRIPTS = { "200", "503,200", "503,503,503", "reset,200", "timeout", "empty,200", "cut", "429;retry-after=0,200" }

local n = 0
local function next_n() n = n + 1 return n end

--- A caller's propagation headers (rf_request.inbound_headers): good, bad and repeated values, fresh strings.
local function new_inbound()
  return { ["x-envoy-attempt-count"] = pick({ "1", "2", "x", "-1", "99999999999999999999" }) .. "",
           ["X-Envoy-Expected-Rq-Timeout-Ms"] = { pick({ "50", "abc", "", "1e9" }) .. "", "200, 7" } }
end

--- A request table with fresh (collectable) strings. Some paths have no route (refused, nothing sent), some
--- carry a secret in the query, which the ledger must never show.
local function new_request(k)
  local r = { method = pick({ "GET", "POST" }), path = pick({ "/echo/", "/echo/", "/none/" }) .. k .. "" }
  if math.random() < 0.2 then r.path = r.path .. "?k=SECRET" .. k end
  if math.random() < 0.3 then r.query = "q=" .. k end
  if math.random() < 0.4 then r.body = ("b"):rep(math.random(0, 3000)) .. k end
  if math.random() < 0.5 then r.idempotency_key = "k-" .. k .. "-" .. math.random(1e6) end
  if math.random() < 0.7 then r.headers = { ["X-Fault-Script"] = pick(SCRIPTS), ["X-Pad"] = ("h"):rep(40) .. k } end
  if math.random() < 0.3 then r.inbound_headers = new_inbound() end
  return r
end

local sequence -- the state of the running sequence: clients, ledgers, budgets, steps, readers

-- ---- hostility --------------------------------------------------------------------------------------------

local ACTS = { "close_client", "close_ledger", "close_budget", "finish_step", "collect", "reenter", "reenter_all",
  "step_reader", "feed_tally", "mutate", "yield", "raise", "nothing" }

--- One hostile act against what ctx names ({client=, step=, budget=, reader=, tally=, victim=}) or the sequence's
--- objects.
--- May raise (the act's own refusal, a busy object, a yield across C, or on purpose).
local function act(ctx)
  stats.acts = stats.acts + 1
  local what = pick(ACTS)
  by_act[what] = (by_act[what] or 0) + 1
  if what == "close_client" then
    local c = ctx.client or sequence.clients[math.random(#sequence.clients + 1)]
    if c then c:close() end
  elseif what == "close_ledger" then
    local l = sequence.ledgers[math.random(#sequence.ledgers)]
    if l then l:close() end
  elseif what == "close_budget" then
    local b = ctx.budget or sequence.budgets[math.random(#sequence.budgets + 1)]
    if b then b:close() end
  elseif what == "finish_step" then
    local s = ctx.step or sequence.steps[math.random(#sequence.steps + 1)]
    if s then s:finish("stopped-by-caller", 1, 0) end
  elseif what == "collect" then
    collectgarbage()
  elseif what == "reenter" then
    local c = ctx.client or sequence.clients[math.random(#sequence.clients + 1)]
    if c then c:request(new_request(next_n())) end
  elseif what == "reenter_all" then
    local c = ctx.client or sequence.clients[math.random(#sequence.clients + 1)]
    if c then c:all{ new_request(next_n()) } end
  elseif what == "step_reader" then
    local r = ctx.reader or sequence.readers[math.random(#sequence.readers + 1)]
    if r then r[1](r[2]) end
  elseif what == "feed_tally" and ctx.tally then -- a file read into the tally a method of it is reading
    ctx.tally:read(sequence.ledger_path, true)
  elseif what == "mutate" and ctx.victim then -- a field of the table being read dropped, and its string collected
    local k = next(ctx.victim)
    if k ~= nil then ctx.victim[k] = nil end
    collectgarbage()
  elseif what == "yield" then
    coroutine.yield("from a metamethod")
  elseif what == "raise" then
    error("a metamethod raised")
  end
end

--- t itself, or (40%) a hostile stand-in for it whose metamethods act on ctx: an empty proxy (every read through
--- __index, __len, __pairs) or t with a metatable (its absent fields, its length and its finalizer act). Half of
--- them act unprotected, so that their errors leave the C function that ran them.
local function hostile(t, ctx)
  local r = math.random()
  if type(t) ~= "table" or r < 0.6 then return t end
  stats.hostile_tables = stats.hostile_tables + 1
  local protected, rate = math.random() < 0.5, math.random() < 0.5 and 0.3 or 1
  local function maybe()
    stats.metamethods = stats.metamethods + 1
    if math.random() < rate then
      if protected then pcall(act, ctx) else act(ctx) end
    end
  end
  if r < 0.8 then
    return setmetatable({}, {
      __index = function(_, k) maybe() return t[k] end,
      __newindex = function(_, k, v) maybe() t[k] = v end,
      __len = function() maybe() return #t end,
      __pairs = function() maybe() return next, t, nil end,
      __tostring = function() maybe() return "a proxy" end,
      __gc = function() pcall(act, ctx) end,
    })
  end
  return setmetatable(t, {
    __index = function() maybe() end,
    __len = function() maybe() return rawlen(t) end,
    __gc = function() pcall(act, ctx) end,
  })
end

--- A finalizer storm: while storm.on, a finalizer acts on ctx and arms the next one, with the collector running back
--- to back (pause 0), so that acts run at allocations inside the binding's C functions.
local storm = { on = false }
local function arm_storm(ctx)
  setmetatable({}, { __gc = function()
    if not storm.on then return end
    stats.storm_acts = stats.storm_acts + 1
    pcall(act, ctx)
    arm_storm(ctx)
  end })
end
local function start_storm(ctx)
  storm.on = true
  collectgarbage("setpause", 0)
  arm_storm(ctx)
end
local function stop_storm()
  storm.on = false
  collectgarbage("setpause", 200)
end

--- A hook doing one random thing to the client, its request or the heap, and returning a random value (false stops;
--- a hostile table is just not false). ctx = {client=, req=}.
local function new_hook(ctx)
  local what = math.random(14)
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
    elseif what == 12 then return hostile({}, ctx)
    elseif what == 13 then pcall(act, ctx)
    end
    -- 14 and the rest: nothing
  end
end

--- A request for client c: fresh, its headers and itself sometimes hostile (acting on c).
local function hostile_request(c, k)
  local req = new_request(k)
  local ctx = { client = c, victim = req }
  if req.headers then req.headers = hostile(req.headers, ctx) end
  if req.inbound_headers then req.inbound_headers = hostile(req.inbound_headers, ctx) end
  return hostile(req, ctx), req
end

local function some_client()
  if #sequence.clients == 0 or math.random() < 0.1 then
    local ctx = {}
    local opts = { policy = LOCK, base_url = URL, rng_seed = math.random(1000) }
    local r = math.random()
    if r < 0.2 then opts.retry_budget = true
    elseif r < 0.35 and #sequence.budgets > 0 then opts.retry_budget = pick(sequence.budgets)
    end
    if math.random() < 0.7 then opts.ledger = sequence.ledgers[math.random(#sequence.ledgers)] end
    if math.random() < 0.5 then opts.on_attempt = new_hook(ctx) end
    if math.random() < 0.2 then opts.headers = hostile({ ["X-Client"] = "c" .. next_n() }, ctx) end
    ctx.budget = type(opts.retry_budget) == "userdata" and opts.retry_budget or nil
    local ok, c = pcall(rf.client, hostile(opts, ctx))
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

--- A fake transport for rf.flow and core.step: a result table (sometimes hostile) as io.send would give.
local function send_result(ctx)
  local status = pick({ 200, 200, 503, 429, 0 })
  local res = { status = status ~= 0 and status or nil, transport = status == 0 and pick({ "timeout", "connect-reset" })
    or nil, body = "x" .. next_n() }
  if math.random() < 0.5 then
    res.headers = hostile({ ["Retry-After"] = pick({ "0", "1", "junk" }), Date = "Sun, 06 Nov 1994 08:49:37 GMT" }, ctx)
  end
  return hostile(res, ctx)
end

local any_op -- any operation but a storm (defined after OPS)

--- Each operation: a name and a function that may raise (a string) or return.
local OPS = {
  request = function()
    local c = some_client()
    if not c then return end
    local req, plain = hostile_request(c, next_n())
    if math.random() < 0.4 then plain.on_attempt = new_hook({ client = c, req = plain }) end
    check_response(c:request(req))
  end,
  request_in_coroutine = function()
    local c = some_client()
    if not c then return end
    local co = coroutine.wrap(function() return c:request((hostile_request(c, next_n()))) end)
    local r = co()
    if type(r) == "table" then check_response(r) end
  end,
  all = function()
    local c = some_client()
    if not c then return end
    local reqs = {}
    for i = 1, math.random(0, 40) do reqs[i] = (hostile_request(c, next_n())) end
    if math.random() < 0.1 then reqs[#reqs + 1] = { method = "GET" } end -- a bad request: raises
    local options -- none, or {concurrency=} (sometimes out of range: raises), itself sometimes hostile
    if math.random() < 0.5 then
      options = hostile({ concurrency = pick({ 1, 2, 7, 64, 0, 1025, 2.5, "3" }) }, { client = c })
    end
    for _, r in ipairs(c:all(hostile(reqs, { client = c }), options)) do check_response(r) end
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
    local opts = math.random() < 0.3 and hostile({ fsync = pick({ "none", "line" }) }, {}) or nil
    sequence.ledgers[#sequence.ledgers + 1] = assert(rf.ledger.open(sequence.ledger_path, opts))
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
    local ctx = { client = sequence.clients[1] }
    local facts = { method = pick({ "GET", "POST", "PUT" }), path = "/echo/" .. next_n(), status = pick({ 200, 503, 500 }),
      attempts = math.random(1, 5), elapsed_ms = math.random(0, 500) }
    if math.random() < 0.2 then facts.hints = hostile({ ["retry-after"] = "1" }, ctx) end
    LOCK:decide(hostile(facts, ctx), rf.rng(math.random(100)), math.random() < 0.3 and hostile({}, ctx) or nil)
    LOCK:budget(hostile({ method = "GET", path = "/echo/1", attempts = math.random(0, 5), elapsed_ms = math.random(0, 500) },
      ctx))
    local decide = LOCK:decider("GET", "/echo/" .. next_n(), math.random() < 0.5)
    decide(pick({ 200, 503 }), nil, math.random(1, 3), math.random(0, 200))
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
      local what = math.random(11)
      if what == 1 then error("flow raised")
      elseif what == 2 then coroutine.yield({}) -- not a request: the scheduler reports it
      elseif what == 3 then c:close()
      elseif what == 4 then c:all{ new_request(next_n()) }
      elseif what == 5 and cos[1] and cos[1] ~= coroutine.running() then coroutine.resume(cos[1])
      elseif what == 6 then
        shared.path, shared.body, shared.headers = nil, nil, nil
        collectgarbage()
      elseif what == 7 then check_response(c:request(shared))
      elseif what == 8 then check_response(c:request((hostile_request(c, next_n()))))
      end
      check_response(c:request(new_request(next_n())))
    end, function() collectgarbage("step") end)
  end,
  run_requests = function() -- started without coroutines: the request table reused, mutated, its strings dropped
    local c = some_client()
    if not c then return end
    local shared = new_request(next_n())
    scheduler.run_requests(c, math.random(1, 12), math.random(1, 6), function()
      local what = math.random(9)
      if what == 1 then error("request function raised")
      elseif what == 2 then c:close()
      elseif what == 3 then return { method = "GET" } -- a bad request: refused
      elseif what == 4 then
        local fresh = new_request(next_n())
        for k in pairs(shared) do shared[k] = nil end
        for k, v in pairs(fresh) do shared[k] = v end
        collectgarbage()
      elseif what == 5 then return new_request(next_n())
      elseif what == 6 then return (hostile_request(c, next_n()))
      end
      return shared
    end, function() if math.random() < 0.3 then collectgarbage() end end)
  end,
  run_generated = function() -- soak's default flow from C: its callback closes, nests, raises, mutates, collects
    local c = some_client()
    if not c then return end
    local ctx = { client = c }
    local routes = { hostile({ method = "GET", pieces = hostile({ "/echo/", "" }, ctx) }, ctx) }
    if math.random() < 0.2 then routes[2] = { method = "GET", pieces = { "no-slash" } } end -- refused flows
    c:_run_generated(hostile({ routes = hostile(routes, ctx), key_prefix = "k-" .. next_n() .. "-",
      count = math.random(0, 40), concurrency = math.random(1, 8), progress_every = math.random(1, 5),
      on_progress = function()
        local what = math.random(8)
        if what == 1 then error("on_progress raised")
        elseif what == 2 then c:close()
        elseif what == 3 then c:request(new_request(next_n()))
        elseif what == 4 then routes[1].pieces[1], routes[1] = nil, nil
        elseif what == 5 then collectgarbage()
        elseif what == 6 then pcall(act, ctx)
        end
      end }, ctx))
  end,
  budget = function()
    local ctx = {}
    local b = rf.retry_budget(LOCK, math.random() < 0.5 and hostile({}, ctx) or nil)
    ctx.budget = b
    sequence.budgets[#sequence.budgets + 1] = b
    b:tokens()
    if math.random() < 0.3 then b:close() end
  end,
  flow = function() -- rf.flow with the host's transport faked: io, its send results and the request hostile
    local ctx = {}
    local plain_io = {
      send = function() return send_result(ctx) end,
      sleep = function() if math.random() < 0.2 then pcall(act, ctx) end end,
      now_ms = function() return 0 end,
    }
    if math.random() < 0.7 then plain_io.ledger = sequence.ledgers[math.random(#sequence.ledgers)] end
    if math.random() < 0.4 and #sequence.budgets > 0 then
      plain_io.retry_budget = pick(sequence.budgets)
      ctx.budget = plain_io.retry_budget
    end
    if math.random() < 0.3 then plain_io.rng = rf.rng(math.random(100)) end
    if math.random() < 0.4 then plain_io.on_attempt = new_hook(ctx) end
    local req = { method = pick({ "GET", "POST" }), path = "/echo/" .. next_n() }
    if math.random() < 0.5 then req.idempotency_key = "k-" .. next_n() .. "-" .. math.random(1e6) end
    if math.random() < 0.3 then req.inbound_headers = hostile(new_inbound(), ctx) end
    check_response(rf.flow(LOCK, hostile(req, ctx), hostile(plain_io, ctx)))
  end,
  step = function() -- core.step driven by hand, its result tables hostile and able to finish the step
    local ctx = {}
    local opts = {}
    if math.random() < 0.7 then opts.ledger = sequence.ledgers[math.random(#sequence.ledgers)] end
    if math.random() < 0.4 and #sequence.budgets > 0 then opts.retry_budget = pick(sequence.budgets) end
    ctx.budget = opts.retry_budget
    local step = core.step(LOCK, hostile({ method = "GET", path = "/echo/" .. next_n() }, ctx), hostile(opts, ctx), 0)
    ctx.step = step
    sequence.steps[#sequence.steps + 1] = step
    for now = 1, math.random(1, 4) do
      if not step:begin(now) then break end
      local retry = step:after(send_result(ctx), now, 0, math.random() < 0.3 and new_hook(ctx) or nil)
      if not retry then break end
    end
    if math.random() < 0.8 then
      check_response(step:finish("stopped-by-caller", 9, 0, "body", hostile({ ["X-A"] = "1" }, ctx)))
    end
  end,
  read_ledger = function() -- the reader stepped again from finalizers while it pushes a record
    local it, state = rf.ledger.read(sequence.ledger_path, math.random() < 0.5 and hostile({}, {}) or nil)
    local ctx = { reader = { it, state } }
    sequence.readers[#sequence.readers + 1] = ctx.reader
    start_storm(ctx)
    local ok, err = pcall(function()
      for rec in it, state do assert(type(rec.path) == "string" and type(rec.attempts) == "number") end
    end)
    stop_storm()
    if not ok then error(err, 0) end
  end,
  json = function() -- encode a table a storm mutates meanwhile; decode what came out
    local t = { a = { 1, 2, 3 }, b = "x" .. next_n(), c = { d = { e = "y" } } }
    for i = 1, math.random(0, 30) do t["k" .. i .. ("z"):rep(30)] = i end
    local ctx = { victim = t }
    local ok, err = pcall(function()
      start_storm(ctx)
      local text = json.encode(hostile(t, ctx))
      stop_storm()
      assert(json.decode(text))
    end)
    stop_storm()
    if not ok then error(err, 0) end
  end,
  appended = function() -- the appends' tally read while a storm makes clients append to the same ledger
    local l = sequence.ledgers[math.random(#sequence.ledgers)]
    l:_tally_appends()
    local c = some_client()
    local ok, err = pcall(function()
      start_storm({ client = c })
      l:_appended()
    end)
    stop_storm()
    if not ok then error(err, 0) end
  end,
  tally = function() -- a tally fed and read while finalizers feed it again (refused: it is busy) and act
    local t = require("retryfreeze.core").ledger_tally(hostile({ by = pick({ "route", "host" }) }, {}))
    local ok, err = pcall(function()
      start_storm({ tally = t })
      t:read(sequence.ledger_path, true)
      assert(math.type(t:stats().requests) == "integer")
      assert(#t:timeline() == 0)
    end)
    stop_storm()
    if not ok then error(err, 0) end
  end,
  storm = function() -- acts from finalizers during the next operation
    start_storm({ client = sequence.clients[1] })
    local ok, err = pcall(any_op)
    stop_storm()
    if not ok then error(err, 0) end
  end,
}
local OP_NAMES = {}
for name in pairs(OPS) do OP_NAMES[#OP_NAMES + 1] = name end
table.sort(OP_NAMES)
any_op = function()
  local name
  repeat name = pick(OP_NAMES) until name ~= "storm"
  return OPS[name]()
end

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
    sequence = { clients = {}, ledgers = {}, budgets = {}, steps = {}, readers = {}, ledger_path = dir_path }
    sequence.ledgers[1] = assert(rf.ledger.open(dir_path))
    for _ = 1, math.random(5, 25) do
      local name = pick(OP_NAMES)
      stats.operations = stats.operations + 1
      local ok, err = pcall(OPS[name])
      stop_storm()
      if not ok then
        if type(err) ~= "string" then error("operation " .. name .. " raised a " .. type(err) .. ", not a message") end
        stats.raised = stats.raised + 1
      end
      by_op[name] = (by_op[name] or 0) + 1
    end
    for _, s in ipairs(sequence.steps) do pcall(s.finish, s, "stopped-by-caller", 1, 0) end
    for _, c in ipairs(sequence.clients) do pcall(c.close, c) end
    for _, b in ipairs(sequence.budgets) do pcall(b.close, b) end
    for _, l in ipairs(sequence.ledgers) do l:close() end
    sequence = { clients = {}, ledgers = {}, budgets = {}, steps = {}, readers = {} } -- for late finalizers' acts
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

local parts, acts = {}, {}
for _, name in ipairs(OP_NAMES) do parts[#parts + 1] = name .. "=" .. (by_op[name] or 0) end
for _, name in ipairs(ACTS) do acts[#acts + 1] = name .. "=" .. (by_act[name] or 0) end
print(string.format("misuse: %d sequences, %d operations (%d raised a clear error), %d responses, %d ledger lines "
  .. "checked, 0 crashes", stats.sequences, stats.operations, stats.raised, stats.responses, stats.ledger_lines))
print(string.format("misuse: %d hostile tables, %d metamethod calls, %d hostile acts (%d from finalizer storms)",
  stats.hostile_tables, stats.metamethods, stats.acts, stats.storm_acts))
print("misuse: operations tried: " .. table.concat(parts, " "))
print("misuse: acts: " .. table.concat(acts, " "))
