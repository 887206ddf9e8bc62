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

-- One case per field: edit(t, old_or_new_value) and the two values; going a → b widens.
local cases = {
  { "maxAttempts", 2, 5, function(t, v) jobs(t).maxAttempts = v end },
  { "perAttemptTimeoutMs", 1000, 1500, function(t, v) jobs(t).perAttemptTimeoutMs = v end },
  { "totalBudgetMs", 4000, 6000, function(t, v) jobs(t).totalBudgetMs = v end },
  { "minAttemptMs", 200, 100, function(t, v) jobs(t).minAttemptMs = v end },
  { "backoff.baseMs", 100, 50, function(t, v) jobs(t).backoff = { baseMs = v } end },
  { "backoff.multiplier", 2, 1.5, function(t, v) jobs(t).backoff = { multiplier = v } end },
  { "backoff.maxMs", 2000, 1000, function(t, v) jobs(t).backoff = { maxMs = v } end },
  { "backoff.jitter", "equal", "none", function(t, v) jobs(t).backoff = { jitter = v } end },
  { "backoff.jitter", "full", "equal", function(t, v) jobs(t).backoff = { jitter = v } end },
  { "backoff.jitter", "decorrelated", "full", function(t, v) jobs(t).backoff = { jitter = v } end },
  { "backoff.jitter", "decorrelated", "none", function(t, v) jobs(t).backoff = { jitter = v } end },
  { "retryAfter.honor", true, false, function(t, v) jobs(t).retryAfter = { honor = v } end },
  { "retryAfter.maxMs", 3000, 6000, function(t, v) jobs(t).retryAfter = { maxMs = v } end },
  { "retryBudget.maxTokens", 100, 200, function(t, v) t.retryBudget.maxTokens = v end, diff.POLICY },
  { "retryBudget.tokenRatio", 0.5, 1.25, function(t, v) t.retryBudget.tokenRatio = v end, diff.POLICY },
  { "gate.maxRetryRatio", 0.5, 0.75, function(t, v) t.gate.maxRetryRatio = v end, diff.POLICY },
  { "gate.minSuccesses", 10, 50, function(t, v) t.gate.minSuccesses = v end, diff.POLICY },
}

describe("diff.compare", function()
  for _, c in ipairs(cases) do
    local field, a, b, edit, route = c[1], c[2], c[3], c[4], c[5] or "POST /v1/jobs"
    it(string.format("%s %s → %s widens, and back narrows", field, tostring(a), tostring(b)), function()
      local ta, tb = base(), base()
      edit(ta, a)
      edit(tb, b)
      local pa, pb = load(ta), load(tb)
      local fwd = diff.compare(pa, pb)
      assert.equal(1, #fwd)
      assert.same({ kind = "widening", route = route, field = field, old = a, new = b }, {
        kind = fwd[1].kind, route = fwd[1].route, field = fwd[1].field, old = fwd[1].old, new = fwd[1].new })
      local back = diff.compare(pb, pa)
      assert.equal(1, #back)
      assert.equal("narrowing", back[1].kind)
      assert.equal(field, back[1].field)
      assert.equal(b, back[1].old)
      assert.equal(a, back[1].new)
    end)
  end

  local set_cases = {
    { "retryable", "HTTP_502", "widening", function(t) jobs(t).retryable = { "HTTP_503", "TIMEOUT", "HTTP_502" } end },
    { "notRetryable", "HTTP_502", "narrowing", function(t) jobs(t).notRetryable = { "HTTP_500", "HTTP_502" } end },
    { "idempotencyRequired", "PATCH", "narrowing",
      function(t) jobs(t).idempotencyRequired = { "POST", "DELETE", "PATCH" } end },
  }
  for _, c in ipairs(set_cases) do
    local field, member, kind, edit = c[1], c[2], c[3], c[4]
    it(string.format("%s +%s is %s, and -%s the reverse", field, member, kind, member), function()
      local tb = base()
      edit(tb)
      local pa, pb = load(base()), load(tb)
      local fwd = diff.compare(pa, pb)
      assert.equal(1, #fwd)
      assert.equal(kind, fwd[1].kind)
      assert.equal(field, fwd[1].field)
      assert.is_nil(fwd[1].old)
      assert.equal(member, fwd[1].new)
      assert.equal(kind:upper() .. "  POST /v1/jobs  " .. field .. " +" .. member, diff.format(fwd[1]))
      local back = diff.compare(pb, pa)
      assert.equal(1, #back)
      assert.equal(kind == "widening" and "narrowing" or "widening", back[1].kind)
      assert.equal(member, back[1].old)
      assert.is_nil(back[1].new)
      assert.equal(field .. " -" .. member, back[1].text)
    end)
  end

  it("removing a class from notRetryable widens (list-level, fail closed)", function()
    local tb = base()
    jobs(tb).notRetryable = json.array()
    local ch = diff.compare(load(base()), load(tb))
    assert.same({ "WIDENING  POST /v1/jobs  notRetryable -HTTP_500" }, diff.lines(ch))
  end)

  it("formats a change as KIND  ROUTE  field old → new", function()
    local tb = base()
    jobs(tb).maxAttempts = 5
    local ch = diff.compare(load(base()), load(tb))
    assert.same({ "WIDENING  POST /v1/jobs  maxAttempts 3 → 5" }, diff.lines(ch))
    assert.same({ widening = 1, narrowing = 0, neutral = 0 }, diff.summary(ch))
    assert.is_true(diff.widens(ch))
    assert.is_false(diff.widens(diff.compare(load(tb), load(base()))))
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
    it("a new route that retries widens; removing it narrows (its requests are refused)", function()
      local tb = base()
      table.insert(tb.routes, { endpoint = "PUT /v2/jobs/{id}", idempotencyRequired = json.array() })
      local pa, pb = load(base()), load(tb)
      local fwd = diff.compare(pa, pb)
      assert.equal(1, #fwd)
      assert.equal("widening", fwd[1].kind)
      assert.equal("route", fwd[1].field)
      assert.equal("no-route", fwd[1].old)
      assert.equal("PUT /v2/jobs/{id}", fwd[1].new)
      assert.equal("WIDENING  PUT /v2/jobs/{id}  route added; its requests were refused before (no-route); it "
        .. "retries (maxAttempts 3, retryable HTTP_503, TIMEOUT)", diff.format(fwd[1]))
      local back = diff.compare(pb, pa)
      assert.same({ "NARROWING  PUT /v2/jobs/{id}  route removed; its requests are now refused (no-route)" },
        diff.lines(back))
    end)

    it("a route removed so that its requests fall to a wider route widens; adding it back narrows", function()
      local tb = base()
      table.remove(tb.routes, 2) -- GET /v1/jobs/{id} (2 attempts); GET /v1/* allows 4
      local pa, pb = load(base()), load(tb)
      local fwd = diff.compare(pa, pb)
      assert.equal(1, #fwd)
      assert.equal("widening", fwd[1].kind)
      assert.equal("GET /v1/jobs/{id}", fwd[1].old)
      assert.equal("GET /v1/*", fwd[1].new)
      assert.equal("WIDENING  GET /v1/jobs/{id}  route removed; its requests now go to GET /v1/* (maxAttempts 2 → 4)",
        diff.format(fwd[1]))
      assert.equal("maxAttempts", fwd[1].details[1].field)
      local back = diff.compare(pb, pa)
      assert.same({ "NARROWING  GET /v1/jobs/{id}  route added; its requests used to go to GET /v1/* "
        .. "(maxAttempts 4 → 2)" }, diff.lines(back))
    end)

    it("a route removed in favour of an identical one is neutral", function()
      local ta, tb = base(), base()
      ta.routes[2].maxAttempts = 4
      table.remove(tb.routes, 2)
      local ch = diff.compare(load(ta), load(tb))
      assert.same({ "NEUTRAL  GET /v1/jobs/{id}  route removed; its requests now go to GET /v1/* (identical rules)" },
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

    it("sample_path fills parameters and a final wildcard", function()
      assert.equal("/v1/jobs/rf-sample/runs/rf-sample", diff.sample_path("/v1/jobs/{id}/runs/{run}"))
      assert.equal("/v1/rf-sample", diff.sample_path("/v1/*"))
      assert.equal("/v1/jobs", diff.sample_path("/v1/jobs"))
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
    assert.is_true(found["WIDENING  POST /v1/jobs  maxAttempts 2 → 3"])
    assert.is_true(found["NARROWING  POST /v1/jobs  perAttemptTimeoutMs 2000 → 1000"])
    assert.is_true(found["WIDENING  POST /v1/jobs  retryable +HTTP_503"])
    assert.is_true(found["WIDENING  GET /v1/jobs/{id}  route added; its requests were refused before (no-route); "
      .. "it retries (maxAttempts 4, retryable HTTP_429, HTTP_502, HTTP_503, HTTP_504, TIMEOUT, CONNECT_RESET)"])
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
    assert.equal("WIDENING  POST /v1/jobs  maxAttempts 3 → 5\nwidening without sign-off: "
      .. assert(rf.load(new_path)).digest .. " is not the latest sign-off in " .. dir .. "/pairing-log.jsonl\n", out)
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
    if not os.execute("git --version >/dev/null 2>&1") then
      pending("git is not installed")
      return
    end

    local function sh(cmd)
      local ok = os.execute("cd '" .. dir .. "' && " .. cmd .. " >/dev/null 2>&1")
      assert(ok, cmd)
    end

    -- Runs the CLI with the temporary repository as the working directory.
    local function run_in_repo(...)
      local cli = h.cli:sub(1, 1) == "/" and h.cli or (os.getenv("PWD") .. "/" .. h.cli)
      local args = {}
      for i, a in ipairs({ ... }) do args[i] = "'" .. a:gsub("'", "'\\''") .. "'" end
      local err_file = os.tmpname()
      local p = io.popen("cd '" .. dir .. "' && '" .. cli .. "' " .. table.concat(args, " ") .. " 2>" .. err_file)
      local out = p:read("a")
      local _, _, code = p:close()
      local f = io.open(err_file)
      local err = f:read("a")
      f:close()
      os.remove(err_file)
      return out, err, code
    end

    before_each(function()
      sh("git init -q . && cp old.lock.json committed.lock.json && git add committed.lock.json && "
        .. "git -c user.name=t -c user.email=t@example.com commit -q -m lock")
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

    it("exits 2 with git's message when git fails", function()
      local out, err, code = run_in_repo("diff", "git:nosuchrev:committed.lock.json", "service.lock.json")
      assert.equal(2, code)
      assert.equal("", out)
      assert.matches("^retryfreeze diff: git:nosuchrev:committed%.lock%.json: git show failed %(exit 128%): "
        .. ".*nosuchrev", err)
      out, err, code = run_in_repo("diff", "git:HEAD:missing.json", "service.lock.json")
      assert.equal("", out)
      assert.equal(2, code)
      assert.matches("missing%.json", err)
    end)

    it("refuses a malformed git: source and quotes hostile paths", function()
      local _, err, code = run_in_repo("diff", "git:HEAD", "service.lock.json")
      assert.equal(2, code)
      assert.equal("retryfreeze diff: git:HEAD: expected git:REV:PATH (REV not starting with '-')\n", err)
      _, err, code = run_in_repo("diff", "git:--output=/tmp/x:y", "service.lock.json")
      assert.equal(2, code)
      assert.matches("expected git:REV:PATH", err)
      _, err, code = run_in_repo("diff", "git:HEAD:a'; touch pwned; '", "service.lock.json")
      assert.equal(2, code)
      assert.matches("git show failed", err)
      assert.is_nil(io.open(dir .. "/pwned"))
    end)
  end)
end)
