-- The client against the project's fault-injecting upstream on loopback: every fault kind, every outcome,
-- Retry-After in seconds and as an HTTP-date, the deadline, the ledger, the on_attempt hook.
local rf = require "retryfreeze"
local h = require "spec.helper"
local servers = require "spec.support.servers"
local upstream = require "retryfreeze.upstream"
local stall = require "spec.support.stall"

local desk = assert(rf.load(h.desk_lock))
local service = assert(rf.load("examples/service.lock.json"))

describe("rf.client against the fault-injecting upstream", function()
  local fx, up, ledger_path, client

  setup(function()
    fx = servers.client_on_upstream(desk)
    up, ledger_path, client = fx.up, fx.ledger_path, fx.client
  end)

  teardown(function() fx.stop() end)

  local function post(script, key)
    return client:request{ method = "POST", path = "/v1/jobs", body = "{}", idempotency_key = key or rf.new_key(),
      headers = script and { ["X-Fault-Script"] = script } or nil }
  end

  it("retries a keyed 504 once and succeeds", function()
    local r = post("504,200")
    assert.same({ true, 200, "success", "success", 2 }, { r.ok, r.status, r.outcome, r.reason, r.attempts })
    assert.equal("HTTP_504", r.tries[1].class)
    assert.equal("pinned-status", r.tries[1].reason)
    assert.equal(2000, r.tries[1].timeout_ms)
    assert.equal('{"ok":true,"n":2}', r.body)
    assert.equal("application/json", r.headers["content-type"])
    assert.equal("POST /v1/jobs", r.route)
  end)

  it("stops on max-attempts: exhausted", function()
    local r = post("504,504,200")
    assert.same({ false, 504, "exhausted", "max-attempts", 2 }, { r.ok, r.status, r.outcome, r.reason, r.attempts })
  end)

  it("never retries a handler 500: terminal", function()
    local r = post("500,200")
    assert.same({ false, 500, "terminal", "status-not-retryable", 1 }, { r.ok, r.status, r.outcome, r.reason, r.attempts })
  end)

  it("sends a POST without a key once: refused", function()
    local r = client:request{ method = "POST", path = "/v1/jobs", headers = { ["X-Fault-Script"] = "504,200" } }
    assert.same({ "refused", "mutating-without-idempotency", 1 }, { r.outcome, r.reason, r.attempts })
  end)

  it("refuses a request no route covers without sending it", function()
    local r = client:request{ method = "GET", path = "/v1/jobs" }
    assert.same({ "refused", "no-route", 0, 0 }, { r.outcome, r.reason, r.attempts, #r.tries })
  end)

  it("retries a connection reset and an empty reply", function()
    local r = post("reset,200")
    assert.same({ true, 2 }, { r.ok, r.attempts })
    assert.equal("CONNECT_RESET", r.tries[1].class)
    assert.equal("connect-reset", r.tries[1].transport)
    r = post("empty,200")
    assert.same({ true, 2 }, { r.ok, r.attempts })
    -- On a fresh connection curl reports got-nothing; on a reused keep-alive one the client blocks libcurl's
    -- own resend and reports connect-reset. Either way the class is CONNECT_RESET.
    assert.is_truthy(({ ["got-nothing"] = true, ["connect-reset"] = true })[r.tries[1].transport])
    assert.equal("CONNECT_RESET", r.tries[1].class)
  end)

  it("treats a 200 whose body the connection cut as a connection failure, and retries it", function()
    local r = post("cut,200")
    assert.same({ true, 200, 2 }, { r.ok, r.status, r.attempts })
    assert.same({ "CONNECT_RESET", "connect-reset", 200 }, { r.tries[1].class, r.tries[1].transport, r.tries[1].status })
    assert.matches("transfer closed with 900 bytes remaining", r.tries[1].error)
    assert.equal('{"ok":true,"n":2}', r.body) -- the cut attempt's partial body never reaches the response
  end)

  it("times out an attempt at the per-try timeout and the retry gets only what is left", function()
    local r, stalled = stall.across(function() return post("timeout,200") end)
    assert.is_true(r.ok)
    assert.equal("TIMEOUT", r.tries[1].class)
    assert.equal(2000, r.tries[1].timeout_ms)
    assert.is_true(r.tries[1].elapsed_ms >= 1990 and r.tries[1].elapsed_ms < 2300 + stalled)
    assert.is_true(r.tries[2].timeout_ms <= 500)
    assert.is_true(r.elapsed_ms <= 2500 + 50 + stalled)
  end)

  it("never outlives totalBudgetMs when the upstream stalls every attempt", function()
    local r, stalled = stall.across(function() return post("timeout,timeout,timeout") end)
    assert.is_false(r.ok)
    assert.is_true(r.elapsed_ms <= 2500 + 50 + stalled, "elapsed " .. r.elapsed_ms)
    assert.same({ "TIMEOUT", "TIMEOUT" }, { r.tries[1].class, r.tries[2].class })
  end)

  it("honors Retry-After in seconds", function()
    local r = post("429;retry-after=1,200")
    assert.is_true(r.ok)
    assert.equal("1", r.tries[1].retry_after)
    assert.equal(1000, r.tries[2].delay_ms)
    assert.is_true(r.elapsed_ms >= 1000)
  end)

  it("honors Retry-After as an HTTP-date (measured against the server's Date)", function()
    local r = post("429;retry-after-date=1,200")
    assert.is_true(r.ok)
    assert.matches("GMT$", r.tries[1].retry_after)
    assert.is_true(r.tries[2].delay_ms >= 0 and r.tries[2].delay_ms <= 1000)
  end)

  it("stops at once on a Retry-After longer than the budget", function()
    local r = post("429;retry-after=30,200")
    assert.same({ "deadline", "retry-after-exceeds-budget", 1 }, { r.outcome, r.reason, r.attempts })
    assert.is_true(r.elapsed_ms < 500)
  end)

  it("ignores an invalid Retry-After and backs off instead", function()
    local r = post("429;retry-after=soon,200")
    assert.is_true(r.ok)
    assert.is_true(r.tries[2].delay_ms <= 100)
  end)

  it("does not carry a Retry-After from attempt 1 into attempt 2", function()
    local r = post("429;retry-after=1,504,200")
    assert.equal("1", r.tries[1].retry_after)
    assert.is_nil(r.tries[2].retry_after)
  end)

  it("lets on_attempt narrow (stop a retry) but never widen (retry a stop)", function()
    local seen = {}
    local r = client:request{ method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key(),
      headers = { ["X-Fault-Script"] = "504,200" },
      on_attempt = function(_, verdict) seen[#seen + 1] = verdict.reason; return false end }
    assert.same({ "terminal", "stopped-by-caller", 1 }, { r.outcome, r.reason, r.attempts })
    assert.same({ "pinned-status" }, seen)
    r = client:request{ method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key(),
      headers = { ["X-Fault-Script"] = "500,200" }, on_attempt = function() return true end }
    assert.same({ "terminal", "status-not-retryable", 1 }, { r.outcome, r.reason, r.attempts })
  end)

  it("re-raises an error from on_attempt after cleaning up", function()
    assert.has_error(function()
      client:request{ method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key(),
        on_attempt = function() error("hook boom") end }
    end)
    assert.is_true(post().ok) -- the client still works
  end)

  it("runs requests concurrently with client:all and returns them in order", function()
    local t0 = rf.monotonic_ms()
    local rs = client:all{
      { method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key(), headers = { ["X-Fault-Script"] = "429;retry-after=1,200" } },
      { method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key(), headers = { ["X-Fault-Script"] = "429;retry-after=1,200" } },
      { method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key(), headers = { ["X-Fault-Script"] = "500" } },
    }
    assert.equal(3, #rs)
    assert.same({ true, true, false }, { rs[1].ok, rs[2].ok, rs[3].ok })
    assert.equal(500, rs[3].status)
    local took_ms = rf.monotonic_ms() - t0
    assert.is_true(took_ms < 2000, "the two 1 s waits overlapped: took " .. took_ms .. " ms")
  end)

  --- n keyed POSTs the upstream holds delay_ms each, through client:all with options; every one a 200 in one
  --- attempt. Returns the upstream's max_in_flight for them (attempts it was answering at once).
  local function all_in_flight(n, options, delay_ms)
    -- An upstream of its own: one shared with other tests may still be stalling an attempt they gave up on.
    local own = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local c = rf.client{ policy = desk, base_url = own.url }
    local reqs = {}
    for i = 1, n do
      reqs[i] = { method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key(),
        headers = { ["X-Fault-Script"] = "200;delay=" .. delay_ms } }
    end
    local rs = c:all(reqs, options)
    c:close()
    assert.equal(n, #rs)
    for i = 1, n do assert.same({ 200, 1 }, { rs[i].status, rs[i].attempts }) end
    local stats = assert(upstream.stats(own.url))
    own.stop()
    assert.equal(n, stats.requests)
    return stats.max_in_flight
  end

  it("client:all with concurrency 1 sends one request at a time", function()
    assert.equal(1, all_in_flight(5, { concurrency = 1 }, 100))
  end)

  it("client:all with concurrency 3 keeps 3 requests in flight, never more", function()
    assert.equal(3, all_in_flight(12, { concurrency = 3 }, 400))
  end)

  it("client:all refuses a bad concurrency, naming it, before sending anything", function()
    assert(upstream.reset(up.url))
    local one = { { method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key() } }
    for _, bad in ipairs({ 0, -1, 1025, 2.5, "2", true }) do
      assert.has_error(function() client:all(one, { concurrency = bad }) end,
        "client:all: options.concurrency must be an integer from 1 to 1024, got " .. (type(bad) == "number" and tostring(bad) or type(bad)))
    end
    assert.has_error(function() client:all(one, { concurency = 2 }) end,
      "client:all: options: unknown option 'concurency' (did you mean 'concurrency'?)")
    assert.has_error(function() client:all(one, 4) end, "client:all: options must be a table {concurrency = N}, got number")
    assert.equal(0, assert(upstream.stats(up.url)).requests)
    assert.equal(200, client:all(one, { concurrency = 1024 })[1].status)
  end)

  it("refuses retry_budget = true when the lock has no retryBudget, instead of ignoring it", function()
    assert.has_error(function() rf.client{ policy = desk, base_url = "http://127.0.0.1:1", retry_budget = true } end,
      "rf.client: retry_budget = true, but the lock has no retryBudget {maxTokens, tokenRatio}")
    local c = rf.client{ policy = desk, base_url = "http://127.0.0.1:1", retry_budget = false }
    c:close()
  end)

  it("names the option a mistyped one likely meant, and only a likely one", function()
    local cases = {
      { { polcy = desk, base_url = "http://127.0.0.1:1" }, "rf.client: unknown option 'polcy' (did you mean 'policy'?)" },
      { { policy = desk, base_url = "http://127.0.0.1:1", retry_budet = true },
        "rf.client: unknown option 'retry_budet' (did you mean 'retry_budget'?)" },
      { { policy = desk, base_url = "http://127.0.0.1:1", conect_timeout_ms = 5 },
        "rf.client: unknown option 'conect_timeout_ms' (did you mean 'connect_timeout_ms'?)" },
      { { policy = desk, base_url = "http://127.0.0.1:1", zzz = 1 }, "rf.client: unknown option 'zzz'" },
    }
    for _, case in ipairs(cases) do
      assert.has_error(function() rf.client(case[1]) end, case[2])
    end
    assert.has_error(function() client:request{ methd = "GET", path = "/v1/jobs" } end,
      "request: unknown option 'methd' (did you mean 'method'?)")
  end)

  it("raises on misuse: bad arguments, raw Idempotency-Key, a closed client", function()
    assert.has_error(function() client:request{ path = "/v1/jobs" } end)
    assert.has_error(function() client:request{ method = "POST", path = "/v1/jobs", bogus = 1 } end,
      "request: unknown option 'bogus'")
    assert.has_error(function()
      client:request{ method = "POST", path = "/v1/jobs", headers = { ["Idempotency-Key"] = "k" } }
    end)
    assert.has_error(function()
      client:request{ method = "POST", path = "/v1/jobs", headers = { ["X-A"] = "a\r\nX-B: b" } }
    end)
    local c2 = rf.client{ policy = desk, base_url = up.url }
    c2:close()
    c2:close()
    assert.has_error(function() c2:request{ method = "POST", path = "/v1/jobs" } end, "attempt to use a closed client")
  end)

  -- A caller's Content-Length: 0 before a body that is itself a request made the upstream execute two requests for
  -- one ledger try. Every name of RF_FRAMING_HEADERS, in any case and with spaces or tabs around it, is refused
  -- before anything is sent, by client:request, client:all and rf.client, naming the header and the argument.
  it("refuses a request header that frames the message before sending anything", function()
    local before = assert(upstream.stats(up.url)).requests
    local smuggled = "GET /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    local names = {}
    for _, e in ipairs(h.x_macro("core/include/retryfreeze/vocabulary.h", "RF_FRAMING_HEADERS")) do
      names[#names + 1] = e[2]
    end
    assert.equal(10, #names)
    for _, name in ipairs(names) do
      local title = name:gsub("^%l", string.upper):gsub("%-%l", string.upper)
      for _, spelled in ipairs({ name, name:upper(), title, " " .. title, title .. " ", title .. "\t" }) do
        local want = string.format('client:request: headers header "%s" is %s, which frames the message or steers '
          .. "its connection: the transport writes it itself, a request may not set it", spelled, name)
        assert.has_error(function()
          client:request{ method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key(), body = smuggled,
            headers = { [spelled] = "0" } }
        end, want)
        local ok, err = pcall(client.all, client, { { method = "POST", path = "/v1/jobs",
          idempotency_key = rf.new_key(), body = smuggled, headers = { [spelled] = "0" } } })
        assert.is_false(ok)
        assert.equal((want:gsub("^client:request: headers", "client:all: [1].headers")), err)
        ok, err = pcall(rf.client, { policy = desk, base_url = up.url, headers = { [spelled] = "0" } })
        assert.is_false(ok)
        assert.equal((want:gsub("^client:request", "rf.client")), err)
      end
    end
    assert.equal(before, assert(upstream.stats(up.url)).requests)
  end)

  it("makes UUID v4 idempotency keys", function()
    local a, b = rf.new_key(), rf.new_key()
    assert.matches("^%x%x%x%x%x%x%x%x%-%x%x%x%x%-4%x%x%x%-[89ab]%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$", a)
    assert.not_equal(a, b)
  end)

  it("writes one ledger line per logical request with the same key on every attempt, no header values", function()
    local key = rf.new_key()
    local before = 0
    local it, st = rf.ledger.read(ledger_path)
    for _ in it, st do before = before + 1 end
    local r = client:request{ method = "POST", path = "/v1/jobs", idempotency_key = key,
      headers = { ["X-Fault-Script"] = "429;retry-after=1,200", Authorization = "Bearer secret-token",
                  Cookie = "session=secret-cookie" } }
    assert.is_true(r.ok)
    local last, count = nil, 0
    it, st = rf.ledger.read(ledger_path)
    for rec in it, st do count = count + 1; last = rec end
    assert.equal(before + 1, count)
    assert.is_false(st.torn)
    assert.same({ key, "success", 2, "POST /v1/jobs", desk.digest }, { last.key, last.outcome, last.attempts, last.route, last.policy })
    assert.equal("1", last.tries[1].retry_after)
    -- each try's peer: the upstream's address, as libcurl connected to it
    local peer = up.url:match("^https?://([^/]+)")
    assert.same({ peer, peer }, { last.tries[1].peer, last.tries[2].peer })
    local f = assert(io.open(ledger_path))
    local text = f:read("a")
    f:close()
    assert.is_nil(text:find("secret", 1, true))
    assert.is_nil(text:find("Bearer", 1, true))
  end)
end)

describe("a hook that raises with requests in flight", function()
  --- Runs call(client) against a fresh upstream with a client of the desk lock (client options `opts`) writing a
  --- fresh ledger; call must raise an error holding `message`. Returns the ledger's records (in order, and by key)
  --- and the upstream's stats.
  local function ledger_after_raise(opts, message, call)
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local ledger_path = os.tmpname()
    local ledger = assert(rf.ledger.open(ledger_path))
    opts.policy, opts.base_url, opts.ledger, opts.rng_seed = desk, up.url, ledger, 1
    local c = rf.client(opts)
    local ok, err = pcall(call, c)
    c:close()
    ledger:close()
    local server = assert(upstream.stats(up.url))
    up.stop()
    assert.is_false(ok)
    assert.matches(message, tostring(err), 1, true)
    local recs, by_key = {}, {}
    local it, st = rf.ledger.read(ledger_path)
    for rec in it, st do
      recs[#recs + 1], by_key[rec.key] = rec, rec
    end
    os.remove(ledger_path)
    return recs, by_key, server
  end

  local function keyed_post(script)
    return { method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key(), headers = { ["X-Fault-Script"] = script } }
  end

  -- Four keyed POSTs through client:all with a client hook that raises on a 500: request 1 answers 500 after 200 ms
  -- (the hook raises), 2 and 3 are held 4 s by the upstream (in flight then), 4 answers 429 at once and waits its
  -- Retry-After of 2 s (between attempts then). Every one of them must have its ledger line, the ones the raise cut
  -- short stopped-by-caller, and the call must not wait for them.
  it("client:all ends every request in flight as stopped-by-caller, each with its ledger line, then re-raises", function()
    local reqs = {}
    for i, script in ipairs({ "500;delay=200", "200;delay=4000", "200;delay=4000", "429;retry-after=2,200" }) do
      reqs[i] = keyed_post(script)
    end
    local recs, by_key, server = ledger_after_raise(
      { on_attempt = function(try) if try.status == 500 then error("hook boom") end end }, "hook boom",
      function(c) c:all(reqs) end)
    assert.equal(4, #recs)
    local attempts = 0
    for _, rec in ipairs(recs) do attempts = attempts + rec.attempts end
    assert.equal(server.requests, attempts) -- every attempt the upstream saw is in the ledger
    local r1, r4 = assert(by_key[reqs[1].idempotency_key]), assert(by_key[reqs[4].idempotency_key])
    assert.same({ "terminal", "status-not-retryable", 500, 1 }, { r1.outcome, r1.reason, r1.status, r1.attempts })
    for i = 2, 3 do -- in flight: the attempt is cancelled, not awaited
      local r = assert(by_key[reqs[i].idempotency_key], "request " .. i .. " has no ledger line")
      assert.same({ "terminal", "stopped-by-caller", 0, 1, 1 }, { r.outcome, r.reason, r.status, r.attempts, #r.tries })
      assert.same({ "UNKNOWN", "stopped-by-caller" }, { r.tries[1].class, r.tries[1].reason })
      assert.is_true(r.elapsed_ms < 4000, "request " .. i .. " was awaited: " .. r.elapsed_ms .. " ms")
    end
    -- between attempts: its one attempt stands, the retry it waited for is never sent
    assert.same({ "terminal", "stopped-by-caller", 429, 1, 1 }, { r4.outcome, r4.reason, r4.status, r4.attempts, #r4.tries })
    assert.equal(4, server.requests)
  end)

  it("client:request whose hook raises on a retry verdict stops there, with its ledger line, then re-raises", function()
    local req = keyed_post("504,200")
    req.on_attempt = function() error("hook boom") end
    local recs, _, server = ledger_after_raise({}, "hook boom", function(c) c:request(req) end)
    assert.equal(1, #recs)
    assert.same({ req.idempotency_key, "terminal", "stopped-by-caller", 504, 1 },
      { recs[1].key, recs[1].outcome, recs[1].reason, recs[1].status, recs[1].attempts })
    assert.equal(1, server.requests) -- the retry the 504 allowed is never sent
  end)
end)

describe("the multi-route service lock over HTTP", function()
  it("uses each route's own limits and the client-wide retry budget", function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local c = rf.client{ policy = service, base_url = up.url, retry_budget = true, rng_seed = 3 }
    local r = c:request{ method = "GET", path = "/v1/jobs/42", headers = { ["X-Fault-Script"] = "503,503,503,200" } }
    assert.same({ true, 4, "GET /v1/jobs/{id}" }, { r.ok, r.attempts, r.route })
    r = c:request{ method = "GET", path = "/v1/queues", headers = { ["X-Fault-Script"] = "503,503,200" } }
    assert.same({ false, 2, "exhausted", "GET /v1/*" }, { r.ok, r.attempts, r.outcome, r.route })
    assert.is_true(c:retry_tokens() < 100)
    c:close()
    up.stop()
  end)
end)

describe("the ledger against what the upstream saw", function()
  it("counts every attempt the upstream received, with zero duplicate executions of keyed POSTs", function()
    local up = assert(upstream.start{ bindir = h.bindir, faults = "504=0.1,429=0.05,reset=0.08,empty=0.05,500=0.03",
      seed = 11, max_seconds = 120 })
    local path = os.tmpname()
    local ledger = assert(rf.ledger.open(path))
    local c = rf.client{ policy = desk, base_url = up.url, ledger = ledger, rng_seed = 5 }
    local batch = {}
    for i = 1, 60 do batch[i] = { method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key(), body = "{}" } end
    local sent = 0
    for _, r in ipairs(c:all(batch)) do sent = sent + r.attempts end
    for _ = 1, 20 do sent = sent + c:request{ method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key() }.attempts end
    c:close()
    ledger:close()
    local server = assert(upstream.stats(up.url))
    up.stop()
    local in_ledger, lines = 0, 0
    local it, st = rf.ledger.read(path)
    for rec in it, st do
      lines = lines + 1
      in_ledger = in_ledger + rec.attempts
    end
    os.remove(path)
    assert.equal(80, lines)
    assert.equal(sent, in_ledger)
    assert.equal(sent, server.requests)
    assert.equal(0, server.duplicate_executions)
  end)
end)
