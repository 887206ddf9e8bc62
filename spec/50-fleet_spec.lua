-- A retry budget shared by a fleet (gRPC A6 retryThrottling kept in Redis) and ledgers from many hosts.
-- Real parts: redis-server on a free loopback port (no persistence) and the project's fault-injecting
-- upstream, both started here and stopped in teardown. Without redis-server the specs are pending.
local rf = require "retryfreeze"
local h = require "spec.helper"
local redis_server = require "spec.redis_server"
local servers = require "spec.support.servers"
local stall = require "spec.support.stall"
local storm_support = require "spec.support.storm"
local write, read = h.write_file, h.read_file

-- maxTokens 10, tokenRatio 0.1: a bucket allows exactly 4 retries while everything fails (tokens 9, 8, 7, 6
-- are > maxTokens/2; at 5 every further retry is throttled, and nothing succeeds to refill it).
local function lock_text(name)
  return ([[{"version": 1,
  "defaults": {"maxAttempts": 5, "perAttemptTimeoutMs": 1000, "totalBudgetMs": 3000,
               "retryable": ["HTTP_503"], "notRetryable": ["HTTP_4XX"],
               "backoff": {"baseMs": 1, "multiplier": 1, "maxMs": 1, "jitter": "none"}},
  "routes": [{"endpoint": "GET /storm"}, {"endpoint": "GET /ok"}],
  "retryBudget": {"maxTokens": 10, "tokenRatio": 0.1, "shared": {"name": "@NAME@"}}}]]):gsub("@NAME@", name)
end

local function now_ms()
  local p = io.popen("date +%s%3N")
  local v = tonumber(p:read("*l"))
  p:close()
  return v
end

describe("retryBudget.shared in the lock", function()
  it("is part of the effective policy and its digest", function()
    local a = assert(rf.load_string(lock_text("jobs-api")))
    local b = assert(rf.load_string(lock_text("jobs-api-2")))
    assert.not_equal(a.digest, b.digest)
    assert.truthy(a:canonical_json():find('"shared":{"name":"jobs-api"}', 1, true))
    assert.same({ max_tokens = 10, token_ratio = 0.1, shared = "jobs-api" }, a.retry_budget)
    assert.is_nil(assert(rf.load(h.desk_lock)).retry_budget)
  end)

  it("refuses a bad name, an unknown key and a missing name, naming the JSON path", function()
    local _, err = rf.load_string(lock_text("bad name"))
    assert.matches("$.retryBudget.shared.name: must be 1..64 characters", err, 1, true)
    _, err = rf.load_string((lock_text("x"):gsub('"name": "x"', '"nmae": "x"')))
    assert.matches("$.retryBudget.shared.nmae", err, 1, true)
    _, err = rf.load_string((lock_text("x"):gsub('"name": "x"', '')))
    assert.matches("$.retryBudget.shared.name: is required", err, 1, true)
    _, err = rf.load_string((lock_text("x"):gsub('"name": "x"', '"name": "' .. ("n"):rep(65) .. '"')))
    assert.matches("$.retryBudget.shared.name: must be 1..64", err, 1, true)
  end)

  it("rf.retry_budget with redis needs retryBudget.shared, and rf.client needs a retryBudget", function()
    local plain = assert(rf.load_string('{"endpoint":"GET /a","maxAttempts":2,"perAttemptTimeoutMs":100,'
      .. '"totalBudgetMs":500,"retryable":["HTTP_503"],"retryBudget":{"maxTokens":10,"tokenRatio":0.1}}'))
    assert.has_error(function() rf.retry_budget(plain, { redis = "redis://127.0.0.1:1/0" }) end,
      "rf.retry_budget: retryBudget.shared the lock has no retryBudget.shared {name}: a shared budget needs the "
        .. "bucket's name in the lock")
    local none = assert(rf.load_string('{"endpoint":"GET /a","maxAttempts":2,"perAttemptTimeoutMs":100,'
      .. '"totalBudgetMs":500,"retryable":["HTTP_503"]}'))
    assert.has_error(function() rf.client{ policy = none, base_url = "http://127.0.0.1:1", retry_budget = true } end,
      "rf.client: retry_budget = true, but the lock has no retryBudget {maxTokens, tokenRatio}")
    local shared = assert(rf.load_string(lock_text("x")))
    assert.has_error(function() rf.retry_budget(shared, { redis = "http://127.0.0.1:1" }) end,
      "rf.retry_budget: url must start with redis:// or rediss://")
    assert.has_error(function() rf.retry_budget(shared, { redis = "redis://h:1/0", timeout_ms = 0 }) end,
      "rf.retry_budget: timeout_ms must be an integer number of milliseconds in 1..10000")
    assert.has_error(function() rf.retry_budget(shared, { redis = "redis://h:1/0", tiemout_ms = 5 }) end,
      "rf.retry_budget: unknown option 'tiemout_ms' (did you mean 'timeout_ms'?)")
  end)

  it("a budget in use by an open client cannot be closed; after the client closes it can", function()
    local policy = assert(rf.load_string(lock_text("x")))
    local budget = rf.retry_budget(policy)
    local c = rf.client{ policy = policy, base_url = "http://127.0.0.1:1", retry_budget = budget }
    assert.has_error(function() budget:close() end, "cannot close a retry budget that 1 open clients or running flows use")
    c:close()
    budget:close()
    assert.has_error(function() budget:tokens() end, "attempt to use a closed retry budget")
  end)

  it("a budget a running rf.flow uses cannot be closed from its io; after the flow it can", function()
    local policy = assert(rf.load_string(lock_text("x")))
    local budget = rf.retry_budget(policy)
    local refusals = {}
    local r = rf.flow(policy, { method = "GET", path = "/storm" }, {
      send = function() return { status = 503, transport = "ok", headers = {} } end,
      sleep = function()
        local ok, err = pcall(budget.close, budget)
        refusals[#refusals + 1] = not ok and err or "closed"
      end,
      now_ms = function() return 0 end, retry_budget = budget,
    })
    -- Four retries (tokens 9, 8, 7, 6), then maxAttempts; every close attempt in between was refused.
    assert.same({ "exhausted", 5 }, { r.outcome, r.attempts })
    assert.equal(4, #refusals)
    for _, e in ipairs(refusals) do
      assert.matches("cannot close a retry budget that 1 open clients or running flows use", e, 1, true)
    end
    budget:close()
  end)
end)

storm_support.describe("a retry budget shared through Redis", "fleet", function(parts, it_redis)
  local srv, up, lock_file
  setup(function()
    srv, up = parts.srv, parts.up
    lock_file = parts.dir and parts.dir .. "/storm.lock.json"
  end)

  --- Runs `procs` storm workers at once (spec.support.storm); returns the upstream's request count, the requests
  --- whose budget was shared and local-fallback. Every worker prints its `done` line and nothing before it.
  local function storm(name, redis_url, procs, per_proc)
    write(lock_file, lock_text(name))
    local sent, shared, fallback, outs = storm_support.run(up.url, lock_file, redis_url, procs, per_proc)
    for _, out in ipairs(outs) do assert.matches("^done ", out) end
    return sent, shared, fallback
  end

  it_redis("8 processes draw on one bucket: the fleet retries what one bucket allows, 8x less than local budgets",
    function()
      local procs, per = 8, 20
      local sent_shared, shared, fallback = storm("storm-shared", srv.url, procs, per)
      local sent_local = storm("storm-local", "local", procs, per)
      local retries_shared, retries_local = sent_shared - procs * per, sent_local - procs * per
      print(string.format("\nstorm: 8 processes x 20 requests at 503=1: retries with one shared bucket %d, "
        .. "with 8 local buckets %d", retries_shared, retries_local))
      -- One bucket: exactly 4 retries (the script runs atomically in Redis, so concurrent processes cannot
      -- both take the last token); 8 local buckets: 4 each.
      assert.equal(4, retries_shared)
      assert.equal(8 * 4, retries_local)
      assert.equal(procs * per, shared)
      assert.equal(0, fallback)
      -- The bucket in Redis: 10 tokens − 160 failures, clamped at 0, with the idle expiry set.
      assert.equal("0", srv.cli("GET", "retryfreeze:budget:storm-shared"):match("%d+"))
      assert.truthy(tonumber(srv.cli("PTTL", "retryfreeze:budget:storm-shared")) > 3000000)
    end)

  it_redis("rf.flow draws on the same shared bucket through io.retry_budget", function()
    local policy = assert(rf.load_string(lock_text("flow")))
    local budget = rf.retry_budget(policy, { redis = srv.url, timeout_ms = 200 })
    local path = os.tmpname()
    local ledger = assert(rf.ledger.open(path, { host = "edge-1" }))
    local answers, clock = { 503, 200 }, 0
    local r = rf.flow(policy, { method = "GET", path = "/storm" }, {
      send = function() clock = clock + 5; return { status = table.remove(answers, 1), transport = "ok", headers = {} } end,
      sleep = function(ms) clock = clock + ms end,
      now_ms = function() return clock end,
      ledger = ledger, retry_budget = budget,
    })
    ledger:close()
    assert.same({ true, 2, "shared" }, { r.ok, r.attempts, r.budget })
    assert.truthy(read(path):find('"host":"edge-1","budget":"shared"}\n', 1, true))
    -- 10 − 1 (the 503) + 0.1 (the success) = 9.1 tokens, in thousandths, in Redis.
    assert.equal("9100", srv.cli("GET", "retryfreeze:budget:flow"):match("%d+"))
    budget:close() -- the finished flow no longer holds it
    assert.has_error(function() budget:tokens() end, "attempt to use a closed retry budget")
    os.remove(path)
  end)

  it_redis("`retryfreeze budget show` reads the shared bucket", function()
    srv.cli("SET", "retryfreeze:budget:shown", "7500", "PX", "60000")
    local out, err, code = h.run_cli("budget", "show", "shown", "--redis", srv.url)
    assert.equal(0, code, err)
    assert.matches("^shown tokens 7%.5 idle expiry in %d+ ms\n$", out)
    out, err, code = h.run_cli("budget", "show", "absent", "--redis", srv.url)
    assert.equal(0, code, err)
    assert.equal("absent: no bucket in Redis (new, or expired while idle: it starts full)\n", out)
    -- A port found closed now, not :1, which another process may hold.
    local dead = servers.closed_port()
    out, err, code = h.run_cli("budget", "show", "x", "--redis", "redis://127.0.0.1:" .. dead .. "/0")
    assert.equal(1, code)
    assert.equal("", out)
    assert.matches("cannot connect to redis 127.0.0.1:" .. dead, err, 1, true)
    out, err, code = h.run_cli("budget", "show", "bad name", "--redis", srv.url)
    assert.equal(2, code)
    assert.equal("", out)
    assert.matches("name must be 1..64 characters", err, 1, true)
  end)

  it_redis("a slow Redis: no decision waits more than timeout_ms, each says local-fallback", function()
    local policy = assert(rf.load_string(lock_text("slow")))
    local c = rf.client{ policy = policy, base_url = up.url, rng_seed = 1,
      retry_budget = { redis = srv.url, timeout_ms = 20 } }
    -- Connects and loads the script. At 20 ms a loaded machine can keep a first decision (connect, SCRIPT LOAD,
    -- EVALSHA) from ending in time, which falls back and drops the connection: the warm-up is a request that
    -- decided in the shared bucket, after the reconnection backoff (100 ms) when one did not.
    local warm
    for _ = 1, 20 do
      warm = c:request{ method = "GET", path = "/storm" }
      if warm.budget == "shared" then break end
      os.execute("sleep 0.15")
    end
    assert.equal("shared", warm.budget)
    -- DEBUG SLEEP blocks the whole server for 1.5 s, from another connection.
    os.execute("redis-cli -p " .. srv.port .. " debug sleep 1.5 >/dev/null 2>&1 &")
    os.execute("sleep 0.2")
    local t0 = now_ms()
    local r, stalled = stall.across(function() return c:request{ method = "GET", path = "/storm" } end)
    local took = now_ms() - t0
    assert.equal("local-fallback", r.budget)
    -- Bounds net of the stall the machine imposed on this thread (spec/support/stall.lua), never of the sleep.
    for _, t in ipairs(r.tries) do assert.is_true(t.elapsed_ms < 200 + stalled, t.elapsed_ms .. " ms") end
    -- 5 attempts at most, each decision bounded by 20 ms (+ scheduling slack); never the 1.5 s sleep.
    assert.is_true(took < 600 + stalled, "the request took " .. took .. " ms, " .. stalled .. " ms of it stalled")
    c:close()
    os.execute("sleep 1.5")
  end)

  it_redis("Redis killed mid-run: requests fall back at once; after a restart the shared bucket is used again",
    function()
      local policy = assert(rf.load_string(lock_text("restart")))
      local c = rf.client{ policy = policy, base_url = up.url, rng_seed = 1,
        retry_budget = { redis = srv.url, timeout_ms = 50 } }
      assert.equal("shared", c:request{ method = "GET", path = "/storm" }.budget)
      local port = srv.port
      srv.stop("KILL")
      for _ = 1, 5 do
        local r, stalled = stall.across(function() return c:request{ method = "GET", path = "/storm" } end)
        assert.equal("local-fallback", r.budget)
        assert.is_true(r.elapsed_ms <= 3000 + 50 + stalled, "elapsed " .. r.elapsed_ms)
      end
      srv = assert(redis_server.start({ port = port, debug = true }))
      parts.srv = srv -- the teardown stops the restarted server
      local budget
      local deadline = now_ms() + 20000 -- reconnection backs off 100 ms doubling to 5 s (a loaded machine: more)
      repeat
        budget = c:request{ method = "GET", path = "/storm" }.budget
        if budget ~= "shared" then os.execute("sleep 0.1") end
      until budget == "shared" or now_ms() > deadline
      assert.equal("shared", budget)
      c:close()
    end)
end)

-- A Redis that misbehaves on purpose (spec/core/fake_resp.c): hiredis' own timeout bounds each read, so a
-- server that drips a byte per 20 ms held a decision, and `budget show`, for as long as it dripped. One
-- deadline now bounds connect, every write and the whole reply.
describe("a Redis that drips, stalls, sends garbage or never answers", function()
  -- The command's wall time holds its own start (a few ms, more on a loaded machine or under ASan): it is
  -- judged against the fastest of three runs against a server that answers at once, with 100 ms to spare,
  -- net of the time the machine kept runnable tasks from a CPU meanwhile (stall.machine_ms: the command is a
  -- child process, whose own run-queue delay cannot be read from here).
  -- The bound on the decision itself, to the millisecond, is spec/core/test_retry_budget_store.c's.
  local TIMEOUT_MS, SLACK_MS = 200, 100

  --- Runs `budget show` against a fake Redis in mode; returns its exit code, stderr, wall time in ms and the
  --- machine's CPU stall (ms) meanwhile.
  local function show(mode, interval_ms)
    local srv = assert(redis_server.fake(mode, interval_ms))
    local t0, s0 = now_ms(), stall.machine_ms()
    local _, err, code = h.run_cli("budget", "show", "x", "--redis", srv.url, "--timeout-ms", tostring(TIMEOUT_MS))
    local took, stalled = now_ms() - t0, stall.machine_ms() - s0
    srv.stop()
    return code, err, took, stalled
  end

  it("`budget show --timeout-ms 200` ends within its timeout, exit 1 naming what Redis did", function()
    -- The same command against a fake that answers at once: what starting the CLI costs in this run.
    local code, err, base = show("ok")
    assert.equal(0, code, err)
    for _ = 1, 2 do
      local c2, e2, again = show("ok")
      assert.equal(0, c2, e2)
      base = math.min(base, again)
    end
    local cases = {
      -- A byte every 50 ms: GET's 10 bytes take 450 ms and PTTL's 8 another 350 (before, the command waited
      -- for all of it: every read got a byte within its 200 ms).
      { "drip", "redis GET: no whole reply within 200 ms", 50 },
      { "stall", "redis GET: no whole reply within 200 ms" },
      { "stall:PTTL", "redis PTTL: no whole reply within 200 ms" },
      { "silent", "redis GET: no whole reply within 200 ms" },
      { "garbage", "redis GET: Protocol error" },
      { "backlog", "cannot connect to redis 127.0.0.1:%d+: no connection within 200 ms" },
    }
    for _, c in ipairs(cases) do
      local took, stalled
      code, err, took, stalled = show(c[1], c[3])
      print(string.format("\nbudget show --timeout-ms %d against fake redis %-10s %d ms (%d ms over a prompt answer, "
        .. "machine stall %.0f ms)", TIMEOUT_MS, c[1], took, took - base, stalled))
      assert.equal(1, code, c[1] .. ": " .. err)
      assert.matches("^retryfreeze budget: " .. c[2], err)
      assert.is_true(took - base <= TIMEOUT_MS + SLACK_MS + stalled,
        string.format("%s took %d ms, the prompt run %d, the machine's stall %.0f", c[1], took, base, stalled))
    end
  end)

  it("rf.flow's decisions fall back to the local bucket when Redis drips the decision's reply", function()
    local srv = assert(redis_server.fake("drip:EVALSHA"))
    local policy = assert(rf.load_string(lock_text("drip")))
    local budget = rf.retry_budget(policy, { redis = srv.url, timeout_ms = 50 })
    local clock, sends = 0, 0
    local t0 = now_ms()
    local r, stalled = stall.across(function()
      return rf.flow(policy, { method = "GET", path = "/storm" }, {
        send = function() sends = sends + 1; return { status = 503, transport = "ok", headers = {} } end,
        sleep = function(ms) clock = clock + ms end,
        now_ms = function() return clock end,
        retry_budget = budget,
      })
    end)
    local took = now_ms() - t0
    srv.stop()
    budget:close()
    -- Five attempts, each decision local-fallback: the first waited its 50 ms, the others fell back at once
    -- during the reconnection backoff (100 ms, doubling); 7 bytes dripped at 20 ms would take 120 ms.
    assert.same({ "exhausted", 5, "local-fallback" }, { r.outcome, r.attempts, r.budget })
    assert.is_true(took < 50 * 5 + 100 + stalled, "the flow took " .. took .. " ms, " .. stalled .. " ms of it stalled")
  end)
end)

describe("ledgers from many hosts", function()
  it("each line carries the writing host (default: the hostname) and stats --by host groups by it", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    local p = io.popen("hostname")
    local hostname = p:read("l")
    p:close()
    local policy = assert(rf.load(h.desk_lock))
    local function write_ledger(path, host, n)
      local l = assert(rf.ledger.open(path, host and { host = host } or nil))
      local c = rf.client{ policy = policy, base_url = "http://127.0.0.1:1", ledger = l }
      for _ = 1, n do c:request{ method = "GET", path = "/unrouted" } end
      c:close()
      l:close()
    end
    write_ledger(dir .. "/a.jsonl", "web-1", 3)
    write_ledger(dir .. "/b.jsonl", "web-2", 2)
    write_ledger(dir .. "/c.jsonl", nil, 1)
    assert.truthy(read(dir .. "/a.jsonl"):find('],"host":"web-1"}\n', 1, true))
    local seen = {}
    for rec in rf.ledger.read(dir .. "/c.jsonl") do seen[#seen + 1] = rec.host end
    assert.same({ hostname }, seen)
    local s = assert(rf.ledger.stats({ dir .. "/a.jsonl", dir .. "/b.jsonl", dir .. "/c.jsonl" }, { by = "host" }))
    assert.equal(3, s.by_host["web-1"].requests)
    assert.equal(2, s.by_host["web-2"].requests)
    assert.equal(1, s.by_host[hostname].requests)
    assert.is_nil(s.by_route)
    local out, err, code = h.run_cli("stats", dir .. "/a.jsonl", dir .. "/b.jsonl", "--by", "host")
    assert.equal(0, code, err)
    assert.matches("\n  host +requests", out)
    assert.matches("\n  web%-1 +3 ", out)
    assert.matches("\n  web%-2 +2 ", out)
    local _, err2, code2 = h.run_cli("stats", dir .. "/a.jsonl", "--by", "hots")
    assert.equal(2, code2)
    assert.equal("retryfreeze stats: --by must be route or host, got 'hots'\n", err2:match("^[^\n]*\n")) -- then usage
    assert.has_error(function() rf.ledger.open(dir .. "/d.jsonl", { host = "has space" }) end,
      "rf.ledger.open: host must be at most 255 bytes of printable ASCII without spaces")
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("a line without host (an older ledger) still reads, and counts under no host", function()
    local path = h.temp_file('{"ts":"2026-11-29T17:20:01.123Z","route":"GET /a","method":"GET","path":"/a",'
      .. '"key":null,"policy":"sha256:00","attempts":1,"elapsed_ms":5,"outcome":"success","reason":"success",'
      .. '"ok":true,"status":200,"body_len":2,"tries":[{"class":"HTTP_200","status":200,"elapsed_ms":5,'
      .. '"delay_ms":0,"reason":"success","retry_after":null}]}\n')
    local s = assert(rf.ledger.stats(path, { by = "host" }))
    assert.equal(1, s.by_host[""].requests)
    os.remove(path)
  end)
end)

-- docs/fleet.md's recipe, run as written: examples/fleet/shipper.conf on two "hosts" (two rsyslogd, each
-- following its own ledger folder) and examples/fleet/collector.conf (one rsyslogd merging what they send),
-- then stats --by host and gate over the merged file. Paths and ports are substituted; nothing else.
describe("shipping ledgers with rsyslog (docs/fleet.md)", function()
  local have = os.execute("command -v rsyslogd >/dev/null 2>&1")
  local function it_rsyslog(name, fn)
    if have then it(name, fn) else pending(name .. " (no rsyslogd)") end
  end

  local function count_lines(path)
    local f = io.open(path, "rb")
    if not f then return 0 end
    local n = select(2, f:read("a"):gsub("\n", ""))
    f:close()
    return n
  end

  local function rsyslogd(conf_text, dir, name)
    local conf, pid, log = dir .. "/" .. name .. ".conf", dir .. "/" .. name .. ".pid", dir .. "/" .. name .. ".log"
    write(conf, conf_text)
    os.execute("rsyslogd -n -f '" .. conf .. "' -i '" .. pid .. "' >'" .. log .. "' 2>&1 &")
    return { pid = pid, log = log }
  end

  local function stop(d)
    os.execute("kill $(cat '" .. d.pid .. "' 2>/dev/null) 2>/dev/null")
  end

  it_rsyslog("two hosts' ledgers arrive merged, line for line, and gate by host", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'/host1 '" .. dir .. "'/host2 '" .. dir .. "'/central '"
      .. dir .. "'/ship1 '" .. dir .. "'/ship2"))
    local merged = dir .. "/merged.jsonl"
    local collector, port
    -- A port found closed now, and each try under its own name: a collector that could not listen is still
    -- exiting when the next starts, and would hold a shared pidfile (rsyslogd then refuses to start).
    for try = 1, 10 do
      port = servers.closed_port()
      local text = read("examples/fleet/collector.conf"):gsub("/var/spool/rsyslog%-ledgers", dir .. "/central")
        :gsub("/srv/ledgers/merged%.jsonl", merged):gsub("10514", tostring(port)):gsub("0%.0%.0%.0", "127.0.0.1")
      collector = rsyslogd(text, dir, "collector" .. try)
      os.execute("sleep 0.5")
      if not read(collector.log):find("Could not create tcp listener", 1, true) then break end
      stop(collector)
    end
    local shippers = {}
    for i = 1, 2 do
      local text = read("examples/fleet/shipper.conf"):gsub("/var/spool/rsyslog%-shipper", dir .. "/ship" .. i)
        :gsub("/var/log/retryfreeze/%*%.jsonl", dir .. "/host" .. i .. "/*.jsonl")
        :gsub("collector%.internal", "127.0.0.1"):gsub("10514", tostring(port))
      shippers[i] = rsyslogd(text, dir, "shipper" .. i)
    end
    -- Each host writes its ledger through the client (a refused port: every request ends in one attempt;
    -- one found closed now, not :1, which another process may hold).
    local policy = assert(rf.load(h.desk_lock))
    local dead = "http://127.0.0.1:" .. servers.closed_port()
    for i, n in ipairs({ 30, 20 }) do
      local l = assert(rf.ledger.open(dir .. "/host" .. i .. "/ledger.jsonl", { host = "web-" .. i }))
      local c = rf.client{ policy = policy, base_url = dead, ledger = l }
      for _ = 1, n do c:request{ method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key() } end
      c:close()
      l:close()
    end
    local deadline = now_ms() + 15000
    while count_lines(merged) < 50 and now_ms() < deadline do os.execute("sleep 0.2") end
    for _, d in ipairs(shippers) do stop(d) end
    stop(collector)
    assert.equal(50, count_lines(merged), read(collector.log) .. read(shippers[1].log))
    -- Line for line: the merged file holds exactly the lines the hosts wrote.
    local want = {}
    for i = 1, 2 do
      for line in read(dir .. "/host" .. i .. "/ledger.jsonl"):gmatch("[^\n]+") do want[#want + 1] = line end
    end
    local got = {}
    for line in read(merged):gmatch("[^\n]+") do got[#got + 1] = line end
    table.sort(want)
    table.sort(got)
    assert.same(want, got)
    local out, err, code = h.run_cli("stats", merged, "--by", "host")
    assert.equal(0, code, err)
    assert.matches("\n  web%-1 +30 ", out)
    assert.matches("\n  web%-2 +20 ", out)
    -- Every request failed (connect refused): the gate over the merged ledger must fail.
    local _, _, gate_code = h.run_cli("gate", merged, "--max-terminal-rate", "0.05")
    assert.equal(1, gate_code)
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

describe("diff of retryBudget.shared", function()
  local diff = require "retryfreeze.diff"
  local function kinds(a, b)
    local list = {}
    for _, c in ipairs(diff.compare(assert(rf.load_string(a)), assert(rf.load_string(b)))) do
      if c.field:match("^retryBudget") then list[#list + 1] = c.kind .. " " .. c.field end
    end
    return list
  end
  local own = lock_text("x"):gsub(',%s*"shared": {"name": "x"}', "")
  it("adding a shared bucket narrows; removing or renaming it widens", function()
    assert.same({ "narrowing retryBudget.shared.name" }, kinds(own, lock_text("jobs")))
    assert.same({ "widening retryBudget.shared.name" }, kinds(lock_text("jobs"), own))
    assert.same({ "widening retryBudget.shared.name" }, kinds(lock_text("jobs"), lock_text("jobs-2")))
    assert.same({}, kinds(lock_text("jobs"), lock_text("jobs")))
  end)
end)
