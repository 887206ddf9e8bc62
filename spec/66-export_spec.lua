-- `retryfreeze export LOCK --to grpc` without a gRPC runtime (the ctest grpc runs the configs under grpcio): the
-- service config it writes, the losses it names and refuses unless accepted, the notes on clamped values, and the
-- one table of what each target does with every lock field, against the schema and docs/cli.md.
local h = require "spec.helper"
local rf = require "retryfreeze"
local json = require "retryfreeze.json"
local export = require "retryfreeze.export"

local function lock_file(routes, top)
  return h.temp_file('{"version": 1, ' .. (top or "") .. '"routes": [' .. routes .. "]}")
end

-- A route that exports to grpc without a loss: UNAVAILABLE retryable with the transport failures gRPC reports as
-- it, and gRPC's own wait header.
local CLEAN = '{"endpoint": "POST /pkg.Svc/Get", "maxAttempts": 3, "perAttemptTimeoutMs": 2000, '
  .. '"totalBudgetMs": 2000, "minAttemptMs": 0, "idempotencyRequired": [], "retryable": ["GRPC_UNAVAILABLE", '
  .. '"CONNECT_REFUSED", "CONNECT_RESET", "DNS_FAILURE", "TLS_FAILURE"], '
  .. '"retryAfter": {"headers": ["grpc-retry-pushback-ms"]}, '
  .. '"backoff": {"baseMs": 25, "maxMs": 400, "multiplier": 1.5, "jitter": "full"}}'

describe("retryfreeze export --to grpc", function()
  it("writes a methodConfig per route and retryThrottling from a token bucket", function()
    local lock = lock_file(CLEAN .. ", " .. CLEAN:gsub("/Get", "/*"):gsub('"maxAttempts": 3', '"maxAttempts": 2'),
      '"retryBudget": {"maxTokens": 20, "tokenRatio": 0.25}, ')
    local out, err, code = h.run_cli("export", lock, "--to", "grpc")
    assert.equal(0, code, err)
    assert.equal("", err)
    local cfg = json.decode(out)
    assert.same({ maxTokens = 20, tokenRatio = 0.25 }, cfg.retryThrottling)
    assert.equal(2, #cfg.methodConfig)
    local by = {}
    for _, mc in ipairs(cfg.methodConfig) do by[mc.name[1].method or "*"] = mc end
    assert.same({ { service = "pkg.Svc", method = "Get" } }, by.Get.name)
    assert.same({ { service = "pkg.Svc" } }, by["*"].name)
    assert.equal("2.000s", by.Get.timeout)
    assert.same({ maxAttempts = 3, initialBackoff = "0.025s", maxBackoff = "0.400s", backoffMultiplier = 1.5,
      retryableStatusCodes = { "UNAVAILABLE" } }, by.Get.retryPolicy)
    assert.equal(2, by["*"].retryPolicy.maxAttempts)
    os.remove(lock)
  end)

  it("names every narrowing rule it cannot carry, exits 1 and writes nothing", function()
    local route = CLEAN:gsub('"perAttemptTimeoutMs": 2000', '"perAttemptTimeoutMs": 500')
      :gsub('"jitter": "full"', '"jitter": "equal"'):gsub('"retryable": %[', '"classLimits": {"GRPC_UNAVAILABLE": 2}, '
        .. '"retryable": ["HTTP_503", ')
    local lock = lock_file(route, '"retryBudget": {"retryRatio": 0.1, "minRetriesPerSecond": 1, "ttlMs": 10000}, ')
    local outfile = os.tmpname()
    os.remove(outfile)
    local out, err, code = h.run_cli("export", lock, "--to", "grpc", "-o", outfile)
    assert.equal(1, code)
    assert.equal("", out)
    assert.is_nil(io.open(outfile))
    for _, want in ipairs({
      "loss: route POST /pkg.Svc/Get: perAttemptTimeoutMs: a per-try timeout of 500 ms under a deadline of 2000 ms "
        .. "(--accept 'perAttemptTimeoutMs')",
      "loss: route POST /pkg.Svc/Get: backoff.jitter: jitter equal",
      "loss: route POST /pkg.Svc/Get: classLimits: class limits GRPC_UNAVAILABLE 2",
      "loss: route POST /pkg.Svc/Get: retryable: retryable classes gRPC does not see on a call: HTTP_503",
      "loss: retryBudget.retryRatio: a ratio retry budget (retryRatio 0.1)",
      "loss: retryBudget.minRetriesPerSecond: minRetriesPerSecond 1",
      "loss: retryBudget.ttlMs: ttlMs 10000",
      "7 rules of the lock cannot be carried to grpc; nothing written",
    }) do
      assert.is_truthy(err:find(want, 1, true), want .. "\nin:\n" .. err)
    end
    -- Accepted by name: written, the accepted losses said, no retryThrottling from a ratio budget.
    local args = { "export", lock, "--to", "grpc", "-o", outfile }
    for _, f in ipairs({ "perAttemptTimeoutMs", "backoff.jitter", "classLimits", "retryable", "retryBudget.retryRatio",
      "retryBudget.minRetriesPerSecond", "retryBudget.ttlMs" }) do
      args[#args + 1] = "--accept"
      args[#args + 1] = f
    end
    out, err, code = h.run_cli(table.unpack(args))
    assert.equal(0, code, err)
    assert.equal("", out)
    assert.is_truthy(err:find("accepted loss: route POST /pkg.Svc/Get: classLimits: class limits GRPC_UNAVAILABLE 2",
      1, true), err)
    local cfg = json.decode(assert(io.open(outfile)):read("a"))
    assert.is_nil(cfg.retryThrottling)
    assert.same({ "UNAVAILABLE" }, cfg.methodConfig[1].retryPolicy.retryableStatusCodes)
    os.remove(outfile)
    os.remove(lock)
  end)

  it("refuses a route that is no gRPC method by its endpoint, unless accepted", function()
    local lock = lock_file(CLEAN .. ', {"endpoint": "GET /v1/*", "maxAttempts": 1, "perAttemptTimeoutMs": 100, '
      .. '"totalBudgetMs": 100, "minAttemptMs": 0, "retryable": []}, ' .. CLEAN:gsub("/pkg.Svc/Get", "/v1/jobs"))
    local _, err, code = h.run_cli("export", lock, "--to", "grpc")
    assert.equal(1, code)
    assert.is_truthy(err:find("loss: route GET /v1/*: not a grpc method", 1, true), err)
    assert.is_truthy(err:find("loss: route POST /v1/jobs: not a grpc method", 1, true), err)
    local out
    out, err, code = h.run_cli("export", lock, "--to", "grpc", "--accept", "GET /v1/*", "--accept", "POST /v1/jobs")
    assert.equal(0, code, err)
    assert.equal(1, #json.decode(out).methodConfig)
    os.remove(lock)
  end)

  it("says in a note what gRPC clamps: maxAttempts over 5, maxAttempts 1, a hedge", function()
    local lock = lock_file(CLEAN:gsub('"maxAttempts": 3', '"maxAttempts": 7') .. ", "
      .. CLEAN:gsub("/Get", "/Put"):gsub('"maxAttempts": 3', '"maxAttempts": 1') .. ", "
      .. CLEAN:gsub("/Get", "/Hedge"):gsub('"retryable"', '"hedging": {"maxAttempts": 3, "hedgingDelayMs": 40, '
        .. '"nonFatalClasses": ["GRPC_UNAVAILABLE", "CONNECT_REFUSED", "CONNECT_RESET", "DNS_FAILURE", "TLS_FAILURE"]}, '
        .. '"retryable"'):gsub('"baseMs": 25, "maxMs": 400, "multiplier": 1.5', '"baseMs": 0, "maxMs": 0, "multiplier": 1'))
    local out, err, code = h.run_cli("export", lock, "--to", "grpc")
    assert.equal(0, code, err)
    assert.is_truthy(err:find("note: route POST /pkg.Svc/Get: gRPC caps retryPolicy.maxAttempts 7 at 5", 1, true), err)
    assert.is_truthy(err:find("note: route POST /pkg.Svc/Put: maxAttempts 1, so no retryPolicy", 1, true), err)
    assert.is_truthy(err:find("note: route POST /pkg.Svc/Hedge: a methodConfig has a retryPolicy or a hedgingPolicy, "
      .. "not both: the route's retries of UNAVAILABLE are not written", 1, true), err)
    local by = {}
    for _, mc in ipairs(json.decode(out).methodConfig) do by[mc.name[1].method] = mc end
    assert.equal(7, by.Get.retryPolicy.maxAttempts) -- written as the lock says; gRPC itself caps it
    assert.is_nil(by.Put.retryPolicy)
    assert.same({ maxAttempts = 3, hedgingDelay = "0.040s", nonFatalStatusCodes = { "UNAVAILABLE" } },
      by.Hedge.hedgingPolicy)
    assert.is_nil(by.Hedge.retryPolicy)
    os.remove(lock)
  end)

  it("refuses an --accept that names no field and no route, and an unknown target", function()
    local lock = lock_file(CLEAN)
    local _, err, code = h.run_cli("export", lock, "--to", "grpc", "--accept", "perTryTimeout")
    assert.equal(2, code)
    assert.is_truthy(err:find("--accept perTryTimeout is neither a lock field nor a route endpoint", 1, true), err)
    _, err, code = h.run_cli("export", lock, "--to", "envoy")
    assert.equal(2, code)
    assert.is_truthy(err:find("envoy", 1, true), err)
    os.remove(lock)
  end)
end)

describe("the export targets' field table", function()
  it("classifies every lock schema field for every target, and nothing else", function()
    local paths = {}
    for _, row in ipairs(rf.lock_schema()) do
      paths[row.path] = true
      for name in pairs(export.targets) do
        local f = export.FIELDS[row.path] and export.FIELDS[row.path][name]
        assert.is_table(f, row.path .. " has no " .. name .. " row")
        assert.is_truthy(({ carried = true, lost = true, irrelevant = true })[f[1]], row.path)
        if f[1] == "lost" then assert.is_function(f.lost, row.path .. ": a lost field says when it is lost") end
      end
    end
    for path in pairs(export.FIELDS) do assert.is_true(paths[path], path .. " is no lock field") end
  end)

  it("refuses what the channel would retry and the lock does not: a code's transport failures, a hedge's backoff, "
    .. "a wait header gRPC does not read", function()
    local route = CLEAN:gsub('"CONNECT_REFUSED", "CONNECT_RESET", "DNS_FAILURE", "TLS_FAILURE"', '"CONNECT_RESET"')
      :gsub('"retryAfter": {"headers": %["grpc%-retry%-pushback%-ms"%]}, ', "")
      :gsub('"retryable"', '"hedging": {"maxAttempts": 2, "hedgingDelayMs": 50, "nonFatalClasses": ["GRPC_UNAVAILABLE"]}, '
        .. '"retryable"')
    local out, err, code = h.run_cli("export", lock_file(route), "--to", "grpc")
    assert.equal(1, code)
    assert.equal("", out)
    for _, want in ipairs({
      "loss: route POST /pkg.Svc/Get: retryable: gRPC would also retry CONNECT_REFUSED (as UNAVAILABLE), DNS_FAILURE "
        .. "(as UNAVAILABLE), TLS_FAILURE (as UNAVAILABLE), which the lock does not list (--accept 'retryable')",
      "loss: route POST /pkg.Svc/Get: hedging.nonFatalClasses: gRPC would also retry CONNECT_REFUSED (as UNAVAILABLE), "
        .. "CONNECT_RESET (as UNAVAILABLE), DNS_FAILURE (as UNAVAILABLE), TLS_FAILURE (as UNAVAILABLE)",
      "loss: route POST /pkg.Svc/Get: backoff: a hedged route's backoff of 25 ms: gRPC sends the next hedge at once",
      "loss: route POST /pkg.Svc/Get: retryAfter.headers: a wait asked by retry-after is not waited",
      "4 rules of the lock cannot be carried to grpc; nothing written",
    }) do
      assert.is_truthy(err:find(want, 1, true), want .. "\nin: " .. err)
    end
  end)

  it("an import of its export is never wider than the lock: diff finds no widening", function()
    for _, lock in ipairs({ "examples/grpc.lock.json", lock_file(CLEAN .. ", " .. CLEAN:gsub("/Get", "/*")) }) do
      local config, lock_back = os.tmpname(), os.tmpname()
      local _, err, code = h.run_cli("export", lock, "--to", "grpc", "-o", config)
      assert.equal(0, code, err)
      _, err, code = h.run_cli("import", config, "--from", "grpc", "-o", lock_back)
      assert.equal(0, code, err)
      local out
      out, err, code = h.run_cli("diff", lock, lock_back)
      assert.equal(0, code, lock .. ":\n" .. out .. err)
      assert.is_nil(out:find("WIDENING", 1, true), out)
      os.remove(config)
      os.remove(lock_back)
    end
  end)

  it("is the table docs/cli.md shows for each target", function()
    local doc = assert(io.open("docs/cli.md")):read("a")
    for name in pairs(export.targets) do
      local section = assert(doc:match("\n### Losses, `%-%-to " .. name .. "`\n(.-)\n#"), "no losses table for " .. name)
      local documented, n = {}, 0
      for path, kind in section:gmatch("\n| `([^`]+)` | (%l+) |") do
        documented[path] = kind
        n = n + 1
      end
      local rows = 0
      for _, row in ipairs(rf.lock_schema()) do
        rows = rows + 1
        assert.equal(export.FIELDS[row.path][name][1], documented[row.path], row.path)
      end
      assert.equal(rows, n)
    end
  end)
end)
