--- retryfreeze.gateway: nginx proxies natively, the engine governs every try.
---
--- nginx's proxy module does all the I/O (headers both ways, keep-alive pools, TLS to the upstream, streamed
--- bodies); the engine (core.step, the attempt loop rf.flow and the curl client run) decides every try of a request
--- from lua-resty-core's ngx.balancer:
---
---   init(opts)        init_by_lua*: loads the lock, opens the ledger, checks that every route can be served here
---   init_worker()     init_worker_by_lua*: this worker's RNG, retry budget and held ledger lines
---   access()          access_by_lua*: the route, matched once; 404 without one; the request's step, in ngx.ctx
---   try()             the balancer phase, each try: the verdict on the last try, then the next try's per-try
---                     timeout (set_timeouts), propagation headers and whether nginx may come back (set_more_tries)
---   balancer()        balancer_by_lua*: try(), then the try's peer, one not yet tried while one is left
---   header_filter()   header_filter_by_lua* (in server{}): the final response's verdict, the request's ledger
---                     line, and the overloaded header a route with propagation tells its caller
---   log()             log_by_lua* (in server{}): a request that ended before its response (the client went away)
---                     still gets its ledger line; so does a request error_page sent to a named location
---   stopped()         content_by_lua* of the named location `error_page 500 = @NAME` sends a request the
---                     balancer stopped to: answers the status of the try the engine did not retry
---   exit_worker()     exit_worker_by_lua*: writes the worker's held ledger lines
---
--- The lean form (init's lean = true, examples/gateway/lean.nginx.conf.in) calls only balancer() and log(): the
--- balancer matches the route and makes the step on the request's first try (no route: 404 through stopped()), and
--- log() writes the ledger line from the final response. Two phase handlers fewer per request, for a lock whose
--- routes are all native and have no propagation (init refuses any other).
---
--- A gateway's plugin makes the same calls from its phases (init_worker, access, header_filter, log; try() from the
--- balancer phase, APISIX's before_proxy, where the gateway picks the peer): see docs/embedding.md ("Gateway
--- mode"). examples/gateway/nginx.conf.in is the plain nginx form.
---
--- The balancer phase cannot sleep or yield, so a try here never waits: a route whose lock asks for a wait (a
--- backoff window above 0 ms, honoured Retry-After) or for hedging cannot be served natively. M.routes says which
--- routes can, and why not; M.init refuses a lock with such a route unless opts.fallback names a location that
--- serves it through the content-phase path (rf.flow: examples/nginx/retry_proxy.lua).
local rf = require "retryfreeze"
local core = require "retryfreeze.core"
local util = require "retryfreeze.util"

local M = {}

local type, tostring, tonumber = type, tostring, tonumber
local find, sub, byte, gsub = string.find, string.sub, string.byte, string.gsub
local SUCCESS_MIN, SUCCESS_MAX = core.SUCCESS_STATUS_MIN, core.SUCCESS_STATUS_MAX
local STATUS_MIN, STATUS_MAX = core.HTTP_STATUS_MIN, core.HTTP_STATUS_MAX
local ngx = rawget(_G, "ngx") -- nil outside nginx, where M.routes still works

-- step:begin and step:after through the FFI under LuaJIT (the same results and errors as the methods, docs/lua.md).
local step_begin = core.ffi_step_begin or function(step, now_ms) return step:begin(now_ms) end
local function method_after(step, res, now_ms, wall_ms) return step:after(res, now_ms, wall_ms) end
local step_after = core.ffi_step_after or method_after
-- step:finish without its response table (the FFI under LuaJIT): whether the response is overloaded.
local step_end = core.ffi_step_end
  or function(step, reason, now, wall) return step:finish(reason, now, wall).overloaded end
-- The clocks through the FFI under LuaJIT: a classic C function call would end the phase handler's trace.
local now_ms, wall_ms = core.ffi_monotonic_ms or rf.monotonic_ms, core.ffi_wall_ms or rf.now_ms
-- A step the gateway ended reused for a later request of the worker (the FFI under LuaJIT, core.ffi_step_reuser): no
-- userdata, holdings or keeper table per request. Without it, every request gets a new step from core.step.
local step_reuser = core.ffi_step_reuser

-- s as well-formed UTF-8 (util.well_formed_utf8), with a byte loop for the usual all-ASCII string: LuaJIT compiles
-- it, where a pattern find (util's own test) would end the phase handler's trace.
local function well_formed_utf8(s)
  for i = 1, #s do
    if byte(s, i) >= 0x80 then return util.well_formed_utf8(s) end
  end
  return s
end

-- The options of M.init besides lock, ledger, peers and fallback: {name, default, min, max} (integers).
local OPTIONS = {
  -- Ledger lines a worker holds, in bytes, before it writes them in one write(2); 0 writes each line at once.
  { "ledger_hold_bytes", core.LEDGER_HOLD_DEFAULT_BYTES, 0, rf.ledger.BATCH_BYTES },
  -- Longest a held ledger line waits before the worker writes it (a timer); the worker also writes its held lines
  -- as it exits (exit_worker_by_lua_block calls M.exit_worker).
  { "ledger_flush_ms", core.LEDGER_FLUSH_DEFAULT_MS, 1, core.LEDGER_FLUSH_MAX_MS },
}

-- The nginx variables the balancer sets for the propagation headers of each try (proxy_set_header NAME $VAR in the
-- configuration): an empty value sends no header, so a caller's own copy never passes through.
M.ATTEMPT_VAR, M.DEADLINE_VAR = "rf_attempt", "rf_deadline_ms"
-- The header names the configuration's proxy_set_header lines send them under, unless opts says otherwise: the
-- defaults of the lock's propagation.attemptHeader and propagation.deadlineHeader, read from the lock's schema.
local function schema_default(path)
  for _, row in ipairs(rf.lock_schema()) do
    if row.path == path then return row.default end
  end
  error("retryfreeze.gateway: the lock schema has no " .. path, 0)
end
local DEFAULT_ATTEMPT_HEADER = schema_default("propagation.attemptHeader")
local DEFAULT_DEADLINE_HEADER = schema_default("propagation.deadlineHeader")

--- Which routes of a policy the gateway serves natively, and why not the others: a try in the balancer phase cannot
--- wait, so a route may not ask for one; and the lean form (opts.lean) runs no access or header_filter phase, so a
--- route there may not have propagation. The rule is the engine's (policy:gateway_refusals, rf_gateway_refusals),
--- which the nginx module asks too.
-- @param policy a policy from rf.load
-- @param opts nil, or {lean = true}: the routes the lean form serves
-- @return an array, in policy:routes() order, of {endpoint = "GET /items/*", native = boolean, why = nil or a
--   sentence naming each lock field that asks for a wait or hedging (its JSON name: hedging, backoff,
--   retryAfter.honor) or, with opts.lean, has propagation, joined by "; and "}
function M.routes(policy, opts)
  local lean = opts ~= nil and opts.lean == true
  local out = {}
  for i, route in ipairs(policy:routes()) do
    local why = policy:gateway_refusals(route.endpoint, lean)
    out[i] = { endpoint = route.endpoint, native = why == nil, why = why }
  end
  return out
end

-- "host:port" → host, port; or nil.
local function split_peer(peer)
  if type(peer) ~= "string" then return nil end
  local host, port = peer:match("^([^%s:]+):(%d+)$")
  port = tonumber(port)
  if not host or not port or port < 1 or port > 65535 then return nil end
  return host, port
end

local shared -- made by the master (M.init), inherited by every worker
local worker -- this worker's own (M.init_worker): {io = {ledger=, rng=, retry_budget=}, next_peer = n}

--- Called from init_by_lua_block, in the master, as nginx loads its configuration (`nginx -t` runs it too): loads
--- and validates the lock, opens the ledger and checks the options; raises the lock's error ("PATH: $.json.path:
--- message"), the ledger's, a bad option's, or the list of routes the gateway cannot serve natively (M.routes) when
--- opts.fallback is absent. Each raises with level 0, so nginx prints the message as it is and does not start.
-- @param opts {lock = path, ledger = path, peers = {"host:port", …} (the upstream's servers, at least one, tried
--   in turn), fallback = "@location" or nil (where a route M.routes finds not native is sent, ngx.exec: a location
--   running rf.flow), attempt_header =, deadline_header = (the names the configuration's proxy_set_header lines
--   send $rf_attempt and $rf_deadline_ms under; default the lock's defaults), request_var = nil or the name of an
--   nginx variable (no "$") that the configuration sets, in the location calling access(), to
--   "$http_idempotency_key\n$http_<attempt header>$http_<deadline header>" (the header names in lowercase, "-" as
--   "_"): access() then reads it once instead of those three headers, each a read of ngx.var (without it, it reads
--   them), lean = true or nil (the configuration runs only balancer() and log(), as lean.nginx.conf.in: refused
--   with fallback, or for a lock with a route that is not native or has propagation, each route named),
--   ledger_hold_bytes =, ledger_flush_ms = (integers, see OPTIONS)}
function M.init(opts)
  if type(opts) ~= "table" then error("retryfreeze.gateway.init: opts must be a table", 0) end
  local policy, why = rf.load(opts.lock)
  if not policy then error(why, 0) end
  local ledger, lerr = rf.ledger.open(opts.ledger)
  if not ledger then error(lerr, 0) end
  if type(opts.peers) ~= "table" or #opts.peers == 0 then
    error("retryfreeze.gateway.init: peers must be a non-empty array of \"host:port\"", 0)
  end
  local hosts, ports, peers = {}, {}, {}
  for i, peer in ipairs(opts.peers) do
    hosts[i], ports[i] = split_peer(peer)
    peers[i] = hosts[i] and hosts[i] .. ":" .. ports[i] -- as the ledger records a try's peer
    if not hosts[i] then
      error(("retryfreeze.gateway.init: peers[%d] must be \"host:port\" (port 1..65535), got %s"):format(i,
        tostring(peer)), 0)
    end
  end
  if opts.request_var ~= nil and (type(opts.request_var) ~= "string" or not opts.request_var:match("^[%a_][%w_]*$")) then
    error("retryfreeze.gateway.init: request_var must be the name of an nginx variable (letters, digits, _), got "
      .. tostring(opts.request_var), 0)
  end
  if opts.lean ~= nil and type(opts.lean) ~= "boolean" then
    error("retryfreeze.gateway.init: lean must be true or false, got " .. tostring(opts.lean), 0)
  end
  if opts.lean and opts.fallback ~= nil then
    error("retryfreeze.gateway.init: lean and fallback exclude each other: the lean form has no access phase, the "
      .. "only one that can send a request to another location", 0)
  end
  if opts.fallback ~= nil and (type(opts.fallback) ~= "string" or not opts.fallback:match("^@.")) then
    error("retryfreeze.gateway.init: fallback must be a named location (\"@name\"), got " .. tostring(opts.fallback), 0)
  end
  local attempt_header = (opts.attempt_header or DEFAULT_ATTEMPT_HEADER):lower()
  local deadline_header = (opts.deadline_header or DEFAULT_DEADLINE_HEADER):lower()
  -- per endpoint: {max = maxAttempts, native = bool, tells = overloaded header or nil, var = its nginx variable};
  -- route_at: the same tables in policy:routes() order; serve: whether each is native (a step may serve it)
  local routes, refused, route_at, serve, any_tells = {}, {}, {}, {}, false
  local effective = {}
  for _, route in ipairs(policy:routes()) do effective[route.endpoint] = route end
  for _, r in ipairs(M.routes(policy, { lean = opts.lean })) do
    local route = effective[r.endpoint]
    local info = { max = route.max_attempts, native = r.native }
    local p = route.propagation
    if p then
      if p.attempt_header ~= attempt_header or p.deadline_header ~= deadline_header then
        error(("retryfreeze.gateway.init: %s: the route's propagation sends %s and %s, but the gateway sends "
          .. "%s and %s (attempt_header, deadline_header: the configuration's proxy_set_header names)"):format(
          r.endpoint, p.attempt_header, p.deadline_header, attempt_header, deadline_header), 0)
      end
      info.tells = p.overloaded_header
      info.var = "upstream_http_" .. p.overloaded_header:gsub("-", "_")
      any_tells = true
    end
    if not r.native then refused[#refused + 1] = r.endpoint .. ": " .. r.why end
    routes[r.endpoint] = info
    route_at[#route_at + 1], serve[#serve + 1] = info, r.native
  end
  if opts.lean and #refused > 0 then
    error("retryfreeze.gateway.init: " .. opts.lock .. ": the lean gateway (balancer and log phases) cannot serve "
      .. "these routes (the full form, without lean = true, serves routes with propagation): "
      .. table.concat(refused, "; "), 0)
  end
  if #refused > 0 and not opts.fallback then
    error("retryfreeze.gateway.init: " .. opts.lock .. ": the gateway cannot serve these routes natively (give "
      .. "fallback = \"@location\" to serve them through rf.flow): " .. table.concat(refused, "; "), 0)
  end
  shared = { policy = policy, ledger = ledger, hosts = hosts, ports = ports, peers = peers, n_peers = #hosts,
             routes = routes, route_at = route_at, any_tells = any_tells, reuse = step_reuser and step_reuser(serve),
             fallback = opts.fallback, attempt_header = attempt_header, deadline_header = deadline_header,
             request_var = opts.request_var, lean = opts.lean == true,
             attempt_in = "http_" .. attempt_header:gsub("-", "_"),
             deadline_in = "http_" .. deadline_header:gsub("-", "_") }
  for _, o in ipairs(OPTIONS) do
    local name, value = o[1], opts[o[1]]
    if value == nil then value = o[2] end
    if type(value) ~= "number" or value % 1 ~= 0 or value < o[3] or value > o[4] then
      error(("retryfreeze.gateway.init: %s must be an integer from %d to %d, got %s"):format(name, o[3], o[4],
        tostring(value)), 0)
    end
    shared[name] = value
  end
end

-- Writes the ledger lines this worker holds; logs what was lost when the write failed.
local function flush_ledger()
  local ok, err = shared.ledger:flush()
  if not ok then ngx.log(ngx.ERR, "retryfreeze.gateway: ledger: ", err) end
end

--- Called from init_worker_by_lua_block: this worker's RNG and retry budget (opts.shared_dict: one budget for all of
--- nginx's workers, kept in that lua_shared_dict; a lock with retryBudget.shared and a Redis URL share one across
--- workers and hosts: rf.retry_budget, docs/fleet.md; else each worker has its own), and its held ledger lines,
--- written every ledger_flush_ms.
-- @param opts nil, {shared_dict = NAME} (a lua_shared_dict of the configuration) or {redis = URL} for a lock whose
--   retryBudget is shared (rf.retry_budget's options)
function M.init_worker(opts)
  if not shared then error("retryfreeze.gateway.init_worker: call gateway.init{…} from init_by_lua_block first", 0) end
  local budget = shared.policy.retry_budget and rf.retry_budget(shared.policy, opts) or nil
  worker = { io = { ledger = shared.ledger, rng = rf.rng(ngx.worker.pid()), retry_budget = budget },
             next_peer = ngx.worker.pid() % shared.n_peers }
  if shared.ledger_hold_bytes > 0 then
    assert(shared.ledger:hold(shared.ledger_hold_bytes))
    local ok, err = ngx.timer.every(shared.ledger_flush_ms / 1000, flush_ledger)
    if not ok then error("retryfreeze.gateway.init_worker: cannot start the ledger's flush timer: " .. tostring(err), 0) end
  end
end

--- Called from exit_worker_by_lua_block, as the worker exits: writes the ledger lines it still holds.
function M.exit_worker()
  if shared then flush_ledger() end
end

-- The propagation headers' values of the try the step just began (the attempt header's, the deadline header's), or
-- nil: through the FFI under LuaJIT (core.ffi_step_propagation, no table), else from step:propagation().
local step_propagation = core.ffi_step_propagation or function(step)
  local sent = step:propagation()
  if sent then return sent[shared.attempt_header], sent[shared.deadline_header] end
end

-- Sets the nginx variables of the propagation headers of the try the step just began.
local function propagate(step)
  local attempt, deadline_ms = step_propagation(step)
  if attempt then
    local var = ngx.var
    var[M.ATTEMPT_VAR], var[M.DEADLINE_VAR] = attempt, deadline_ms
  end
  return attempt
end

-- One request table per worker for core.step, which keeps what it reads: nothing between filling it and the call can
-- yield, so no two requests use it at once.
local REQUEST = { method = nil, path = nil, idempotency_key = nil, inbound_headers = nil }

-- The worker's steps whose requests ended (finish), each reused by a later request (shared.reuse), the last first;
-- at most POOL_MAX (a worker's requests in flight at once seldom reach it; past it an ended step is left to the
-- collector).
local pool, n_pool, POOL_MAX = {}, 0, 1024

-- The states of this worker's requests whose step has not ended (from open_request to finish), each with its
-- request (ctx.r, lua-resty-core's request pointer): an internal redirect to a named location (error_page 502 =
-- @fallback) clears ngx.ctx, and the phases after it find the state of the request's earlier upstream here
-- (recovered). A request ends in finish() when its last phase calls log(): docs/embedding.md puts log_by_lua (and
-- the full form's header_filter_by_lua) in server{}. An array whose slots (ctx.slot) are reused through a free
-- list (no new table key per request); false in a free slot.
local in_flight, free_slots, n_free = {}, {}, 0
-- lua-resty-core's current request (a pointer), loaded on the first call: nginx's Lua only.
local get_request
local function current_request()
  if not get_request then get_request = require("resty.core.base").get_request end
  return get_request()
end

-- The state of an earlier upstream of this request, which an internal redirect cleared from ngx.ctx, or nil: a
-- walk of the requests in flight, only when ngx.ctx has no state. The pointer alone may be a later request's (nginx
-- reuses it): the state must have the request's start time too.
local function recovered()
  local r, started = current_request(), nil
  for i = 1, #in_flight do
    local ctx = in_flight[i]
    if ctx and ctx.r == r then
      started = started or ngx.req.start_time()
      if ctx.started == started then return ctx end
    end
  end
  return nil
end

-- Ends a request's state from its final response (defined below, after the phases it needs).
local final

-- The request's state for its phases (ngx.ctx.rf): its route matched once (policy:match, or the match of a reused
-- step) and its step (the engine's attempt loop: its idempotency key is the request's Idempotency-Key header, and
-- with the route's propagation its caller's attempt number and deadline narrow it): a step of an ended request of
-- this worker, reused, or a new one. Returns the state, or nil and 404 (no route), 500 (a subrequest, which the
-- error log names) or "fallback" (a route the gateway cannot serve natively). An earlier upstream of the
-- request, which an internal redirect cleared from ngx.ctx, gets its ledger line first. With opts.request_var,
-- raises when that variable does not hold the value it names (the configuration does not set it).
local function open_request()
  if not worker then
    error("retryfreeze.gateway: this worker has no RNG and retry budget: init_worker_by_lua_block did not run, or "
      .. "failed (see the error log)", 0)
  end
  local var = ngx.var
  local method, internal = ngx.req.get_method(), ngx.req.is_internal()
  if internal and ngx.is_subrequest then
    -- a mirror's or an auth_request's: the full form runs no access phase for it, the lean form no log phase (its
    -- ledger line would be lost), and its $request_uri is the main request's
    ngx.log(ngx.ERR, "retryfreeze.gateway: ", method, " ", var.uri, ": a subrequest (mirror, auth_request) to a ",
      "governed upstream: the Lua gateway does not govern subrequests; proxy it to an upstream without the gateway, ",
      "or use the nginx module")
    return nil, 500
  end
  -- The path as the upstream gets it (proxy_pass with no URI sends the request target as the client wrote it),
  -- not nginx's normalised $uri: a route is chosen by what is sent ("/a/%2e%2e/items/1" is not "/items/1").
  local path = var.request_uri
  local q = find(path, "?", 1, true)
  if q then path = sub(path, 1, q - 1) end
  if internal then
    -- a request nginx redirected: when a rewrite or an internal redirect changed its URI (no longer the client's
    -- target, decoded), proxy_pass sends that URI, escaped as nginx escapes it (a named location keeps the target)
    local uri = var.uri
    if ngx.unescape_uri(path) ~= uri then path = ngx.escape_uri(uri, 0) end
  end
  -- an earlier upstream of this request governed here, whose state nginx's internal redirect (error_page to a named
  -- location) cleared from ngx.ctx: its ledger line now, its upstream over
  if internal then
    local earlier = recovered()
    if earlier and not earlier.done then final(earlier) end
  end
  local key, sent -- sent: whether the caller sent a propagation header (read only when a route has propagation)
  local request_var = shared.request_var
  if request_var then -- the key and the caller's propagation headers in one read (opts.request_var)
    local v = var[request_var]
    local nl = v and find(v, "\n", 1, true)
    if not nl then
      error("retryfreeze.gateway: $" .. request_var .. " must be set to \"$http_idempotency_key\\n$"
        .. shared.attempt_in .. "$" .. shared.deadline_in .. "\" (opts.request_var), got " .. tostring(v), 0)
    end
    if nl > 1 then key = sub(v, 1, nl - 1) end
    sent = shared.any_tells and nl < #v
  else
    key = var.http_idempotency_key
    if key == "" then key = nil end -- an empty key is no key (docs/lua.md, facts)
    sent = shared.any_tells and (var[shared.attempt_in] or var[shared.deadline_in])
  end
  -- What comes from the wire goes to the ledger, which takes only UTF-8: a stray byte is recorded as U+FFFD rather
  -- than the line refused (the upstream still gets the bytes the client sent).
  path = well_formed_utf8(path)
  if key then key = well_formed_utf8(key) end
  local now = now_ms()
  local route, step
  -- A step of an ended request, reused: it matches the route itself. A caller's propagation headers take core.step.
  local reuse = shared.reuse
  if reuse and n_pool > 0 and not sent then
    local pooled = pool[n_pool]
    local at, reused = reuse(pooled, method, path, key, now)
    if reused ~= nil then
      if not at then return nil, 404 end
      if not reused then return nil, "fallback" end -- a route the gateway cannot serve natively
      route, step = shared.route_at[at], pooled
    end
    pool[n_pool] = nil -- serving this request, or refused (then core.step says why below)
    n_pool = n_pool - 1
  end
  if not step then
    local endpoint = shared.policy:match(method, path)
    if not endpoint then return nil, 404 end
    route = shared.routes[endpoint]
    if not route.native then return nil, "fallback" end
    -- A caller's propagation headers, all of them (repeated ones count by the narrowest), only when it sent one
    local inbound
    if route.tells and sent then inbound = ngx.req.get_headers() end
    local req = REQUEST
    req.method, req.path, req.idempotency_key, req.inbound_headers = method, path, key, inbound
    step = core.step(shared.policy, req, worker.io, now)
    req.method, req.path, req.idempotency_key, req.inbound_headers = nil, nil, nil, nil
  end
  -- tries: how many began; first: the peer of the first try (each retry takes the next one not yet tried).
  -- every field the request's phases set, sized at once (peer, first_timeout_ms and first_stop are read only once set)
  -- internal: whether nginx redirected it (its upstream may not be the request's first: seg, the index of its own
  -- in nginx's upstream_* variables, is counted on its first try); r, started: its request, in in_flight
  local ctx = { step = step, route = route, tries = 0, first = 0, done = false, peer = false, first_timeout_ms = false,
                first_stop = false, internal = internal, seg = 0, r = current_request(),
                started = ngx.req.start_time(), slot = 0 }
  ngx.ctx.rf = ctx
  local slot
  if n_free > 0 then
    slot, n_free = free_slots[n_free], n_free - 1
  else
    slot = #in_flight + 1
  end
  ctx.slot, in_flight[slot] = slot, ctx
  return ctx, now
end

--- Called from access_by_lua_block (not in the lean form, opts.lean): matches the request's route once; no route
--- answers 404, a route the gateway cannot serve natively goes to opts.fallback (ngx.exec). Otherwise the request's
--- step is kept in ngx.ctx.rf for the next phases: a step of an ended request of this worker, reused, or a new one.
--- With opts.request_var, raises when that variable does not hold the value it names (the configuration does not
--- set it).
function M.access()
  local ctx, now_or_stop = open_request()
  if not ctx then
    if now_or_stop == 404 or now_or_stop == 500 then return ngx.exit(now_or_stop) end
    return ngx.exec(shared.fallback)
  end
  local now = now_or_stop
  if ctx.route.tells then
    -- nginx builds the request once, before the first try's balancer: that try begins here, so that the request
    -- carries its propagation headers without being built again
    local step = ctx.step
    local timeout_ms, why = step_begin(step, now)
    ctx.first_timeout_ms, ctx.first_stop = timeout_ms, why
    if timeout_ms then propagate(step) end
  end
end

-- Ends the request's step with reason at now (monotonic) and wall (Unix) ms, read now when not given: its ledger line;
-- whether the response is overloaded. The step then waits in the pool for a later request (nothing of this request
-- refers to it any more).
local function finish(ctx, reason, now, wall)
  ctx.done = true
  local step = ctx.step
  ctx.step = nil
  local slot = ctx.slot
  if in_flight[slot] == ctx then
    in_flight[slot] = false
    n_free = n_free + 1
    free_slots[n_free] = slot
  end
  local overloaded = step_end(step, reason, now or now_ms(), wall or wall_ms())
  if shared.reuse and n_pool < POOL_MAX then
    n_pool = n_pool + 1
    pool[n_pool] = step
  end
  return overloaded
end

-- The last item of an nginx upstream_* variable's list ("0.001, - : " → "-"), or nil.
local function last_item(value)
  return value and value:match("([%d%.%-]+)[^%d%.%-]*$")
end

-- The last item of upstream seg's part (0 for the request's first upstream) of an nginx upstream_* variable, whose
-- upstreams are separated by " : " ("502, 502 : 200", 0 → "502"); of the whole list when seg is nil.
local function item_at(value, seg)
  if not seg or not value then return last_item(value) end
  local i, from = 0, 1
  while true do
    local s, e = find(value, " : ", from, true)
    if i == seg then return last_item(sub(value, from, s and s - 1 or #value)) end
    if not s then return nil end
    i, from = i + 1, e + 1
  end
end

-- The last try as io.send's result (res, filled in): nginx reports a try it gave up on with a status code (its
-- last_failure, or the final response's): the upstream's status when a response head came (upstream_header_time
-- has the try's time), else an error nginx stands in for: a 504 is a timeout; a try whose connection never
-- opened (upstream_connect_time "-") was never sent (connect-refused, not_sent); any other broke after the request
-- may have left (connect-reset), which a request without an idempotency key does not retry.
local function last_try(res, code, route, seg)
  local var = ngx.var
  -- nginx passes any three digits on; a status outside core.HTTP_STATUS_MIN..MAX (RFC 9110 §15) is no HTTP
  -- response: a transport failure the engine classes UNKNOWN, not a status it would refuse
  if code < STATUS_MIN or code > STATUS_MAX then
    res.status, res.transport, res.not_sent, res.headers = 0, "other", false, nil
    return res
  end
  -- nginx stands in with 502 or 504 only: any other code is the upstream's own
  if (code ~= 502 and code ~= 504) or item_at(var.upstream_header_time, seg) ~= "-" then
    res.status, res.transport, res.not_sent, res.headers = code, "ok", false, nil
    -- the upstream's overloaded header: read by step:after for a route with propagation, whose verdict on a failure
    -- only it changes (a success is one whatever the headers: core.SUCCESS_STATUS_MIN..MAX)
    if route.tells and not seg and (code < SUCCESS_MIN or code > SUCCESS_MAX) then
      local v = var[route.var]
      res.headers = v and { [route.tells] = v } or nil
    end
    return res
  end
  res.status, res.headers = 0, nil
  if code == 504 then
    res.transport, res.not_sent = "timeout", false
  elseif item_at(var.upstream_connect_time, seg) == "-" then
    res.transport, res.not_sent = "connect-refused", true
  else
    res.transport, res.not_sent = "connect-reset", false
  end
  return res
end

-- lua-resty-core's ngx.balancer, loaded on the first try (it needs nginx's Lua; M.routes runs without it).
local balancer

-- The balancer stops the request after a try the engine does not retry: the ledger line now, and the answer
-- (M.stopped, through error_page 500) from what nginx keeps across the internal redirect: its variables.
local function stop(ctx, reason, status, now, wall)
  local overloaded = finish(ctx, reason, now, wall)
  local var = ngx.var
  var.rf_stop_status = tostring(status)
  if overloaded and ctx.route.tells then var.rf_stop_tells = ctx.route.tells end
  ngx.exit(ngx.ERROR)
  return nil
end

-- One result table per worker: the balancer cannot yield, so no two requests use it at once. peer: the last try's
-- "host:port" (ctx.peer), recorded in its ledger entry.
local RESULT = { status = 0, transport = "ok", headers = nil, not_sent = false, peer = nil }

-- The request's state in the balancer phase: ngx.ctx.rf, which the lean form (no access phase, opts.lean) makes on
-- the first try. false when the request stopped: a path with no route answers 404 (through M.stopped; every route
-- of a lean gateway is native, M.init).
local function state_in_balancer()
  local ctx = ngx.ctx.rf
  if ctx then return ctx end
  if not shared.lean and not ngx.is_subrequest then -- a subrequest has no access phase: open_request refuses it
    error("retryfreeze.gateway: no request state: access_by_lua_block must call access() (or give init lean = true)", 0)
  end
  local refused
  ctx, refused = open_request()
  if ctx then return ctx end
  if refused == 404 then ngx.var.rf_stop_status = "404" end -- else a 500 (the error log says why)
  ngx.exit(ngx.ERROR)
  return false
end

-- M.try on the request's state ctx (ngx.ctx.rf).
local function try_on(ctx, peer)
  local step, route = ctx.step, ctx.route
  local now = now_ms()
  local last = 503 -- the status a stop answers with: no try could start
  if ctx.tries == 0 and ctx.internal then
    -- the request's earlier upstreams, each a " : " before this one's first try ("502, 502 : -")
    local _, n = gsub(ngx.var.upstream_status or "", " : ", "")
    ctx.seg = n
  end
  if ctx.tries > 0 then
    local _, code = balancer.get_last_failure()
    last = code or 502
    local res = last_try(RESULT, last, route)
    res.peer = ctx.peer
    -- the FFI path passes no overloaded header: the method reads one when it came
    local after = res.headers and method_after or step_after
    local wall = wall_ms()
    local retry, x = after(step, res, now, wall)
    res.headers, res.peer = nil, nil
    if not retry then return stop(ctx, x, last, now, wall) end
    if x > 0 then -- never for a route M.routes finds native; refused rather than sent early
      ngx.log(ngx.ERR, "retryfreeze.gateway: the engine asked for a ", x, " ms wait the balancer cannot make")
      return stop(ctx, "stopped-by-caller", last)
    end
  end
  local timeout_ms, why
  if ctx.tries == 0 and route.tells then -- begun in access, its headers set
    timeout_ms, why = ctx.first_timeout_ms, ctx.first_stop
  else
    timeout_ms, why = step_begin(step, now)
    -- the request rebuilt with this try's propagation headers
    if timeout_ms and route.tells and propagate(step) then balancer.recreate_request() end
  end
  if not timeout_ms then return stop(ctx, why, last) end
  local tries = ctx.tries + 1
  ctx.tries, ctx.peer = tries, peer
  local s = timeout_ms / 1000
  local ok, err = balancer.set_timeouts(s, s, s)
  if not ok then error("retryfreeze.gateway: set_timeouts: " .. tostring(err), 0) end
  if tries < route.max then balancer.set_more_tries(1) end
  return tries
end

--- Called from the balancer phase, once per try, by a host that picks the peer itself (an APISIX plugin's
--- before_proxy; M.balancer picks from opts.peers). From the second try on, the last try's failure (its status
--- code from ngx.balancer.get_last_failure: the upstream's status for a status proxy_next_upstream lists, or nginx's
--- 502 or 504 for an error or a timeout) goes to the engine: when it does not retry, the request stops here (its
--- ledger line, then ngx.exit(ngx.ERROR): error_page 500 → M.stopped) and this returns nothing. Otherwise the
--- engine starts the try (its per-try timeout, or a stop: deadline, throttled), which gets the per-try timeout for
--- connect, send and read (set_timeouts), the propagation headers of its number and time ($rf_attempt,
--- $rf_deadline_ms; the request is rebuilt for it), and one more try allowed to nginx while the route's
--- maxAttempts allows one. Each try's peer goes to its entry in the ledger line: the "host:port" the host gives here
--- (it picked the peer before) or, for M.balancer, the one it sets after.
-- @param peer nil, or the "host:port" this try goes to (a port 1..65535, as the ledger records it)
-- @return the try's number (1 for the first), or nil when the request stopped
function M.try(peer)
  if not balancer then balancer = require "ngx.balancer" end
  local ctx = state_in_balancer()
  if not ctx then return nil end
  return try_on(ctx, peer)
end

--- Called from balancer_by_lua_block, once per try: M.try, then the try's peer: the next of opts.peers not yet
--- tried by this request while one is left (the first try's peer from a per-worker rotation), then the next in turn.
function M.balancer()
  if not balancer then balancer = require "ngx.balancer" end
  local ctx = state_in_balancer()
  if not ctx then return end
  local tries = try_on(ctx)
  if not tries then return end
  local n = shared.n_peers
  if tries == 1 then
    local w = worker.next_peer
    ctx.first, worker.next_peer = w, (w + 1) % n
  end
  local i = (ctx.first + tries - 1) % n + 1
  local ok, err = balancer.set_current_peer(shared.hosts[i], shared.ports[i])
  if not ok then error("retryfreeze.gateway.balancer: set_current_peer: " .. tostring(err), 0) end
  ctx.peer = shared.peers[i]
end

-- Ends the request with the final response's verdict: the ledger line, and the overloaded header for the caller.
-- status nil: a state recovered after an internal redirect, whose upstream is over; its last try is read from its
-- own upstream's part of nginx's upstream_* variables (ctx.seg), not from a later upstream's.
final = function(ctx, status, in_header_filter)
  local res = RESULT
  local route = ctx.route
  if ctx.tries == 0 then
    finish(ctx, "stopped-by-caller") -- the request ended before its first try (a client gone, an error)
    return
  end
  local seg
  if not status then
    seg = ctx.seg
    status = tonumber(item_at(ngx.var.upstream_status, seg)) or 502
  end
  -- 499: nginx's own code for a client that closed before the response (no head came for the last try): not an
  -- upstream's status but a try the host gave up (transport "other", with its peer), and a request the caller
  -- stopped
  if status == 499 and item_at(ngx.var.upstream_header_time, seg) == "-" then
    res.status, res.transport, res.not_sent, res.headers, res.peer = 0, "other", false, nil, ctx.peer
    local now, wall = now_ms(), wall_ms()
    step_after(ctx.step, res, now, wall)
    res.peer = nil
    finish(ctx, "stopped-by-caller", now, wall)
    return
  end
  last_try(res, status, route, seg)
  res.peer = ctx.peer
  local after = res.headers and method_after or step_after
  local now, wall = now_ms(), wall_ms() -- the final response's head: its try's end and the request's
  local retry, x = after(ctx.step, res, now, wall)
  res.headers, res.peer = nil, nil
  -- retry: the engine would retry a status nginx was not told to come back on (not in proxy_next_upstream):
  -- the request ends with it all the same, as one the caller stopped.
  local overloaded = finish(ctx, retry and "stopped-by-caller" or x, now, wall)
  if in_header_filter and overloaded and route.tells then ngx.header[route.tells] = "true" end
end

--- Called from header_filter_by_lua_block: the final response (the upstream's, or nginx's 502/504 for a last try
--- that failed) goes to the engine, which gives the request's outcome and reason: its ledger line is appended
--- (held), and a route with propagation that stopped after retrying tells its caller (overloadedHeader: true). After
--- an internal redirect (error_page 502 = @fallback, which clears ngx.ctx), the line of the request's earlier
--- governed upstream, from that upstream's own last try.
function M.header_filter()
  local ctx = ngx.ctx.rf
  if ctx then
    if not ctx.done then final(ctx, ngx.status, true) end
  else -- after an internal redirect (error_page 502 = @fallback): the earlier upstream's line
    ctx = recovered()
    if ctx and not ctx.done then final(ctx) end
  end
end

--- Called from log_by_lua_block: a request that never reached header_filter (the client closed first, or the lean
--- form, which runs no header_filter) gets its ledger line here, from the final response, or after an internal
--- redirect (error_page 502 = @fallback, which clears ngx.ctx) from its governed upstream's own last try; and an
--- exiting worker writes its held lines now (its timer has run for the last time).
function M.log()
  local ctx = ngx.ctx.rf
  if ctx then
    if not ctx.done then final(ctx, ngx.status) end
  else -- after an internal redirect (error_page 502 = @fallback): the earlier upstream's line
    ctx = recovered()
    if ctx and not ctx.done then final(ctx) end
  end
  if ngx.worker.exiting() then flush_ledger() end
end

--- Called from content_by_lua_block of the named location error_page 500 sends to: a request the balancer stopped
--- (its ledger line is written) is answered with the status of the try the engine did not retry (the upstream's
--- status, 502 or 504, or 503 when no try could start), an empty body, and for a route with propagation that
--- retried, its overloaded header. Any other 500 stays a 500.
function M.stopped()
  local var = ngx.var
  local status = tonumber(var.rf_stop_status)
  if not status then return ngx.exit(500) end
  ngx.status = status
  local tells = var.rf_stop_tells
  if tells and tells ~= "" then ngx.header[tells] = "true" end
  ngx.header["Content-Length"] = 0
  return ngx.exit(ngx.OK)
end

return M
