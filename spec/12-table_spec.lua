-- Decision tables: retryfreeze.decision_table and `retryfreeze check LOCK --table`.
local h = require "spec.helper"
local rf = require "retryfreeze"
local dt = require "retryfreeze.decision_table"

local function tsv(...) return table.concat({ ... }, "\n") .. "\n" end
local function row(...) return table.concat({ ... }, "\t") end

-- The desk lock's seed-1 backoff for the first retry (the engine's value; the shipped tables pin it).
local D = assert(rf.load(h.desk_lock)):decide({ method = "POST", path = "/v1/jobs", status = 504, attempts = 1,
  elapsed_ms = 300, idempotency_key = "k1" }, rf.rng(dt.DEFAULT_SEED)).delay_ms
local WRONG = D == 0 and 1 or D - 1

local header = row("method", "path", "status", "transport", "retry_after", "attempts", "elapsed_ms", "idempotency_key",
  "expect", "reason", "delay_ms", "timeout_ms")

describe("retryfreeze check --table", function()
  it("passes the shipped desk table against the desk lock", function()
    local out, err, code = h.run_cli("check", h.desk_lock, "--table", "examples/decisions.tsv")
    assert.equal("", err)
    assert.equal(0, code)
    assert.matches("\nexamples/decisions%.tsv: 22 rows, 22 passed, 0 failed\n$", out)
    assert.matches("^ok: examples/retry%-budget%.lock%.json\ndigest: sha256:%x+\n", out)
  end)

  it("passes the shipped service table against the service lock", function()
    local out, _, code = h.run_cli("check", "examples/service.lock.json", "--table", "examples/service-decisions.tsv")
    assert.equal(0, code)
    assert.matches("\nexamples/service%-decisions%.tsv: 14 rows, 14 passed, 0 failed\n$", out)
  end)

  it("fails on a deliberately wrong row, showing its line, facts, expectation and actual verdict", function()
    local path = h.temp_file(tsv(
      "# a wrong row among right ones",
      header,
      row("POST", "/v1/jobs", "504", "", "", "1", "300", "k1", "retry", "pinned-status", tostring(D), "2000"),
      "",
      row("POST", "/v1/jobs", "500", "", "", "1", "300", "k1", "retry", "pinned-status", "", ""),
      row("POST", "/v1/jobs", "429", "", "1", "1", "100", "k1", "retry", "", "1000", "1400")))
    local out, err, code = h.run_cli("check", h.desk_lock, "--table", path)
    os.remove(path)
    assert.equal("", err)
    assert.equal(1, code)
    local digest = assert(rf.load(h.desk_lock)).digest
    assert.equal("ok: " .. h.desk_lock .. "\ndigest: " .. digest .. "\n"
      .. path .. ":5: FAIL (retry, reason differ)\n"
      .. "  facts:    method=POST path=/v1/jobs status=500 attempts=1 elapsed_ms=300 idempotency_key=k1\n"
      .. "  expected: retry pinned-status\n"
      .. "  actual:   stop status-not-retryable class=HTTP_500 retry_after=absent route=POST /v1/jobs\n"
      .. path .. ": 3 rows, 2 passed, 1 failed\n", out)
  end)

  it("checks delay_ms and timeout_ms with the fixed seed, and --seed changes it", function()
    local path = h.temp_file(tsv(header,
      row("POST", "/v1/jobs", "504", "", "", "1", "300", "k1", "retry", "pinned-status", tostring(WRONG), "2000")))
    local out, _, code = h.run_cli("check", h.desk_lock, "--table", path)
    assert.equal(1, code)
    assert.matches(":2: FAIL %(delay_ms differ%)\n", out)
    assert.matches("  expected: retry pinned%-status delay_ms=" .. WRONG .. " timeout_ms=2000\n"
      .. "  actual:   retry pinned%-status delay_ms=" .. D .. " timeout_ms=2000 class=HTTP_504 retry_after=absent "
      .. "route=POST /v1/jobs\n", out)
    local v = assert(rf.load(h.desk_lock)):decide({ method = "POST", path = "/v1/jobs", status = 504, attempts = 1,
      elapsed_ms = 300, idempotency_key = "k1" }, rf.rng(7))
    local f = assert(io.open(path, "w"))
    f:write(tsv(header,
      row("POST", "/v1/jobs", "504", "", "", "1", "300", "k1", "retry", "", tostring(v.delay_ms), "")))
    f:close()
    _, _, code = h.run_cli("check", h.desk_lock, "--table", path, "--seed", "7")
    os.remove(path)
    assert.equal(0, code)
  end)

  it("prints a row's note with its failure", function()
    local path = h.temp_file(tsv(row("note", "method", "path", "status", "expect"),
      row("handler 500 never", "POST", "/v1/jobs", "500", "retry")))
    local out, _, code = h.run_cli("check", h.desk_lock, "--table", path)
    os.remove(path)
    assert.equal(1, code)
    assert.matches(":2: FAIL %(retry differ%) — handler 500 never\n", out)
  end)

  local malformed = {
    { "an unknown column", tsv(row("method", "path", "expect", "body"), row("GET", "/", "stop", "x")),
      '1: unknown column "body" (facts: method, path, status, transport, retry_after, date, attempts, elapsed_ms, '
      .. "idempotency_key, source, now_ms, hint:NAME for a wait header NAME; expected: expect, reason, delay_ms, "
      .. "timeout_ms, retry_after_header, hedge; note)" },
    { "an unknown hint column", tsv(row("method", "path", "expect", "hint:x-wait"), row("GET", "/", "stop", "1")),
      '1: unknown column "hint:x-wait" (facts: method, path, status, transport, retry_after, date, attempts, '
      .. "elapsed_ms, idempotency_key, source, now_ms, hint:NAME for a wait header NAME; expected: expect, reason, "
      .. "delay_ms, timeout_ms, retry_after_header, hedge; note)" },
    { "a duplicate column", tsv(row("method", "path", "expect", "path")), '1: column "path" appears twice' },
    { "no expect column", tsv(row("method", "path")), '1: the header has no "expect" or "hedge" column' },
    { "a short row", tsv("# c", row("method", "path", "expect"), row("GET", "/")),
      "3: 2 cells, but the header has 3 columns" },
    { "a non-integer status", tsv(row("method", "path", "status", "expect"), row("GET", "/", "50x", "stop")),
      '2: column "status" needs a non-negative integer, got "50x"' },
    { "a bad expect", tsv(row("method", "path", "expect"), row("GET", "/", "maybe")),
      '2: expect must be retry or stop, got "maybe"' },
    { "an unknown reason", tsv(row("method", "path", "expect", "reason"), row("GET", "/", "stop", "nope")),
      '2: unknown reason "nope"' },
    { "an empty method", tsv(row("method", "path", "expect"), row("", "/", "stop")),
      "2: method and path are required" },
    { "an empty expect", tsv(row("method", "path", "expect"), row("GET", "/", "")),
      "2: expect (retry or stop) or hedge (yes, no or after N) is required" },
    { "a bad hedge", tsv(row("method", "path", "hedge"), row("GET", "/", "after 5 ms")),
      '2: hedge must be yes, no or "after N" (N ms), got "after 5 ms"' },
    { "an unknown column, listing hedge", tsv(row("method", "path", "hedged"), row("GET", "/", "yes")),
      '1: unknown column "hedged" (facts: method, path, status, transport, retry_after, date, attempts, elapsed_ms, '
      .. "idempotency_key, source, now_ms, hint:NAME for a wait header NAME; expected: expect, reason, delay_ms, "
      .. "timeout_ms, retry_after_header, hedge; note)" },
    { "facts the engine refuses", tsv(row("method", "path", "transport", "expect"), row("GET", "/", "warp", "stop")),
      "2: facts.transport must be one of ok, timeout, connect-reset, connect-refused, dns, tls, got-nothing, other, "
      .. "proxy-refused, too-many-redirects; got 'warp'" },
    { "no rows", tsv("# only a header", row("method", "path", "expect")), "2: no rows" },
    { "nothing at all", tsv("# nothing"), "1: no header row" },
  }
  for _, m in ipairs(malformed) do
    it("exits 2 naming the line on " .. m[1], function()
      local path = h.temp_file(m[2])
      local out, err, code = h.run_cli("check", h.desk_lock, "--table", path)
      os.remove(path)
      assert.equal(2, code)
      assert.equal("", out)
      assert.equal("retryfreeze check: malformed table: " .. path .. ":" .. m[3] .. "\n", err)
    end)
  end

  describe("a hedge column", function()
    local HEDGE_LOCK = [[{"version": 1,
 "defaults": {"maxAttempts": 3, "perAttemptTimeoutMs": 2000, "totalBudgetMs": 5000, "retryable": ["HTTP_503"]},
 "routes": [{"endpoint": "GET /quote/*", "hedging": {"maxAttempts": 3, "hedgingDelayMs": 120}},
            {"endpoint": "POST /orders", "hedging": {"maxAttempts": 2, "hedgingDelayMs": 50}},
            {"endpoint": "GET /plain"}]}]]

    it("pins whether a request is hedged and after how long, with or without a verdict", function()
      local lock = h.temp_file(HEDGE_LOCK)
      local path = h.temp_file(tsv(row("method", "path", "status", "idempotency_key", "expect", "reason", "hedge"),
        row("GET", "/quote/a", "", "", "", "", "after 120"),
        row("GET", "/quote/a", "503", "", "retry", "pinned-status", "yes"),
        row("POST", "/orders", "", "k1", "", "", "after 50"),
        row("POST", "/orders", "", "", "", "", "no"),
        row("GET", "/plain", "", "", "", "", "no"),
        row("GET", "/elsewhere", "", "", "", "", "no")))
      local out, err, code = h.run_cli("check", lock, "--table", path)
      assert.equal("", err)
      assert.equal(0, code)
      assert.matches(": 6 rows, 6 passed, 0 failed\n$", out)
      os.remove(path)
      os.remove(lock)
    end)

    it("fails a row whose hedging differs, showing the hedging it got", function()
      local lock = h.temp_file(HEDGE_LOCK)
      local path = h.temp_file(tsv(row("method", "path", "idempotency_key", "hedge"),
        row("GET", "/quote/a", "", "after 100"),
        row("POST", "/orders", "", "yes"),
        row("GET", "/plain", "", "yes"),
        row("POST", "/orders", "k1", "no")))
      local out, _, code = h.run_cli("check", lock, "--table", path)
      assert.equal(1, code)
      assert.matches(path:gsub("%p", "%%%0") .. ":2: FAIL %(hedge differ%)\n"
        .. "  facts:    method=GET path=/quote/a\n"
        .. "  expected: hedge=after 100\n"
        .. "  actual:   hedge: hedged delay_ms=120 max_attempts=3 route=GET /quote/%*\n", out)
      assert.matches("  expected: hedge=yes\n  actual:   hedge: not hedged mutating%-without%-idempotency "
        .. "route=POST /orders\n", out)
      assert.matches("  expected: hedge=yes\n  actual:   hedge: not hedged max%-attempts route=GET /plain\n", out)
      assert.matches("  expected: hedge=no\n  actual:   hedge: hedged delay_ms=50 max_attempts=2 route=POST /orders\n",
        out)
      assert.matches(": 4 rows, 0 passed, 4 failed\n$", out)
      os.remove(path)
      os.remove(lock)
    end)
  end)

  it("exits 2 on a missing table and on --seed without --table", function()
    h.assert_usage_errors({
      { { "check", h.desk_lock, "--table", "/nonexistent/t.tsv" },
        whole = "retryfreeze check: cannot open decision table /nonexistent/t.tsv: No such file or directory\n" },
    })
    local _, err, code = h.run_cli("check", h.desk_lock, "--seed", "3")
    assert.equal(2, code)
    assert.matches("^retryfreeze check: %-%-seed needs %-%-table\n", err)
  end)
end)

describe("retryfreeze.decision_table", function()
  it("parses comments, blank lines, CRLF, empty cells and integers", function()
    local t = assert(dt.parse("# c\r\n\r\n"
      .. row("method", "path", "status", "retry_after", "expect", "note") .. "\r\n"
      .. row("GET", "/a", "503", "  ", "stop", "spaces are a fact") .. "\r\n"
      .. row("GET", "/b", "", "", "retry", "") .. "\r\n", "t"))
    assert.same({ "method", "path", "status", "retry_after", "expect", "note" }, t.columns)
    assert.equal(2, #t.rows)
    assert.same({ line = 4, facts = { method = "GET", path = "/a", status = 503, retry_after = "  " },
      expect = { retry = false }, note = "spaces are a fact" }, t.rows[1])
    assert.same({ line = 5, facts = { method = "GET", path = "/b" }, expect = { retry = true } }, t.rows[2])
  end)

  it("runs each row with a fresh RNG seeded the same way", function()
    local policy = assert(rf.load(h.desk_lock))
    local r = row("POST", "/v1/jobs", "504", "", "", "1", "300", "k1", "retry", "pinned-status", tostring(D), "2000")
    local t = assert(dt.parse(tsv(header, r, r, r)))
    local res = assert(dt.run(policy, t))
    assert.equal(3, res.passed)
    assert.equal(0, res.failed)
    for _, x in ipairs(res.rows) do assert.equal(D, x.verdict.delay_ms) end
    assert.is_true(D >= 0 and D <= 100) -- full jitter over the desk lock's 100 ms first cap
  end)

  it("reads hint:NAME columns as facts.hints and checks retry_after_header", function()
    local lock = h.temp_file([[{"endpoint": "GET /x", "maxAttempts": 3, "perAttemptTimeoutMs": 1000,
      "totalBudgetMs": 60000, "retryable": ["HTTP_429", "HTTP_503"],
      "backoff": {"baseMs": 100, "multiplier": 1, "maxMs": 100, "jitter": "none"},
      "retryAfter": {"headers": ["grpc-retry-pushback-ms", "retry-after-ms", "ratelimit", "retry-after"]}}]])
    local text = tsv(row("note", "method", "path", "status", "hint:retry-after-ms", "hint:ratelimit",
        "hint:grpc-retry-pushback-ms", "retry_after", "expect", "reason", "delay_ms", "retry_after_header"),
      row("ms wins", "GET", "/x", "429", "250", "", "", "1", "retry", "pinned-status", "250", "retry-after-ms"),
      row("exhausted quota", "GET", "/x", "429", "", '"d";r=0;t=2', "", "", "retry", "", "2000", "ratelimit"),
      row("pushback stop", "GET", "/x", "503", "", "", "-1", "", "stop", "server-pushback", "",
        "grpc-retry-pushback-ms"),
      row("nothing", "GET", "/x", "503", "", "", "", "", "retry", "", "100", ""))
    local t = assert(dt.parse(text, "hints.tsv"))
    assert.same({ ["retry-after-ms"] = "250" }, t.rows[1].facts.hints)
    assert.is_nil(t.rows[4].facts.hints)
    local res = assert(dt.run(assert(rf.load(lock)), t))
    assert.same({ 4, 0 }, { res.passed, res.failed })
    -- A header the verdict does not name is a mismatch, shown on the failure's lines.
    local bad = tsv(row("method", "path", "status", "hint:retry-after-ms", "expect", "retry_after_header"),
      row("GET", "/x", "429", "250", "retry", "ratelimit"))
    local path = h.temp_file(bad)
    local out, _, code = h.run_cli("check", lock, "--table", path)
    assert.equal(1, code)
    assert.matches("FAIL %(retry_after_header differ%)\n  facts:    method=GET path=/x status=429 "
      .. "hint:retry%-after%-ms=250\n  expected: retry retry_after_header=ratelimit\n  actual:   retry pinned%-status "
      .. "delay_ms=250 timeout_ms=1000 class=HTTP_429 retry_after=honored retry_after_header=retry%-after%-ms", out)
    -- A hint the route does not read: the table is malformed (exit 2), naming the line.
    local unread = h.temp_file(tsv(row("method", "path", "hint:x-ratelimit-reset", "expect"), row("GET", "/x", "1",
      "stop")))
    local _, err
    _, err, code = h.run_cli("check", lock, "--table", unread)
    assert.equal(2, code)
    assert.matches(":2: facts.hints the route \"GET /x\" does not read x%-ratelimit%-reset", err)
    os.remove(path)
    os.remove(unread)
    os.remove(lock)
  end)

  it("formats facts and verdicts", function()
    assert.equal('method=POST path=/v1/jobs status=429 retry_after="Wed, 21 Oct 2015 07:28:00 GMT" attempts=1',
      dt.format_facts({ attempts = 1, method = "POST", path = "/v1/jobs", status = 429,
        retry_after = "Wed, 21 Oct 2015 07:28:00 GMT" }))
    assert.equal("retry pinned-status delay_ms=1000 timeout_ms=1400 class=HTTP_429 retry_after=honored "
      .. "route=POST /v1/jobs", dt.format_verdict({ retry = true, reason = "pinned-status", class = "HTTP_429",
      delay_ms = 1000, timeout_ms = 1400, retry_after = "honored", route = "POST /v1/jobs" }))
    assert.equal("stop no-route class=HTTP_504 retry_after=absent route=none", dt.format_verdict({ retry = false,
      reason = "no-route", class = "HTTP_504", delay_ms = 0, timeout_ms = 0, retry_after = "absent" }))
    assert.equal("stop max-attempts", dt.format_expect({ retry = false, reason = "max-attempts" }))
    assert.equal('method=GET path=/x hint:retry-after-ms=250 hint:ratelimit="\\"d\\";r=0;t=2"',
      dt.format_facts({ method = "GET", path = "/x", hints = { ratelimit = '"d";r=0;t=2', ["retry-after-ms"] = "250" } }))
    assert.equal("stop server-pushback class=HTTP_503 retry_after=honored retry_after_header=grpc-retry-pushback-ms "
      .. "route=GET /x", dt.format_verdict({ retry = false, reason = "server-pushback", class = "HTTP_503",
      retry_after = "honored", retry_after_header = "grpc-retry-pushback-ms", route = "GET /x" }))
  end)
end)

describe("decision_table.read and format_failure", function()
  local desk = assert(rf.load(h.desk_lock))

  it("read: a file parsed as check --table reads it, or nil and the message check prints", function()
    local t = assert(dt.read("examples/decisions.tsv"))
    assert.equal("examples/decisions.tsv", t.name)
    local r = assert(dt.run(desk, t))
    assert.same({ #t.rows, 0 }, { r.passed, r.failed })
    local none, why = dt.read("no/such.tsv")
    assert.is_nil(none)
    assert.equal("cannot open decision table no/such.tsv: No such file or directory", why)
    local bad = h.temp_file(tsv(row("method", "path", "expect"), row("GET", "/x")))
    none, why = dt.read(bad)
    os.remove(bad)
    assert.is_nil(none)
    assert.equal("malformed table: " .. bad .. ":2: 2 cells, but the header has 3 columns", why)
  end)

  -- The docs said lines; it returned one string. Both now say: one string of four lines, each ending in "\n".
  it("format_failure: one string of four newline-ended lines, exactly what check prints", function()
    local path = h.temp_file(tsv(row("note", "method", "path", "status", "idempotency_key", "expect", "reason"),
      row("a wrong row", "POST", "/v1/jobs", "500", "k1", "retry", "pinned-status")))
    local results = assert(dt.run(desk, assert(dt.read(path))))
    local text = dt.format_failure(results.rows[1], path)
    assert.equal("string", type(text))
    local lines = {}
    for line in text:gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
    assert.equal(4, #lines)
    assert.equal(#text, #table.concat(lines, "\n") + 1) -- nothing after the fourth newline
    assert.equal(path .. ":2: FAIL (retry, reason differ) — a wrong row", lines[1])
    assert.equal("  facts:    method=POST path=/v1/jobs status=500 idempotency_key=k1", lines[2])
    assert.equal("  expected: retry pinned-status", lines[3])
    assert.equal("  actual:   stop status-not-retryable class=HTTP_500 retry_after=absent route=POST /v1/jobs",
      lines[4])
    local out, _, code = h.run_cli("check", h.desk_lock, "--table", path)
    os.remove(path)
    assert.equal(1, code)
    assert.equal(text .. path .. ": 1 rows, 0 passed, 1 failed\n", (out:gsub("^ok: [^\n]*\ndigest: [^\n]*\n", "")))
  end)
end)

