-- The replay's "A vs B" page (`retryfreeze replay --report`, `retryfreeze report --replay`) and the chained form of
-- assert.replay, over a small ledger written here line by line, so every recorded figure is known: GET /x/{i} has
-- 6 first-try successes, 4 successes after one 503 and 2 requests that ended after two 503s (maxAttempts 2);
-- POST /y has 2 first-try successes, which a candidate of GET /x/{i} alone routes nowhere; one line is the seed
-- harness's. The lines carry no per-try timeout or Date: they are older lines, and the page must say so.
local h = require "spec.helper"
local gen = require "spec.ledger_gen"
local json = require "retryfreeze.json"
local rf = require "retryfreeze"
require "retryfreeze.spec"

local q, read = h.shell_quote, h.read_file
local tmp = h.temp_dir()
teardown(function() os.execute("rm -rf " .. q(tmp)) end)

local BACKOFF = '"backoff":{"baseMs":1,"maxMs":5,"jitter":"full"}'
local T0 = 1795910400000

-- A single-route lock of GET /x/{i} retrying 503 with these attempts (and these fields); path under tmp.
local function lock(name, attempts, fields)
  return h.write_file(tmp .. "/" .. name .. ".lock.json", '{"endpoint":"GET /x/{i}","perAttemptTimeoutMs":2000,'
    .. '"maxAttempts":' .. attempts .. ',"totalBudgetMs":20000,"retryable":["HTTP_503"],' .. BACKOFF
    .. (fields and "," .. fields or "") .. "}")
end

local function ledger_text()
  local lines, n = {}, 0
  local function add(r)
    n = n + 1
    r.ts_ms = T0 + n * 1000
    r.route, r.method, r.path = r.route or "GET /x/{i}", r.method or "GET", r.path or ("/x/" .. n)
    lines[#lines + 1] = gen.line(r)
  end
  for _ = 1, 6 do
    add{ attempts = 1, elapsed_ms = 20, outcome = "success", reason = "success", ok = true, status = 200,
      tries = { { "HTTP_200", 200, 20, 0, "success" } } }
  end
  for _ = 1, 4 do
    add{ attempts = 2, elapsed_ms = 150, outcome = "success", reason = "success", ok = true, status = 200,
      tries = { { "HTTP_503", 503, 30, 0, "pinned-status" }, { "HTTP_200", 200, 20, 100, "success" } } }
  end
  for _ = 1, 2 do
    add{ attempts = 2, elapsed_ms = 160, outcome = "exhausted", reason = "max-attempts", ok = false, status = 503,
      tries = { { "HTTP_503", 503, 30, 0, "pinned-status" }, { "HTTP_503", 503, 30, 100, "max-attempts" } } }
  end
  for i = 1, 2 do
    add{ route = "POST /y", method = "POST", path = "/y", key = "k" .. i, attempts = 1, elapsed_ms = 10,
      outcome = "success", reason = "success", ok = true, status = 200, tries = { { "HTTP_200", 200, 10, 0, "success" } } }
  end
  lines[#lines + 1] = '{"key": "h1", "attempts": 1, "elapsed_s": 0.02, "last": {"status": 200, "body_len": 2, '
    .. '"verdict": "unknown"}, "ok": true}\n'
  return table.concat(lines)
end

describe("assert.replay(ledgers, policy), chained", function()
  local ledger, same, narrow
  setup(function()
    ledger = h.write_file(tmp .. "/chain.jsonl", ledger_text())
    same, narrow = assert(rf.load(lock("same", 2))), assert(rf.load(lock("narrow", 1)))
  end)

  -- The figures of the record: GET /x/{i} alone is replayed (POST /y: no-route; the harness line: recorded only).
  it("knows the ledger (the replay's own numbers)", function()
    local p = assert(rf.replay(ledger, same, { seed = 1 })).predicted
    assert.same({ 14, 10, 18, 10 / 14, 2 }, { p.requests, p.successes, p.attempts, p.success_rate, p.no_route })
    local r = assert(rf.replay(ledger, narrow, { seed = 1 }))
    local n = r.predicted
    assert.same({ 14, 6, 12, 6 / 14, -9 }, { n.requests, n.successes, n.attempts, n.success_rate, n.extra_attempts })
    assert.same({ 15, 13, 21 }, { r.recorded.requests, r.recorded.successes, r.recorded.attempts })
  end)

  it("passes a bound the prediction keeps, and fails one it breaches", function()
    -- same: the successes' attempts over the successes, 14 / 10
    local p = assert(rf.replay(ledger, same, { seed = 1 })).predicted
    assert.equal(1.4, p.attempts_per_success)
    assert.replay(ledger, same).attempts_per_success.at_most(1.4)
    assert.replay(ledger, same).attempts_per_success.at_least(1.4)
    assert.replay(ledger, narrow).attempts_per_success.at_most(1)
    assert.replay(ledger, narrow).success_rate.at_least(6 / 14)
    assert.replay(ledger, narrow).extra_attempts.at_most(-9)
    assert.replay(ledger, same).no_route.at_most(2)
    local ok, err = pcall(function() assert.replay(ledger, same).attempts_per_success.at_most(1.3) end)
    assert.is_false(ok)
    err = tostring(err)
    assert.matches("predict attempts_per_success at most 1.3: predicted 1.4000.", err, 1, true)
    assert.matches(ledger, err, 1, true)
    assert.matches(same.digest, err, 1, true)
    ok, err = pcall(function() assert.replay({ ledger, ledger }, narrow).success_rate.at_least(0.5, "narrowing") end)
    assert.is_false(ok)
    err = tostring(err)
    assert.matches("^[^\n]*narrowing", err)
    assert.matches("predict success_rate at least 0.5: predicted 0.4286.", err, 1, true)
    assert.matches(ledger .. ", " .. ledger, err, 1, true)
    ok, err = pcall(function() assert.replay(ledger, narrow).attempts.at_least(13) end)
    assert.is_false(ok)
    assert.matches("predict attempts at least 13: predicted 12.", tostring(err), 1, true)
  end)

  it("reports a breached bound as a failure of the test, at the caller's line", function()
    local ok, err = pcall(function() assert.replay(ledger, same).successes.at_least(11) end)
    assert.is_false(ok)
    assert.equal("failure", (getmetatable(err) or {}).__type)
    assert.matches("26%-replay_report_spec%.lua:%d+:", tostring(err))
  end)

  it("checks several figures of one replay", function()
    local p = assert.replay(ledger, narrow)
    p.attempts_per_success.at_most(1)
    p.retried_success_ratio.at_most(0)
    p.throttled.at_most(0)
    assert.has_error(function() p.successes.at_least(7) end)
  end)

  it("negated, passes when the bound is breached", function()
    assert.is_not.replay(ledger, same).attempts_per_success.at_most(1.3)
    assert.is_not.replay(ledger, same).attempts_per_success.at_least(1.5)
    local ok, err = pcall(function() assert.is_not.replay(ledger, same).attempts_per_success.at_most(1.4) end)
    assert.is_false(ok)
    assert.matches("predict attempts_per_success not at most 1.4: predicted 1.4000.", tostring(err), 1, true)
  end)

  it("fails a ratio it cannot judge instead of passing it: no predicted success", function()
    local none = h.write_file(tmp .. "/none.jsonl", gen.line{ ts_ms = T0, route = "GET /x/{i}", method = "GET",
      path = "/x/1", attempts = 1, elapsed_ms = 20, outcome = "terminal", reason = "status-not-retryable", ok = false,
      status = 500, tries = { { "HTTP_500", 500, 20, 0, "status-not-retryable" } } })
    local ok, err = pcall(function() assert.replay(none, same).attempts_per_success.at_most(1.3) end)
    assert.is_false(ok)
    assert.matches("predict attempts_per_success at most 1.3: cannot be judged: 0 predicted successes", tostring(err), 1, true)
    assert.has_error(function() assert.is_not.replay(none, same).attempts_per_success.at_most(1.3) end)
    assert.replay(none, same).success_rate.at_most(0) -- over requests: judged
  end)

  it("keeps the thresholds form", function()
    assert.replay(ledger, same, { max_attempts_per_success = 1.4, min_successes = 1 })
    assert.is_not.replay(ledger, same, { max_attempts_per_success = 1.3, min_successes = 1 })
  end)

  it("refuses misuse: an unknown figure, a figure that is no number, a bound that is no number", function()
    for _, figure in ipairs({ "attempts_per_sucess", "reasons", "by_route" }) do
      local ok, err = pcall(function() return assert.replay(ledger, same)[figure] end)
      assert.is_false(ok)
      assert.matches("^[^\n]*26%-replay_report_spec%.lua:%d+: bad figure '" .. figure .. "' of assert.replay %(a "
        .. "number of the predicted table expected: attempts, attempts_per_request, attempts_per_success, [%w_, ]*"
        .. "extra_attempts, [%w_, ]*%)$", err)
    end
    assert.has_error(function() assert.replay(ledger, same).attempts.at_most("3") end,
      "bad argument #1 to 'at_most' (number expected, got string)")
    assert.has_error(function() assert.replay(ledger, same).attempts.at_most(0 / 0) end,
      "bad argument #1 to 'at_most' (number expected, got NaN)")
  end)
end)

-- The A vs B page. Its numbers are checked twice: against the replay's own result (`replay --json`, the same seed)
-- cell by cell, and against what the ledger above holds by construction.
describe("the A vs B page: replay --report and report --replay", function()
  local browser = require "spec.support.chromium"
  local gate = require "retryfreeze.gate"
  local report = require "retryfreeze.report"
  local ledger, narrow, wide

  -- The data the page embeds for its charts.
  local function page_data(page)
    return assert(json.decode(read(page):match('<script type="application/json" id="rf%-data">(.-)</script>')))
  end

  local function replay_json(candidate, seed, ...)
    local out, err, code = h.run_cli("replay", ledger, "--lock", candidate, "--json", "--seed", tostring(seed), ...)
    assert.equal(0, code, err)
    return assert(json.decode(out))
  end

  -- Each chart cell of the page against the replay's result: the figure of that scope and side (null where the
  -- figure's denominator is 0), the interval of a modelled prediction; every scope, figure and side present once.
  local function assert_cells_equal(data, r)
    local replay = require "retryfreeze.replay"
    local seen, scopes = {}, { [report.ALL] = "" }
    for name in pairs(r.recorded.by_route) do scopes[name == "" and "(no route)" or name] = name end
    for name in pairs(r.predicted.by_route) do scopes[name == "" and "(no route)" or name] = name end
    for _, c in ipairs(data.versus.figures) do
      local key = c.scope .. "|" .. c.side .. "|" .. c.figure
      assert.is_nil(seen[key], key)
      seen[key] = true
      local side = r[c.side]
      local t, iv = side, r.interval.whole
      if c.scope ~= report.ALL then t, iv = side.by_route[scopes[c.scope]], r.interval[scopes[c.scope]] end
      local den = replay.denominators[c.figure]
      if t == nil or (den and t[den] == 0) then
        assert.equal(json.null, c.value, key)
      else
        assert.equal(t[c.figure], c.value, key)
      end
      if c.side == "predicted" and iv and iv.modelled and c.value ~= json.null and iv[c.figure .. "_lo"] then
        assert.same({ iv[c.figure .. "_lo"], iv[c.figure .. "_hi"] }, { c.lo, c.hi }, key)
      else
        assert.same({}, { c.lo, c.hi }, key)
      end
    end
    local n = 0
    for _ in pairs(scopes) do n = n + 1 end
    local count = 0
    for _ in pairs(seen) do count = count + 1 end
    assert.equal(n * 2 * #replay.figures, count)
    -- the reasons, side by side
    local reasons = {}
    for _, c in ipairs(data.versus.reasons) do
      local t = r[c.side]
      if c.scope ~= report.ALL then t = t.by_route[scopes[c.scope]] end
      assert.equal(t.reasons[c.reason], c.requests, c.row .. " " .. c.reason)
      reasons[#reasons + 1] = c
    end
    assert.is_true(#reasons > 0)
  end

  setup(function()
    ledger = h.write_file(tmp .. "/versus.jsonl", ledger_text())
    narrow, wide = lock("versus-narrow", 1), lock("versus-wide", 4)
  end)

  it("replay --report: the replay's text, then the page, whose chart data are the replay's numbers", function()
    local page = tmp .. "/wide.html"
    local text, err, code = h.run_cli("replay", ledger, "--lock", wide, "--seed", "3", "--min-samples", "2")
    assert.equal(0, code, err)
    local out
    out, err, code = h.run_cli("replay", ledger, "--lock", wide, "--seed", "3", "--min-samples", "2", "--report", page)
    assert.same({ 0, "" }, { code, err })
    assert.equal(text .. "report: " .. page .. "\n", out)
    local r = replay_json(wide, 3, "--min-samples", "2")
    assert.is_true(r.predicted.modelled > 0, "the wide candidate models the exhausted requests' third try")
    assert_cells_equal(page_data(page), r)
    -- Known by construction: the record's figures of the whole input and of GET /x/{i}.
    local cells = {}
    for _, c in ipairs(page_data(page).versus.figures) do cells[c.scope .. "|" .. c.side .. "|" .. c.figure] = c end
    assert.same({ 15, 13, 21, 13 / 15 }, { cells["(all requests)|recorded|requests"].value,
      cells["(all requests)|recorded|successes"].value, cells["(all requests)|recorded|attempts"].value,
      cells["(all requests)|recorded|success_rate"].value })
    assert.same({ 12, 10, 18, 1.4 }, { cells["GET /x/{i}|recorded|requests"].value,
      cells["GET /x/{i}|recorded|successes"].value, cells["GET /x/{i}|recorded|attempts"].value,
      cells["GET /x/{i}|recorded|attempts_per_success"].value })
    -- POST /y: recorded, routed nowhere by the candidate: predicted under (no route), refused with no attempt
    assert.same({ 2, 0 }, { cells["(no route)|predicted|requests"].value, cells["(no route)|predicted|attempts"].value })
    assert.equal(json.null, cells["(no route)|predicted|attempts_per_success"].value)
    assert.equal(json.null, cells["(no route)|recorded|requests"].value)
    -- a modelled figure carries its interval, around its point estimate
    local aps = cells["GET /x/{i}|predicted|success_rate"]
    assert.is_true(aps.lo <= aps.value and aps.value <= aps.hi)
    assert.is_true(aps.lo < aps.hi)
  end)

  -- The page's notes, unescaped.
  local function page_notes(text)
    local notes = {}
    for n in text:match('<ul id="versus%-notes">(.-)</ul>'):gmatch('<li class="note">(.-)</li>') do
      notes[#notes + 1] = browser.html_unescape(n)
    end
    return notes
  end

  it("says what the prediction assumed, its interval, and what the older lines could not support", function()
    -- 2 samples suffice: the third tries of the exhausted requests are modelled
    local page = tmp .. "/wide-notes.html"
    local _, err, code = h.run_cli("replay", ledger, "--lock", wide, "--seed", "3", "--min-samples", "2",
      "--report", page)
    assert.equal(0, code, err)
    local text = read(page)
    local r = replay_json(wide, 3, "--min-samples", "2")
    local notes = page_notes(text)
    assert.same(r.notes, notes)
    local all = table.concat(notes, "\n")
    assert.matches("2 requests modelled (2 tries the record never made, drawn from the tries it recorded on the same "
      .. "route at the same attempt after the same failure class; assumed: a request's next try as the record's "
      .. "requests that failed as often fared at that attempt, the upstream's behaviour unchanged by the extra load); "
      .. "interval: ± 1.96 standard deviations over 40 redraws", all, 1, true)
    assert.matches("1 seed-harness line (no method, path or tries): counted as recorded only; no figure of theirs can "
      .. "be predicted", all, 1, true)
    assert.matches("12 requests from older lines without the replay facts (per-try timeout, transport outcome, every "
      .. "wait header, Date)", all, 1, true)
    assert.matches("2 requests the candidate routes nowhere: predicted as refused (no-route)", all, 1, true)
    assert.matches("the ledgers mix 2 locks", all, 1, true)
    local method = browser.html_unescape(assert(text:match('<p id="versus%-method">(.-)</p>')))
    assert.matches("assuming a request's next try as the record's requests that failed as often fared at that "
      .. "attempt, the upstream's behaviour unchanged by the extra load; its figures carry an interval", method, 1,
      true)
    assert.matches("Here 2 of 14 requests were modelled.", method, 1, true)
    local head = assert(text:match('<div id="versus%-head"([^>]*)>'))
    assert.matches('data-exact="10" data-modelled="2" data-unmodelled="0" data-no-route="2" data-harness="1"', head,
      1, true)
    -- 30 samples (the default): too few after HTTP_503 on GET /x/{i}, and the page says so instead of guessing
    _, err, code = h.run_cli("replay", ledger, "--lock", wide, "--seed", "3", "--report", page)
    assert.equal(0, code, err)
    text = read(page)
    r = replay_json(wide, 3)
    notes = page_notes(text)
    assert.same(r.notes, notes)
    all = table.concat(notes, "\n")
    assert.matches("too few samples: GET /x/{i} after HTTP_503 has 6 recorded tries (fewer than 30); not predicted: "
      .. "those requests end as recorded", all, 1, true)
    assert.matches("2 requests could not be modelled (no recorded try to draw from): counted as they ended in the "
      .. "record", all, 1, true)
  end)

  it("report --replay: the same view; the verdict judges the prediction as gate --replay does", function()
    local page = tmp .. "/narrow.html"
    -- the record's success rate (13 / 15) keeps the candidate's minimum; its prediction (6 / 14) does not
    narrow = lock("versus-narrow-gated", 1, '"gate":{"minSuccessRate":0.5}')
    local out, err, code = h.run_cli("report", ledger, "-o", page, "--lock", narrow, "--replay", "--seed", "5")
    assert.equal(0, code, err)
    local r = replay_json(narrow, 5)
    local data = page_data(page)
    assert_cells_equal(data, r)
    -- exact: maxAttempts 1 ends each request at its first try, which the record holds
    local cells = {}
    for _, c in ipairs(data.versus.figures) do cells[c.scope .. "|" .. c.side .. "|" .. c.figure] = c end
    assert.same({ 12, 6, 12, 0.5, 1 }, { cells["GET /x/{i}|predicted|requests"].value,
      cells["GET /x/{i}|predicted|successes"].value, cells["GET /x/{i}|predicted|attempts"].value,
      cells["GET /x/{i}|predicted|success_rate"].value, cells["GET /x/{i}|predicted|attempts_per_success"].value })
    assert.is_nil(cells["GET /x/{i}|predicted|success_rate"].lo)
    local text = read(page)
    assert.matches("Here no request was modelled: every prediction is exact, and has no interval.", text, 1, true)
    local summary = gate.summary(r.predicted)
    assert.matches('<pre id="summary">predicted: ' .. summary .. "</pre>", text, 1, true)
    assert.matches('<pre id="recorded-summary">recorded: ' .. gate.summary(r.recorded) .. "</pre>", text, 1, true)
    local gout, _, gcode = h.run_cli("gate", "--replay", ledger, "--lock", narrow, "--seed", "5")
    assert.equal(1, gcode, gout)
    local breach = assert(gout:match("\n(breach: [^\n]*)"))
    assert.equal("breach: success 42.857% < min 50.000% (min-success-rate)", breach)
    assert.matches('data-state="breach"><strong>predicted gate: breach</strong>', text, 1, true)
    assert.matches('<div class="bad breach">' .. breach:gsub("<", "&lt;") .. "</div>", text, 1, true)
    assert.equal("report: " .. page .. " (15 requests, predicted gate breach)\npredicted: " .. summary .. "\n", out)
    -- the same page without --replay judges the record, which keeps the gate
    out = h.run_cli("report", ledger, "-o", page, "--lock", narrow)
    assert.equal("report: " .. page .. " (15 requests, gate pass)\n" .. gate.summary(r.recorded) .. "\n", out)
    assert.is_nil(read(page):find('id="versus"', 1, true))
  end)

  it("renders offline in headless Chromium: every chart drawn, the interval too, no console message", function()
    local page = tmp .. "/render.html"
    local _, err, code = h.run_cli("replay", ledger, "--lock", wide, "--seed", "3", "--min-samples", "2",
      "--report", page)
    assert.equal(0, code, err)
    local p = io.popen("readlink -f " .. q(page))
    local abs = p:read("l")
    p:close()
    local dom, log = browser.run(tmp, abs, "--dump-dom")
    assert.same({}, browser.console_lines(log))
    local attrs, status = browser.render_status(dom)
    assert.truthy(attrs, "no render status in the DOM")
    assert.same({}, status.errors)
    assert.same({}, status.resources)
    -- every chart but Retry-After use, which is not drawn at all: no try of this ledger carried one (the page says so)
    assert.equal('data-drawn="14" data-charts="14"', attrs:match('data%-drawn="%d+" data%-charts="%d+"'))
    assert.is_nil(status.charts["chart-retry-after"])
    assert.matches("Retry-After use: no data (no attempt in these ledgers carried a Retry-After header).", dom, 1, true)
    for _, id in ipairs({ "chart-vs-attempts", "chart-vs-success-rate", "chart-vs-retried",
      "chart-vs-attempts-per-success", "chart-vs-terminal", "chart-vs-reasons" }) do
      local c = assert(status.charts[id], id)
      assert.is_true(c.svg and c.marks > 0 and c.width > 100, id)
    end
    -- the success rate: a bar per scope and side with a value (all requests, GET /x/{i}: both sides; no route:
    -- predicted only; POST /y and the seed harness: recorded only), and one rule for each modelled prediction (all
    -- requests, GET /x/{i})
    assert.equal(7 + 2, status.charts["chart-vs-success-rate"].marks)
  end)

  it("refuses a report path it cannot write, before replaying, and leaves no file", function()
    local cases = {
      { tmp .. "/no-such-folder/page.html", "no-such-folder/page.html" },
      { tmp, "it is a directory" },
    }
    for _, c in ipairs(cases) do
      local out, err, code = h.run_cli("replay", ledger, "--lock", wide, "--report", c[1])
      assert.same({ 2, "" }, { code, out }, c[1])
      assert.matches("^retryfreeze replay: ", err)
      assert.matches(c[2], err, 1, true)
      local _, rerr, rcode = h.run_cli("report", ledger, "-o", c[1], "--lock", wide, "--replay")
      assert.equal(2, rcode)
      assert.equal(err:gsub("retryfreeze replay", "retryfreeze report"):gsub("%-%-report: ", ""), rerr)
    end
    assert.is_nil(io.open(tmp .. "/no-such-folder/page.html"))
    local listing = io.popen("ls -A " .. q(tmp) .. " | grep -c 'page.html' || true")
    assert.equal("0", listing:read("l"))
    listing:close()
    -- a corrupt line stops it before anything is written
    local corrupt = h.write_file(tmp .. "/corrupt.jsonl", ledger_text() .. "{not json}\n")
    local page = tmp .. "/corrupt.html"
    local out, err, code = h.run_cli("replay", corrupt, "--lock", wide, "--report", page)
    assert.same({ 2, "" }, { code, out })
    assert.matches("corrupt.jsonl:16: corrupt ledger line", err, 1, true)
    assert.is_nil(io.open(page))
    -- bad usage
    out, err, code = h.run_cli("replay", ledger, "--lock", wide, "--report", "")
    assert.same({ 2, "" }, { code, out })
    assert.matches("--report FILE names no file", err, 1, true)
    out, err, code = h.run_cli("report", ledger, "-o", page, "--replay")
    assert.same({ 2, "" }, { code, out })
    assert.matches("--replay needs --lock", err, 1, true)
    out, err, code = h.run_cli("report", ledger, "-o", page, "--lock", wide, "--seed", "3")
    assert.same({ 2, "" }, { code, out })
    assert.matches("--seed needs --replay", err, 1, true)
  end)

  it("groups by host with --by host: lines without a host are under (no host), as stats says it", function()
    local page = tmp .. "/hosts.html"
    local out, err, code = h.run_cli("replay", ledger, "--lock", narrow, "--by", "host", "--report", page)
    assert.equal(0, code, err)
    assert.matches("\nhost %(no host%)\n", out)
    assert.matches("\n  %(no host%) ", (h.run_cli("stats", ledger, "--by", "host")))
    local r = replay_json(narrow, 0, "--by", "host")
    local scopes = {}
    for _, c in ipairs(page_data(page).versus.figures) do
      scopes[c.scope] = true
      if c.scope == "(no host)" and (c.figure == "requests" or c.figure == "attempts") then
        assert.equal(r[c.side].by_host[""][c.figure], c.value, c.side .. " " .. c.figure)
      end
    end
    assert.same({ ["(all requests)"] = true, ["(no host)"] = true }, scopes)
    assert.matches("<th>host</th><th>figure</th>", read(page), 1, true)
  end)

  it("writes the page alone on standard output with --report -, the text on standard error", function()
    local text = h.run_cli("replay", ledger, "--lock", narrow, "--seed", "2")
    local out, err, code = h.run_cli("replay", ledger, "--lock", narrow, "--seed", "2", "--report", "-")
    assert.equal(0, code, err)
    assert.equal(text .. "report: -\n", err)
    assert.matches("^<!DOCTYPE html>", out)
    assert.matches('<section id="versus">', out, 1, true)
    assert.matches("</html>\n$", out)
  end)
end)
