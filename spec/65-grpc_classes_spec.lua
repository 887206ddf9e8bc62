-- The gRPC status codes as failure classes: a grpc-status 1..16 (a header or a trailer) is the class GRPC_<name>
-- whatever the HTTP status, 0 (OK) leaves the class to the status, anything else is refused; gRPC methods are
-- routed as POST /package.Service/Method.
local h = require "spec.helper"
local rf = require "retryfreeze"

local LOCK = [[{"version": 1, "routes": [
  {"endpoint": "POST /helloworld.Greeter/SayHello", "maxAttempts": 4, "perAttemptTimeoutMs": 1000,
   "totalBudgetMs": 5000, "idempotencyRequired": [], "retryable": ["GRPC_UNAVAILABLE", "GRPC_RESOURCE_EXHAUSTED"],
   "notRetryable": ["GRPC_INVALID_ARGUMENT"], "classLimits": {"GRPC_RESOURCE_EXHAUSTED": 2},
   "backoff": {"baseMs": 10, "maxMs": 100, "multiplier": 2, "jitter": "none"}},
  {"endpoint": "POST /helloworld.Greeter/*", "maxAttempts": 2, "perAttemptTimeoutMs": 1000,
   "totalBudgetMs": 5000, "idempotencyRequired": [], "retryable": ["GRPC_DEADLINE_EXCEEDED"],
   "backoff": {"baseMs": 10, "maxMs": 100, "multiplier": 2, "jitter": "none"}}]}]]

-- The 16 codes in order, as grpc/doc/statuscodes.md numbers them.
local CODES = { "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
  "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
  "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED" }

local function facts(path, grpc_status, extra)
  local f = { method = "POST", path = path, status = 200, grpc_status = grpc_status, attempts = 1, elapsed_ms = 0 }
  for k, v in pairs(extra or {}) do f[k] = v end
  return f
end

describe("gRPC status classes", function()
  local policy = assert(rf.load_string(LOCK))

  it("classify grpc-status N in 1..16 as GRPC_<name of N>, whatever the HTTP status", function()
    for n, name in ipairs(CODES) do
      assert.equal("GRPC_" .. name, policy:decide(facts("/helloworld.Greeter/SayHello", n)).class)
      assert.equal("GRPC_" .. name, policy:decide(facts("/helloworld.Greeter/SayHello", n, { status = 503 })).class)
    end
  end)

  it("take grpc-status 0 (OK) on an HTTP 200 as a success, and leave other statuses to HTTP", function()
    local v = policy:decide(facts("/helloworld.Greeter/SayHello", 0))
    assert.equal("success", v.reason)
    assert.equal("HTTP_200", v.class)
    assert.equal("HTTP_503", policy:decide(facts("/helloworld.Greeter/SayHello", 0, { status = 503 })).class)
  end)

  it("retry a retryable code, stop a non-retryable one, and apply a gRPC class limit", function()
    local v = policy:decide(facts("/helloworld.Greeter/SayHello", 14))
    assert.is_true(v.retry)
    assert.equal("pinned-status", v.reason)
    assert.equal(10, v.delay_ms)
    v = policy:decide(facts("/helloworld.Greeter/SayHello", 3))
    assert.is_false(v.retry)
    assert.equal("status-not-retryable", v.reason)
    v = policy:decide(facts("/helloworld.Greeter/SayHello", 8, { attempts = 2 }))
    assert.equal("class-limit", v.reason)
    v = policy:decide(facts("/helloworld.Greeter/SayHello", 14, { attempts = 2 }))
    assert.is_true(v.retry)
  end)

  it("refuse a grpc-status outside 0..16, naming the fact", function()
    for _, bad in ipairs({ 17, -1, 1.5, "14" }) do
      local ok, err = pcall(policy.decide, policy, facts("/helloworld.Greeter/SayHello", bad))
      assert.is_false(ok)
      assert.matches("facts.grpc_status must be", tostring(err), 1, true)
    end
  end)

  it("let a transport outcome win over a grpc-status", function()
    local v = policy:decide(facts("/helloworld.Greeter/SayHello", 14, { transport = "timeout", status = 0 }))
    assert.equal("TIMEOUT", v.class)
  end)

  it("route POST /package.Service/Method exactly and POST /package.Service/* by service", function()
    assert.equal("POST /helloworld.Greeter/SayHello", policy:decide(facts("/helloworld.Greeter/SayHello", 14)).route)
    local v = policy:decide(facts("/helloworld.Greeter/SayGoodbye", 4))
    assert.equal("POST /helloworld.Greeter/*", v.route)
    assert.is_true(v.retry)
    assert.is_nil(policy:decide(facts("/helloworld.Other/SayHello", 14)).route)
    assert.is_nil(policy:decide(facts("/helloworld.Greeter/SayHello", 14, { method = "GET" })).route)
  end)

  it("are every one a token a lock accepts, in retryable, notRetryable and classLimits", function()
    for _, name in ipairs(CODES) do
      local lock = '{"endpoint": "POST /p.S/M", "maxAttempts": 3, "perAttemptTimeoutMs": 1, "totalBudgetMs": 1, '
        .. '"retryable": ["GRPC_' .. name .. '"], "classLimits": {"GRPC_' .. name .. '": 2}}'
      assert.is_truthy(rf.load_string(lock), name)
    end
    local _, err = rf.load_string('{"endpoint": "POST /p.S/M", "maxAttempts": 1, "perAttemptTimeoutMs": 1, '
      .. '"totalBudgetMs": 1, "retryable": ["GRPC_UNAVAILABL"]}')
    assert.matches('did you mean "GRPC_UNAVAILABLE"?', err, 1, true)
  end)
end)

describe("retryfreeze decide --grpc-status", function()
  it("classifies the code and refuses one out of range, naming the option", function()
    local lock = h.temp_file(LOCK)
    local out, err, code = h.run_cli("decide", lock, "--method", "POST", "--path", "/helloworld.Greeter/SayHello",
      "--status", "200", "--grpc-status", "14", "--seed", "1")
    assert.equal(0, code, err)
    assert.matches('"retry":true,"reason":"pinned-status","class":"GRPC_UNAVAILABLE"', out, 1, true)
    out, err, code = h.run_cli("decide", lock, "--method", "POST", "--path", "/helloworld.Greeter/SayHello",
      "--status", "200", "--grpc-status", "0")
    assert.equal(0, code, err)
    assert.matches('"reason":"success","class":"HTTP_200"', out, 1, true)
    local _, err3, code3 = h.run_cli("decide", lock, "--method", "POST", "--path", "/helloworld.Greeter/SayHello",
      "--status", "200", "--grpc-status", "17")
    assert.equal(2, code3)
    assert.matches("--grpc-status must be in 0..16, got 17", err3, 1, true)
    os.remove(lock)
  end)
end)
