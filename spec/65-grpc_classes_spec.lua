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

describe("a ledger try's grpc_status", function()
  local HEAD = '{"ts":"2026-12-07T05:21:57.597Z","route":"POST /p.S/*","method":"POST","path":"/p.S/M","key":null,'
    .. '"policy":"sha256:' .. ("0"):rep(64) .. '","attempts":1,"elapsed_ms":12,"outcome":"terminal",'
    .. '"reason":"status-not-retryable","ok":false,"status":200,"body_len":0,"tries":['

  local function read_tries(line)
    local path = h.temp_file(line .. "\n")
    local recs, errs = {}, nil
    local ok, err = pcall(function()
      local it, st = rf.ledger.read(path)
      for rec in it, st do recs[#recs + 1] = rec end
    end)
    if not ok then errs = tostring(err) end
    os.remove(path)
    return recs[1] and recs[1].tries, errs
  end

  it("reads back as the writer writes it (the fast path) and with its keys in another order", function()
    local tries = assert(read_tries(HEAD .. '{"class":"GRPC_UNAVAILABLE","status":200,"elapsed_ms":6,"delay_ms":0,'
      .. '"reason":"status-not-retryable","retry_after":null,"timeout_ms":5000,"grpc_status":14}]}'))
    assert.equal(14, tries[1].grpc_status)
    tries = assert(read_tries(HEAD .. '{"grpc_status":3,"class":"GRPC_INVALID_ARGUMENT","status":200,"elapsed_ms":6,'
      .. '"delay_ms":0,"reason":"status-not-retryable","retry_after":null}]}'))
    assert.equal(3, tries[1].grpc_status)
  end)

  it("refuses a grpc_status outside 1..16, naming the field", function()
    for _, bad in ipairs({ "17", "0", "-1", '"14"', "1.5" }) do
      local tries, err = read_tries(HEAD .. '{"class":"GRPC_UNAVAILABLE","status":200,"elapsed_ms":6,"delay_ms":0,'
        .. '"reason":"status-not-retryable","retry_after":null,"grpc_status":' .. bad .. '}]}')
      assert.is_nil(tries, bad)
      assert.matches("grpc_status", err, 1, true)
    end
  end)
end)

describe("the replay of a gRPC try", function()
  local function line(try_extra)
    return '{"ts":"2026-12-07T05:21:57.597Z","route":"POST /p.S/*","method":"POST","path":"/p.S/M","key":null,'
      .. '"policy":"sha256:' .. ("0"):rep(64) .. '","attempts":1,"elapsed_ms":12,"outcome":"terminal",'
      .. '"reason":"status-not-retryable","ok":false,"status":200,"body_len":0,"tries":[{"class":"GRPC_INTERNAL",'
      .. '"status":200,"elapsed_ms":6,"delay_ms":0,"reason":"status-not-retryable","retry_after":null'
      .. try_extra .. '}]}\n'
  end

  -- An HTTP 200 whose grpc-status was 13 stays a failure under the candidate: decided as GRPC_INTERNAL, never as a
  -- success, from the try's grpc_status or, on a line without it, from its class.
  for _, case in ipairs({ { "with grpc_status", ',"timeout_ms":5000,"grpc_status":13' }, { "from its class", "" } }) do
    it("decides it by its gRPC class (" .. case[1] .. ")", function()
      local path = h.temp_file(line(case[2]))
      local stops = assert(rf.load_string('{"endpoint": "POST /p.S/*", "maxAttempts": 3, "perAttemptTimeoutMs": '
        .. '1000, "totalBudgetMs": 5000, "idempotencyRequired": [], "retryable": ["GRPC_UNAVAILABLE"]}'))
      local r = assert(rf.replay({ path }, stops))
      assert.same({ terminal = 1 }, r.predicted.by_outcome)
      assert.same({ ["terminal status-not-retryable"] = 1 }, r.predicted.by_reason)
      local retries = assert(rf.load_string('{"endpoint": "POST /p.S/*", "maxAttempts": 3, "perAttemptTimeoutMs": '
        .. '1000, "totalBudgetMs": 5000, "idempotencyRequired": [], "retryable": ["GRPC_INTERNAL"], '
        .. '"backoff": {"baseMs": 10, "maxMs": 10, "multiplier": 1, "jitter": "none"}}'))
      r = assert(rf.replay({ path }, retries))
      -- the candidate retries it: a retry beyond the record, which needs recorded tries to draw from (a gap here)
      assert.is_nil(r.predicted.by_outcome.success)
      assert.equal("GRPC_INTERNAL", r.gaps[1] and r.gaps[1].class)
      os.remove(path)
    end)
  end
end)
