--- An nginx (lua-nginx-module, LuaJIT) handler that proxies to an upstream through rf.flow: each attempt is
--- one HTTP/1.1 exchange on a cosocket (ngx.socket.tcp) bounded by the attempt's per-try timeout, waits are
--- ngx.sleep, times are rf.monotonic_ms, and every request is one ledger line.
--- The master loads and validates the lock and opens the ledger when nginx loads its configuration
--- (init_by_lua*): a bad lock fails `nginx -t` and the start with the lock's error, and the workers inherit the
--- policy and the ledger's descriptor, so they append to it after dropping root's privileges.
--- Per-worker state: each nginx worker has its own jitter RNG and retry budget (init_worker_by_lua*); a retry
--- budget throttles the retries of one worker only. For one bucket across workers and hosts, give the lock
--- retryBudget.shared and use rf.retry_budget(policy, {redis = URL}) here (docs/fleet.md).
local rf = require "retryfreeze"

local M = {}

local shared -- {policy=, ledger=, host=, port=}: made by the master (M.init), inherited by every worker
local worker -- {rng=, budget=}: this worker's own (M.init_worker)

--- Called from init_by_lua_block, in the master, as nginx loads its configuration (`nginx -t` too): loads and
--- validates the lock and opens the ledger, raising the lock's or the ledger's error, which fails the
--- configuration with that message.
-- @param opts {lock=path, ledger=path, upstream_host=, upstream_port=}
function M.init(opts)
  local policy, why = rf.load(opts.lock)
  if not policy then error(why, 0) end -- "PATH: $.json.path: message"
  local ledger, lerr = rf.ledger.open(opts.ledger)
  if not ledger then error(lerr, 0) end
  -- The header each route with propagation tells its caller with, when it stops after retrying (docs/lock.md)
  local tells = {}
  for _, route in ipairs(policy:routes()) do
    if route.propagation then tells[route.endpoint] = route.propagation.overloaded_header end
  end
  shared = { policy = policy, ledger = ledger, host = opts.upstream_host, port = opts.upstream_port, tells = tells }
end

--- Called from init_worker_by_lua_block: this worker's RNG and retry budget.
function M.init_worker()
  if not shared then error("retry_proxy.init_worker: call retry_proxy.init{…} from init_by_lua_block first", 0) end
  -- A retry budget only when the lock has one (rf.retry_budget refuses a lock without retryBudget).
  local budget = shared.policy.retry_budget and rf.retry_budget(shared.policy) or nil
  worker = { rng = rf.rng(ngx.worker.pid()), budget = budget }
end

-- Transport outcomes (rf.transports) of cosocket errors.
local function transport_of(err)
  if err == "timeout" then return "timeout" end
  if err:find("refused", 1, true) then return "connect-refused" end
  if err:find("reset", 1, true) or err == "closed" then return "connect-reset" end
  return "other"
end

-- One attempt on a fresh connection: the request line, the headers and the body; the response's status,
-- headers and body (Content-Length or up to the close). Every socket operation is bounded by timeout_ms.
local function send(attempt)
  local sock = ngx.socket.tcp()
  sock:settimeouts(attempt.timeout_ms, attempt.timeout_ms, attempt.timeout_ms)
  local deadline = rf.monotonic_ms() + attempt.timeout_ms
  local ok, err = sock:connect(shared.host, shared.port)
  if not ok then return { transport = transport_of(err), error = err, not_sent = true } end
  local lines = { attempt.method .. " " .. attempt.path .. (attempt.query and ("?" .. attempt.query) or "")
                  .. " HTTP/1.1", "Host: " .. shared.host, "Connection: close" }
  for name, value in pairs(attempt.headers) do lines[#lines + 1] = name .. ": " .. value end
  local body = attempt.body or ""
  if body ~= "" or attempt.method == "POST" or attempt.method == "PUT" then
    lines[#lines + 1] = "Content-Length: " .. #body
  end
  local _, serr = sock:send(table.concat(lines, "\r\n") .. "\r\n\r\n" .. body)
  if serr then
    sock:close()
    return { transport = transport_of(serr), error = serr }
  end
  local status_line, rerr = sock:receive("*l")
  if not status_line then
    sock:close()
    return { transport = rerr == "closed" and "got-nothing" or transport_of(rerr), error = rerr }
  end
  local status = tonumber(status_line:match("^HTTP/1%.%d (%d%d%d)"))
  local headers, length = {}, nil
  while true do
    local line, herr = sock:receive("*l")
    if not line then
      sock:close()
      return { transport = transport_of(herr), error = herr }
    end
    if line == "" then break end
    local name, value = line:match("^([^:]+):%s*(.-)%s*$")
    if name then
      name = name:lower()
      if headers[name] == nil then headers[name] = value end
      if name == "content-length" then length = tonumber(value) end
    end
  end
  local remaining = deadline - rf.monotonic_ms()
  if remaining < 1 then remaining = 1 end
  sock:settimeouts(remaining, remaining, remaining)
  local resp_body, berr, partial
  if length then resp_body, berr, partial = sock:receive(length) else resp_body, berr, partial = sock:receive("*a") end
  sock:close()
  if not resp_body then return { transport = transport_of(berr), error = berr, status = 0, body = partial } end
  return { status = status, transport = "ok", headers = headers, body = resp_body }
end

--- content_by_lua_block: proxies this request to the upstream through rf.flow and answers with the last
--- attempt's status and body, plus X-Retryfreeze-Outcome, -Reason and -Attempts, and, when the route has
--- propagation and the flow stopped after retrying, its overloaded header (x-envoy-overloaded: true).
function M.handle()
  if not worker then
    error("retry_proxy: this worker has no RNG and retry budget: init_worker_by_lua_block did not run, or failed "
      .. "(see the error log)", 0)
  end
  ngx.req.read_body()
  local inbound = ngx.req.get_headers()
  local key = inbound["idempotency-key"]
  -- inbound_headers: the caller's own; with the route's propagation its deadline and attempt number narrow this
  -- layer's (never widen them), and what this layer sends upstream is its own attempt's (docs/embedding.md)
  local request = { method = ngx.req.get_method(), path = ngx.var.uri, query = ngx.var.args, body = ngx.req.get_body_data(),
                    idempotency_key = type(key) == "string" and key or nil, headers = {}, inbound_headers = inbound }
  local script = inbound["x-fault-script"] -- the test upstream's fault script, passed through
  if type(script) == "string" then request.headers["X-Fault-Script"] = script end
  local r = rf.flow(shared.policy, request, {
    send = send,
    sleep = function(ms) ngx.sleep(ms / 1000) end,
    -- elapsed_ms and the deadline need a clock that never goes back: ngx.now() is nginx's cached wall clock
    now_ms = rf.monotonic_ms,
    ledger = shared.ledger,
    rng = worker.rng,
    retry_budget = worker.budget,
  })
  ngx.status = r.status > 0 and r.status or 502
  ngx.header["X-Retryfreeze-Outcome"] = r.outcome
  ngx.header["X-Retryfreeze-Reason"] = r.reason
  ngx.header["X-Retryfreeze-Attempts"] = tostring(r.attempts)
  -- retried here already (or shed below): the caller, told so, does not retry it again
  if r.overloaded and r.route and shared.tells[r.route] then ngx.header[shared.tells[r.route]] = "true" end
  ngx.print(r.body)
end

return M
