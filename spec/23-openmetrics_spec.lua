-- `retryfreeze stats --format openmetrics`: metric names and values on a small hand-written ledger, every value
-- equal to `stats --json` on a generated one, `promtool check metrics` (Debian prometheus) accepting it, and
-- the stats fields behind it (attempts per request, exact elapsed buckets, Retry-After use).
local h = require "spec.helper"
local gen = require "spec.ledger_gen"
local json = require "retryfreeze.json"

local T0 = 1795910400000 -- 2026-11-29T00:00:00Z

local scratch = h.scratch()
local ledger = scratch.file
teardown(scratch.remove)

local function rec(r)
  r.ts_ms = r.ts_ms or T0
  r.route, r.method, r.path = r.route or "POST /v1/jobs", r.method or "POST", r.path or "/v1/jobs"
  return gen.line(r)
end

local function ok1(ms, route)
  return rec{ route = route, attempts = 1, elapsed_ms = ms, outcome = "success", reason = "success", ok = true,
    status = 200, tries = { { "HTTP_200", 200, ms, 0, "success" } } }
end

-- Retry-After shapes: {first try's class, status, Retry-After, next delay_ms, ts_ms}.
local function retried(ra, delay, ts_ms)
  return rec{ ts_ms = ts_ms, attempts = 2, elapsed_ms = 10 + delay, outcome = "success", reason = "success", ok = true,
    status = 200, tries = { { "HTTP_503", 503, 5, 0, "pinned-status", ra }, { "HTTP_200", 200, 5, delay, "success" } } }
end

--- The samples of an exposition: {["name{labels}"] = value string}, and the lines in order.
local function samples(text)
  local s, lines = {}, {}
  for l in text:gmatch("([^\n]*)\n") do
    lines[#lines + 1] = l
    if l:sub(1, 1) ~= "#" then
      local key, value = l:match("^(%S+%b{}) (%S+)$")
      assert(key, "not a sample line: " .. l)
      s[key] = value
    end
  end
  return s, lines
end

local function promtool(text)
  local path = h.temp_file(text)
  local p = io.popen("promtool check metrics < '" .. path .. "' 2>&1")
  local out = p:read("a")
  local ok, _, code = p:close()
  os.remove(path)
  return ok, code, out
end

describe("retryfreeze stats --format openmetrics", function()
  it("names counters, gauges and the duration histogram by route, in seconds, and ends with # EOF", function()
    local path = ledger(ok1(3) .. ok1(40) .. ok1(300, "GET /v1/jobs/{id}") .. retried("1", 1000)
      .. rec{ attempts = 1, elapsed_ms = 12, outcome = "terminal", reason = "status-not-retryable", ok = false,
        status = 500, tries = { { "HTTP_500", 500, 12, 0, "status-not-retryable" } } }
      .. rec{ route = "", method = "GET", path = "/x", attempts = 0, elapsed_ms = 0, outcome = "refused",
        reason = "no-route", ok = false, status = 0 })
    local out, err, code = h.run_cli("stats", "--format", "openmetrics", path)
    assert.equal("", err)
    assert.equal(0, code)
    local s, lines = samples(out)
    assert.equal("# EOF", lines[#lines])
    assert.equal('4', s['retryfreeze_requests_total{route="POST /v1/jobs"}'])
    assert.equal('1', s['retryfreeze_requests_total{route="GET /v1/jobs/{id}"}'])
    assert.equal('1', s['retryfreeze_requests_total{route="(no route)"}'])
    assert.equal('3', s['retryfreeze_successes_total{route="POST /v1/jobs"}'])
    assert.equal('5', s['retryfreeze_attempts_total{route="POST /v1/jobs"}'])
    assert.equal('1', s['retryfreeze_retries_total{route="POST /v1/jobs"}'])
    assert.equal('1', s['retryfreeze_retried_successes_total{route="POST /v1/jobs"}'])
    assert.equal('1', s['retryfreeze_terminal_failures_total{route="POST /v1/jobs"}'])
    assert.equal('0.75', s['retryfreeze_success_ratio{route="POST /v1/jobs"}'])
    assert.equal('0.25', s['retryfreeze_terminal_ratio{route="POST /v1/jobs"}'])
    assert.equal('1.3333333333333333', s['retryfreeze_attempts_per_success_ratio{route="POST /v1/jobs"}'])
    assert.equal('3', s['retryfreeze_outcomes_total{route="POST /v1/jobs",outcome="success",reason="success"}'])
    assert.equal('1', s['retryfreeze_outcomes_total{route="(no route)",outcome="refused",reason="no-route"}'])
    assert.equal('1', s['retryfreeze_retried_attempts_total{route="POST /v1/jobs",class="HTTP_503"}'])
    assert.equal('1', s['retryfreeze_retry_after_total{route="POST /v1/jobs",use="honored"}'])
    -- elapsed 3, 40, 1010, 12 ms on POST /v1/jobs: exact cumulative counts at each bound, sum in seconds.
    local b = 'retryfreeze_request_duration_seconds_bucket{route="POST /v1/jobs",le="%s"}'
    assert.equal('1', s[b:format("0.005")])
    assert.equal('2', s[b:format("0.025")])
    assert.equal('3', s[b:format("0.05")])
    assert.equal('3', s[b:format("1")])
    assert.equal('4', s[b:format("2.5")])
    assert.equal('4', s[b:format("+Inf")])
    assert.equal('1.065', s['retryfreeze_request_duration_seconds_sum{route="POST /v1/jobs"}'])
    assert.equal('4', s['retryfreeze_request_duration_seconds_count{route="POST /v1/jobs"}'])
    assert.equal('0', s['retryfreeze_request_duration_seconds_bucket{route="GET /v1/jobs/{id}",le="0.25"}'])
    assert.equal('1', s['retryfreeze_request_duration_seconds_bucket{route="GET /v1/jobs/{id}",le="0.5"}'])
    assert.truthy(out:find("# TYPE retryfreeze_requests_total counter\n", 1, true))
    assert.truthy(out:find("# TYPE retryfreeze_request_duration_seconds histogram\n# UNIT "
      .. "retryfreeze_request_duration_seconds seconds\n", 1, true))
  end)

  it("escapes label values", function()
    local path = ledger(ok1(1, 'GET /a\\"b\\\\c')) -- JSON-escaped in the ledger: GET /a"b\c
    local out = h.run_cli("stats", "--format", "openmetrics", path)
    assert.truthy(out:find('retryfreeze_requests_total{route="GET /a\\"b\\\\c"} 1\n', 1, true))
  end)

  it("passes promtool check metrics and equals stats --json on a generated ledger", function()
    local path = os.tmpname()
    scratch.track(path)
    gen.generate(path, 5000, { seed = 3 })
    local out, err, code = h.run_cli("stats", "--format", "openmetrics", path)
    assert.equal("", err)
    assert.equal(0, code)
    local ok, pcode, pout = promtool(out)
    assert.is_true(ok == true, "promtool check metrics failed (" .. tostring(pcode) .. "): " .. pout)
    assert.equal("", pout)
    local jtext = h.run_cli("stats", "--json", path)
    local st = assert(json.decode(jtext))
    local s = samples(out)
    local n = 0
    for route, r in pairs(st.by_route) do
      local label = route == "" and "(no route)" or route
      local function get(name, extra) return s[name .. '{route="' .. label .. '"' .. (extra or "") .. "}"] end
      for name, field in pairs({ requests_total = "requests", successes_total = "successes",
        attempts_total = "attempts", retries_total = "retries", retried_successes_total = "retried_successes",
        terminal_failures_total = "terminal" }) do
        assert.equal(tostring(r[field]), get("retryfreeze_" .. name), name .. " " .. label)
        n = n + 1
      end
      for name, field in pairs({ success_ratio = "success_rate", retried_success_ratio = "retried_success_ratio",
        terminal_ratio = "terminal_rate", attempts_per_success_ratio = "attempts_per_success",
        retries_per_request_ratio = "retry_ratio" }) do
        assert.near(r[field], tonumber(get("retryfreeze_" .. name)), 1e-12, name .. " " .. label)
      end
      for k, count in pairs(r.by_reason) do
        local outcome, reason = k:match("^(%S+) (.*)$")
        assert.equal(tostring(count), get("retryfreeze_outcomes_total", ',outcome="' .. outcome .. '",reason="'
          .. reason .. '"'))
      end
      for use, count in pairs(r.retry_after) do
        assert.equal(tostring(count), get("retryfreeze_retry_after_total", ',use="' .. use .. '"'))
      end
      for _, bk in ipairs(r.elapsed_buckets) do
        assert.equal(tostring(bk.count), get("retryfreeze_request_duration_seconds_bucket",
          ',le="' .. (bk.le_ms / 1000 == math.floor(bk.le_ms / 1000) and string.format("%d", math.floor(bk.le_ms / 1000))
            or tostring(bk.le_ms / 1000)) .. '"'))
      end
    end
    assert.equal(5 * 6, n)
  end)

  it("refuses an unknown format and --json with another format", function()
    local path = ledger(ok1(1))
    local _, err, code = h.run_cli("stats", "--format", "csv", path)
    assert.equal(2, code)
    assert.truthy(err:find("--format must be text, json or openmetrics, got 'csv'", 1, true))
    _, err, code = h.run_cli("stats", "--json", "--format", "openmetrics", path)
    assert.equal(2, code)
    assert.truthy(err:find("--json contradicts --format openmetrics", 1, true))
    local out
    out, _, code = h.run_cli("stats", "--format", "json", path)
    assert.equal(0, code)
    assert.equal(1, json.decode(out).requests)
  end)
end)

describe("stats fields behind the metrics and the report", function()
  local stats = require("retryfreeze.ledger_stats").stats

  it("counts requests by attempts and elapsed_ms exactly at each bound", function()
    local s = assert(stats(ledger(ok1(5) .. ok1(6) .. retried(nil, 20) .. ok1(10))))
    assert.same({ ["1"] = 3, ["2"] = 1 }, s.by_attempts)
    assert.same({ le_ms = 5, count = 1 }, s.elapsed_buckets[1])
    assert.same({ le_ms = 10, count = 3 }, s.elapsed_buckets[2])
    assert.same({ le_ms = 25, count = 3 }, s.elapsed_buckets[3])
    assert.same({ le_ms = 50, count = 4 }, s.elapsed_buckets[4])
    assert.equal(51, s.elapsed_ms_sum)
    assert.equal(T0, s.ts_min_ms)
    assert.equal(T0, s.ts_max_ms)
  end)

  it("tells what became of each Retry-After from the ledger alone", function()
    local date_ms = T0 + 60000
    local text = retried("1", 1000) -- waited exactly 1 s: honored
      .. retried("1", 250) -- valid, but the backoff was used: not-honored
      .. retried("soon", 100) -- invalid: ignored-invalid
      .. retried(" ", 100) -- only spaces: absent, not counted
      -- an HTTP-date: the second attempt (5 ms long, the record ends at ts) started at that second: honored
      .. retried(gen.http_date(date_ms), 3000, date_ms + 5)
      -- the same date, but the second attempt started 4 s later: not-honored
      .. retried(gen.http_date(date_ms), 7000, date_ms + 4005)
      .. rec{ attempts = 1, elapsed_ms = 5, outcome = "deadline", reason = "retry-after-exceeds-budget", ok = false,
        status = 503, tries = { { "HTTP_503", 503, 5, 0, "retry-after-exceeds-budget", "600" } } } -- honored
      .. rec{ attempts = 1, elapsed_ms = 5, outcome = "exhausted", reason = "max-attempts", ok = false, status = 503,
        tries = { { "HTTP_503", 503, 5, 0, "max-attempts", "1" } } } -- stopped before it mattered: not-needed
    local s = assert(stats(ledger(text)))
    assert.same({ honored = 3, ["not-honored"] = 2, ["ignored-invalid"] = 1, ["not-needed"] = 1 }, s.retry_after)
    assert.same(s.retry_after, s.by_route["POST /v1/jobs"].retry_after)
  end)

  it("reads each wait header by its own rule: ms, delta-seconds, a reset timestamp, a gRPC pushback", function()
    local function via(header, value, delay, ts_ms)
      return rec{ ts_ms = ts_ms, attempts = 2, elapsed_ms = 10 + delay, outcome = "success", reason = "success",
        ok = true, status = 200, tries = { { "HTTP_429", 429, 5, 0, "pinned-status", value, header },
          { "HTTP_200", 200, 5, delay, "success" } } }
    end
    local reset_s = math.floor((T0 + 120000) / 1000)
    local text = via("retry-after-ms", "1500", 1500) -- 1500 ms waited: honored
      .. via("retry-after-ms", "1500", 1500000) -- read as seconds it would match; it is ms: not-honored
      .. via("ratelimit-reset", "2", 2000) -- delta-seconds: honored
      .. via("x-ratelimit-reset", tostring(reset_s), 4000, reset_s * 1000 + 5) -- started at the reset time
      .. via("retry-after-ms", "1.5", 100) -- a fraction is invalid for an integer-ms header
      .. rec{ attempts = 1, elapsed_ms = 5, outcome = "refused", reason = "server-pushback", ok = false, status = 503,
        tries = { { "HTTP_503", 503, 5, 0, "server-pushback", "-1", "grpc-retry-pushback-ms" } } } -- honored stop
    local s = assert(stats(ledger(text)))
    assert.same({ honored = 4, ["not-honored"] = 1, ["ignored-invalid"] = 1 }, s.retry_after)
  end)

  it("splits the same numbers over time buckets", function()
    local path = ledger(rec{ ts_ms = T0 + 10, attempts = 1, elapsed_ms = 4, outcome = "success", reason = "success",
      ok = true, status = 200, tries = { { "HTTP_200", 200, 4, 0, "success" } } }
      .. retried("1", 1000, T0 + 61000) .. retried(nil, 50, T0 + 62000) .. ok1(7))
    local ls = require "retryfreeze.ledger_stats"
    local tl = assert(ls.timeline(path, { origin_ms = T0, bucket_ms = 60000, buckets = 3 }))
    assert.equal(3, #tl)
    assert.same({ T0, T0 + 60000, T0 + 120000 }, { tl[1].start_ms, tl[2].start_ms, tl[3].start_ms })
    assert.same({ 2, 2, 0 }, { tl[1].requests, tl[2].requests, tl[3].requests })
    assert.equal(0, tl[1].retried_success_ratio)
    assert.equal(1, tl[2].retried_success_ratio)
    assert.same({ honored = 1 }, tl[2].retry_after)
    assert.is_nil(tl[3].elapsed_ms.p50)
    local whole = assert(stats(path))
    assert.equal(whole.requests, tl[1].requests + tl[2].requests + tl[3].requests)
    assert.has_error(function() require("retryfreeze.core").ledger_tally{ timeline = { origin_ms = 0,
      bucket_ms = 0, buckets = 3 } } end, "bad argument #1 to 'ledger_tally' (timeline.bucket_ms must be "
      .. "1..253402300799999 (ms), got 0)")
  end)
end)
