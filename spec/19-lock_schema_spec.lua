-- One value means the same wherever it is written. The lock schema (rf.lock_schema(), the engine's table) names
-- every field once; each place that takes a field's value outside a lock takes exactly what a lock takes. The
-- cases are complete for a number field: its two bounds, one step (its smallest unit) outside each, a value finer
-- than its unit, and a value in the middle, which is where two range or precision rules can differ.
local rf = require "retryfreeze"
local cli_args = require "retryfreeze.cli.args"

local B = '{"endpoint": "GET /x", "maxAttempts": 2, "perAttemptTimeoutMs": 1000, "totalBudgetMs": 2000, '
  .. '"retryable": ["HTTP_503"]'

local function lock_takes(row, v)
  local members = string.format('"%s": %.17g', row.key, v)
  if row.parent then members = string.format('"%s": {%s}', row.parent, members) end
  return rf.load_string(B .. ", " .. members .. "}") ~= nil
end

local function kebab(key) return (key:gsub("%u", function(c) return "-" .. c:lower() end)) end

--- The values to try for a number row, in its own unit.
local function probes(row)
  local step = row.decimals == 3 and 0.001 or 1
  return { row.min, row.max, row.min - step, row.max + step, row.min + step / 2, (row.min + row.max) / 2 }
end

local function gate_thresholds()
  local rows = {}
  for _, row in ipairs(rf.lock_schema()) do
    if row.parent == "gate" and (row.type == "integer" or row.type == "decimal") then rows[#rows + 1] = row end
  end
  assert.is_true(#rows >= 6)
  return rows
end

describe("a gate threshold", function()
  for _, name in ipairs({ "gate", "soak" }) do
    local cmd = require("retryfreeze.cli." .. name)
    local args = name == "gate" and { "ledger.jsonl" } or { "x.lock.json" }

    it("is taken by `" .. name .. "` exactly when a lock takes it, at each bound and beside it", function()
      for _, row in ipairs(gate_thresholds()) do
        local option = "--" .. kebab(row.key)
        for _, v in ipairs(probes(row)) do
          local argv = table.move(args, 1, #args, 1, {})
          argv[#argv + 1] = option
          argv[#argv + 1] = string.format("%.17g", v)
          local opts, why = cli_args.parse(cmd, argv, {})
          assert.equal(lock_takes(row, v), opts ~= nil,
            string.format("%s %.17g: the lock %s it, %s %s", option, v, lock_takes(row, v) and "takes" or "refuses",
              name, opts and "takes it" or ("refuses it: " .. tostring(why))))
        end
      end
    end)
  end

  it("is an option of both commands, described and bounded as its row says", function()
    local gate_cmd = require "retryfreeze.cli.gate"
    for _, row in ipairs(gate_thresholds()) do
      local option = "--" .. kebab(row.key)
      local found
      for _, o in ipairs(gate_cmd.options) do if o[1] == option then found = o end end
      assert.is_table(found, option)
      assert.equal(row.about, found[3])
      assert.same({ row.min, row.max }, found.range)
      assert.truthy(require("retryfreeze.cli.args").help(gate_cmd):find(option, 1, true))
    end
  end)
end)

describe("retryfreeze diff", function()
  local diff = require "retryfreeze.diff"

  it("judges every field of a route by its row: a scalar by its direction, the rest by an effect that covers it", function()
    local covered = {}
    for _, e in ipairs(diff.effects) do
      for _, c in ipairs(e.covers) do covered[c:gsub("%.%*$", "")] = e.field end
    end
    for _, row in ipairs(rf.lock_schema()) do
      if row.place == "route" then
        -- an object is judged by its fields (an optional one, propagation, also by its presence: its row's
        -- widens); the endpoint by the requests it takes (request classes)
        if row.type == "object" and row.if_absent == "none" then
          assert.is_string(covered[row.path], row.path .. " (optional) is judged by no effect")
        elseif row.type == "object" or row.type == "endpoint" then
          assert.is_nil(covered[row.path], row.path)
        else
          assert.is_string(covered[row.path], row.path .. " (widens: " .. row.widens .. ") is judged by no effect")
        end
      end
    end
  end)

  it("pairs every row's type with a widening rule that compares it", function()
    for _, row in ipairs(rf.lock_schema()) do
      assert.is_true(diff.compares(row), string.format("%s: type %s under widens %s, which the diff cannot compare",
        row.path, row.type, row.widens))
    end
  end)

  it("a boolean row marked grows is not compared as a number: its change widens, unclassified", function()
    local real, saved = rf.lock_schema, package.loaded["retryfreeze.diff"]
    rf.lock_schema = function()
      local rows = real()
      for _, row in ipairs(rows) do
        if row.path == "retryAfter.honor" then row.widens = "grows" end
      end
      return rows
    end
    package.loaded["retryfreeze.diff"] = nil
    local ok, mis = pcall(require, "retryfreeze.diff")
    rf.lock_schema, package.loaded["retryfreeze.diff"] = real, saved
    assert(ok, mis)
    local function honor(v)
      return assert(rf.load_string(B .. ', "retryAfter": {"honor": ' .. tostring(v) .. "}}"))
    end
    local changes
    ok, changes = pcall(mis.compare, honor(true), honor(false))
    assert(ok, changes)
    assert.equal(1, #changes)
    assert.same({ "widening", "retryAfter.honor" }, { changes[1].kind, changes[1].field })
    assert.matches("not classified", changes[1].text)
  end)

  -- Values a lock takes for a row's type, as JSON texts: two or more, so that some pair differs.
  local function candidates(row)
    local t = row.type
    if t == "integer" or t == "decimal" then
      local step = row.decimals == 3 and 0.001 or 1
      local mid = row.decimals == 3 and (row.min + row.max) / 2 or math.floor((row.min + row.max) / 2)
      local c = {}
      for _, v in ipairs({ row.min, row.max, row.min + step, mid }) do c[#c + 1] = string.format("%.17g", v) end
      return c
    end
    return ({
      boolean = { "true", "false" },
      jitter = { '"none"', '"full"', '"equal"' },
      name = { '"a"', '"b"' },
      header = { '"x-a"', '"x-b"' },
      classes = { '["HTTP_429"]', '["HTTP_500", "HTTP_429"]', "[]" },
      methods = { "[]", '["POST"]' },
      ["wait-headers"] = { '["retry-after"]', '["retry-after-ms"]' },
      ["class-limits"] = { "{}", '{"HTTP_503": 1}', '{"HTTP_503": 2}' },
      reasons = { "[]", '["deadline"]' },
    })[t] or {}
  end

  local members
  -- A retryBudget member's other members of its form (docs/lock.md: a token bucket, or a ratio), which the loader
  -- requires with it.
  local WITH = { ["retryBudget.maxTokens"] = '"tokenRatio": 0.5', ["retryBudget.tokenRatio"] = '"maxTokens": 10',
    ["retryBudget.shared"] = '"maxTokens": 10, "tokenRatio": 0.5',
    ["retryBudget.minRetriesPerSecond"] = '"retryRatio": 0.1', ["retryBudget.ttlMs"] = '"retryRatio": 0.1' }
  -- A flat lock's required route members, each left out when the row under test is it.
  local BASE = { { "endpoint", '"GET /x"' }, { "maxAttempts", "3" }, { "perAttemptTimeoutMs", "1000" },
    { "totalBudgetMs", "600000" }, { "retryable", '["HTTP_503"]' } }

  -- A flat lock setting row to value: its objects around it, each with its required rows.
  local function lock_text(rows, row, value)
    local base = {}
    for _, m in ipairs(BASE) do
      if row.parent or m[1] ~= row.key then base[#base + 1] = string.format('"%s": %s', m[1], m[2]) end
    end
    return "{" .. table.concat(base, ", ") .. ", " .. members(rows, row, value) .. "}"
  end

  -- The members of a flat lock setting row to value: its objects around it, each with its required rows.
  function members(rows, row, value)
    local by_path = {}
    for _, r in ipairs(rows) do by_path[r.path] = r end
    local text, at = string.format('"%s": %s', row.key, value), row
    while at.parent do
      local parent, siblings = by_path[at.parent], {}
      for _, r in ipairs(rows) do
        if r.parent == parent.path and r ~= at and r.if_absent == "required" then
          siblings[#siblings + 1] = string.format('"%s": %s', r.key, candidates(r)[1])
        end
      end
      if WITH[at.path] then siblings[#siblings + 1] = WITH[at.path] end
      table.insert(siblings, 1, text)
      text, at = string.format('"%s": {%s}', parent.key, table.concat(siblings, ", ")), parent
    end
    return text
  end

  it("compares a changed value of every field without error, and classifies it by the field", function()
    local rows = rf.lock_schema()
    local covering = {}
    for _, e in ipairs(diff.effects) do
      for _, c in ipairs(e.covers) do covering[c:gsub("%.%*$", "")] = e.field end
    end
    local untried = {}
    for _, row in ipairs(rows) do
      if row.place ~= "multi" and row.type ~= "object" and row.type ~= "endpoint" then
        local loaded = {}
        for _, v in ipairs(candidates(row)) do
          local p = rf.load_string(lock_text(rows, row, v))
          if p then loaded[#loaded + 1] = p end
        end
        local a, b
        for i = 2, #loaded do
          if loaded[i].digest ~= loaded[1].digest then a, b = loaded[1], loaded[i] break end
        end
        if not a then
          untried[#untried + 1] = row.path
        else
          for _, pair in ipairs({ { a, b }, { b, a } }) do
            local ok, changes = pcall(diff.compare, pair[1], pair[2])
            assert(ok, row.path .. ": " .. tostring(changes))
            local named = false
            for _, c in ipairs(changes) do
              assert.is_truthy(({ widening = true, narrowing = true, neutral = true })[c.kind], row.path)
              named = named or c.field == row.path or c.field == covering[row.path]
                or row.path:sub(1, #c.field + 1) == c.field .. "."
            end
            assert.is_true(named, row.path .. ": no change names it or its effect")
          end
        end
      end
    end
    assert.same({}, untried)
  end)

  it("judges each gate threshold in its row's direction, and treats its absence as its row says", function()
    local base = '{"endpoint": "GET /x", "maxAttempts": 2, "perAttemptTimeoutMs": 1000, "totalBudgetMs": 2000, '
      .. '"retryable": ["HTTP_503"], "gate": {%s}}'
    for _, row in ipairs(rf.lock_schema()) do
      if row.parent == "gate" and (row.type == "integer" or row.type == "decimal") then
        local lo, hi = row.min, row.max
        local function policy(v)
          return assert(rf.load_string(string.format(base, v and string.format('"%s": %.17g', row.key, v) or "")))
        end
        local grows = diff.compare(policy(lo), policy(hi))
        assert.equal(1, #grows, row.path)
        assert.equal(row.widens == "grows" and "widening" or "narrowing", grows[1].kind, row.path)
        -- dropped: the loosest (not checked), unless absence counts as a value (then judged as that value)
        local dropped = diff.compare(policy(lo), policy(nil))
        if row.default == nil then
          assert.equal("widening", dropped[1].kind, row.path)
        elseif row.default == lo then -- the same threshold: only the digest differs (0 written out, or not)
          for _, c in ipairs(dropped) do assert.not_equal(row.path, c.field) end
        end
      end
    end
  end)
end)

describe("rf_route_view (core/include/retryfreeze/policy.h)", function()
  local h = require "spec.helper"

  -- The members of a C struct typedef in a header, in order.
  local function struct_members(path, name)
    local body = assert(h.read_file(path):match("typedef struct " .. name .. " {(.-)} " .. name .. ";"), name)
    local members = {}
    for line in body:gmatch("[^\n]+") do
      local m = line:gsub("/%*.*", ""):match("([%w_]+);%s*$")
      if m then members[m] = true end
    end
    return members
  end

  -- A route row whose member is not its view in snake case: its unit in the name, or a list's other spelling.
  local MEMBER = { ["backoff.multiplier"] = "backoff_multiplier_milli", classLimits = "class_limit_classes",
    ["hedging.nonFatalClasses"] = "hedging_non_fatal", ["hedging.hedgingDelayMs"] = "hedging_delay_ms" }
  -- Route rows with no member, on purpose: objects whose fields are members, and propagation, which has a view
  -- of its own (rf_policy_propagation, propagation.h).
  local ABSENT = { backoff = "its fields", retryAfter = "its fields", propagation = "rf_policy_propagation",
    ["propagation.attemptHeader"] = "rf_policy_propagation", ["propagation.deadlineHeader"] = "rf_policy_propagation",
    ["propagation.overloadedHeader"] = "rf_policy_propagation",
    ["propagation.inboundDeadline"] = "rf_policy_propagation", ["propagation.inboundAttempt"] = "rf_policy_propagation" }

  it("has a member for every route field of the schema, or lists it as deliberately absent", function()
    local members = struct_members("core/include/retryfreeze/policy.h", "rf_route_view")
    for _, row in ipairs(rf.lock_schema()) do
      if row.place == "route" then
        local want = MEMBER[row.path] or (row.view or ""):gsub("%.", "_")
        if ABSENT[row.path] then
          assert.is_nil(members[want], row.path .. " is listed as absent but rf_route_view has " .. want)
        else
          assert.is_true(members[want], row.path .. ": rf_route_view has no member " .. want)
        end
      end
    end
    -- Neither list names a field the schema no longer has.
    local routes = {}
    for _, row in ipairs(rf.lock_schema()) do routes[row.path] = row.place == "route" or nil end
    for path in pairs(MEMBER) do assert.is_true(routes[path], path) end
    for path in pairs(ABSENT) do assert.is_true(routes[path], path) end
  end)
end)
