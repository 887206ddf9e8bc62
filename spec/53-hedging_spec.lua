-- Hedging under the lock (gRPC A6 hedgingPolicy as the route field `hedging`) in the curl-multi client. Real parts:
-- the project's fault-injecting upstream on a free loopback port, started here and stopped in teardown. Its script
-- step `timeout` stalls the first attempt of a sequence (method + path + script, or the Idempotency-Key) for
-- --stall-ms 800 before any work, then answers 200; the next attempt of the sequence answers at once. So a hedge
-- started after hedgingDelayMs 100 wins, and the stalled attempt never executes.
local rf = require "retryfreeze"
local h = require "spec.helper"
local upstream = require "retryfreeze.upstream"

local STALL_MS, DELAY_MS = 800, 100

local function lock_text(routes, budget)
  return [[{"version": 1,
  "defaults": {"maxAttempts": 3, "perAttemptTimeoutMs": 2000, "totalBudgetMs": 5000,
               "retryable": ["HTTP_503", "TIMEOUT"],
               "backoff": {"baseMs": 10, "multiplier": 1, "maxMs": 10, "jitter": "none"}},
  "routes": [ ]] .. routes .. [[ ] ]] .. (budget and (', "retryBudget": ' .. budget) or "") .. "}"
end

local HEDGED = [[{"endpoint": "GET /h/*", "hedging": {"maxAttempts": 2, "hedgingDelayMs": 100}},
  {"endpoint": "GET /pb/*", "retryAfter": {"headers": ["grpc-retry-pushback-ms"]},
   "hedging": {"maxAttempts": 3, "hedgingDelayMs": 100, "nonFatalClasses": ["HTTP_503"]}},
  {"endpoint": "GET /dl/*", "perAttemptTimeoutMs": 300, "totalBudgetMs": 300, "minAttemptMs": 50,
   "hedging": {"maxAttempts": 3, "hedgingDelayMs": 100, "nonFatalClasses": ["TIMEOUT"]}},
  {"endpoint": "POST /h/*", "hedging": {"maxAttempts": 2, "hedgingDelayMs": 100}},
  {"endpoint": "GET /nf/*", "hedging": {"maxAttempts": 3, "hedgingDelayMs": 100, "nonFatalClasses": ["HTTP_503"]}},
  {"endpoint": "GET /ib/*", "propagation": {}, "hedging": {"maxAttempts": 3, "hedgingDelayMs": 100}}]]

describe("hedging in the client", function()
  local up, dir, policy, client, ledger_path
  local path_n = 0
  setup(function()
    up = assert(upstream.start({ bindir = h.bindir, stall_ms = STALL_MS }))
    dir = h.temp_dir("hedge")
    ledger_path = dir .. "/ledger.jsonl"
    policy = assert(rf.load_string(lock_text(HEDGED)))
    client = rf.client{ policy = policy, base_url = up.url, ledger = assert(rf.ledger.open(ledger_path)) }
  end)
  teardown(function()
    if client then client:close() end
    if up then up.stop() end
    if dir then os.execute("rm -rf '" .. dir .. "'") end
  end)

  local function stats() return assert(upstream.stats(up.url)) end
  --- The upstream's counts once no request is still arriving (the same count twice, 50 ms apart; at most 2 s):
  --- an attempt the client cancelled may reach the upstream after the client returned, and is counted in the
  --- window of the request that made it, never in the next one's.
  local function settled()
    local last = stats()
    for _ = 1, 40 do
      os.execute("sleep 0.05")
      local now = stats()
      if now.requests == last.requests then return now end
      last = now
    end
    return last
  end
  -- A fresh path per request: each is its own sequence at the upstream.
  local function fresh(prefix)
    path_n = path_n + 1
    return prefix .. path_n
  end
  local function send(c, req, script)
    req.headers = { ["X-Fault-Script"] = script or "timeout" }
    local before, t0 = settled(), rf.monotonic_ms()
    local r = c:request(req)
    local took = rf.monotonic_ms() - t0
    local after = settled()
    return r, took, after.requests - before.requests, after, before
  end

  it("a hedged GET answers after the hedging delay, not the stall: 2 upstream requests, the hedge wins", function()
    local r, took, sent = send(client, { method = "GET", path = fresh("/h/get") })
    print(string.format("\nhedged GET, first response stalls %d ms, hedgingDelayMs %d: %d ms, %d upstream requests",
      STALL_MS, DELAY_MS, took, sent))
    assert.equal(200, r.status)
    assert.equal("success", r.reason)
    assert.equal(2, r.attempts)
    assert.equal(2, sent)
    assert.is_true(took >= DELAY_MS and took < STALL_MS / 2, tostring(took))
    -- In the order the attempts ended: the hedge (started at the delay) won, the first attempt was cancelled.
    assert.equal(2, #r.tries)
    local won, cancelled = r.tries[1], r.tries[2]
    assert.same({ true, "winner", 200 }, { won.hedge, won.fate, won.status })
    assert.is_true(won.start_ms >= DELAY_MS and won.start_ms < STALL_MS, tostring(won.start_ms))
    assert.same({ false, "cancelled", 0, "UNKNOWN", 0 },
      { cancelled.hedge, cancelled.fate, cancelled.status, cancelled.class, cancelled.start_ms })
    assert.equal("cancelled: another attempt's response ended the request", cancelled.error)
  end)

  it("a keyless POST on a hedged route is sent once and waits out the stall", function()
    local r, took, sent = send(client, { method = "POST", path = fresh("/h/post"), body = "x" })
    assert.equal(200, r.status)
    assert.equal(1, r.attempts)
    assert.equal(1, sent)
    assert.is_true(took >= STALL_MS, tostring(took))
    assert.is_nil(r.tries[1].fate)
    assert.is_nil(r.tries[1].start_ms)
  end)

  it("a keyed POST is hedged with its one key: an attempt stalled before any work never executes", function()
    local key = rf.new_key()
    local r, took, sent, after, before = send(client,
      { method = "POST", path = fresh("/h/post"), body = "x", idempotency_key = key })
    assert.equal(200, r.status)
    assert.equal(2, r.attempts)
    assert.equal(2, sent)
    assert.is_true(took < STALL_MS / 2, tostring(took))
    assert.equal(1, after.keys - before.keys) -- both attempts carried the same key
    assert.equal(1, after.executions - before.executions)
    assert.equal(0, after.duplicate_executions - before.duplicate_executions)
  end)

  -- A hedge does not make a keyed POST execute once: an attempt the upstream already started doing the work of
  -- goes on at the upstream when the client cancels it (the docs said "executes once"; 40 of 40 such losing hedges
  -- executed in one run). The key is what lets the upstream tell them apart: retryfreeze sends the same one on every
  -- attempt and hedge, and the upstream must deduplicate by it. Here the first attempt does its work at once, then
  -- takes 800 ms to answer (delay=); the hedge answers at once and wins.
  it("a keyed POST's losing hedge that the upstream started executes too, under the same key", function()
    local key = rf.new_key()
    local c = rf.client{ policy = policy, base_url = up.url } -- no ledger: the ledger case below counts its own
    finally(function() c:close() end)
    local r, _, sent, after, before = send(c,
      { method = "POST", path = fresh("/h/post"), body = "x", idempotency_key = key }, "200;delay=" .. STALL_MS)
    assert.same({ 200, 2, 2 }, { r.status, r.attempts, sent })
    assert.same({ "winner", "cancelled" }, { r.tries[1].fate, r.tries[2].fate })
    assert.equal(1, after.keys - before.keys) -- every attempt and hedge carried the one key
    assert.equal(2, after.executions - before.executions) -- both started: what really ran
    assert.equal(1, after.duplicate_executions - before.duplicate_executions) -- the upstream sees it by the key
  end)

  -- docs/lock.md#propagation: a caller's attempt number above 1 leaves this layer one attempt. A hedge is an
  -- attempt: a hedged route starts none for such a request (client:request and client:all alike).
  it("an inbound attempt above 1 stops hedging: one upstream request, no hedge", function()
    local inbound = { ["x-envoy-attempt-count"] = "2" }
    local c = rf.client{ policy = policy, base_url = up.url } -- no ledger: the ledger case below counts its own
    finally(function() c:close() end)
    local r, _, sent = send(c, { method = "GET", path = fresh("/ib/get"), inbound_headers = inbound })
    assert.same({ 200, "success", 1, 1, 1 }, { r.status, r.reason, r.attempts, sent, #r.tries })
    assert.same({ 2, nil }, { r.inbound_attempt, r.tries[1].fate })
    local before = stats().requests
    local rs = c:all({ { method = "GET", path = fresh("/ib/all"), inbound_headers = inbound,
                              headers = { ["X-Fault-Script"] = "timeout" } },
                            { method = "GET", path = fresh("/ib/all"), inbound_headers = inbound,
                              headers = { ["X-Fault-Script"] = "503,200" } } }, { concurrency = 2 })
    assert.same({ 200, 1, nil }, { rs[1].status, rs[1].attempts, rs[1].tries[1].fate })
    assert.same({ 503, "inbound-retry", 1 }, { rs[2].status, rs[2].reason, rs[2].attempts })
    assert.equal(2, stats().requests - before)
    -- The caller's first attempt (1) narrows nothing: the route hedges as before.
    r, _, sent = send(c, { method = "GET", path = fresh("/ib/get"),
      inbound_headers = { ["x-envoy-attempt-count"] = "1" } })
    assert.same({ 200, 2, 2 }, { r.status, r.attempts, sent })
  end)

  it("a fatal class ends the request at once, cancelling the attempt in flight", function()
    local r, took, sent = send(client, { method = "GET", path = fresh("/h/fatal") }, "timeout,500")
    assert.equal("hedge-fatal", r.reason)
    assert.equal("terminal", r.outcome)
    assert.equal(500, r.status)
    assert.equal(2, sent)
    assert.is_true(took < STALL_MS / 2, tostring(took))
    assert.same({ "failed", "cancelled" }, { r.tries[1].fate, r.tries[2].fate })
  end)

  it("a non-fatal class lets the others go on: the next hedge wins", function()
    local r, took = send(client, { method = "GET", path = fresh("/nf/") }, "timeout,503")
    assert.equal(200, r.status)
    assert.equal("success", r.reason)
    assert.equal(3, r.attempts)
    assert.is_true(took < STALL_MS, tostring(took))
    local fates = {}
    for _, t in ipairs(r.tries) do fates[#fates + 1] = t.fate end
    assert.same({ "failed", "winner", "cancelled" }, fates)
    -- The hedge failed (503, non-fatal); the retry it allowed 10 ms later won (or, on a machine slow enough that
    -- the 503 came after the next hedge was due, that hedge did); the stalled first attempt was cancelled.
    assert.same({ true, false }, { r.tries[1].hedge, r.tries[3].hedge })
    assert.is_true(r.tries[2].start_ms >= r.tries[1].start_ms + r.tries[1].elapsed_ms)
  end)

  it("a Retry-After on a hedge holds back the next hedge and the retry", function()
    -- Without the wait the request above took a third attempt 10 ms after the 503; asked to wait 1 s, it makes
    -- none, and the stalled first attempt's answer at 800 ms wins.
    local r, took, sent = send(client, { method = "GET", path = fresh("/nf/") }, "timeout,503;retry-after=1")
    assert.equal(200, r.status)
    assert.equal(2, r.attempts)
    assert.equal(2, sent)
    assert.is_true(took >= STALL_MS and took < 1000 + DELAY_MS, tostring(took))
    assert.same({ "failed", "winner" }, { r.tries[1].fate, r.tries[2].fate })
    assert.same({ true, false, 0 }, { r.tries[1].hedge, r.tries[2].hedge, r.tries[2].start_ms })
  end)

  it("a server's pushback on a hedge stops the hedging; the attempt in flight goes on and wins", function()
    local r, took, sent = send(client, { method = "GET", path = fresh("/pb/") },
      "timeout,503;header=grpc-retry-pushback-ms:-1")
    assert.equal(200, r.status)
    assert.equal(2, r.attempts)
    assert.equal(2, sent)
    assert.is_true(took >= STALL_MS, tostring(took))
    assert.same({ "server-pushback", "failed" }, { r.tries[1].reason, r.tries[1].fate })
  end)

  it("the deadline holds for hedges: every attempt's per-try timeout ends by totalBudgetMs", function()
    local r, took = send(client, { method = "GET", path = fresh("/dl/") }, "timeout,timeout,timeout")
    assert.is_false(r.ok)
    assert.is_true(took >= 300 and took < 300 + 250, tostring(took))
    for _, t in ipairs(r.tries) do
      assert.is_true(t.start_ms + t.elapsed_ms <= 300 + 100, t.start_ms .. " + " .. t.elapsed_ms)
    end
  end)

  it("client:all hedges each request on the multi, side by side", function()
    local reqs = {}
    for i = 1, 4 do
      reqs[i] = { method = "GET", path = fresh("/h/all"), headers = { ["X-Fault-Script"] = "timeout" } }
    end
    local before, t0 = settled(), rf.monotonic_ms()
    local rs = client:all(reqs)
    local took = rf.monotonic_ms() - t0
    assert.equal(8, settled().requests - before.requests)
    assert.is_true(took < STALL_MS / 2, tostring(took))
    for _, r in ipairs(rs) do
      assert.equal(200, r.status)
      assert.equal(2, r.attempts)
    end
  end)

  it("the ledger records each hedge, and stats counts hedges and the requests a hedge won", function()
    local records = {}
    local it, state = rf.ledger.read(ledger_path)
    for rec in it, state do records[#records + 1] = rec end
    local first = records[1]
    assert.same({ "winner", true, "cancelled", false }, { first.tries[1].fate, first.tries[1].hedge,
      first.tries[2].fate, first.tries[2].hedge })
    assert.is_true(first.tries[1].start_ms >= DELAY_MS)
    assert.is_nil(records[2].tries[1].fate) -- the keyless POST never hedged: its line is any request's
    local s = assert(rf.ledger.stats(ledger_path))
    -- Counted from the records here, by the ledger's definitions, and by the tally: one hedge each for the GET,
    -- the keyed POST, the fatal request, the one told to wait, the one pushed back and the 4 of client:all, one or
    -- two for the one that ran into its deadline (its second hedge is due at 200 ms and starts only while 50 ms of
    -- its 300 ms are left: a loaded machine that wakes the client 50 ms late skips it, by the lock's rule), one or
    -- two for the non-fatal request.
    local hedged, hedges, wins = 0, 0, 0
    for _, rec in ipairs(records) do
      local n, won = 0, false
      for _, t in ipairs(rec.tries) do
        if t.hedge then
          n = n + 1
          won = won or t.fate == "winner"
        end
      end
      hedged, hedges, wins = hedged + (n > 0 and 1 or 0), hedges + n, wins + (won and 1 or 0)
    end
    assert.equal(12, s.requests)
    assert.same({ 11, hedges, wins }, { s.hedged, s.hedges, s.hedge_wins })
    assert.is_true(hedges >= 11 and hedges <= 13, tostring(hedges))
    assert.is_true(wins == 6 or wins == 7, tostring(wins))
    local out = h.run_cli("stats", ledger_path)
    assert.truthy(out:find(string.format("hedges %26d  (%.3f per request, in 11 requests)", hedges, hedges / 12), 1,
      true), out)
    assert.truthy(out:find(string.format("won by a hedge %18d  (%.2f%% of requests)", wins, 100 * wins / 12), 1,
      true), out)
    -- The report shows them beside its summary.
    local page = h.run_cli("report", ledger_path, "-o", "-")
    assert.truthy(page:find(string.format('<div class="note" id="hedging" data-hedges="%d" data-hedge-wins="%d">hedges: '
      .. '%d in 11 requests', hedges, wins, hedges), 1, true))
  end)
end)

describe("hedging and the retry budget", function()
  local up
  setup(function() up = assert(upstream.start({ bindir = h.bindir, stall_ms = STALL_MS })) end)
  teardown(function() if up then up.stop() end end)

  it("a hedge takes a retry-budget token: a budget that throttles stops the hedging", function()
    -- maxTokens 2: a token taken leaves 1 <= 2 / 2, so the first hedge is refused.
    local policy = assert(rf.load_string(lock_text(HEDGED, '{"maxTokens": 2, "tokenRatio": 1}')))
    local c = rf.client{ policy = policy, base_url = up.url, retry_budget = true }
    local before = assert(upstream.stats(up.url)).requests
    local r = c:request{ method = "GET", path = "/h/throttled", headers = { ["X-Fault-Script"] = "timeout" } }
    assert.equal(200, r.status)
    assert.equal(1, r.attempts)
    assert.equal(1, assert(upstream.stats(up.url)).requests - before)
    -- The refused hedge's token taken (2 - 1: throttled at <= 1), then the success's tokenRatio added back.
    assert.equal(2, c:retry_tokens())
    c:close()
  end)

  it("a ratio budget counts a hedge as a retry", function()
    local policy = assert(rf.load_string(lock_text(HEDGED, '{"retryRatio": 1, "ttlMs": 60000}')))
    local budget = rf.retry_budget(policy)
    local c = rf.client{ policy = policy, base_url = up.url, retry_budget = budget }
    local r = c:request{ method = "GET", path = "/h/ratio", headers = { ["X-Fault-Script"] = "timeout" } }
    assert.equal(2, r.attempts)
    local w = budget:window()
    assert.same({ 1, 1 }, { w.requests, w.retries })
    c:close()
    budget:close()
  end)
end)

describe("a ratio budget counts each request once, hedged or not", function()
  local up
  setup(function() up = assert(upstream.start({ bindir = h.bindir })) end)
  teardown(function() if up then up.stop() end end)

  -- Every attempt answers 503 after 120 ms: past the hedging delay (100 ms), so a hedged request asks for a hedge
  -- with its first attempt in flight, and each attempt's failure is decided after.
  local FAILING = "503;delay=120,503;delay=120,503;delay=120"
  local ROUTES = [[{"endpoint": "GET /plain/*"},
    {"endpoint": "GET /nf/*", "hedging": {"maxAttempts": 3, "hedgingDelayMs": 100, "nonFatalClasses": ["HTTP_503"]}}]]

  --- 20 failing requests on prefix through a fresh budget of retryRatio 0.5; the retries and hedges sent, and the
  --- window's counts.
  local function run(prefix)
    local policy = assert(rf.load_string(lock_text(ROUTES, '{"retryRatio": 0.5, "ttlMs": 60000}')))
    local budget = rf.retry_budget(policy)
    local c = rf.client{ policy = policy, base_url = up.url, retry_budget = budget }
    local before = assert(upstream.stats(up.url)).requests
    for i = 1, 20 do
      c:request{ method = "GET", path = prefix .. i, headers = { ["X-Fault-Script"] = FAILING } }
    end
    local extra = assert(upstream.stats(up.url)).requests - before - 20
    local w = budget:window()
    c:close()
    budget:close()
    return extra, w
  end

  it("20 failing requests at retryRatio 0.5: 10 retries and hedges in all on either route, 20 requests counted",
    function()
      local plain, wp = run("/plain/r")
      local hedged, wh = run("/nf/r")
      print(string.format("\nratio 0.5, 20 failing requests: plain %d retries, hedged %d retries + hedges; "
        .. "windows count %d and %d requests", plain, hedged, wp.requests, wh.requests))
      assert.same({ 10, 20, 10 }, { plain, wp.requests, wp.retries })
      assert.same({ 10, 20, 10 }, { hedged, wh.requests, wh.retries })
    end)
end)

describe("hedging where attempts cannot overlap", function()
  local policy = assert(rf.load_string(lock_text(HEDGED)))

  it("rf.flow refuses a request its route hedges, naming why", function()
    local ok, err = pcall(rf.flow, policy, { method = "GET", path = "/h/x" }, {
      send = function() return { status = 200, transport = "ok", headers = {} } end, sleep = function() end,
      now_ms = function() return 0 end })
    assert.is_false(ok)
    assert.matches('hedging route "GET /h/*" hedges its requests (hedging: several attempts in flight at once), '
      .. "which a step of one attempt at a time cannot do", tostring(err), 1, true)
    -- A keyless POST on the same route is not hedged, so rf.flow sends it.
    local r = rf.flow(policy, { method = "POST", path = "/h/x" }, {
      send = function() return { status = 200, transport = "ok", headers = {} } end, sleep = function() end,
      now_ms = function() return 0 end })
    assert.equal("success", r.reason)
  end)

  it("rf.flow sends a request of a hedged route whose inbound attempt leaves one attempt, once", function()
    local sent = 0
    local io = { send = function() sent = sent + 1; return { status = 503, transport = "ok", headers = {} } end,
      sleep = function() end, now_ms = function() return 0 end }
    local r = rf.flow(policy, { method = "GET", path = "/ib/x", inbound_headers = { ["X-Envoy-Attempt-Count"] = "3" } },
      io)
    assert.same({ "inbound-retry", 1, 1, 3 }, { r.reason, r.attempts, sent, r.inbound_attempt })
    local ok, err = pcall(rf.flow, policy, { method = "GET", path = "/ib/x",
      inbound_headers = { ["X-Envoy-Attempt-Count"] = "1" } }, io)
    assert.is_false(ok)
    assert.matches('route "GET /ib/*" hedges its requests', tostring(err), 1, true)
  end)

  it("a client that follows redirects refuses a hedged request", function()
    local c = rf.client{ policy = policy, base_url = "http://127.0.0.1:1", follow_redirects = true }
    assert.has_error(function() c:request{ method = "GET", path = "/h/x" } end, 'client:request: follow_redirects route '
      .. '"GET /h/*" hedges its requests (hedging), whose attempts overlap and do not follow redirects: send it with '
      .. "a client without follow_redirects")
    c:close()
  end)
end)

describe("retryfreeze soak --compare-hedging", function()
  it("under a slow tail, hedging cuts p99: both runs' figures and the extra attempts, in one run", function()
    local dir = h.temp_dir("hedge-soak")
    local lock = h.write_file(dir .. "/lock.json", [[{"version": 1,
      "defaults": {"maxAttempts": 3, "perAttemptTimeoutMs": 2000, "totalBudgetMs": 5000, "retryable": ["HTTP_503"],
                   "backoff": {"baseMs": 10, "multiplier": 2, "maxMs": 100, "jitter": "none"}},
      "routes": [{"endpoint": "GET /s/*", "hedging": {"maxAttempts": 3, "hedgingDelayMs": 50}}]}]])
    local out, err = h.run_cli("soak", lock, "--requests", "300", "--concurrency", "16", "--faults", "slow=0.05:800ms",
      "--compare-hedging", "--ledger", dir .. "/soak.jsonl")
    os.execute("rm -rf '" .. dir .. "'")
    print("\n" .. out)
    local with, without, attempts, plain = out:match("p99 (%d+) ms with hedging, (%d+) ms without; p50 %d+ ms, %d+ ms; "
      .. "attempts (%d+) with, (%d+) without")
    assert.truthy(with, out .. err)
    -- Without hedging a slow answer (5 %) is the p99: 800 ms. With it, a hedge after 50 ms answers at once unless
    -- it is slow too (0.25 %), so the p99 is about the hedging delay.
    assert.is_true(tonumber(without) >= 800, out)
    assert.is_true(tonumber(with) < 400, out)
    local hedges = tonumber(out:match("hedges=(%d+) in"))
    assert.equal(tonumber(plain) + hedges, tonumber(attempts)) -- the extra attempts are the hedges
    assert.is_true(hedges > 0)
  end)

  -- One hedged route's p99 fell from 800 to 132 ms while the whole run read "802 vs 803 ms": the unhedged route's
  -- slow answers were the whole run's p99 either way. soak reports each route as well.
  it("compares each route too, where a hedged route's p99 falls though the whole run's does not", function()
    local dir = h.temp_dir("hedge-soak-routes")
    local lock = h.write_file(dir .. "/lock.json", [[{"version": 1,
      "defaults": {"maxAttempts": 3, "perAttemptTimeoutMs": 2000, "totalBudgetMs": 5000, "retryable": ["HTTP_503"],
                   "backoff": {"baseMs": 10, "multiplier": 2, "maxMs": 100, "jitter": "none"}},
      "routes": [{"endpoint": "GET /s/*", "hedging": {"maxAttempts": 3, "hedgingDelayMs": 50}},
                 {"endpoint": "GET /p/*"}]}]])
    local out, err = h.run_cli("soak", lock, "--requests", "400", "--concurrency", "16", "--faults", "slow=0.05:800ms",
      "--compare-hedging", "--ledger", dir .. "/soak.jsonl")
    os.execute("rm -rf '" .. dir .. "'")
    local figures = "p99 (%d+) ms with hedging, (%d+) ms without; p50 %d+ ms, %d+ ms; attempts (%d+) with, (%d+) without"
    local whole_with, whole_without = out:match("whole run: " .. figures)
    assert.truthy(whole_with, out .. err)
    assert.is_true(tonumber(whole_with) >= 800 and tonumber(whole_without) >= 800, out) -- the plain route's tail
    local s_with, s_without, s_att, s_plain = out:match("\n  GET /s/%*: " .. figures)
    assert.truthy(s_with, out)
    assert.is_true(tonumber(s_without) >= 800, out)
    assert.is_true(tonumber(s_with) < 400, out)
    assert.is_true(tonumber(s_att) > tonumber(s_plain), out) -- the hedges
    local p_with, p_without, p_att, p_plain = out:match("\n  GET /p/%*: " .. figures)
    assert.truthy(p_with, out)
    assert.is_true(tonumber(p_with) >= 800 and tonumber(p_without) >= 800, out)
    assert.equal(p_plain, p_att) -- an unhedged route: the same attempts either way
  end)

  it("refuses a lock that hedges no route", function()
    local lock = h.temp_file('{"endpoint":"GET /a","maxAttempts":2,"perAttemptTimeoutMs":100,"totalBudgetMs":500,'
      .. '"retryable":["HTTP_503"]}')
    local ledger = os.tmpname()
    local _, err, code = h.run_cli("soak", lock, "--requests", "1", "--compare-hedging", "--ledger", ledger)
    os.remove(lock)
    os.remove(ledger)
    assert.equal(2, code)
    assert.matches("--compare-hedging: the lock hedges no route", err, 1, true)
  end)
end)
