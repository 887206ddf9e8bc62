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
