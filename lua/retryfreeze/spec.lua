--- Policy assertions for busted: `require "retryfreeze.spec"` (in a spec file or a busted helper) registers
--- luassert assertions that pin a lock's behaviour, with failure messages that show the facts and the verdict:
---
---   assert.retries(policy, facts [, message])            the verdict is a retry
---   assert.stops(policy, facts [, reason [, message]])   the verdict is a stop (with this reason, if given)
---   assert.waits(policy, facts, ms [, message])          the verdict is a retry after exactly ms milliseconds
---   assert.hedges(policy, facts [, delay_ms [, message]])
---                                                        the request of facts (method, path, idempotency_key)
---                                                        is hedged (policy:hedging), one more attempt every
---                                                        delay_ms, if given; assert.is_not.hedges: it is sent
---                                                        one attempt at a time
---   assert.budget_allows(policy, args [, timeout_ms [, message]])
---                                                        policy:budget(args) allows the next attempt (with
---                                                        this per-try timeout, if given)
---   assert.not_widened(old_policy, new_policy [, message])  no change from old to new widens (retryfreeze.diff)
---   assert.decision_table(policy, path [, message])    every row of the decision table file at path passes, as
---                                                        `retryfreeze check --table` runs it (seed 1)
---   assert.replay(ledgers, policy, thresholds [, message])
---                                                        the ledgers replayed under policy (rf.replay, seed 1)
---                                                        breach none of thresholds, retryfreeze.gate's names
---                                                        ({max_attempts_per_success = 1.3, …}) judged as
---                                                        `retryfreeze gate --replay` judges them
---   assert.replay(ledgers, policy).FIGURE.at_most(bound [, message])
---   assert.replay(ledgers, policy).FIGURE.at_least(bound [, message])
---                                                        the chained form: FIGURE is a number of the
---                                                        replay's predicted table (attempts_per_success,
---                                                        success_rate, extra_attempts, …), its point estimate
---                                                        within the bound
---
--- Each has its negation through luassert's modifiers: assert.is_not.retries, assert.is_not.stops, … —
--- `assert.is_not.not_widened(old, new)` passes when something widens.
---
--- Decisions use a jitter RNG seeded with M.SEED (1) for every assertion, so waits() is reproducible and
--- matches `retryfreeze decide --seed 1` and `retryfreeze check --table`.
--- Misuse (a policy argument that is not a policy, facts that are not a table, an unknown fact key, a decision
--- table that cannot be read or parsed, or a row the engine refuses) raises an error rather than failing the
--- assertion.
local math = require("retryfreeze.compat").math
local assert = require "luassert"
local say = require "say"
local rf = require "retryfreeze"
local diff = require "retryfreeze.diff"
local decision_table = require "retryfreeze.decision_table"
local gate = require "retryfreeze.gate"
local replay = require "retryfreeze.replay"

local M = {}

--- The jitter seed every assertion decides with.
M.SEED = 1

local function check_policy(p, fname, n, level)
  if type(p) ~= "userdata" or not tostring(p):match("^retryfreeze%.Policy") then
    error(string.format("bad argument #%d to '%s' (policy expected, got %s)", n, fname, type(p)), level + 1)
  end
end

local function check_table(t, fname, n, what, level)
  if type(t) ~= "table" then
    error(string.format("bad argument #%d to '%s' (%s table expected, got %s)", n, fname, what, type(t)), level + 1)
  end
end

-- An assertion's first two arguments, checked: a policy (argument 1) and a table (argument 2,
-- named `what` in the message).
local function policy_and_table(arguments, fname, what, level)
  check_policy(arguments[1], fname, 1, level + 1)
  check_table(arguments[2], fname, 2, what, level + 1)
  return arguments[1], arguments[2]
end

--- Decides facts under a policy with the assertions' fixed seed.
-- @param policy policy; facts table (the keys of policy:decide)
-- @return verdict table
function M.decide(policy, facts) return policy:decide(facts, rf.rng(M.SEED)) end

-- M.decide for an assertion: a fact the engine refuses is reported at the user's assertion line, as the
-- assertion's argument 2, not inside this module.
local function decide_for(policy, facts, fname, level)
  local ok, v = pcall(M.decide, policy, facts)
  if ok then return v end
  local why = tostring(v):match("^[^\n]-bad argument #%d+ to '[^']*' %((.*)%)$") or tostring(v)
  error(string.format("bad argument #2 to '%s' (%s)", fname, why), level + 1)
end

-- Replaces the assertion's arguments with the strings its message shows, unformatted.
local function show(arguments, ...)
  local n = select("#", ...)
  for i = 1, n do arguments[i] = select(i, ...) end
  for i = n + 1, arguments.n or n do arguments[i] = nil end
  arguments.n = n
  arguments.nofmt = {}
  for i = 1, n do arguments.nofmt[i] = true end
end

local function set_message(state, msg)
  if msg ~= nil then state.failure_message = msg end
end

local function retries(state, arguments, level)
  level = (level or 1) + 1
  local policy, facts = policy_and_table(arguments, "retries", "facts", level)
  local msg = arguments[3]
  local v = decide_for(policy, facts, "retries", level)
  show(arguments, decision_table.format_facts(facts), decision_table.format_verdict(v))
  set_message(state, msg)
  return v.retry == true
end

local function stops(state, arguments, level)
  level = (level or 1) + 1
  local policy, facts = policy_and_table(arguments, "stops", "facts", level)
  local reason, msg = arguments[3], arguments[4]
  if reason ~= nil and type(reason) ~= "string" then
    error("bad argument #3 to 'stops' (reason string expected, got " .. type(reason) .. ")", level + 1)
  end
  local v = decide_for(policy, facts, "stops", level)
  show(arguments, reason and "with reason " .. reason or "(any reason)", decision_table.format_facts(facts),
    decision_table.format_verdict(v))
  set_message(state, msg)
  return v.retry == false and (reason == nil or v.reason == reason)
end

local function waits(state, arguments, level)
  level = (level or 1) + 1
  local policy, facts = policy_and_table(arguments, "waits", "facts", level)
  local ms, msg = arguments[3], arguments[4]
  if math.type(ms) ~= "integer" then
    error("bad argument #3 to 'waits' (integer milliseconds expected, got " .. tostring(ms) .. ")", level + 1)
  end
  local v = decide_for(policy, facts, "waits", level)
  show(arguments, tostring(ms), decision_table.format_facts(facts), decision_table.format_verdict(v))
  set_message(state, msg)
  return v.retry == true and v.delay_ms == ms
end

local function hedges(state, arguments, level)
  level = (level or 1) + 1
  local policy, facts = policy_and_table(arguments, "hedges", "facts", level)
  local ms, msg = arguments[3], arguments[4]
  if ms ~= nil and math.type(ms) ~= "integer" then
    error("bad argument #3 to 'hedges' (integer milliseconds expected, got " .. tostring(ms) .. ")", level + 1)
  end
  local ok, h = pcall(policy.hedging, policy, facts)
  if not ok then
    local why = tostring(h):match("^[^\n]-bad argument #%d+ to '[^']*' %((.*)%)$") or tostring(h)
    error(string.format("bad argument #2 to 'hedges' (%s)", why), level + 1)
  end
  show(arguments, ms and "with a hedging delay of " .. ms .. " ms" or "(any delay)",
    decision_table.format_facts(facts), decision_table.format_hedging(h))
  set_message(state, msg)
  return decision_table.hedging_matches(h, { hedged = true, delay_ms = ms })
end

local function format_budget(b)
  return string.format("allowed=%s reason=%s timeout_ms=%d route=%s", tostring(b.allowed), tostring(b.reason),
    b.timeout_ms, b.route or "none")
end

local function budget_allows(state, arguments, level)
  level = (level or 1) + 1
  local policy, args = policy_and_table(arguments, "budget_allows", "budget", level)
  local timeout_ms, msg = arguments[3], arguments[4]
  if timeout_ms ~= nil and math.type(timeout_ms) ~= "integer" then
    error("bad argument #3 to 'budget_allows' (integer milliseconds expected, got " .. tostring(timeout_ms) .. ")",
      level + 1)
  end
  local b = policy:budget(args)
  show(arguments, timeout_ms and "with timeout_ms " .. timeout_ms or "(any timeout)",
    decision_table.format_facts(args), format_budget(b))
  set_message(state, msg)
  return b.allowed == true and (timeout_ms == nil or b.timeout_ms == timeout_ms)
end

local function not_widened(state, arguments, level)
  level = (level or 1) + 1
  local old, new, msg = arguments[1], arguments[2], arguments[3]
  check_policy(old, "not_widened", 1, level)
  check_policy(new, "not_widened", 2, level)
  local changes = diff.compare(old, new)
  local widening, all = {}, {}
  for _, c in ipairs(changes) do
    all[#all + 1] = "  " .. diff.format(c)
    if c.kind == "widening" then widening[#widening + 1] = "  " .. diff.format(c) end
  end
  show(arguments, old.digest, new.digest,
    #widening > 0 and table.concat(widening, "\n") or "  (none)",
    #all > 0 and table.concat(all, "\n") or "  (none)")
  set_message(state, msg)
  return #widening == 0
end

-- The table at path, run with the assertions' seed: the results, or raises at the user's assertion as argument 2.
local function run_table_file(policy, path, level)
  local tbl, why = decision_table.read(path)
  local results
  if tbl then results, why = decision_table.run(policy, tbl, { seed = M.SEED }) end
  if not results then
    if tbl then why = "malformed table: " .. why end -- a row the engine refuses: check --table's words
    error(string.format("bad argument #2 to 'decision_table' (%s)", why), level + 1)
  end
  return results
end

local function decision_table_passes(state, arguments, level)
  level = (level or 1) + 1
  local policy, path, msg = arguments[1], arguments[2], arguments[3]
  check_policy(policy, "decision_table", 1, level)
  if type(path) ~= "string" then
    error("bad argument #2 to 'decision_table' (table file path expected, got " .. type(path) .. ")", level + 1)
  end
  local results = run_table_file(policy, path, level)
  local failures = {}
  for _, r in ipairs(results.rows) do
    if not r.ok then failures[#failures + 1] = decision_table.format_failure(r, path) end
  end
  show(arguments, path, tostring(results.failed), tostring(#results.rows),
    (table.concat(failures):gsub("\n$", "")))
  set_message(state, msg)
  return results.failed == 0
end

-- The threshold names assert.replay takes: gate's numbers, and its min_successes, min_requests, forbid_reasons.
local replay_thresholds = { min_successes = true, min_requests = true, forbid_reasons = true }
for _, k in ipairs(gate.numeric) do replay_thresholds[k] = true end

-- A figure of the chained form's message: a count as an integer, a ratio with 4 decimals (as replay prints them).
local function figure_text(v)
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format("%d", v) end
  return string.format("%.4f", v)
end

-- The failure of a bound of the chained form, raised through luassert (busted counts it as a failed assertion)
-- at the line that called at_most or at_least.
local function bound_failure(r, ledgers, policy, what, msg)
  local lines = { string.format("Expected the replay of %s under %s to predict %s.",
    type(ledgers) == "table" and table.concat(ledgers, ", ") or ledgers, policy.digest, what),
    "Predicted: " .. gate.summary(r.predicted), "Recorded: " .. gate.summary(r.recorded) }
  for _, l in ipairs(r.notes) do lines[#lines + 1] = "  note: " .. l end
  local text = table.concat(lines, "\n")
  if msg ~= nil then text = tostring(msg) .. "\n" .. text end
  assert(false, text, assert:level(3))
end

-- The chained form's object: indexing it with a figure of the predicted table gives {at_most, at_least}, each
-- judging the figure's point estimate (negated: passing when the bound does not hold). A ratio whose
-- denominator is 0 fails either way: it is 0 by convention, which says nothing about the candidate.
local function figure_chain(r, ledgers, policy, negated, default_msg)
  local numbers = {}
  for k, v in pairs(r.predicted) do
    if type(v) == "number" then numbers[#numbers + 1] = k end
  end
  table.sort(numbers)
  return setmetatable({}, { __index = function(_, key)
    local v = r.predicted[key]
    if type(v) ~= "number" then
      error(string.format("bad figure '%s' of assert.replay (a number of the predicted table expected: %s)",
        tostring(key), table.concat(numbers, ", ")), 2)
    end
    local function bound(name, holds)
      return function(b, msg)
        if type(b) ~= "number" or b ~= b then
          error(string.format("bad argument #1 to '%s' (number expected, got %s)", name,
            type(b) == "number" and "NaN" or type(b)), 2)
        end
        if msg == nil then msg = default_msg end
        local den = replay.denominators[key]
        local iv = r.interval.whole
        local interval = iv and iv.modelled and iv[key .. "_lo"]
          and string.format(" (interval [%.4f, %.4f])", iv[key .. "_lo"], iv[key .. "_hi"]) or ""
        local expected = string.format("%s%s %.14g", negated and "not " or "", (name:gsub("_", " ")), b)
        if den and r.predicted[den] == 0 then
          bound_failure(r, ledgers, policy, string.format("%s %s: cannot be judged: 0 predicted %s", key, expected,
            den), msg)
        elseif holds(v, b) == negated then
          bound_failure(r, ledgers, policy, string.format("%s %s: predicted %s%s", key, expected, figure_text(v),
            interval), msg)
        end
      end
    end
    return { at_most = bound("at_most", function(x, b) return x <= b end),
      at_least = bound("at_least", function(x, b) return x >= b end) }
  end })
end

local function replay_passes(state, arguments, level)
  level = (level or 1) + 1
  local ledgers, policy, thresholds, msg = arguments[1], arguments[2], arguments[3], arguments[4]
  if type(ledgers) ~= "string" and type(ledgers) ~= "table" then
    error("bad argument #1 to 'replay' (ledger path or array of paths expected, got " .. type(ledgers) .. ")",
      level + 1)
  end
  check_policy(policy, "replay", 2, level)
  if thresholds == nil then -- the chained form: the figures are judged by at_most and at_least
    local r, why = rf.replay(ledgers, policy, { seed = M.SEED })
    if not r then error("bad argument #1 to 'replay' (" .. why .. ")", level + 1) end
    -- luassert raises when the result differs from state.mod (false under is_not): the chain judges instead.
    return state.mod, { figure_chain(r, ledgers, policy, not state.mod, msg), n = 1 }
  end
  check_table(thresholds, "replay", 3, "thresholds", level)
  for k in pairs(thresholds) do
    if not replay_thresholds[k] then
      error("bad argument #3 to 'replay' (unknown threshold '" .. tostring(k) .. "')", level + 1)
    end
  end
  local r, why = rf.replay(ledgers, policy, { seed = M.SEED })
  if not r then error("bad argument #1 to 'replay' (" .. why .. ")", level + 1) end
  local verdict = gate.evaluate(r.predicted, thresholds)
  local lines = {}
  for _, l in ipairs(verdict.breaches) do lines[#lines + 1] = "  " .. l end
  for _, l in ipairs(verdict.notes) do lines[#lines + 1] = "  " .. l end
  for _, l in ipairs(r.notes) do lines[#lines + 1] = "  note: " .. l end
  show(arguments, policy.digest, gate.summary(r.predicted), gate.summary(r.recorded),
    #lines > 0 and table.concat(lines, "\n") or "  (none)")
  set_message(state, msg)
  return verdict.pass
end

-- An assertion's two messages, which differ only in "to" and "not to" at {to} (swapped for an assertion that is
-- itself a negation, as not_widened).
local function say_both(name, text, negated)
  local yes, no = "to", "not to"
  if negated then yes, no = no, yes end
  say:set("assertion." .. name .. ".positive", (text:gsub("{to}", yes)))
  say:set("assertion." .. name .. ".negative", (text:gsub("{to}", no)))
end

say_both("rf_retries", "Expected the policy {to} retry.\nFacts: %s\nVerdict: %s")
say_both("rf_stops", "Expected the policy {to} stop %s.\nFacts: %s\nVerdict: %s")
say_both("rf_waits", "Expected the policy {to} retry after %s ms.\nFacts: %s\nVerdict: %s")
say_both("rf_hedges", "Expected the request {to} be hedged %s.\nFacts: %s\nHedging: %s")
say_both("rf_budget_allows", "Expected the budget {to} allow the next attempt %s.\nAttempt: %s\nBudget: %s")
say_both("rf_not_widened",
  "Expected the new policy {to} widen the old one.\nOld: %s\nNew: %s\nWidening:\n%s\nAll changes:\n%s", true)

say:set("assertion.rf_decision_table.positive", "Expected every row of %s to pass: %s of %s failed.\n%s")
say:set("assertion.rf_decision_table.negative", "Expected some row of %s to fail: all %.0s%s rows passed.%s")

say:set("assertion.rf_replay.positive",
  "Expected the replay under %s to breach no threshold.\nPredicted: %s\nRecorded: %s\nFound:\n%s")
say:set("assertion.rf_replay.negative",
  "Expected the replay under %s to breach a threshold.\nPredicted: %s\nRecorded: %s\nFound:\n%s")

assert:register("assertion", "retries", retries, "assertion.rf_retries.positive", "assertion.rf_retries.negative")
assert:register("assertion", "stops", stops, "assertion.rf_stops.positive", "assertion.rf_stops.negative")
assert:register("assertion", "waits", waits, "assertion.rf_waits.positive", "assertion.rf_waits.negative")
assert:register("assertion", "hedges", hedges, "assertion.rf_hedges.positive", "assertion.rf_hedges.negative")
assert:register("assertion", "budget_allows", budget_allows, "assertion.rf_budget_allows.positive",
  "assertion.rf_budget_allows.negative")
assert:register("assertion", "not_widened", not_widened, "assertion.rf_not_widened.positive",
  "assertion.rf_not_widened.negative")
assert:register("assertion", "decision_table", decision_table_passes, "assertion.rf_decision_table.positive",
  "assertion.rf_decision_table.negative")
assert:register("assertion", "replay", replay_passes, "assertion.rf_replay.positive", "assertion.rf_replay.negative")

return M
