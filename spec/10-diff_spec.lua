-- retryfreeze.diff and `retryfreeze diff`: every field in both directions, route moves, neutral edits, git: sources.
local h = require "spec.helper"
local rf = require "retryfreeze"
local diff = require "retryfreeze.diff"
local json = require "retryfreeze.json"

-- A multi-route lock as a Lua table; every case edits a deep copy and encodes it.
local function base()
  return {
    version = 1,
    defaults = {
      maxAttempts = 3, perAttemptTimeoutMs = 1000, totalBudgetMs = 4000, minAttemptMs = 200,
      retryable = { "HTTP_503", "TIMEOUT" }, notRetryable = { "HTTP_500" }, idempotencyRequired = { "POST", "DELETE" },
      backoff = { baseMs = 100, multiplier = 2, maxMs = 2000, jitter = "equal" },
      retryAfter = { honor = true, maxMs = 3000 },
    },
    routes = {
      { endpoint = "POST /v1/jobs" },
      { endpoint = "GET /v1/jobs/{id}", maxAttempts = 2 },
      { endpoint = "GET /v1/*", maxAttempts = 4 },
    },
    retryBudget = { maxTokens = 100, tokenRatio = 0.5 },
    gate = { maxRetryRatio = 0.5, minSuccesses = 10, forbidReasons = { "deadline" } },
  }
end

local function load(t)
  local text = json.encode(t)
  return assert(rf.load_string(text, "test")), text
end

local function jobs(t) return t.routes[1] end

-- One case per effect of the jobs route: edit(t, value) and the two values; going a → b widens.
local cases = {
  { "maxAttempts", 2, 5, function(t, v) jobs(t).maxAttempts = v end },
  { "perAttemptTimeoutMs", 1000, 1500, function(t, v) jobs(t).perAttemptTimeoutMs = v end },
  { "totalBudgetMs", 4000, 6000, function(t, v) jobs(t).totalBudgetMs = v end },
  { "minAttemptMs", 200, 100, function(t, v) jobs(t).minAttemptMs = v end },
  { "retryAfter.honor", true, false, function(t, v) jobs(t).retryAfter = { honor = v } end },
  { "retryAfter.maxMs", 3000, 6000, function(t, v) jobs(t).retryAfter = { maxMs = v } end },
  { "retryBudget.maxTokens", 100, 200, function(t, v) t.retryBudget.maxTokens = v end, diff.POLICY },
  { "retryBudget.tokenRatio", 0.5, 1.25, function(t, v) t.retryBudget.tokenRatio = v end, diff.POLICY },
  { "gate.maxRetryRatio", 0.5, 0.75, function(t, v) t.gate.maxRetryRatio = v end, diff.POLICY },
  { "gate.minSuccesses", 10, 50, function(t, v) t.gate.minSuccesses = v end, diff.POLICY },
  { "gate.minSuccessRate", 0.9, 0.5, function(t, v) t.gate.minSuccessRate = v end, diff.POLICY },
}

local function lines_of(ta, tb) return diff.lines(diff.compare(load(ta), load(tb))) end

describe("diff.compare", function()
  for _, c in ipairs(cases) do
    local field, a, b, edit, route = c[1], c[2], c[3], c[4], c[5] or "POST /v1/jobs"
    it(string.format("%s %s → %s widens, and back narrows", field, tostring(a), tostring(b)), function()
      local ta, tb = base(), base()
      edit(ta, a)
      edit(tb, b)
      local pa, pb = load(ta), load(tb)
      local fwd = diff.compare(pa, pb)
      assert.equal(1, #fwd, table.concat(diff.lines(fwd), "\n"))
      assert.same({ kind = "widening", route = route, field = field, old = a, new = b }, {
        kind = fwd[1].kind, route = fwd[1].route, field = fwd[1].field, old = fwd[1].old, new = fwd[1].new })
      local back = diff.compare(pb, pa)
      assert.equal(1, #back)
      assert.same({ "narrowing", field, b, a }, { back[1].kind, back[1].field, back[1].old, back[1].new })
    end)
  end

  describe("delay windows per retry number", function()
    it("an earlier window widens, a later one narrows (baseMs, multiplier, maxMs)", function()
      local ta, tb = base(), base()
      jobs(tb).backoff = { baseMs = 50 }
      assert.same({ "WIDENING  POST /v1/jobs  backoff.baseMs 100 → 50: delay window retry 1 [50, 100] → [25, 50] ms, "
        .. "retry 2 [100, 200] → [50, 100] ms" }, lines_of(ta, tb))
      assert.same({ "NARROWING  POST /v1/jobs  backoff.baseMs 50 → 100: delay window retry 1 [25, 50] → [50, 100] ms, "
        .. "retry 2 [50, 100] → [100, 200] ms" }, lines_of(tb, ta))
      tb = base()
      jobs(tb).backoff = { multiplier = 1.5 }
      assert.same({ "WIDENING  POST /v1/jobs  backoff.multiplier 2 → 1.5: delay window retry 2 [100, 200] → [75, 150] "
        .. "ms" }, lines_of(ta, tb))
      tb = base()
      jobs(tb).backoff = { maxMs = 150 }
      assert.same({ "WIDENING  POST /v1/jobs  backoff.maxMs 2000 → 150: delay window retry 2 [100, 200] → [75, 150] ms" },
        lines_of(ta, tb))
      assert.same({ "NARROWING  POST /v1/jobs  backoff.maxMs 150 → 2000: delay window retry 2 [75, 150] → [100, 200] ms" },
        lines_of(tb, ta))
    end)

    it("a maxMs no retry reaches changes no window: neutral, and said so", function()
      local tb = base()
      jobs(tb).backoff = { maxMs = 1000 }
      assert.same({ "NEUTRAL  POST /v1/jobs  backoff.maxMs 2000 → 1000 (no request's backoff changes)" },
        lines_of(base(), tb))
    end)

    -- With baseMs equal to maxMs, decorrelated gives the constant delay none gives.
    it("judges jitter by the windows it gives, not by a rank", function()
      local function with(jitter)
        local t = base()
        jobs(t).backoff = { baseMs = 1000, maxMs = 1000, jitter = jitter }
        return t
      end
      local full_none = lines_of(with("full"), with("none"))
      assert.same({ "WIDENING  POST /v1/jobs  backoff.jitter full → none: delay window retry 1 [0, 1000] → "
        .. "[1000, 1000] ms, retry 2 [0, 1000] → [1000, 1000] ms" }, full_none)
      assert.same({ "WIDENING  POST /v1/jobs  backoff.jitter full → decorrelated: delay window retry 1 [0, 1000] → "
        .. "[1000, 1000] ms, retry 2 [0, 1000] → [1000, 1000] ms" }, lines_of(with("full"), with("decorrelated")))
      assert.same({ "NEUTRAL  POST /v1/jobs  backoff.jitter \"decorrelated\" → \"none\" (no request's backoff changes)" },
        lines_of(with("decorrelated"), with("none")))
      -- Once the cap reaches maxMs, decorrelated is narrower than full: [min(baseMs, cap), maxMs] vs [0, maxMs].
      local function capped(jitter)
        local t = base()
        jobs(t).backoff = { baseMs = 400, maxMs = 500, jitter = jitter }
        return t
      end
      assert.same({ "WIDENING  POST /v1/jobs  backoff.jitter full → decorrelated: delay window retry 1 [0, 400] → "
        .. "[400, 500] ms, retry 2 [0, 500] → [400, 500] ms" }, lines_of(capped("full"), capped("decorrelated")))
    end)

    it("policy:delay_window bounds every delay the engine draws (every jitter, retries 1..6)", function()
      for _, jitter in ipairs({ "none", "full", "equal", "decorrelated" }) do
        local p = assert(rf.load_string(json.encode({ endpoint = "GET /x", maxAttempts = 10, perAttemptTimeoutMs = 100,
          totalBudgetMs = 3600000, retryable = { "HTTP_503" },
          backoff = { baseMs = 30, multiplier = 1.7, maxMs = 400, jitter = jitter } })))
        for attempts = 1, 6 do
          local lo, hi = p:delay_window("GET /x", attempts)
          local seen_lo, seen_hi = math.huge, -1
          for seed = 1, 300 do
            local v = p:decide({ method = "GET", path = "/x", status = 503, attempts = attempts, elapsed_ms = 0 },
              rf.rng(seed))
            assert.is_true(v.retry)
            seen_lo, seen_hi = math.min(seen_lo, v.delay_ms), math.max(seen_hi, v.delay_ms)
          end
          assert.is_true(seen_lo >= lo and seen_hi <= hi, string.format("%s retry %d: [%d, %d] outside [%d, %d]",
            jitter, attempts, seen_lo, seen_hi, lo, hi))
          assert.is_true(seen_hi - seen_lo >= (hi - lo) * 0.8, jitter .. ": the window is wider than the draws")
        end
      end
      assert.has_error(function() assert(rf.load("examples/service.lock.json")):delay_window("GET /nope", 1) end)
    end)

    it("a window that moves both ways (earlier start, more spread) is widening", function()
      local ta, tb = base(), base()
      jobs(ta).backoff = { jitter = "none" }
      jobs(tb).backoff = { jitter = "full" }
      local ch = diff.compare(load(ta), load(tb))
      assert.same({ "widening", "backoff" }, { ch[1].kind, ch[1].field })
    end)
  end)

  describe("classes and keys", function()
    it("a new retryable class widens; removing it narrows", function()
      local tb = base()
      jobs(tb).retryable = { "HTTP_503", "TIMEOUT", "HTTP_502" }
      assert.same({ "WIDENING  POST /v1/jobs  retryable +HTTP_502" }, lines_of(base(), tb))
      assert.same({ "NARROWING  POST /v1/jobs  retryable -HTTP_502" }, lines_of(tb, base()))
    end)

    it("judges classes by what the engine retries: a family, and a notRetryable exception removed", function()
      local ta, tb = base(), base()
      jobs(ta).retryable = { "HTTP_5XX" }
      jobs(tb).retryable = { "HTTP_5XX" }
      jobs(tb).notRetryable = json.array()
      assert.same({ "WIDENING  POST /v1/jobs  retryable +HTTP_500" }, lines_of(ta, tb))
      local tc = base()
      jobs(tc).retryable = { "HTTP_5XX", "TIMEOUT" }
      assert.same({ "WIDENING  POST /v1/jobs  retryable +HTTP_501..HTTP_502, HTTP_504..HTTP_599" },
        lines_of(base(), tc))
    end)

    it("a notRetryable entry for a class nobody retried changes no request: neutral", function()
      local tb = base()
      jobs(tb).notRetryable = { "HTTP_500", "HTTP_404" }
      assert.same({ 'NEUTRAL  POST /v1/jobs  notRetryable ["HTTP_500"] → ["HTTP_404","HTTP_500"] (no request\'s '
        .. "retryable changes)" }, lines_of(base(), tb))
    end)

    it("a dropped key requirement for the route's own method widens; one for another method is neutral", function()
      local tb = base()
      jobs(tb).idempotencyRequired = { "DELETE" }
      assert.same({ "WIDENING  POST /v1/jobs  idempotency key required for retries: yes → no" }, lines_of(base(), tb))
      assert.same({ "NARROWING  POST /v1/jobs  idempotency key required for retries: no → yes" }, lines_of(tb, base()))
      local tc = base()
      jobs(tc).idempotencyRequired = { "POST", "DELETE", "PATCH" }
      assert.same({ 'NEUTRAL  POST /v1/jobs  idempotencyRequired ["DELETE","POST"] → ["DELETE","PATCH","POST"] (no '
        .. "request's idempotencyRequired changes)" }, lines_of(base(), tc))
    end)
  end)

  it("formats a change as KIND  ROUTE  field old → new", function()
    local tb = base()
    jobs(tb).maxAttempts = 5
    local ch = diff.compare(load(base()), load(tb))
    assert.same({ "WIDENING  POST /v1/jobs  maxAttempts 3 → 5" }, diff.lines(ch))
    assert.same({ widening = 1, narrowing = 0, neutral = 0 }, diff.summary(ch))
    assert.equal("widening", diff.verdict(ch))
    assert.is_true(diff.widens(ch))
    assert.is_false(diff.widens(diff.compare(load(tb), load(base()))))
    assert.equal("narrowing", diff.verdict(diff.compare(load(tb), load(base()))))
  end)

  it("a retry budget removed widens, added narrows", function()
    local tb = base()
    tb.retryBudget = nil
    local pa, pb = load(base()), load(tb)
    assert.same({ "WIDENING  (policy)  retryBudget {maxTokens 100, tokenRatio 0.5} → none (retries never throttled)" },
      diff.lines(diff.compare(pa, pb)))
    assert.same({ "NARROWING  (policy)  retryBudget none → {maxTokens 100, tokenRatio 0.5}" },
      diff.lines(diff.compare(pb, pa)))
  end)

  it("propagation removed or a narrowing of it turned off widens; a header renamed widens; the reverse narrows", function()
    local on = base()
    on.routes[2].propagation = {}
    local off = base()
    assert.same({ "NARROWING  GET /v1/jobs/{id}  propagation none → on" }, diff.lines(diff.compare(load(off), load(on))))
    assert.same({ "WIDENING  GET /v1/jobs/{id}  propagation on → none" }, diff.lines(diff.compare(load(on), load(off))))
    for _, key in ipairs({ "inboundDeadline", "inboundAttempt" }) do
      local flipped = base()
      flipped.routes[2].propagation = { [key] = false }
      assert.same({ "WIDENING  GET /v1/jobs/{id}  propagation." .. key .. " true → false" },
        diff.lines(diff.compare(load(on), load(flipped))), key)
      assert.same({ "NARROWING  GET /v1/jobs/{id}  propagation." .. key .. " false → true" },
        diff.lines(diff.compare(load(flipped), load(on))), key)
    end
    for _, key in ipairs({ "attemptHeader", "deadlineHeader", "overloadedHeader" }) do
      local renamed = base()
      renamed.routes[2].propagation = { [key] = "X-Other" }
      local lines = diff.lines(diff.compare(load(on), load(renamed)))
      assert.equal(1, #lines, key)
      assert.matches("^WIDENING  GET /v1/jobs/{id}  propagation%." .. key .. " [%w-]+ → x%-other$", lines[1])
      assert.equal("WIDENING", diff.lines(diff.compare(load(renamed), load(on)))[1]:match("^%u+"), key)
    end
    -- the same propagation spelt differently (defaults written out, names in another case) changes nothing
    local spelt = base()
    spelt.routes[2].propagation = { attemptHeader = "X-Envoy-Attempt-Count", inboundAttempt = true }
    assert.same({}, diff.compare(load(on), load(spelt)))
    assert.equal(load(on).digest, load(spelt).digest)
    assert.not_equal(load(off).digest, load(on).digest)
  end)

  it("a gate removed widens, added narrows", function()
    local tb = base()
    tb.gate = nil
    assert.same({ "WIDENING  (policy)  gate {maxRetryRatio 0.5, minSuccesses 10, forbidReasons deadline} → none "
      .. "(ledger stats no longer judged)" }, diff.lines(diff.compare(load(base()), load(tb))))
    assert.same({ "NARROWING  (policy)  gate none → {maxRetryRatio 0.5, minSuccesses 10, forbidReasons deadline}" },
      diff.lines(diff.compare(load(tb), load(base()))))
  end)

  it("a gate threshold dropped or a forbidden reason dropped widens; added narrows", function()
    local tb = base()
    tb.gate = { minSuccesses = 10, forbidReasons = json.array() }
    local lines = diff.lines(diff.compare(load(base()), load(tb)))
    assert.same({ "WIDENING  (policy)  gate.maxRetryRatio 0.5 → none",
      "WIDENING  (policy)  gate.forbidReasons -deadline" }, lines)
    lines = diff.lines(diff.compare(load(tb), load(base())))
    assert.same({ "NARROWING  (policy)  gate.maxRetryRatio none → 0.5",
      "NARROWING  (policy)  gate.forbidReasons +deadline" }, lines)
  end)

  describe("routes", function()
    -- A new, more specific route takes requests from a wider one.
    it("a route that takes requests from a wider route is judged by what those requests get", function()
      local svc = assert(rf.load("examples/service.lock.json"))
      local f = assert(io.open("examples/service.lock.json"))
      local doc = json.decode(f:read("a"))
      f:close()
      table.insert(doc.routes, { endpoint = "GET /v1/jobs/*", maxAttempts = 3 })
      local shadowing = assert(rf.load_string(json.encode(doc)))
      local ch = diff.compare(svc, shadowing)
      assert.same({ 'WIDENING  GET /v1/jobs/*  takes GET /v1/jobs, GET /v1/jobs/, GET /v1/jobs//…, GET /v1/jobs/{id}/… from "GET /v1/*": '
        .. "maxAttempts 2 → 3" }, diff.lines(ch))
      -- The trailing slash and an empty segment after it: only a "*" takes those (a {param} refuses "").
      assert.same({ "GET /v1/jobs", "GET /v1/jobs/", "GET /v1/jobs//…", "GET /v1/jobs/{id}/…" }, ch[1].requests)
      -- assert.not_widened (retryfreeze.spec) uses the same diff.
      require "retryfreeze.spec"
      assert.is_not.not_widened(svc, shadowing)
      assert.has_error(function() assert.not_widened(svc, shadowing) end)
      assert.not_widened(shadowing, svc)
      -- The CLI exits 1 on it.
      local path = h.temp_file(json.encode(doc))
      local out, _, code = h.run_cli("diff", "examples/service.lock.json", path, "--log", "/nonexistent/log.jsonl")
      os.remove(path)
      assert.equal(1, code)
      assert.matches('^WIDENING  GET /v1/jobs/%*  takes GET /v1/jobs, GET /v1/jobs/, GET /v1/jobs//…, GET /v1/jobs/{id}/… from "GET /v1/%*": '
        .. "maxAttempts 2 → 3\n", out)
      assert.same({ 'NARROWING  GET /v1/*  takes GET /v1/jobs, GET /v1/jobs/, GET /v1/jobs//…, GET /v1/jobs/{id}/… from "GET /v1/jobs/*": '
        .. "maxAttempts 3 → 2" }, diff.lines(diff.compare(shadowing, svc)))
      -- The same route with maxAttempts 2 takes them with the same effects: neutral.
      doc.routes[#doc.routes].maxAttempts = 2
      assert.same({ 'NEUTRAL  GET /v1/jobs/*  takes GET /v1/jobs, GET /v1/jobs/, GET /v1/jobs//…, GET /v1/jobs/{id}/… from "GET /v1/*" (the same '
        .. "effects)" }, diff.lines(diff.compare(svc, assert(rf.load_string(json.encode(doc))))))
    end)

    it("a new route for requests no route matched widens; removing it narrows (its requests are refused)", function()
      local tb = base()
      table.insert(tb.routes, { endpoint = "PUT /v2/jobs/{id}", idempotencyRequired = json.array() })
      local pa, pb = load(base()), load(tb)
      local fwd = diff.compare(pa, pb)
      assert.same({ "WIDENING  PUT /v2/jobs/{id}  takes PUT /v2/jobs/{id} from no-route (refused before): "
        .. "maxAttempts 3, retryable HTTP_503, TIMEOUT" }, diff.lines(fwd))
      assert.same({ "widening", "route", "no-route", "PUT /v2/jobs/{id}" },
        { fwd[1].kind, fwd[1].field, fwd[1].old, fwd[1].new })
      assert.same({ 'NARROWING  PUT /v2/jobs/{id}  PUT /v2/jobs/{id} now refused (no-route); was "PUT /v2/jobs/{id}"' },
        diff.lines(diff.compare(pb, pa)))
    end)

    it("a route removed so that its requests fall to a wider route widens; adding it back narrows", function()
      local tb = base()
      table.remove(tb.routes, 2) -- GET /v1/jobs/{id} (2 attempts); GET /v1/* allows 4
      assert.same({ 'WIDENING  GET /v1/*  takes GET /v1/jobs/{id} from "GET /v1/jobs/{id}": maxAttempts 2 → 4' },
        lines_of(base(), tb))
      assert.same({ 'NARROWING  GET /v1/jobs/{id}  takes GET /v1/jobs/{id} from "GET /v1/*": maxAttempts 4 → 2' },
        lines_of(tb, base()))
    end)

    it("a route removed in favour of an identical one is neutral", function()
      local ta, tb = base(), base()
      ta.routes[2].maxAttempts = 4
      table.remove(tb.routes, 2)
      local ch = diff.compare(load(ta), load(tb))
      assert.same({ 'NEUTRAL  GET /v1/*  takes GET /v1/jobs/{id} from "GET /v1/jobs/{id}" (the same effects)' },
        diff.lines(ch))
      assert.is_false(diff.widens(ch))
    end)

    it("a renamed path parameter is neutral", function()
      local tb = base()
      tb.routes[2].endpoint = "GET /v1/jobs/{job_id}"
      local ch = diff.compare(load(base()), load(tb))
      assert.same({ "NEUTRAL  GET /v1/jobs/{job_id}  endpoint GET /v1/jobs/{id} → GET /v1/jobs/{job_id} "
        .. "(path parameter renamed)" }, diff.lines(ch))
    end)

    it("an effect added to diff.effects judges a field by its effect; \"x.*\" covers the fields under x", function()
      local saved = diff.effects
      diff.effects = {}
      for _, e in ipairs(saved) do
        if e.field ~= "classLimits" then diff.effects[#diff.effects + 1] = e end -- replaced by the one below
      end
      diff.effects[#diff.effects + 1] = { field = "classLimits", covers = { "classLimits.*" },
        value = function(_, _, r) return r.class_limits and r.class_limits.TIMEOUT or r.max_attempts end,
        compare = diff.more_is_wider, text = function(a, b) return "TIMEOUT attempts " .. a .. " → " .. b end }
      local ok, lines = pcall(function()
        local ta, tb = base(), base()
        jobs(ta).classLimits = { TIMEOUT = 2 }
        jobs(tb).classLimits = { TIMEOUT = 3 }
        return { lines_of(ta, tb), lines_of(tb, ta) }
      end)
      diff.effects = saved
      assert.is_true(ok, lines)
      assert.same({ { "WIDENING  POST /v1/jobs  TIMEOUT attempts 2 → 3" },
        { "NARROWING  POST /v1/jobs  TIMEOUT attempts 3 → 2" } }, lines)
    end)

    it("a lock field no effect covers fails closed as widening", function()
      local saved = diff.effects
      diff.effects = {}
      local ok, lines = pcall(function()
        local tb = base()
        jobs(tb).maxAttempts = 2
        return lines_of(base(), tb)
      end)
      diff.effects = saved
      assert.is_true(ok, lines)
      assert.same({ "WIDENING  POST /v1/jobs  maxAttempts 3 → 2 (not classified, so treated as widening)" }, lines)
    end)
  end)

  describe("neutral edits", function()
    it("the same lock has no changes", function()
      local pa, text = load(base())
      assert.same({}, diff.compare(pa, pa, { old_text = text, new_text = text }))
    end)

    it("a $comment edit is neutral and names where it is", function()
      local ta, tb = base(), base()
      ta.routes[1]["$comment"] = "jobs"
      tb.routes[1]["$comment"] = "jobs: reviewed"
      tb["$comment"] = "top"
      local pa, text_a = load(ta)
      local pb, text_b = load(tb)
      assert.equal(pa.digest, pb.digest)
      local ch = diff.compare(pa, pb, { old_text = text_a, new_text = text_b })
      assert.same({
        'NEUTRAL  (policy)  $comment none → "top"',
        'NEUTRAL  POST /v1/jobs  $comment "jobs" → "jobs: reviewed"',
      }, diff.lines(ch))
      assert.is_false(diff.widens(ch))
    end)

    it("formatting and alias spelling alone are one neutral change", function()
      local old_text = '{"endpoint":"POST /v1/jobs","maxAttempts":2,"perAttemptTimeoutMs":2000,"totalBudgetMs":2500,'
        .. '"retryable":["GATEWAY_TIMEOUT"]}'
      local new_text = '{ "retryable": ["TIMEOUT", "HTTP_504"], "endpoint": "POST /v1/jobs",\n "maxAttempts": 2,'
        .. ' "perAttemptTimeoutMs": 2000, "totalBudgetMs": 2500 }'
      local pa = assert(rf.load_string(old_text))
      local pb = assert(rf.load_string(new_text))
      assert.same({ "NEUTRAL  (policy)  formatting, key order or alias spelling only (digest unchanged)" },
        diff.lines(diff.compare(pa, pb, { old_text = old_text, new_text = new_text })))
      assert.same({}, diff.compare(pa, pb))
    end)
  end)

  it("raises on an argument that is not a policy", function()
    assert.has_error(function() diff.compare({}, load(base())) end,
      "bad argument #1 to 'compare' (policy expected, got table)")
  end)

  it("compares the two example locks", function()
    local svc = assert(rf.load("examples/service.lock.json"))
    local desk = assert(rf.load(h.desk_lock))
    local ch = diff.compare(desk, svc)
    local s = diff.summary(ch)
    assert.is_true(s.widening > 0)
    assert.is_true(s.narrowing > 0)
    local lines = diff.lines(ch)
    assert.equal("NARROWING  (policy)  retryBudget none → {maxTokens 100, tokenRatio 0.1}", lines[1])
    local found = {}
    for _, l in ipairs(lines) do found[l] = true end
    assert.is_true(found["WIDENING  POST /v1/jobs  maxAttempts 2 → 3"], table.concat(lines, "\n"))
    assert.is_true(found["NARROWING  POST /v1/jobs  perAttemptTimeoutMs 2000 → 1000"])
    assert.is_true(found["WIDENING  POST /v1/jobs  retryable +HTTP_502..HTTP_503"])
    assert.is_true(found["WIDENING  GET /v1/jobs/{id}  takes GET /v1/jobs/{id} from no-route (refused before): "
      .. "maxAttempts 4, retryable HTTP_429, HTTP_502, HTTP_503, HTTP_504, TIMEOUT, CONNECT_RESET"])
  end)
end)

-- Two widenings an enumeration of sampled request shapes missed (spec/support/diff_attacks.lua): a placeholder
-- segment that a lock can name itself, and paths with an empty segment, which only a last "*" matches.
describe("diff.compare: the request space is a partition", function()
  local attacks = require "spec.support.diff_attacks"
  local rf_core = require "retryfreeze.core"

  for _, attack in ipairs({ { "placeholder", { "GET /a/{id}" }, "NARROWING  GET /b  maxAttempts 3 → 2" },
    { "empty_segment", { "GET /a/", "GET /a//…" }, "NARROWING  GET /a/{id}/*  maxAttempts 3 → 2" } }) do
    local name, requests, narrowing = attack[1], attack[2], attack[3]
    it(name .. ": the widened route's requests are found, and the CLI exits 1", function()
      local old_text, new_text, route = attacks[name]()
      local ch = diff.compare(assert(rf.load_string(old_text)), assert(rf.load_string(new_text)))
      local function line(text) return "WIDENING  " .. route .. "  " .. text end
      assert.same({ line("maxAttempts 1 → 10"), line("perAttemptTimeoutMs 1000 → 600000"),
        line("totalBudgetMs 2000 → 3600000"), line("idempotency key required for retries: yes → no"),
        line("retryable +HTTP_400..HTTP_599"), narrowing }, diff.lines(ch))
      for i = 1, 5 do assert.same(requests, ch[i].requests) end
      require "retryfreeze.spec" -- assert.not_widened judges with the same diff
      assert.is_not.not_widened(assert(rf.load_string(old_text)), assert(rf.load_string(new_text)))
      local dir = h.temp_dir("diff-attack")
      h.write_file(dir .. "/old.lock.json", old_text)
      h.write_file(dir .. "/new.lock.json", new_text)
      local out, err, code = h.run_cli("diff", dir .. "/old.lock.json", dir .. "/new.lock.json")
      os.execute("rm -rf " .. h.shell_quote(dir))
      assert.equal(1, code, out .. err)
      assert.matches("WIDENING  " .. route:gsub("%p", "%%%0") .. "  maxAttempts 1 → 10\n", out)
    end)
  end

  it("more request classes than diff.MAX_SHAPES fail closed as one widening change", function()
    local pa = assert(rf.load_string((attacks.placeholder())))
    local saved = diff.MAX_SHAPES
    diff.MAX_SHAPES = 5
    local ok, lines = pcall(function() return diff.lines(diff.compare(pa, pa)) end)
    diff.MAX_SHAPES = saved
    assert.is_true(ok, lines)
    assert.same({ "WIDENING  (policy)  more than 5 request classes to compare (not classified, so treated as "
      .. "widening)" }, lines)
    assert.same({}, diff.compare(pa, pa)) -- the same lock under the real cap: no change
  end)

  it("policy:next_segments names what the routes take after a prefix, by the matcher's own segment rule", function()
    local old_text = attacks.placeholder()
    local p = assert(rf.load_string(old_text))
    assert.same({ { "a", "b" }, 0, 0 }, { p:next_segments("GET", "/") })
    assert.same({ { "rf~" }, 1, 0 }, { p:next_segments("GET", "/a/") })
    assert.same({ {}, 0, 0 }, { p:next_segments("GET", "/a/" .. rf_core.OTHER_SEGMENT .. "/") })
    assert.same({ {}, 0, 0 }, { p:next_segments("POST", "/") })
    local q = assert(rf.load_string(attacks.empty_segment()))
    assert.same({ { "a" }, 0, 0 }, { q:next_segments("GET", "/") })
    assert.same({ {}, 1, 1 }, { q:next_segments("GET", "/a/") }) -- {id} (with its "*"), and "*"
    assert.same({ {}, 0, 1 }, { q:next_segments("GET", "/a//") }) -- only a "*" takes the empty segment
    assert.same({ {}, 0, 2 }, { q:next_segments("GET", "/a/x/") })
    for _, bad in ipairs({ "", "a/", "/a", "/a?/", "/#/" }) do
      assert.has_error(function() p:next_segments("GET", bad) end,
        "bad argument #2 to 'next_segments' (prefix must start and end with '/' and hold no '?' or '#')")
    end
    -- The witnesses: a lock cannot name them, so they reach the {param} and no route.
    assert.is_nil(rf.load_string('{"endpoint":"GET /a/' .. rf_core.OTHER_SEGMENT .. '","maxAttempts":1,'
      .. '"perAttemptTimeoutMs":1,"totalBudgetMs":1,"retryable":[]}'))
    assert.equal("GET /a/{id}", p:match("GET", "/a/" .. rf_core.OTHER_SEGMENT))
    assert.is_nil(p:match(rf_core.OTHER_METHOD, "/a/x"))
  end)
end)

--- The diff's lines between base() changed by edit_old and base() changed by edit_new (either may be nil).
local function edit_lines(edit_old, edit_new)
  local a, b = base(), base()
  if edit_old then edit_old(a) end
  if edit_new then edit_new(b) end
  return diff.lines(diff.compare(load(a), load(b)))
end

-- The property the diff promises: whenever some request gets more attempts, more time, a new retryable
-- class, a dropped key requirement, or an earlier or narrower delay window, the diff says WIDENING. Random
-- pairs of locks over a small alphabet of patterns, random requests; the oracle asks the engine directly.
describe("diff.compare: class limits and wait headers, by effect", function()
  local lines = edit_lines

  it("a class limit added or lowered narrows, raised or removed widens, as the engine applies it", function()
    assert.same({ "NARROWING  GET /v1/*  attempts by class (classLimits): TIMEOUT 4 → 2" },
      lines(nil, function(t) t.routes[3].classLimits = { TIMEOUT = 2 } end))
    assert.same({ "WIDENING  GET /v1/*  attempts by class (classLimits): TIMEOUT 2 → 4" },
      lines(function(t) t.routes[3].classLimits = { TIMEOUT = 2 } end, nil))
    assert.same({ "WIDENING  GET /v1/*  attempts by class (classLimits): TIMEOUT 2 → 3" },
      lines(function(t) t.routes[3].classLimits = { TIMEOUT = 2 } end,
        function(t) t.routes[3].classLimits = { TIMEOUT = 3 } end))
    -- A specific status beating its family with a higher limit: HTTP_503 gains although a limit was added.
    assert.same({ "WIDENING  GET /v1/*  attempts by class (classLimits): HTTP_503 2 → 3" },
      lines(function(t) t.routes[3].classLimits = { HTTP_5XX = 2 } end,
        function(t) t.routes[3].classLimits = { HTTP_5XX = 2, HTTP_503 = 3 } end))
    -- Defaults reach every route that does not set its own (GET /v1/jobs/{id} has maxAttempts 2: neutral).
    assert.same({ "NARROWING  GET /v1/*  attempts by class (classLimits): HTTP_503 4 → 2",
      "NEUTRAL  GET /v1/jobs/{id}  classLimits.HTTP_503 none → 2 (no request's classLimits changes)",
      "NARROWING  POST /v1/jobs  attempts by class (classLimits): HTTP_503 3 → 2" },
      lines(nil, function(t) t.defaults.classLimits = { HTTP_503 = 2 } end))
    -- A limit on a class the route does not retry, or equal to maxAttempts, changes nothing a request gets.
    local neutral = lines(nil, function(t) t.routes[3].classLimits = { HTTP_404 = 1, TIMEOUT = 4 } end)
    for _, l in ipairs(neutral) do assert.matches("^NEUTRAL", l) end
    -- maxAttempts under a limit: judged once, by maxAttempts.
    assert.same({ "WIDENING  GET /v1/*  maxAttempts 4 → 5" },
      lines(function(t) t.routes[3].classLimits = { TIMEOUT = 2 } end,
        function(t) t.routes[3].classLimits = { TIMEOUT = 2 }; t.routes[3].maxAttempts = 5 end))
  end)

  it("any change to retryAfter.headers widens: added, removed or moved", function()
    local two = function(t) t.routes[3].retryAfter = { honor = true, maxMs = 3000,
      headers = { "retry-after-ms", "retry-after" } } end
    assert.same({ "WIDENING  GET /v1/*  retryAfter.headers [retry-after] → [retry-after-ms, retry-after]" },
      lines(nil, two))
    assert.same({ "WIDENING  GET /v1/*  retryAfter.headers [retry-after-ms, retry-after] → [retry-after]" },
      lines(two, nil))
    assert.same({ "WIDENING  GET /v1/*  retryAfter.headers [retry-after-ms, retry-after] → [retry-after, retry-after-ms]" },
      lines(two, function(t) t.routes[3].retryAfter = { honor = true, maxMs = 3000,
        headers = { "retry-after", "retry-after-ms" } } end))
    -- Writing the default out, or in another case, changes nothing.
    assert.same({}, lines(nil, function(t) t.routes[3].retryAfter = { honor = true, maxMs = 3000,
      headers = { "Retry-After" } } end))
  end)
end)

describe("diff.compare: hedging and the ratio retry budget, by effect", function()
  local lines = edit_lines
  local function hedge(max, delay, classes)
    return function(t) t.routes[3].hedging = { maxAttempts = max, hedgingDelayMs = delay, nonFatalClasses = classes } end
  end

  it("hedging added, raised, sooner or past more classes widens; the reverse narrows; both ways widens", function()
    assert.same({ "WIDENING  GET /v1/*  hedging none → {maxAttempts 3, hedgingDelayMs 100}" },
      lines(nil, hedge(3, 100)))
    assert.same({ "NARROWING  GET /v1/*  hedging {maxAttempts 3, hedgingDelayMs 100} → none" },
      lines(hedge(3, 100), nil))
    assert.same({ "WIDENING  GET /v1/*  hedging {maxAttempts 3, hedgingDelayMs 100} → {maxAttempts 4, hedgingDelayMs 100}" },
      lines(hedge(3, 100), hedge(4, 100)))
    assert.same({ "WIDENING  GET /v1/*  hedging {maxAttempts 3, hedgingDelayMs 100} → {maxAttempts 3, hedgingDelayMs 50}" },
      lines(hedge(3, 100), hedge(3, 50)))
    assert.same({ "NARROWING  GET /v1/*  hedging {maxAttempts 3, hedgingDelayMs 50} → {maxAttempts 3, hedgingDelayMs 100}" },
      lines(hedge(3, 50), hedge(3, 100)))
    assert.same({ "WIDENING  GET /v1/*  hedging {maxAttempts 3, hedgingDelayMs 100} → {maxAttempts 3, hedgingDelayMs 100, "
      .. "nonFatalClasses HTTP_503}" }, lines(hedge(3, 100), hedge(3, 100, { "HTTP_503" })))
    -- Fewer attempts but sooner: one request may get a hedge earlier, so it widens (fail closed).
    assert.same({ "WIDENING  GET /v1/*  hedging {maxAttempts 3, hedgingDelayMs 100} → {maxAttempts 2, hedgingDelayMs 50}" },
      lines(hedge(3, 100), hedge(2, 50)))
    -- The canonical form: classes by alias and order are the same hedging.
    assert.same({}, lines(hedge(3, 100, { "HTTP_503", "TIMEOUT" }), hedge(3, 100, { "TIMEOUT", "HTTP_503" })))
  end)

  local ratio = function(r, m, ttl)
    return function(t) t.retryBudget = { retryRatio = r, minRetriesPerSecond = m, ttlMs = ttl } end
  end

  it("a higher ratio or minimum widens, lower narrows; any window change widens", function()
    assert.same({ "WIDENING  (policy)  retryBudget.retryRatio 0.2 → 0.25" }, lines(ratio(0.2, 0, 10000), ratio(0.25, 0, 10000)))
    assert.same({ "NARROWING  (policy)  retryBudget.retryRatio 0.25 → 0.2" }, lines(ratio(0.25, 0, 10000), ratio(0.2, 0, 10000)))
    assert.same({ "WIDENING  (policy)  retryBudget.minRetriesPerSecond 0 → 5" }, lines(ratio(0.2, 0, 10000), ratio(0.2, 5, 10000)))
    assert.same({ "WIDENING  (policy)  retryBudget.ttlMs 10000 → 20000" }, lines(ratio(0.2, 0, 10000), ratio(0.2, 0, 20000)))
    assert.same({ "WIDENING  (policy)  retryBudget.ttlMs 20000 → 10000" }, lines(ratio(0.2, 0, 20000), ratio(0.2, 0, 10000)))
    -- minRetriesPerSecond 0 and ttlMs 10000 are the defaults: writing them out changes nothing.
    assert.same({}, lines(function(t) t.retryBudget = { retryRatio = 0.2 } end, ratio(0.2, 0, 10000)))
  end)

  it("switching kinds widens unless the new budget allows no retry at all", function()
    local tokens = function(t) t.retryBudget = { maxTokens = 100, tokenRatio = 0.5 } end
    assert.same({ "WIDENING  (policy)  retryBudget {maxTokens 100, tokenRatio 0.5} → {retryRatio 0.2, "
      .. "minRetriesPerSecond 0, ttlMs 10000} (another kind of budget: judged widening unless it allows no retry)" },
      lines(tokens, ratio(0.2, 0, 10000)))
    assert.same({ "WIDENING  (policy)  retryBudget {retryRatio 0.2, minRetriesPerSecond 0, ttlMs 10000} → "
      .. "{maxTokens 100, tokenRatio 0.5} (another kind of budget: judged widening unless it allows no retry)" },
      lines(ratio(0.2, 0, 10000), tokens))
    assert.same({ "NARROWING  (policy)  retryBudget {maxTokens 100, tokenRatio 0.5} → {retryRatio 0, "
      .. "minRetriesPerSecond 0, ttlMs 10000} (it allows no retry)" }, lines(tokens, ratio(0, 0, 10000)))
    assert.same({ "NARROWING  (policy)  retryBudget {retryRatio 0.2, minRetriesPerSecond 0, ttlMs 10000} → "
      .. "{maxTokens 2, tokenRatio 0.5} (it allows no retry)" },
      lines(ratio(0.2, 0, 10000), function(t) t.retryBudget = { maxTokens = 2, tokenRatio = 0.5 } end))
  end)
end)

describe("diff property: a request that gains means WIDENING", function()
  local METHODS = { "GET", "POST" }
  local PATTERNS = { "/a", "/a/{id}", "/a/*", "/a/b", "/a/{id}/c", "/*", "/b/{x}", "/a/b/*" }
  local SEGMENTS = { "a", "b", "c", "7", "zz" }
  local CLASSES = { "HTTP_500", "HTTP_502", "HTTP_503", "HTTP_5XX", "HTTP_4XX", "HTTP_429", "TIMEOUT",
    "CONNECT_RESET" }
  local JITTERS = { "none", "full", "equal", "decorrelated" }

  local oracle = require "spec.support.diff_oracle"
  local pick, subset = oracle.pick, oracle.subset

  local function random_lock(rng)
    local routes, used = {}, {}
    for _ = 1, rng(4) do
      local ep = pick(rng, METHODS) .. " " .. pick(rng, PATTERNS)
      if not used[ep] then
        used[ep] = true
        local budget = 500 * rng(8)
        local per = math.min(budget, 250 * rng(4))
        local base_ms = 50 * (rng(4) - 1)
        local retryable = subset(rng, CLASSES)
        local not_retryable = json.array()
        for _, c in ipairs(subset(rng, CLASSES)) do
          local dup = false
          for _, r in ipairs(retryable) do dup = dup or r == c end
          if not dup then not_retryable[#not_retryable + 1] = c end
        end
        routes[#routes + 1] = { endpoint = ep, maxAttempts = rng(4), perAttemptTimeoutMs = per, totalBudgetMs = budget,
          minAttemptMs = math.min(per, 100 * (rng(3) - 1)), retryable = retryable, notRetryable = not_retryable,
          idempotencyRequired = rng(2) == 1 and { "POST" } or json.array(),
          backoff = { baseMs = base_ms, multiplier = pick(rng, { 1, 1.5, 2 }), maxMs = base_ms + 100 * (rng(3) - 1),
            jitter = pick(rng, JITTERS) },
          retryAfter = { honor = rng(2) == 1, maxMs = 1000 * rng(3) } }
      end
    end
    return { version = 1, routes = routes }
  end

  -- A mutated copy: one or two fields of one route changed, a route added or one removed.
  local function mutate(rng, t)
    local c = json.decode(json.encode(t))
    for _ = 1, rng(2) do
      local what = rng(12)
      local r = c.routes[rng(#c.routes)]
      if what == 1 then r.maxAttempts = rng(4)
      elseif what == 2 then r.totalBudgetMs = 500 * rng(8); r.perAttemptTimeoutMs = math.min(r.perAttemptTimeoutMs,
        r.totalBudgetMs); r.minAttemptMs = math.min(r.minAttemptMs, r.perAttemptTimeoutMs)
      elseif what == 3 then r.retryable = subset(rng, CLASSES); r.notRetryable = json.array()
      elseif what == 4 then r.idempotencyRequired = rng(2) == 1 and { "POST" } or json.array()
      elseif what == 5 then r.backoff.jitter = pick(rng, JITTERS)
      elseif what == 6 then r.backoff.baseMs = 50 * (rng(4) - 1); r.backoff.maxMs = r.backoff.baseMs + 100 * (rng(3) - 1)
      elseif what == 7 then r.retryAfter.honor = not r.retryAfter.honor; r.retryAfter.maxMs = 1000 * rng(3)
      elseif what == 8 and #c.routes > 1 then table.remove(c.routes, rng(#c.routes))
      elseif what == 9 then
        local extra = random_lock(rng).routes[1]
        local clash = false
        for _, o in ipairs(c.routes) do clash = clash or o.endpoint:gsub("{[^}]*}", "{}") == extra.endpoint:gsub("{[^}]*}", "{}") end
        if not clash then c.routes[#c.routes + 1] = extra end
      elseif what == 11 then -- class limits (an overlap or a limit over maxAttempts makes no lock: skipped)
        r.classLimits = {}
        for _ = 1, rng(3) - 1 do r.classLimits[pick(rng, CLASSES)] = rng(r.maxAttempts) end
      elseif what == 12 then
        local headers = subset(rng, rf.wait_headers)
        r.retryAfter.headers = #headers > 0 and headers or { "retry-after" }
      else r.minAttemptMs = math.min(r.perAttemptTimeoutMs, 100 * (rng(3) - 1)) end
    end
    return c
  end

  local effects, gains = oracle.effects, oracle.gains

  it("holds for 300 random lock pairs and 60 random requests each", function()
    local seed = tonumber(os.getenv("RF_DIFF_PROPERTY_SEED") or "11")
    local state = seed
    local function rng(n) -- Park-Miller (MINSTD): reproducible from the seed, exact in doubles (LuaJIT too)
      state = state * 48271 % 2147483647
      return math.floor(state / 2147483647 * n) + 1
    end
    local checked, gained = 0, 0
    for case = 1, 300 do
      local ta = random_lock(rng)
      local tb = mutate(rng, ta)
      local pa, pb = rf.load_string(json.encode(ta)), rf.load_string(json.encode(tb))
      if pa and pb then
        local widened = diff.widens(diff.compare(pa, pb))
        for _ = 1, 60 do
          local segs = {}
          for i = 1, rng(5) - 1 do segs[i] = pick(rng, SEGMENTS) end
          local method, path = pick(rng, METHODS), "/" .. table.concat(segs, "/")
          if gains(effects(pa, method, path), effects(pb, method, path)) then
            gained = gained + 1
            assert(widened, string.format("seed %d case %d: %s %s gains, but the diff says %s:\n%s\n%s", seed, case,
              method, path, diff.verdict(diff.compare(pa, pb)), json.encode(ta), json.encode(tb)))
          end
          checked = checked + 1
        end
      end
    end
    assert.is_true(checked >= 6000, "checked " .. checked)
    assert.is_true(gained >= 200, "only " .. gained .. " requests gained: the generator is too tame")
  end)
end)

describe("retryfreeze diff", function()
  local dir, old_path, new_path

  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    old_path, new_path = dir .. "/old.lock.json", dir .. "/service.lock.json"
    local t = base()
    local f = assert(io.open(old_path, "w"))
    f:write(json.encode(t))
    f:close()
    jobs(t).maxAttempts = 5
    f = assert(io.open(new_path, "w"))
    f:write(json.encode(t))
    f:close()
  end)

  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("prints one line per change and exits 1 when something widens", function()
    local out, err, code = h.run_cli("diff", old_path, new_path)
    assert.equal("", err)
    assert.equal(1, code)
    -- No pairing log at all: said as verify says it, not "is not the latest sign-off in" a file that does not exist.
    assert.equal("WIDENING  POST /v1/jobs  maxAttempts 3 → 5\nwidening without sign-off: no sign-off exists: "
      .. dir .. "/pairing-log.jsonl not found\n", out)
  end)

  it("says which sign-off is missing: none for this lock, or not the latest", function()
    local log = dir .. "/pairing-log.jsonl"
    local _, err, code = h.run_cli("signoff", old_path, "--by", "Ana", "--by", "Bo")
    assert.equal(0, code, err)
    local out
    out, err, code = h.run_cli("diff", old_path, new_path)
    assert.equal(1, code, err)
    assert.equal("WIDENING  POST /v1/jobs  maxAttempts 3 → 5\nwidening without sign-off: no sign-off exists for "
      .. "service.lock.json in " .. log .. "\n", out)
    _, err, code = h.run_cli("signoff", new_path, "--by", "Ana", "--by", "Bo")
    assert.equal(0, code, err)
    local signed = assert(rf.load(new_path)).digest
    local t = json.decode(h.read_file(new_path))
    jobs(t).maxAttempts = 6
    h.write_file(new_path, json.encode(t))
    out, err, code = h.run_cli("diff", old_path, new_path)
    assert.equal(1, code, err)
    assert.equal("WIDENING  POST /v1/jobs  maxAttempts 3 → 6\nwidening without sign-off: "
      .. assert(rf.load(new_path)).digest .. " is not the latest sign-off of service.lock.json in " .. log
      .. " (that is " .. signed .. ", line 2)\n", out)
  end)

  it("exits 0 for a narrowing", function()
    local out, _, code = h.run_cli("diff", new_path, old_path)
    assert.equal(0, code)
    assert.equal("NARROWING  POST /v1/jobs  maxAttempts 5 → 3\n", out)
  end)

  it("exits 0 and says so when nothing changed", function()
    local out, _, code = h.run_cli("diff", old_path, old_path)
    assert.equal(0, code)
    assert.equal("no changes (" .. assert(rf.load(old_path)).digest .. ")\n", out)
  end)

  it("exits 0 when NEW's digest is the latest sign-off", function()
    local _, _, code = h.run_cli("signoff", new_path, "--by", "Ana & Bo")
    assert.equal(0, code)
    local out
    out, _, code = h.run_cli("diff", old_path, new_path)
    assert.equal(0, code)
    assert.matches("^WIDENING  POST /v1/jobs  maxAttempts 3 → 5\nwidening signed off: sha256:%x+ on "
      .. "%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ by Ana & Bo %(.*pairing%-log%.jsonl line 1%)\n$", out)
  end)

  it("prints JSON with --json", function()
    local out, _, code = h.run_cli("diff", old_path, new_path, "--json")
    assert.equal(1, code)
    local doc = assert(json.decode(out))
    assert.same({ widening = 1, narrowing = 0, neutral = 0 }, doc.summary)
    assert.equal(json.null, doc.signed_off)
    assert.equal(assert(rf.load(old_path)).digest, doc.from.digest)
    assert.equal(new_path, doc.to.source)
    assert.equal(1, #doc.changes)
    local c = doc.changes[1]
    assert.same({ "widening", "POST /v1/jobs", "maxAttempts", 3, 5, "WIDENING  POST /v1/jobs  maxAttempts 3 → 5" },
      { c.kind, c.route, c.field, c.old, c.new, c.line })
    assert.same({ "POST /v1/jobs" }, c.requests)
  end)

  it("exits 2 on an invalid lock and on bad usage", function()
    local bad = h.temp_file('{"endpoint":"GET /a"}')
    local out, err, code = h.run_cli("diff", old_path, bad)
    os.remove(bad)
    assert.equal(2, code)
    assert.equal("", out)
    assert.equal("retryfreeze diff: " .. bad .. ": $.maxAttempts: is required and has no default (an absent number "
      .. "never becomes a retry count)\n", err)
    out, err, code = h.run_cli("diff", old_path)
    assert.equal("", out)
    assert.equal(2, code)
    assert.matches("expected OLD and NEW", err)
  end)

  describe("git:REV:PATH", function()
    if not h.has_git then
      pending("git is not installed")
      return
    end

    -- Runs the CLI with the temporary repository as the working directory.
    local function run_in_repo(...)
      local cli = h.cli:sub(1, 1) == "/" and h.cli or (os.getenv("PWD") .. "/" .. h.cli)
      local args = {}
      for i, a in ipairs({ ... }) do args[i] = "'" .. a:gsub("'", "'\\''") .. "'" end
      return h.sh("cd '" .. dir .. "' && '" .. cli .. "' " .. table.concat(args, " "))
    end

    before_each(function()
      h.git(dir, "init -q .")
      h.write_file(dir .. "/committed.lock.json", h.read_file(dir .. "/old.lock.json"))
      h.git(dir, "add committed.lock.json")
      h.git(dir, "commit -q -m lock")
    end)

    it("reads OLD from a commit", function()
      local out, err, code = run_in_repo("diff", "git:HEAD:committed.lock.json", "service.lock.json")
      assert.equal("", err)
      assert.equal(1, code)
      assert.matches("^WIDENING  POST /v1/jobs  maxAttempts 3 → 5\n", out)
      out, err, code = run_in_repo("diff", "git:HEAD:./committed.lock.json", "old.lock.json")
      assert.equal("", err)
      assert.equal(0, code)
      assert.equal("no changes (" .. assert(rf.load(old_path)).digest .. ")\n", out)
    end)

    it("diff.load reports git's failure, and loads plain paths with their text", function()
      -- git runs in the current directory (the project here), where this path was never committed
      local p, err = diff.load("git:HEAD:no/such/committed.lock.json")
      assert.is_nil(p)
      assert.matches("^git:HEAD:no/such/committed%.lock%.json: git show failed %(exit %d+%): .+", err)
      local text
      p, text = diff.load(old_path)
      assert.equal(assert(rf.load(old_path)).digest, p.digest)
      assert.equal(json.encode(base()), text)
      p, err = diff.load(dir .. "/nope.json")
      assert.is_nil(p)
      assert.matches("nope%.json: No such file or directory", err)
    end)

    -- diff OLD service.lock.json in the repository, refused: exit 2, nothing on stdout; returns stderr.
    local function refused(old)
      local out, err, code = run_in_repo("diff", old, "service.lock.json")
      assert.equal(2, code, old)
      assert.equal("", out)
      return err
    end

    it("exits 2 with git's message when git fails", function()
      assert.matches("^retryfreeze diff: git:nosuchrev:committed%.lock%.json: git show failed %(exit 128%): "
        .. ".*nosuchrev", refused("git:nosuchrev:committed.lock.json"))
      assert.matches("missing%.json", refused("git:HEAD:missing.json"))
    end)

    it("refuses a malformed git: source and quotes hostile paths", function()
      assert.equal("retryfreeze diff: git:HEAD: expected git:REV:PATH (REV not starting with '-')\n",
        refused("git:HEAD"))
      assert.matches("expected git:REV:PATH", refused("git:--output=/tmp/x:y"))
      assert.matches("git show failed", refused("git:HEAD:a'; touch pwned; '"))
      assert.is_nil(io.open(dir .. "/pwned"))
    end)
  end)
end)
