-- Every list of names a refusal prints equals what its reader accepts. Each test walks an X-macro list of
-- core/include/retryfreeze/vocabulary.h (parsed from the header, so a name added there is checked here without
-- editing this file). The engine's own lists (classes, jitters, wait headers) are walked in C:
-- spec/core/test_vocabulary_lists.c.
local h = require "spec.helper"
local rf = require "retryfreeze"

--- The strings of the X-macro `name` in vocabulary.h, in order.
local function x_macro(name)
  local strings = {}
  for _, e in ipairs(h.x_macro("core/include/retryfreeze/vocabulary.h", name)) do strings[#strings + 1] = e[2] end
  return strings
end

local split = h.split_list

local B = '{"endpoint": "GET /x", "maxAttempts": 2, "perAttemptTimeoutMs": 1000, "totalBudgetMs": 2000, '
  .. '"retryable": ["HTTP_503"]}'

describe("the lists refusals print", function()
  it("facts.transport: exactly RF_TRANSPORTS, each accepted", function()
    local transports = x_macro("RF_TRANSPORTS")
    assert.same(transports, rf.transports)
    local policy = assert(rf.load_string(B))
    local ok, err = pcall(policy.decide, policy, { method = "GET", path = "/x", attempts = 1, elapsed_ms = 0,
      transport = "nope" }, rf.rng(1))
    assert.is_false(ok)
    local list = assert(tostring(err):match("must be one of (.-); got 'nope'"), tostring(err))
    assert.same(transports, split(list))
    for _, t in ipairs(transports) do
      assert.is_table(policy:decide({ method = "GET", path = "/x", attempts = 1, elapsed_ms = 0, transport = t,
        status = t == "ok" and 503 or nil }, rf.rng(1)))
    end
  end)

  it("facts.hints: exactly RF_WAIT_HEADERS, each accepted", function()
    local headers = x_macro("RF_WAIT_HEADERS")
    local policy = assert(rf.load_string(B:gsub("}$", ', "retryAfter": {"headers": ["'
      .. table.concat(headers, '", "') .. '"]}}')))
    local ok, err = pcall(policy.decide, policy, { method = "GET", path = "/x", hints = { ["x-wait"] = "1" } })
    assert.is_false(ok)
    local list = assert(tostring(err):match("unknown hint 'x%-wait' %(hints are lowercase wait header names: (.-)%)"),
      tostring(err))
    assert.same(headers, split(list))
    for _, name in ipairs(headers) do
      assert.is_table(policy:decide({ method = "GET", path = "/x", status = 429, hints = { [name] = "1" } }))
    end
  end)

  it("model --class: the status grammar and exactly RF_NAMED_CLASSES, each accepted", function()
    local named = x_macro("RF_NAMED_CLASSES")
    local lock = h.temp_file(B)
    local _, err, code = h.run_cli("model", lock, "--class", "NOPE")
    assert.equal(2, code)
    local list = assert(err:match("%-%-class must be a failure class a verdict can have %((.-)%), got 'NOPE'"), err)
    local items = split(list)
    assert.equal("HTTP_<100..599>", table.remove(items, 1))
    assert.same(named, items)
    for _, c in ipairs(named) do
      local _, cerr, ccode = h.run_cli("model", lock, "--class", c)
      assert.equal(0, ccode, c .. ": " .. cerr)
    end
    os.remove(lock)
  end)
end)
