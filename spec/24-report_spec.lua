-- `retryfreeze report`: the HTML report of a generated ledger, rendered by headless Chromium (Debian chromium)
-- with the network disabled (a proxy on a closed port, every host name unresolvable, no background
-- networking). The page records what it drew in #rf-render-status once its charts have rendered; Chromium's
-- --dump-dom gives the DOM after that, and --enable-logging=stderr prints every console message, so the spec
-- checks: no console message, no error, no resource loaded, every chart drew marks, and the summary line and
-- the worst-routes table equal `stats --json` of the same ledger. A screenshot goes to BUILD/report-screenshot.png.
local h = require "spec.helper"
local gen = require "spec.ledger_gen"
local json = require "retryfreeze.json"

local build_dir = os.getenv("RF_BUILD_DIR") or "build"

local q, read = h.shell_quote, h.read_file

local tmp = h.temp_dir()
teardown(function() os.execute("rm -rf " .. q(tmp)) end)

local browser = require "spec.support.chromium"
local console_lines, html_unescape = browser.console_lines, browser.html_unescape
local function chromium(file, mode, tz) return browser.run(tmp, file, mode, tz) end

describe("retryfreeze report", function()
  local ledger = tmp .. "/ledger.jsonl"
  local page = tmp .. "/report.html"
  local abs_page

  setup(function()
    gen.generate(ledger, 20000, { seed = 11 })
    local out, err, code = h.run_cli("report", ledger, "-o", page, "--lock", h.desk_lock, "--title", "Spec <report>")
    assert.equal("", err)
    assert.equal(0, code)
    assert.truthy(out:find("^report: " .. page:gsub("%p", "%%%0") .. " %(20000 requests, gate %a+%)\n"))
    local p = io.popen("readlink -f " .. q(page))
    abs_page = p:read("l")
    p:close()
  end)

  it("writes one file that needs nothing else", function()
    local text = read(page)
    assert.truthy(text:find('content="default-src \'none\';', 1, true), "a CSP forbidding every fetch")
    assert.falsy(text:find("<link", 1, true))
    assert.falsy(text:find("<script[^>]-src="))
    assert.falsy(text:find("<img", 1, true))
    assert.falsy(text:find("sourceMappingURL", 1, true))
    assert.truthy(text:find("<title>Spec &lt;report&gt;</title>", 1, true))
    -- the charts' library is inlined, byte for byte (the vendored minified builds)
    assert.truthy(text:find(read("lua/retryfreeze/vendor/vega/vega.min.js"), 1, true))
  end)

  it("renders offline in headless Chromium: no console message, every chart drawn, the numbers of stats --json",
    function()
      local dom, log = chromium(abs_page, "--dump-dom")
      assert.same({}, console_lines(log))
      local attrs, body = dom:match('<pre id="rf%-render%-status"([^>]*)>(.-)</pre>')
      assert.truthy(attrs, "no render status in the DOM")
      local status = assert(json.decode(html_unescape(body)))
      assert.same({}, status.errors)
      assert.same({}, status.resources)
      assert.equal('data-drawn="9" data-charts="9"', attrs:match("data%-drawn=\"%d+\" data%-charts=\"%d+\""))
      local n = 0
      for id, c in pairs(status.charts) do
        n = n + 1
        assert.is_true(c.svg, id)
        assert.is_true(c.marks > 0, id .. " drew no mark")
        assert.is_true(c.width > 100, id .. " has no width")
      end
      assert.equal(9, n)

      local s = assert(json.decode((h.run_cli("stats", "--json", ledger))))
      local summary = html_unescape(assert(dom:match('<pre id="summary">(.-)</pre>')))
      local rs, aps, term, rpr, ok, req = summary:match("^retried%-success=([%d.]+)%% attempts/success=([%d.]+) "
        .. "terminal=([%d.]+)%% retries/request=([%d.]+) successes=(%d+) requests=(%d+)$")
      assert.truthy(rs, summary)
      assert.equal(string.format("%.2f", 100 * s.retried_success_ratio), rs)
      assert.equal(string.format("%.2f", s.attempts_per_success), aps)
      assert.equal(string.format("%.2f", 100 * s.terminal_rate), term)
      assert.equal(string.format("%.3f", s.retry_ratio), rpr)
      assert.equal(s.successes, tonumber(ok))
      assert.equal(20000, tonumber(req))
      assert.equal(s.requests, tonumber(req))

      -- The table: every route, worst retried-success ratio first, each number equal to stats --json.
      local rows, prev = 0, math.huge
      for route, cells in dom:gmatch('<tr data%-route="([^"]*)">(.-)</tr>') do
        route = html_unescape(route)
        local r = assert(s.by_route[route == "(no route)" and "" or route], route)
        rows = rows + 1
        local fields = 0
        for field, value in cells:gmatch('data%-field="([%w_]+)" data%-value="([^"]*)"') do
          fields = fields + 1
          local want = field == "p99" and r.elapsed_ms.p99 or r[field]
          assert.equal(want, tonumber(value), route .. " " .. field)
        end
        assert.equal(8, fields)
        assert.is_true(r.retried_success_ratio <= prev)
        prev = r.retried_success_ratio
      end
      local routes = 0
      for _ in pairs(s.by_route) do routes = routes + 1 end
      assert.equal(routes, rows)
      assert.equal(5, rows)
    end)

  it("saves a screenshot of the rendered page", function()
    -- Taken under a name of this run's, then renamed to CI's artifact: the file runs under several Lua versions
    -- side by side, and a rename replaces the artifact whole.
    local shot = build_dir .. "/report-screenshot." .. tmp:match("[^/.]+$") .. ".png"
    local _, log = chromium(abs_page, "--screenshot=" .. q(shot))
    assert.same({}, console_lines(log))
    local png = read(shot)
    assert.equal("\137PNG\r\n\26\n", png:sub(1, 8))
    assert.is_true(#png > 50000, "a screenshot of " .. #png .. " bytes is too small to show the charts")
    assert(os.rename(shot, build_dir .. "/report-screenshot.png"))
  end)

  it("would see a console message or a blocked load (the check can fail)", function()
    local bad = tmp .. "/bad.html"
    local f = assert(io.open(bad, "wb"))
    f:write('<!DOCTYPE html><html><body><script>console.error("boom-from-page")</script></body></html>')
    f:close()
    local _, log = chromium(bad, "--dump-dom")
    local lines = console_lines(log)
    assert.equal(1, #lines)
    assert.truthy(lines[1]:find('"boom-from-page"', 1, true))
  end)

  it("charts the numbers of stats: the time buckets add up, attempts and Retry-After by route match", function()
    local data = assert(json.decode(read(page):match('<script type="application/json" id="rf%-data">(.-)</script>')))
    local s = assert(json.decode((h.run_cli("stats", "--json", ledger))))
    local total, retried = 0, 0
    for _, b in ipairs(data.timeline) do
      total = total + b.requests
      if b.retried_success_ratio ~= json.null then assert.is_true(b.retried_success_ratio >= 0) end
    end
    assert.equal(s.requests, total)
    assert.equal(36, #data.timeline) -- 6 hours in 10-minute buckets
    for _, a in ipairs(data.attempts) do
      assert.equal(s.by_attempts[tostring(a.attempts)] or 0, a.requests)
    end
    for _, r in ipairs(data.retry_after) do
      retried = retried + r.tries
      assert.equal(s.by_route[r.route].retry_after[r.use], r.tries)
    end
    local want = 0
    for _, n in pairs(s.retry_after) do want = want + n end
    assert.equal(want, retried)
    for _, o in ipairs(data.outcomes) do
      assert.equal(s.by_route[o.route == "(no route)" and "" or o.route].by_outcome[o.outcome], o.requests)
    end
  end)

  it("shows the lock's digest and its sign-off from the pairing log", function()
    local text = read(page)
    local rf = require "retryfreeze"
    assert.truthy(text:find('<code id="lock-digest">' .. assert(rf.load(h.desk_lock)).digest .. "</code>", 1, true))
    assert.truthy(text:find('<div id="signoff" data-state="', 1, true))
    -- The desk lock is signed off in examples/pairing-log.jsonl, which it shares with the service lock.
    assert.truthy(text:find('<div id="signoff" data-state="signed"', 1, true))
    -- signed off in a fresh pairing log: the page says so; without a log, it says that too
    local log = tmp .. "/pairing-log.jsonl"
    local _, err, code = h.run_cli("signoff", h.desk_lock, "--by", "Ana & Bo", "--log", log)
    assert.equal(0, code, err)
    local signed = tmp .. "/signed.html"
    _, err, code = h.run_cli("report", ledger, "-o", signed, "--lock", h.desk_lock, "--log", log)
    assert.equal(0, code, err)
    text = read(signed)
    assert.truthy(text:find('<div id="signoff" data-state="signed" class="ok">signed off on ', 1, true))
    assert.truthy(text:find("by Ana &amp; Bo (" .. log .. " line 1)", 1, true))
    _, err, code = h.run_cli("report", ledger, "-o", signed, "--lock", h.desk_lock, "--log", tmp .. "/none.jsonl")
    assert.equal(0, code, err)
    assert.truthy(read(signed):find('<div id="signoff" data-state="no-log" class="bad">', 1, true))
  end)

  it("without a gate in the lock, judges with the seed's defaults, as gate --lock does", function()
    local gout, _, gcode = h.run_cli("gate", ledger, "--lock", h.desk_lock)
    assert.truthy(gout:find("the seed's defaults", 1, true))
    local text = read(page)
    assert.truthy(text:find('data-state="' .. (gcode == 1 and "breach" or "pass") .. '"', 1, true))
    local n = 0
    for line in gout:gmatch("(breach: [^\n]*)") do
      n = n + 1
      assert.truthy(text:find('<div class="bad breach">' .. line:gsub("&", "&amp;"):gsub(">", "&gt;")
        :gsub("<", "&lt;") .. "</div>", 1, true), line)
    end
    assert.equal(gcode == 1, n > 0)
    assert.truthy(text:find("thresholds (the seed&#39;s defaults", 1, true))
  end)

  it("judges with the lock's gate thresholds, as gate --lock does", function()
    local lock = tmp .. "/gated.lock.json"
    local doc = assert(json.decode(read(h.desk_lock)))
    doc.gate = { maxRetriedSuccess = 0.01 }
    local f = assert(io.open(lock, "wb"))
    f:write(json.encode(doc))
    f:close()
    local gated = tmp .. "/gated.html"
    local out, err, code = h.run_cli("report", ledger, "-o", gated, "--lock", lock)
    assert.equal("", err)
    assert.equal(0, code)
    assert.truthy(out:find("gate breach", 1, true))
    local gout, _, gcode = h.run_cli("gate", ledger, "--lock", lock)
    assert.equal(1, gcode)
    local text = read(gated)
    assert.truthy(text:find('data-state="breach"', 1, true))
    for line in gout:gmatch("(breach: [^\n]*)") do
      assert.truthy(text:find('<div class="bad breach">' .. line:gsub("&", "&amp;"):gsub(">", "&gt;")
        :gsub("<", "&lt;") .. "</div>", 1, true), line)
    end
    assert.truthy(text:find('<pre id="summary">' .. gout:match("^([^\n]*)"):gsub("&", "&amp;") .. "</pre>", 1, true))
  end)

  it("refuses bad usage, a missing ledger and a corrupt line, naming them", function()
    local _, err, code = h.run_cli("report", ledger)
    assert.equal(2, code)
    assert.truthy(err:find("-o FILE is required", 1, true))
    _, err, code = h.run_cli("report", "-o", tmp .. "/x.html")
    assert.equal(2, code)
    assert.truthy(err:find("expected at least one LEDGER", 1, true))
    _, err, code = h.run_cli("report", ledger, "-o", tmp .. "/x.html", "--log", "p.jsonl")
    assert.equal(2, code)
    assert.truthy(err:find("--log needs --lock", 1, true))
    _, err, code = h.run_cli("report", tmp .. "/missing.jsonl", "-o", tmp .. "/x.html")
    assert.equal(2, code)
    assert.truthy(err:find("missing.jsonl", 1, true))
    local corrupt = h.temp_file(gen.line{ ts_ms = 0, route = "GET /a", method = "GET", path = "/a", attempts = 1,
      elapsed_ms = 1, outcome = "success", reason = "success", ok = true, status = 200,
      tries = { { "HTTP_200", 200, 1, 0, "success" } } } .. "{not json}\n")
    _, err, code = h.run_cli("report", corrupt, "-o", tmp .. "/x.html")
    os.remove(corrupt)
    assert.equal(2, code)
    assert.truthy(err:find(":2: corrupt ledger line", 1, true))
    assert.is_nil(io.open(tmp .. "/x.html"))
  end)

  it("is written by soak --report and demo --report for their ledgers", function()
    local soak_ledger, soak_page = tmp .. "/soak.jsonl", tmp .. "/soak.html"
    local out, err, code = h.run_cli("soak", h.desk_lock, "--requests", "120", "--ledger", soak_ledger,
      "--report", soak_page, "--max-retried-success", "1")
    assert.equal(0, code, err)
    assert.truthy(out:find("report: " .. soak_page .. "\n", 1, true))
    local text = read(soak_page)
    local summary = h.run_cli("gate", soak_ledger, "--max-retried-success", "1"):match("^([^\n]*)")
    assert.truthy(text:find('<pre id="summary">' .. summary .. "</pre>", 1, true))
    assert.truthy(text:find('data-state="pass"', 1, true))
    assert.truthy(text:find("max-retried-success 1", 1, true))

    local demo_ledger, demo_page = tmp .. "/demo.jsonl", tmp .. "/demo.html"
    out, err, code = h.run_cli("demo", "--requests", "40", "--ledger", demo_ledger, "--report", demo_page)
    assert.equal(0, code, err)
    assert.truthy(out:find("report: " .. demo_page .. "\n", 1, true))
    local s = assert(json.decode((h.run_cli("stats", "--json", demo_ledger))))
    assert.equal(40, s.requests)
    assert.truthy(read(demo_page):find(string.format("successes=%d requests=40</pre>", s.successes), 1, true))
  end)
end)

-- The time axes said UTC but printed a 12-hour clock without AM/PM (20:32 as 08:32); the page showed its test
-- hook's raw JSON; the seed harness's lines (no ts) were left out of the charts over time without a word.
describe("retryfreeze report, read as a person reads it", function()
  local ledger = tmp .. "/evening.jsonl"
  local page = tmp .. "/evening.html"
  local EVENING = 1795910400000 + 20 * 3600000 -- 2026-11-29T20:00:00Z
  local HARNESS = '{"key": "k%d", "attempts": 2, "elapsed_s": 0.41, "last": {"status": 200, "body_len": 12, '
    .. '"verdict": "unknown"}, "ok": true}\n'
  local dom, text

  setup(function()
    gen.generate(ledger, 2000, { seed = 3, start_ms = EVENING, span_ms = 2 * 3600000 })
    local f = assert(io.open(ledger, "a"))
    for i = 1, 3 do f:write(HARNESS:format(i)) end
    f:close()
    local _, err, code = h.run_cli("report", ledger, "-o", page)
    assert.equal(0, code, err)
    text = read(page)
    local p = io.popen("readlink -f " .. q(page))
    local abs = p:read("l")
    p:close()
    local log
    -- Five and a half hours east of UTC: a label in local time would read 01:30 to 03:30.
    dom, log = chromium(abs, "--dump-dom", "Asia/Kolkata")
    assert.same({}, console_lines(log))
  end)

  --- The labels of every x axis titled 'time (UTC)', one list per axis.
  local function time_axis_labels()
    local axes = {}
    for rest in dom:gmatch("aria%-label=\"X%-axis titled 'time %(UTC%)'[^\"]*\".-role%-axis%-label[^>]*>(.-)</g>") do
      local labels = {}
      for label in rest:gmatch("<text[^>]*>([^<]*)</text>") do labels[#labels + 1] = label end
      axes[#axes + 1] = labels
    end
    return axes
  end

  it("labels the time axes on a 24-hour UTC clock", function()
    local axes = time_axis_labels()
    assert.equal(5, #axes) -- requests, retried successes, attempts per success, terminal rate, elapsed_ms
    for i, labels in ipairs(axes) do
      local seen = {}
      assert.is_true(#labels >= 4, "axis " .. i .. ": " .. table.concat(labels, " "))
      for _, label in ipairs(labels) do
        local hh, mm = label:match("^(%d%d):(%d%d)$")
        assert.truthy(hh, "axis " .. i .. " label '" .. label .. "' is not HH:MM")
        -- 20:00 to 22:00 UTC: a 12-hour clock would print 08 PM, 08:15 …
        assert.is_true(tonumber(hh) >= 20 and tonumber(hh) <= 22 and tonumber(mm) < 60, label)
        seen[label] = true
      end
      assert.is_true(seen["20:00"] and seen["20:30"] and seen["21:00"], table.concat(labels, " "))
    end
  end)

  it("keeps its test hook out of sight", function()
    local attrs = assert(dom:match('<pre id="rf%-render%-status"([^>]*)>'), "no render status in the DOM")
    assert.matches("%f[%w]hidden%f[^%w]", attrs)
    assert.matches('data%-drawn="9"', attrs) -- the hook still reports, to a test
    -- and the page says in words what it drew
    assert.truthy(dom:find('<span id="rf-drawn">9 of 9 charts drawn</span>', 1, true))
  end)

  it("says how many seed-harness lines it left out of the charts over time, and why", function()
    local note = assert(dom:match('<div class="meta" id="untimed">(.-)</div>'), "no note on lines without ts")
    assert.equal("3 lines from the seed's harness carry no ts: they are counted in the summary, the charts by "
      .. "route and the table, but not in the charts over time.", note)
    local data = assert(json.decode(text:match('<script type="application/json" id="rf%-data">(.-)</script>')))
    local in_time = 0
    for _, b in ipairs(data.timeline) do in_time = in_time + b.requests end
    assert.equal(2000, in_time) -- the 2003 requests less the 3 harness lines
    assert.truthy(text:find("successes=%d+ requests=2003</pre>"))
  end)

  it("says nothing about untimed lines when every line has a ts", function()
    local timed, timed_page = tmp .. "/timed.jsonl", tmp .. "/timed.html"
    gen.generate(timed, 50, { seed = 3 })
    local _, err, code = h.run_cli("report", timed, "-o", timed_page)
    assert.equal(0, code, err)
    local body = read(timed_page)
    assert.truthy(body:find('<div class="grid">', 1, true))
    assert.falsy(body:find('id="untimed"', 1, true))
  end)
end)

-- Colours came from each chart's own order of the names (success drawn red in one chart, green in another); a
-- chart with no data drew an empty frame labelled "undefined"; long route labels were cut to "…".
describe("retryfreeze report, one colour table, no empty chart, labels in full", function()
  local report = require "retryfreeze.report"
  local rf = require "retryfreeze"
  local LONG = "GET /v1/organisations/{org}/projects/{project}/deployments/{deployment}/jobs/*"

  it("has one colour for every outcome and every reason, distinct within each, success green in both", function()
    for kind, names in pairs({ outcome = rf.outcomes, reason = rf.reasons }) do
      local seen = {}
      for _, name in ipairs(names) do
        local c = report.COLOURS[kind][name]
        assert.truthy(c and c:match("^#%x%x%x%x%x%x$"), kind .. " " .. name .. " has no colour")
        assert.is_nil(seen[c], kind .. " " .. name .. " shares " .. tostring(c) .. " with " .. tostring(seen[c]))
        seen[c] = name
      end
    end
    assert.same({ "success", "terminal", "exhausted", "deadline", "throttled", "refused" }, rf.outcomes)
    assert.equal("#2e7d32", report.COLOURS.outcome.success)
    assert.equal("#2e7d32", report.COLOURS.reason.success)
  end)

  it("colours outcomes and reasons by the table, leaves out a chart with no data and cuts no label", function()
    local lock = h.write_file(tmp .. "/long.lock.json", '{"endpoint": "' .. LONG .. '", "maxAttempts": 2, '
      .. '"perAttemptTimeoutMs": 1000, "totalBudgetMs": 3000, "retryable": ["HTTP_503"]}')
    local ledger, page = tmp .. "/long.jsonl", tmp .. "/long.html"
    local _, err, code = h.run_cli("soak", lock, "--requests", "200", "--faults", "503=0.2,500=0.1", "--ledger", ledger,
      "--report", page)
    assert.equal(0, code, err)
    local text = read(page)
    local data = assert(json.decode(text:match('<script type="application/json" id="rf%-data">(.-)</script>')))
    assert.same({}, data.retry_after) -- the upstream sent no Retry-After
    assert.same({ domain = { "success", "terminal", "exhausted" }, range = { "#2e7d32", "#c62828", "#ef6c00" } },
      data.colours.outcome)
    for i, name in ipairs(data.colours.reason.domain) do
      assert.equal(report.COLOURS.reason[name], data.colours.reason.range[i], name)
    end
    local p = io.popen("readlink -f " .. q(page))
    local abs = p:read("l")
    p:close()
    local dom, log = chromium(abs, "--dump-dom")
    assert.same({}, console_lines(log))
    local attrs, status = browser.render_status(dom)
    assert.same({}, status.errors)
    assert.equal('data-drawn="8" data-charts="8"', attrs:match("data%-drawn=\"%d+\" data%-charts=\"%d+\""))
    for id, c in pairs(status.charts) do assert.is_true(c.fits, id .. " is wider than its figure") end
    assert.falsy(dom:find('id="chart-retry-after"', 1, true))
    assert.truthy(dom:find('<div class="meta no-data" data-chart="chart-retry-after">Retry-After use: no data (no '
      .. "attempt in these ledgers carried a Retry-After header).</div>", 1, true))
    local shown = dom:gsub("<script.-</script>", "") -- the page without the inlined library
    assert.falsy(shown:find("undefined", 1, true))
    -- the outcome chart draws success in green and terminal in red
    local outcomes = assert(dom:match('id="chart%-outcomes"(.-)</figure>'))
    assert.truthy(outcomes:find('fill="#2e7d32"', 1, true))
    assert.truthy(outcomes:find('fill="#c62828"', 1, true))
    -- every label in full: the long route on the axes, nothing cut to "…"
    assert.truthy(dom:find(">" .. LONG .. "</text>", 1, true), "the route label is cut")
    for t in dom:gmatch("<text[^>]*>([^<]*)</text>") do assert.falsy(t:find("…", 1, true), t) end
  end)
end)

describe("retryfreeze.report.buckets_for", function()
  local report = require "retryfreeze.report"
  local T0 = 1795910400000 -- 2026-11-29T00:00:00Z

  it("picks the smallest round width that gives at most 60 buckets, aligned to it", function()
    assert.same({ origin_ms = T0, bucket_ms = 1000, buckets = 1 }, report.buckets_for(T0 + 10, T0 + 10))
    assert.same({ origin_ms = T0, bucket_ms = 1000, buckets = 60 }, report.buckets_for(T0, T0 + 59999))
    assert.same({ origin_ms = T0, bucket_ms = 2000, buckets = 31 }, report.buckets_for(T0, T0 + 60000))
    assert.same({ origin_ms = T0, bucket_ms = 600000, buckets = 36 }, report.buckets_for(T0 + 5, T0 + 6 * 3600000 - 1))
    assert.same({ origin_ms = T0 - 86400000, bucket_ms = 86400000, buckets = 32 },
      report.buckets_for(T0 - 3600000, T0 + 30 * 86400000))
    assert.same({ origin_ms = T0 - 2 * 86400000, bucket_ms = 172800000, buckets = 47 },
      report.buckets_for(T0 - 3600000, T0 + 90 * 86400000))
  end)

  it("stays within the bucket limit for a span of centuries", function()
    local b = report.buckets_for(0, 253402300799999)
    assert.is_true(b.buckets <= 60)
    assert.equal(0, b.bucket_ms % 31536000000)
    assert.is_true(b.origin_ms <= 0 and b.origin_ms + b.buckets * b.bucket_ms > 253402300799999)
  end)
end)
