-- Deterministic ledgers in the writer's exact line format (core/src/ledger/ledger_format.c: every field, in
-- that order), for the report, OpenMetrics and stats specs and bench/evidence/bench_report.lua. A mix of routes of
-- different health, an "incident" in the middle of the time span (more failures), retries after 503, 429 and
-- timeouts, Retry-After values that are honored, not honored, invalid, an HTTP-date, too long for the budget,
-- and present on a stopping verdict, terminal and exhausted requests, and no-route refusals.
local M = {}

local POLICY = "sha256:" .. string.rep("ab", 32)

--- The routes of a generated ledger and the share of their requests that succeed at the first try.
M.routes = {
  { route = "POST /v1/jobs", method = "POST", path = "/v1/jobs", healthy = 0.93 },
  { route = "GET /v1/jobs/{id}", method = "GET", path = "/v1/jobs/42", healthy = 0.97 },
  { route = "POST /v1/refunds", method = "POST", path = "/v1/refunds", healthy = 0.75 },
  { route = "DELETE /v1/jobs/{id}", method = "DELETE", path = "/v1/jobs/42", healthy = 0.88 },
}

--- RFC 3339 UTC with milliseconds, as the ledger writes ts.
function M.rfc3339(ms)
  return os.date("!%Y-%m-%dT%H:%M:%S", math.floor(ms / 1000)) .. string.format(".%03dZ", ms % 1000)
end

--- IMF-fixdate (RFC 9110 §5.6.7) of a whole second.
function M.http_date(ms)
  return os.date("!%a, %d %b %Y %H:%M:%S GMT", math.floor(ms / 1000))
end

--- One ledger line (with its newline). r: {ts_ms, route, method, path, key (string|nil), attempts, elapsed_ms,
--- outcome, reason, ok, status, tries = {{class, status, elapsed_ms, delay_ms, reason, retry_after|nil,
--- retry_after_header|nil (the wait header the value came from; written only when given)}…}}
function M.line(r)
  local tries = {}
  for i, t in ipairs(r.tries or {}) do
    tries[i] = string.format('{"class":"%s","status":%d,"elapsed_ms":%d,"delay_ms":%d,"reason":"%s","retry_after":%s%s}',
      t[1], t[2], t[3], t[4], t[5], t[6] and ('"' .. t[6] .. '"') or "null",
      t[7] and (',"retry_after_header":"' .. t[7] .. '"') or "")
  end
  return string.format('{"ts":"%s","route":"%s","method":"%s","path":"%s","key":%s,"policy":"%s","attempts":%d,'
    .. '"elapsed_ms":%d,"outcome":"%s","reason":"%s","ok":%s,"status":%d,"body_len":%d,"tries":[%s]}\n',
    M.rfc3339(r.ts_ms), r.route, r.method, r.path, r.key and ('"' .. r.key .. '"') or "null", POLICY, r.attempts,
    r.elapsed_ms, r.outcome, r.reason, tostring(r.ok), r.status, r.ok and 17 or 0, table.concat(tries, ","))
end

-- A failed first attempt followed by a success; ra: the first response's Retry-After (or nil), delay: the wait.
local function retried(start, class, status, e1, e2, delay, ra)
  return { attempts = 2, elapsed_ms = e1 + delay + e2, outcome = "success", reason = "success", ok = true,
    status = 200, ts_ms = start + e1 + delay + e2,
    tries = { { class, status, e1, 0, "pinned-status", ra }, { "HTTP_200", 200, e2, delay, "success" } } }
end

-- The failure shapes, chosen uniformly once a request is not a first-try success.
local shapes = {
  function(s, e1, e2) return retried(s, "HTTP_503", 503, e1, e2, 1000, "1") end, -- honored
  function(s, e1, e2) return retried(s, "HTTP_503", 503, e1, e2, 150, "2") end, -- not honored (backoff used)
  function(s, e1, e2) return retried(s, "HTTP_429", 429, e1, e2, 100, "soon") end, -- ignored-invalid
  function(s, e1, e2) -- an HTTP-date, honored: the second attempt starts at that second
    local date = math.floor((s + e1 + 1500) / 1000) * 1000 + 1000
    local r = retried(s, "HTTP_503", 503, e1, e2, date - (s + e1), M.http_date(date))
    return r
  end,
  function(s, e1, e2) -- two timeouts, then a success after backoff
    return { attempts = 3, elapsed_ms = 2 * e1 + 300 + e2, outcome = "success", reason = "success", ok = true,
      status = 200, ts_ms = s + 2 * e1 + 300 + e2,
      tries = { { "TIMEOUT", 0, e1, 0, "pinned-status" }, { "TIMEOUT", 0, e1, 100, "pinned-status" },
        { "HTTP_200", 200, e2, 200, "success" } } }
  end,
  function(s, e1) -- terminal 500
    return { attempts = 1, elapsed_ms = e1, outcome = "terminal", reason = "status-not-retryable", ok = false,
      status = 500, ts_ms = s + e1, tries = { { "HTTP_500", 500, e1, 0, "status-not-retryable" } } }
  end,
  function(s, e1) -- exhausted: three 504s, the last one's Retry-After not needed
    return { attempts = 3, elapsed_ms = 3 * e1 + 150, outcome = "exhausted", reason = "max-attempts", ok = false,
      status = 504, ts_ms = s + 3 * e1 + 150, tries = { { "HTTP_504", 504, e1, 0, "pinned-status" },
        { "HTTP_504", 504, e1, 50, "pinned-status" }, { "HTTP_504", 504, e1, 100, "max-attempts", "3" } } }
  end,
  function(s, e1) -- Retry-After longer than the budget: honored, the request stops
    return { attempts = 1, elapsed_ms = e1, outcome = "deadline", reason = "retry-after-exceeds-budget", ok = false,
      status = 503, ts_ms = s + e1, tries = { { "HTTP_503", 503, e1, 0, "retry-after-exceeds-budget", "120" } } }
  end,
}

--- Writes a ledger of n records to path.
-- @param path string; n integer
-- @param opts table|nil: {seed = 1, start_ms = 2026-11-29T00:00:00Z, span_ms = 6 h, no_route_every = 200}
-- @return path
function M.generate(path, n, opts)
  opts = opts or {}
  local rng_state = opts.seed or 1
  local function random() -- Park-Miller (MINSTD): exact in doubles, so the same ledger on every Lua and LuaJIT
    rng_state = rng_state * 48271 % 2147483647
    return rng_state / 2147483647
  end
  local start, span = opts.start_ms or 1795910400000, opts.span_ms or 6 * 3600 * 1000
  local no_route_every = opts.no_route_every or 200
  local out = M.lines_to(path)
  for i = 1, n do
    local s = start + math.floor((i - 1) * span / n)
    local route = M.routes[math.floor(random() * #M.routes) + 1]
    local incident = i > n * 0.4 and i <= n * 0.55
    local e1 = math.floor(-math.log(1 - random()) * 40) + 1
    local e2 = math.floor(-math.log(1 - random()) * 40) + 1
    local r
    if no_route_every > 0 and i % no_route_every == 0 then
      r = { attempts = 0, elapsed_ms = 0, outcome = "refused", reason = "no-route", ok = false, status = 0,
        ts_ms = s, tries = {}, route = "", method = "GET", path = "/nowhere" }
    elseif random() < route.healthy - (incident and 0.2 or 0) then
      r = { attempts = 1, elapsed_ms = e1, outcome = "success", reason = "success", ok = true, status = 200,
        ts_ms = s + e1, tries = { { "HTTP_200", 200, e1, 0, "success" } } }
    else
      r = shapes[math.floor(random() * #shapes) + 1](s, e1, e2)
    end
    r.route, r.method, r.path = r.route or route.route, r.method or route.method, r.path or route.path
    if r.method ~= "GET" and r.reason ~= "no-route" then r.key = string.format("key-%08d", i) end
    out.add(M.line(r))
  end
  out.close()
  return path
end

--- A writer of many lines to a new file at path (replaced), 4096 lines to a write: add(line) takes a line with its
--- newline, close() writes what is left and closes the file. Raises when the file cannot be opened.
-- @param path string
-- @return {add = function(line), close = function()}
function M.lines_to(path)
  local f = assert(io.open(path, "wb"))
  local buf = {}
  local w = {}
  function w.add(line)
    buf[#buf + 1] = line
    if #buf == 4096 then
      f:write(table.concat(buf))
      buf = {}
    end
  end
  function w.close()
    f:write(table.concat(buf))
    f:close()
  end
  return w
end

return M
