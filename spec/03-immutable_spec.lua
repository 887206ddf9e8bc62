local rf = require "retryfreeze"
local h = require "spec.helper"

describe("a policy is immutable from Lua", function()
  local policy = assert(rf.load(h.desk_lock))
  local facts = { method = "POST", path = "/v1/jobs", status = 500, idempotency_key = "k" }
  local before = policy:decide(facts)

  local function unchanged()
    assert.same(before, policy:decide(facts))
    assert.equal("status-not-retryable", policy:decide(facts).reason)
  end

  it("raises on assignment, with 'immutable' in the message", function()
    h.assert_immutable(policy, { "digest", "decide", "max_attempts", "anything" })
    unchanged()
  end)

  it("hides its metatable and refuses rawset and setmetatable", function()
    assert.equal("string", type(getmetatable(policy)))
    assert.has_error(function() rawset(policy, "decide", function() end) end)
    assert.has_error(function() setmetatable(policy, {}) end)
    unchanged()
  end)

  it("hands out copies: changing routes() changes nothing", function()
    local routes = policy:routes()
    routes[1].max_attempts = 99
    routes[1].retryable[1] = "HTTP_500"
    table.insert(routes[1].retryable, "HTTP_5XX")
    assert.equal(2, policy:routes()[1].max_attempts)
    unchanged()
  end)

  it("is not fooled by a table pretending to be a policy", function()
    local fake = { decide = function() return { retry = true } end }
    assert.has_error(function() policy.decide(fake, facts) end)
  end)

  it("ignores __index tricks on the facts table (raw iteration)", function()
    local sneaky = setmetatable({ method = "POST", path = "/v1/jobs", status = 500 },
      { __index = function(_, k) if k == "idempotency_key" then return "k" end return "body text" end })
    local v = policy:decide(sneaky)
    assert.equal("status-not-retryable", v.reason)
    local keyless = setmetatable({ method = "POST", path = "/v1/jobs", status = 504 },
      { __index = { idempotency_key = "k" } })
    assert.equal("mutating-without-idempotency", policy:decide(keyless).reason)
  end)

  it("debug.setmetatable changes which function a lookup finds, never what the real decide decides", function()
    -- A policy is known by a secret tag in its memory, not by its metatable: the real decide still decides
    -- the detached object as locked, and a metatable cannot make another userdata pass for a policy.
    local victim = assert(rf.load(h.desk_lock))
    local real_decide = victim.decide
    debug.setmetatable(victim, { __index = { decide = function() return { retry = true } end } })
    assert.same(before, real_decide(victim, facts))
    local impostor = io.tmpfile()
    debug.setmetatable(impostor, debug.getmetatable(policy))
    assert.error_matches(function() real_decide(impostor, facts) end, "retryfreeze.Policy expected, got a forged one")
    debug.setmetatable(impostor, debug.getmetatable(io.stdout))
    impostor:close()
    unchanged()
  end)
end)
