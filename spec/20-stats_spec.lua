-- `retryfreeze stats` and rf.ledger.stats (retryfreeze.ledger_stats): counts, ratios, percentiles, by route,
-- several files, globs and rotated files, a torn last line, corrupt lines, --json; plus retryfreeze.glob.
-- Ledgers are written here in the writer's exact line format (core/src/ledger/ledger_format.c), and one through
-- the real client against the project's upstream.
local rf = require "retryfreeze"
local h = require "spec.helper"
local ledger_stats = require "retryfreeze.ledger_stats"
local glob = require "retryfreeze.glob"

local POLICY = "sha256:" .. string.rep("ab", 32)

--- One ledger line, every field in the writer's order. r: {route, method, path, key, attempts, elapsed_ms,
--- outcome, reason, ok, status, tries = {{class, status, elapsed_ms, delay_ms, reason, retry_after}}}
local function line(r)
  local tries = {}
  for i, t in ipairs(r.tries or {}) do
    tries[i] = string.format('{"class":"%s","status":%d,"elapsed_ms":%d,"delay_ms":%d,"reason":"%s","retry_after":%s}',
      t[1], t[2], t[3], t[4], t[5], t[6] and ('"' .. t[6] .. '"') or "null")
  end
  return string.format('{"ts":"2026-11-29T17:20:01.123Z","route":"%s","method":"%s","path":"%s","key":%s,'
    .. '"policy":"%s","attempts":%d,"elapsed_ms":%d,"outcome":"%s","reason":"%s","ok":%s,"status":%d,'
    .. '"body_len":%d,"tries":[%s]}\n', r.route or "POST /v1/jobs", r.method or "POST", r.path or "/v1/jobs",
    r.key and ('"' .. r.key .. '"') or "null", POLICY, r.attempts, r.elapsed_ms, r.outcome, r.reason,
    tostring(r.ok), r.status, r.ok and 17 or 0, table.concat(tries, ","))
end

-- Record shapes used below.
local function ok1(ms, route)
  return line{ route = route, attempts = 1, elapsed_ms = ms, outcome = "success", reason = "success", ok = true,
    status = 200, tries = { { "HTTP_200", 200, ms, 0, "success" } } }
end
local function ok_after_503(ms, route)
  return line{ route = route, attempts = 2, elapsed_ms = ms, outcome = "success", reason = "success", ok = true,
    status = 200, tries = { { "HTTP_503", 503, 5, 0, "pinned-status", "1" }, { "HTTP_200", 200, 5, 1000, "success" } } }
end
local function terminal500(ms, route)
  return line{ route = route, attempts = 1, elapsed_ms = ms, outcome = "terminal", reason = "status-not-retryable",
    ok = false, status = 500, tries = { { "HTTP_500", 500, ms, 0, "status-not-retryable" } } }
end
local function exhausted504(ms, route)
  return line{ route = route, attempts = 3, elapsed_ms = ms, outcome = "exhausted", reason = "max-attempts", ok = false,
    status = 504, tries = { { "HTTP_504", 504, 5, 0, "pinned-status" }, { "HTTP_504", 504, 5, 50, "pinned-status" },
      { "HTTP_504", 504, 5, 100, "max-attempts" } } }
end
local function no_route(ms)
  return line{ route = "", method = "GET", path = "/nowhere", attempts = 0, elapsed_ms = ms, outcome = "refused",
    reason = "no-route", ok = false, status = 0 }
end

local temp_dir, write = h.temp_dir, h.write_file

local scratch = h.scratch()
local ledger = scratch.file
teardown(scratch.remove)

-- 10 requests: elapsed 1..10 ms on "POST /v1/jobs": 6 first-try successes, 2 successes after a 503,
-- 1 terminal 500, 1 exhausted after 3 × 504; and one no-route refusal (0 attempts, 7 ms).
local function mixed()
  return ok1(1) .. ok1(2) .. ok1(3) .. ok1(4) .. ok1(5) .. ok1(6) .. ok_after_503(7) .. ok_after_503(8)
    .. terminal500(9) .. exhausted504(10) .. no_route(7)
end

describe("rf.ledger.stats", function()
  it("counts requests, successes, attempts and ratios from known records", function()
    local s = assert(ledger_stats.stats(ledger(mixed())))
    assert.same({ 11, 8, 3, 1, 2, 14, 10, 4 }, { s.requests, s.successes, s.failures, s.terminal, s.retried_successes,
      s.attempts, s.success_attempts, s.retries })
    assert.equal(8 / 11, s.success_rate)
    assert.equal(1 / 11, s.terminal_rate)
    assert.equal(2 / 8, s.retried_success_ratio)
    assert.equal(10 / 8, s.attempts_per_success)
    assert.equal(14 / 11, s.attempts_per_request)
    assert.equal(4 / 11, s.retry_ratio)
    assert.same({ success = 8, terminal = 1, exhausted = 1, refused = 1 }, s.by_outcome)
    assert.same({ ["success success"] = 8, ["terminal status-not-retryable"] = 1, ["exhausted max-attempts"] = 1,
      ["refused no-route"] = 1 }, s.by_reason)
    assert.same({ success = 8, ["status-not-retryable"] = 1, ["max-attempts"] = 1, ["no-route"] = 1 }, s.reasons)
    assert.same({ HTTP_503 = 2, HTTP_504 = 2 }, s.retried_classes)
    assert.same({ 11, false, 0, 0 }, { s.lines, next(s.torn) ~= nil, s.torn_lines, s.corrupt_lines })
  end)

  it("gives exact nearest-rank percentiles below 128 ms", function()
    local text = {}
    for ms = 1, 100 do text[#text + 1] = ok1(ms) end
    local s = assert(ledger_stats.stats(ledger(table.concat(text))))
    assert.same({ p50 = 50, p95 = 95, p99 = 99, min = 1, max = 100, mean = 50.5 }, s.elapsed_ms)
  end)

  it("keeps percentiles above 128 ms within 1/128 of the nearest-rank value", function()
    local text, values = {}, {}
    for i = 1, 200 do
      local ms = 100 + i * 997 % 50000 -- spread over 100..50 100 ms
      values[i] = ms
      text[i] = ok1(ms)
    end
    table.sort(values)
    local s = assert(ledger_stats.stats(ledger(table.concat(text))))
    for q, key in pairs({ [0.50] = "p50", [0.95] = "p95", [0.99] = "p99" }) do
      local exact = values[math.ceil(q * 200 - 1e-9)]
      assert.is_true(math.abs(s.elapsed_ms[key] - exact) <= exact / 128, key .. " " .. s.elapsed_ms[key] .. " vs " .. exact)
    end
    assert.equal(values[200], s.elapsed_ms.max)
    assert.equal(values[1], s.elapsed_ms.min)
  end)

  it("has buckets that cover every duration once, each at most 1/64 of its values wide", function()
    local prev_hi = -1
    for idx = 0, 500 do
      local lo, hi = ledger_stats.bucket_range(idx)
      assert.equal(prev_hi + 1, lo)
      assert.equal(idx, ledger_stats.bucket(lo))
      assert.equal(idx, ledger_stats.bucket(hi))
      assert.is_true(hi - lo + 1 <= math.max(1, lo / 64))
      prev_hi = hi
    end
    for _, v in ipairs({ 127, 128, 255, 256, 1000, 65535, 3600000, 2 ^ 53 - 1 }) do
      local lo, hi = ledger_stats.bucket_range(ledger_stats.bucket(v))
      assert.is_true(lo <= v and v <= hi, v)
      assert.is_true(math.abs(math.floor((lo + hi) / 2) - v) <= v / 128, v)
    end
    assert.equal(3071, ledger_stats.bucket(2 ^ 53 - 1))
    assert.equal(0, ledger_stats.bucket(-5))
  end)

  it("splits by route, the unmatched route under \"\"", function()
    local s = assert(ledger_stats.stats(ledger(ok1(3, "GET /v1/jobs/{id}") .. ok_after_503(20, "GET /v1/jobs/{id}")
      .. terminal500(4) .. no_route(1))))
    local get = s.by_route["GET /v1/jobs/{id}"]
    assert.same({ 2, 2, 1, 3, 1 }, { get.requests, get.successes, get.retried_successes, get.attempts, get.retries })
    assert.same({ p50 = 3, p95 = 20, p99 = 20, min = 3, max = 20, mean = 11.5 }, get.elapsed_ms)
    assert.same({ 1, 0, 1 }, { s.by_route["POST /v1/jobs"].requests, s.by_route["POST /v1/jobs"].successes,
      s.by_route["POST /v1/jobs"].terminal })
    assert.same({ ["refused no-route"] = 1 }, s.by_route[""].by_reason)
    assert.equal(4, s.requests)
  end)

  it("sums several files and expands a glob over rotated files in natural order", function()
    local dir = temp_dir()
    scratch.track(dir)
    write(dir .. "/ledger.jsonl", ok1(1) .. ok1(2))
    write(dir .. "/ledger.jsonl.1", ok_after_503(3))
    write(dir .. "/ledger.jsonl.2", terminal500(4))
    write(dir .. "/ledger.jsonl.10", ok1(5))
    write(dir .. "/other.jsonl", ok1(6))
    local s = assert(ledger_stats.stats(dir .. "/ledger.jsonl*"))
    assert.same({ dir .. "/ledger.jsonl", dir .. "/ledger.jsonl.1", dir .. "/ledger.jsonl.2", dir .. "/ledger.jsonl.10" },
      s.files)
    assert.same({ 5, 4, 1, 1, 6 }, { s.requests, s.successes, s.retried_successes, s.terminal, s.attempts })
    s = assert(ledger_stats.stats({ dir .. "/ledger.jsonl", dir .. "/other.jsonl" }))
    assert.same({ 3, 3 }, { s.requests, s.lines })
    assert.same({ nil, "no file matches '" .. dir .. "/nothing*'" }, { ledger_stats.stats(dir .. "/nothing*") })
  end)

  it("counts and reports a torn last line without counting it as a request", function()
    local text = ok1(1) .. ok1(2) .. ok1(3)
    local path = ledger(text .. ok1(4):sub(1, 60))
    local s = assert(ledger_stats.stats(path))
    assert.same({ 3, 4, 1 }, { s.requests, s.lines, s.torn_lines })
    assert.same({ [path] = 4 }, s.torn)
  end)

  it("stops at a corrupt line with its file and line number, or counts it with skip_corrupt", function()
    local path = ledger(ok1(1) .. '{"ts":"2026-11-29T17:20:01.123Z"}\n' .. ok1(2) .. "\n" .. ok1(3))
    local s, err = ledger_stats.stats(path)
    assert.is_nil(s)
    assert.equal(path .. ":2: corrupt ledger line: missing field \"$.route\"", err)
    s = assert(ledger_stats.stats(path, { skip_corrupt = true }))
    assert.same({ 3, 5, 2 }, { s.requests, s.lines, s.corrupt_lines })
    assert.same({ [path] = 2 }, s.corrupt)
  end)

  -- A line whose attempts disagree with its tries, or whose tries go on after the verdict that ended the request,
  -- was counted as a record: stats and replay counted tries the request never made. Both readers (the writer's
  -- fast form and any other spelling) refuse it as corrupt, with its line number.
  it("counts a line whose attempts and tries disagree, or whose tries go on after a success, as corrupt", function()
    local after_success = line{ attempts = 2, elapsed_ms = 9, outcome = "success", reason = "success", ok = true,
      status = 200, tries = { { "HTTP_200", 200, 5, 0, "success" }, { "HTTP_503", 503, 5, 0, "pinned-status" } } }
    local after_stop = line{ attempts = 2, elapsed_ms = 9, outcome = "terminal", reason = "status-not-retryable",
      ok = false, status = 500, tries = { { "HTTP_500", 500, 5, 0, "status-not-retryable" },
        { "HTTP_500", 500, 5, 0, "status-not-retryable" } } }
    local cases = {
      { ok_after_503(7):gsub('"attempts":2', '"attempts":3'), '"$.attempts" is 3 but "$.tries" has 2: one try per '
        .. "attempt" },
      { ok1(1):gsub('"attempts":1', '"attempts":0'), '"$.attempts" is 0 but "$.tries" has 1: one try per attempt' },
      -- the same, spelled otherwise than the writer does (the general reader): a space after the colon
      { ok_after_503(7):gsub('"attempts":2', '"attempts": 1'), '"$.attempts" is 1 but "$.tries" has 2: one try per attempt' },
      { after_success, '"$.tries[0].reason" is "success", which ends the request, but 1 more tries follow' },
      { after_stop, '"$.tries[0].reason" is "status-not-retryable", which ends the request, but 1 more tries follow' },
    }
    for _, case in ipairs(cases) do
      local path = ledger(ok1(1) .. case[1] .. ok1(2))
      local st, err = ledger_stats.stats(path)
      assert.is_nil(st)
      assert.equal(path .. ":2: corrupt ledger line: " .. case[2], err)
      st = assert(ledger_stats.stats(path, { skip_corrupt = true }))
      assert.same({ 2, 1 }, { st.requests, st.corrupt_lines })
      local _, rerr, code = h.run_cli("replay", path, "--lock", h.desk_lock)
      assert.equal(2, code)
      assert.matches(path .. ":2: corrupt ledger line: " .. case[2], rerr, 1, true)
    end
    -- A hedged request's tries are in the order they ended: a cancelled attempt may follow the winner.
    local hedged = line{ attempts = 2, elapsed_ms = 9, outcome = "success", reason = "success", ok = true,
      status = 200, tries = { { "HTTP_200", 200, 5, 0, "success" }, { "UNKNOWN", 0, 9, 0, "success" } } }
      :gsub('"retry_after":null}', '"retry_after":null,"start_ms":0,"fate":"winner"}', 1)
      :gsub('"retry_after":null}%]', '"retry_after":null,"start_ms":0,"fate":"cancelled"}]', 1)
    assert.equal(1, assert(ledger_stats.stats(ledger(hedged))).requests)
  end)

  it("returns nil, message for a file it cannot open; raises on a bad argument", function()
    local s, err = ledger_stats.stats({ "/nonexistent/ledger.jsonl" })
    assert.is_nil(s)
    assert.equal("cannot open ledger /nonexistent/ledger.jsonl: No such file or directory", err)
    assert.has_error(function() ledger_stats.stats(42) end,
      "bad argument #1 to 'stats' (string or array of strings expected, got number)")
    -- Options that are not a table: the error is the caller's (it names this file and line).
    local ok, err2 = pcall(function() local r = ledger_stats.stats({}, 5) return r end)
    assert.is_false(ok)
    assert.matches("20%-stats_spec%.lua:%d+: bad argument #2 to 'stats' %(table expected, got number%)$", err2)
    assert.has_error(function() ledger_stats.summarize({ "/nonexistent/ledger.jsonl" }) end)
  end)

  it("reports zero ratios and no percentiles for an empty ledger", function()
    local s = assert(ledger_stats.stats(ledger("")))
    assert.same({ 0, 0, 0, 0 }, { s.requests, s.attempts_per_success, s.terminal_rate, s.retried_success_ratio })
    assert.same({}, s.elapsed_ms)
  end)

  it("reads a ledger the real client wrote", function()
    local upstream = require "retryfreeze.upstream"
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local path = os.tmpname()
    scratch.track(path)
    local led = assert(rf.ledger.open(path))
    local client = rf.client{ policy = assert(rf.load(h.desk_lock)), base_url = up.url, ledger = led, rng_seed = 1 }
    local function post(script)
      return client:request{ method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key(),
        headers = { ["X-Fault-Script"] = script } }
    end
    local rs = { post("504,200"), post("200"), post("500"), post("504,504") }
    client:close()
    led:close()
    up.stop()
    local s = assert(ledger_stats.stats(path))
    assert.same({ 4, 2, 1, 1, 6, 3, 2 }, { s.requests, s.successes, s.retried_successes, s.terminal, s.attempts,
      s.success_attempts, s.retries })
    assert.same({ success = 2, terminal = 1, exhausted = 1 }, s.by_outcome)
    assert.same({ HTTP_504 = 2 }, s.retried_classes)
    local max = 0
    for _, r in ipairs(rs) do max = math.max(max, r.elapsed_ms) end
    assert.equal(max, s.elapsed_ms.max)
  end)
end)

describe("retryfreeze stats", function()
  it("prints the counts, ratios, percentiles, reasons and routes", function()
    local out, err, code = h.run_cli("stats", ledger(mixed()))
    assert.equal(0, code, err)
    h.assert_holds(out, {
      "ledgers: 1 file, 11 lines\n",
      "  requests                       11\n",
      "  successes                       8  (72.73%)\n",
      "  terminal failures               1  (9.09% of requests)\n",
      "  retried successes               2  (25.00% of successes)\n",
      "  attempts per success        1.250\n",
      "  attempts per request        1.273\n",
      "  elapsed_ms             p50 6  p95 10  p99 10  max 10\n",
      "  exhausted  max-attempts                            1\n",
      "  HTTP_503                                           2\n",
      "  (no route)                           1     0.00%     0.00%     0.00%     0.000        7        7        7\n",
    })
  end)

  it("prints one JSON object with --json", function()
    local out, _, code = h.run_cli("stats", "--json", ledger(ok1(1) .. ok_after_503(9) .. terminal500(5)))
    assert.equal(0, code)
    assert.equal(1, select(2, out:gsub("\n", "")))
    assert.matches('^{"files":%[".-"%],"lines":3,"torn":{},"torn_lines":0,"corrupt":{},"corrupt_lines":0,'
      .. '"requests":3,"successes":2,"failures":1,"terminal":1,"retried_successes":1,"attempts":4,'
      .. '"success_attempts":3,"retries":1,', out)
    h.assert_holds(out, {
      '"elapsed_ms":{"p50":5,"p95":9,"p99":9,"min":1,"max":9,"mean":5}',
      -- json.encode applies the key order at every depth, so "terminal" (a top-level key) comes first here too.
      '"by_outcome":{"terminal":1,"success":2}',
      '"retried_classes":{"HTTP_503":1}',
      '"by_route":{"POST /v1/jobs":{"requests":3,',
    })
  end)

  it("reports a torn last line and exits 0", function()
    local path = ledger(ok1(1) .. ok1(2):sub(1, 30))
    local out, _, code = h.run_cli("stats", path)
    assert.equal(0, code)
    assert.matches("torn line: " .. path .. ":2 (a write cut short; not counted as a request)", out, 1, true)
    out = h.run_cli("stats", "--json", path)
    assert.matches('"torn":{"' .. path .. '":2},"torn_lines":1', out, 1, true)
  end)

  it("stops with file and line on a corrupt line (exit 2) unless --skip-corrupt", function()
    local path = ledger(ok1(1) .. "not json\n" .. ok1(2))
    local out, err, code = h.run_cli("stats", path)
    assert.equal(2, code)
    assert.equal("", out)
    assert.matches("^retryfreeze stats: " .. path:gsub("%p", "%%%0") .. ":2: corrupt ledger line: ", err)
    assert.matches("--skip-corrupt counts and skips corrupt lines", err, 1, true)
    out, err, code = h.run_cli("stats", "--skip-corrupt", path)
    assert.equal(0, code, err)
    assert.matches("corrupt lines skipped: " .. path .. ": 1\n", out, 1, true)
    assert.matches("  requests                        2\n", out, 1, true)
  end)

  it("expands a quoted glob and refuses one that matches nothing", function()
    local dir = temp_dir()
    scratch.track(dir)
    write(dir .. "/l.jsonl", ok1(1))
    write(dir .. "/l.jsonl.1", ok1(2) .. ok1(3))
    local out, _, code = h.run_cli("stats", dir .. "/l.jsonl*")
    assert.equal(0, code)
    assert.matches("ledgers: 2 files, 3 lines", out, 1, true)
    local _, err
    _, err, code = h.run_cli("stats", dir .. "/x*")
    assert.equal(2, code)
    assert.equal("retryfreeze stats: no file matches '" .. dir .. "/x*'\n", err)
  end)

  it("exits 2 on bad usage or a missing file", function()
    h.assert_usage_errors({
      { { "stats" }, "expected at least one LEDGER" },
      { { "stats", "--bogus", "x" }, "unknown option '--bogus'" },
      { { "stats", "/nonexistent/l.jsonl" },
        whole = "retryfreeze stats: cannot open ledger /nonexistent/l.jsonl: No such file or directory\n" },
    })
  end)
end)

describe("retryfreeze.glob", function()
  it("knows an unescaped wildcard", function()
    assert.is_true(glob.has_magic("a/*.jsonl"))
    assert.is_true(glob.has_magic("a/l.jsonl.[0-9]"))
    assert.is_false(glob.has_magic("a/\\*.jsonl"))
  end)

  it("expands with glob(3): across directories, skipping dot files, sets and escapes, no shell", function()
    local dir = temp_dir()
    scratch.track(dir)
    assert(os.execute("mkdir -p '" .. dir .. "/a' '" .. dir .. "/b' '" .. dir .. "/.c'"))
    for _, p in ipairs({ "a/l.jsonl", "a/l.jsonl.1", "b/l.jsonl", ".c/l.jsonl", "a/.l.jsonl", "b/it's.jsonl",
      "b/$(touch x).jsonl", "b/*.jsonl" }) do
      write(dir .. "/" .. p, "")
    end
    assert.same({ dir .. "/a/l.jsonl", dir .. "/a/l.jsonl.1", dir .. "/b/$(touch x).jsonl", dir .. "/b/*.jsonl",
      dir .. "/b/it's.jsonl", dir .. "/b/l.jsonl" }, glob.expand(dir .. "/*/*.jsonl*"))
    assert.same({ dir .. "/.c/l.jsonl" }, glob.expand(dir .. "/.*/l.jsonl"))
    assert.same({ dir .. "/a/.l.jsonl" }, glob.expand(dir .. "/a/.l*"))
    assert.same({ dir .. "/a/l.jsonl.1" }, glob.expand(dir .. "/[a]/l.jsonl.[0-9]"))
    assert.same({ dir .. "/b/*.jsonl" }, glob.expand(dir .. "/?/\\*.jsonl"))
    assert.same({}, glob.expand(dir .. "/none/*"))
    assert.same({}, glob.expand(dir .. "/a/[bc"))
    assert.is_nil(io.open("x", "rb"), "a shell ran")
    local ok, why = pcall(glob.expand, "a\0*")
    assert.is_false(ok)
    assert.matches("bad argument #1 to '[%w.?]*' %(pattern holds a NUL byte%)", why)
  end)

  it("sorts numbers in names by value", function()
    local names = { "l.jsonl.10", "l.jsonl.2", "l.jsonl", "l.jsonl.1" }
    table.sort(names, glob.natural_less)
    assert.same({ "l.jsonl", "l.jsonl.1", "l.jsonl.2", "l.jsonl.10" }, names)
  end)
end)

-- Soak and demo replaced an existing ledger, varied under a fixed seed, and soak's default
-- faults never exercised the backoff.
describe("soak and demo ledgers", function()
  local read_all = h.read_file
  local function eleven_lines()
    local text = string.rep(ok1(7), 11)
    return h.temp_file(text), text
  end
  local function counts(out)
    -- The run's numbers, without the upstream's port.
    return (out:gsub("http://127%.0%.0%.1:%d+", "URL"):gsub("client%-cpu=%d+us/request", ""))
  end

  it("demo appends to an existing ledger and reports only its own requests", function()
    local path, before = eleven_lines()
    local out, err, code = h.run_cli("demo", "--requests", "5", "--ledger", path)
    assert.equal(0, code, err)
    local after = read_all(path)
    assert.equal(before, after:sub(1, #before))
    local _, n = after:gsub("\n", "")
    assert.equal(16, n)
    assert.matches("(5 requests, %d+ attempts, appended after line 11)", out)
    os.remove(path)
  end)

  it("soak appends to an existing ledger and reports only its own requests", function()
    local path, before = eleven_lines()
    local out, err, code = h.run_cli("soak", h.desk_lock, "--requests", "5", "--ledger", path)
    assert.equal(0, code, err)
    local after = read_all(path)
    assert.equal(before, after:sub(1, #before))
    local _, n = after:gsub("\n", "")
    assert.equal(16, n)
    assert.matches("ledger " .. path .. " (appended after line 11)\nrequests=5 ", out, 1, true)
    os.remove(path)
  end)

  it("soak and demo end a torn last line with a newline and append after it", function()
    local text = ok1(7) .. '{"ts":"2026-11-29T17:20:01.123Z","rou'
    for _, cmd in ipairs({ { "demo", "--requests", "2" }, { "soak", h.desk_lock, "--requests", "2" } }) do
      local path = h.temp_file(text)
      cmd[#cmd + 1] = "--ledger"
      cmd[#cmd + 1] = path
      local out, err, code = h.run_cli(table.unpack(cmd))
      assert.equal(0, code, cmd[1] .. ": " .. err)
      assert.matches("appended after line 2)", out, 1, true)
      local after = read_all(path)
      assert.equal(text .. "\n", after:sub(1, #text + 1))
      local s = assert(rf.ledger.stats(path))
      assert.same({ 3, 1, { [path] = 2 } }, { s.requests, s.torn_lines, s.torn })
      os.remove(path)
    end
  end)

  -- demo printed nothing for the seconds its flow ran, while soak drew a progress bar: both draw the same bar
  -- (retryfreeze.cli.progress), on a terminal only.
  it("demo and soak draw a progress bar on a terminal, and none into a pipe or a file", function()
    local full = "%[" .. string.rep("#", 30) .. "%] 60/60  %d+ req/s "
    for _, cmd in ipairs({ { "demo", "--requests", "60" }, { "soak", h.desk_lock, "--requests", "60" } }) do
      local ledger_path, stdout = os.tmpname(), os.tmpname()
      local words = { h.cli }
      for _, a in ipairs(cmd) do words[#words + 1] = h.shell_quote(a) end
      local command = table.concat(words, " ") .. " --ledger " .. h.shell_quote(ledger_path)
      -- standard error a pipe: no bar, no carriage return
      local out, err, code = h.sh(command)
      assert.equal(0, code, err)
      assert.is_nil(err:find("\r", 1, true), cmd[1])
      assert.is_nil(err:find("req/s", 1, true), cmd[1])
      assert.is_nil(out:find("req/s", 1, true), cmd[1])
      -- standard error a terminal (script(1) gives the command a pty), standard output a file
      local tty, tty_err, tty_code = h.sh("script -qec " .. h.shell_quote(command .. " >" .. h.shell_quote(stdout))
        .. " /dev/null")
      assert.equal(0, tty_code, tty_err)
      assert.matches("\r" .. full, tty, 1, cmd[1])
      if cmd[1] == "demo" then -- one redraw per batch of 25 (the first is always drawn), then the last
        assert.matches("\r%[" .. string.rep("#", 12) .. string.rep("%.", 18) .. "%] 25/60 ", tty)
      end
      local text = h.read_file(stdout)
      assert.is_nil(text:find("req/s", 1, true), cmd[1])
      assert.is_nil(text:find("\r", 1, true), cmd[1])
      assert.matches(cmd[1] == "demo" and "demo: 60 requests" or "soak: 60 flows", text, 1, true)
      os.remove(ledger_path)
      os.remove(stdout)
    end
  end)

  it("demo gives the same counts for the same seed", function()
    local a, b = os.tmpname(), os.tmpname()
    local out_a, _, code_a = h.run_cli("demo", "--requests", "60", "--seed", "3", "--ledger", a)
    local out_b, _, code_b = h.run_cli("demo", "--requests", "60", "--seed", "3", "--ledger", b)
    os.remove(a)
    os.remove(b)
    assert.same({ 0, 0 }, { code_a, code_b })
    assert.equal(counts(out_a):gsub(a, "L"), counts(out_b):gsub(b, "L"))
  end)

  it("soak gives the same counts for the same seed, and its default faults exercise the backoff", function()
    local a, b = os.tmpname(), os.tmpname()
    local out_a, _, code_a = h.run_cli("soak", "examples/service.lock.json", "--requests", "150", "--seed", "5",
      "--ledger", a)
    local out_b, _, code_b = h.run_cli("soak", "examples/service.lock.json", "--requests", "150", "--seed", "5",
      "--ledger", b)
    assert.same({ 0, 0 }, { code_a, code_b })
    assert.equal(counts(out_a):gsub(a, "L"), counts(out_b):gsub(b, "L"))
    -- Retries after a 503 or 429 wait the lock's backoff: no Retry-After in the default faults.
    local backoffs, retry_afters = 0, 0
    local it, st = rf.ledger.read(a)
    for rec in it, st do
      for i = 2, #rec.tries do
        if rec.tries[i].delay_ms > 0 then backoffs = backoffs + 1 end
        if rec.tries[i - 1].retry_after ~= nil then retry_afters = retry_afters + 1 end
      end
    end
    os.remove(a)
    os.remove(b)
    assert.is_true(backoffs > 5, "retries with a backoff delay: " .. backoffs)
    assert.equal(0, retry_afters)
  end)
end)

-- A ledger written by the seed's Python harness was refused.
describe("seed-harness ledger lines", function()
  local HARNESS_OK = '{"key": "k1", "attempts": 2, "elapsed_s": 0.41, "last": {"status": 200, "body_len": 12, '
    .. '"verdict": "unknown"}, "ok": true}\n'
  local HARNESS_FAIL = '{"key": null, "attempts": 3, "elapsed_s": 1.2, "last": {"status": 503, '
    .. '"body_len": 0, "verdict": "retry"}, "ok": false}\n'

  it("are read line by line beside the writer's own lines, with the documented mapping", function()
    local path = h.temp_file(HARNESS_OK .. ok1(20) .. HARNESS_FAIL .. ok_after_503(30))
    local s = assert(ledger_stats.stats(path))
    local it, st = rf.ledger.read(path)
    local first = it(st)
    os.remove(path)
    assert.same({ 4, 3, 2, 0 }, { s.requests, s.successes, s.retried_successes, s.terminal })
    local hs = s.by_route["(seed harness)"]
    assert.same({ 2, 1, 5, 410, 1200 }, { hs.requests, hs.successes, hs.attempts, hs.elapsed_ms.min,
      hs.elapsed_ms.max })
    assert.same({ ["success success"] = 1, ["failed seed-harness"] = 1 }, hs.by_reason)
    assert.same({ "(seed harness)", "k1", 2, 410, "success", "success", true, 200, 12, 0 }, { first.route, first.key,
      first.attempts, first.elapsed_ms, first.outcome, first.reason, first.ok, first.status, first.body_len,
      #first.tries })
  end)

  it("are gated like any ledger", function()
    local path = h.temp_file(string.rep(HARNESS_OK, 60))
    local out, _, code = h.run_cli("gate", path)
    os.remove(path)
    assert.equal(1, code)
    assert.matches("^retried%-success=100%.00%% attempts/success=2%.00 .*\nbreach: retried%-success 100%.000%% > max "
      .. "5%.000%% %(max%-retried%-success%)\nbreach: attempts/success 2%.000 > max 1%.300", out)
  end)

  it("are refused when malformed, naming the field", function()
    for text, why in pairs({
      [HARNESS_OK:gsub('"ok": true', '"ok": 1')] = 'field "$.ok" must be a boolean',
      [HARNESS_OK:gsub(', "ok": true', '')] = 'missing field "$.ok" (a seed-harness line)',
      [HARNESS_OK:gsub('"verdict"', '"x": 1, "verdict"')] = 'unknown field "$.last.x"',
      [HARNESS_OK:gsub('0%.41', '-1')] = 'field "$.elapsed_s" must be a number of seconds',
    }) do
      local path = h.temp_file(ok1(5) .. text)
      local s, err = ledger_stats.stats(path)
      os.remove(path)
      assert.is_nil(s)
      assert.matches(path .. ":2: corrupt ledger line: " .. why, err, 1, true)
    end
  end)
end)
