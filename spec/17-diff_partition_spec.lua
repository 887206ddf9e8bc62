-- The diff against an adversary: random lock pairs whose literals come from a small pool of strings a diff could
-- confuse (placeholder-like strings, "~", "_", "%2A" and "%2a", case variants), one mutation of one route (or a
-- route added, removed or moved), and then EVERY request up to 4 segments over the pair's literals, the empty
-- segment and two fresh segments, every method either lock names plus a lowercase and an unnamed one, with
-- queries, fragments and paths that do not start with "/", routed by the engine. Any request that gains
-- (spec/support/diff_oracle.lua) must make the diff widen, and the CLI exit 1. Seeds: RF_DIFF_PARTITION_SEEDS
-- ("1,2,3"), cases per seed: RF_DIFF_PARTITION_CASES.
local h = require "spec.helper"
local rf = require "retryfreeze"
local diff = require "retryfreeze.diff"
local json = require "retryfreeze.json"
local oracle = require "spec.support.diff_oracle"

-- Literals a lock may name. The empty segment is not one of them (a lock refuses "//"): requests carry it.
local LOCK_POOL = { "a", "A", "rf~", "~", "_", "%2A", "%2a", "b" }
-- Segments a request may carry that no lock of the case names: placeholder-like strings, a "*" and a "{id}" (a
-- lock reads those as patterns, a request as text), a case variant.
local FRESH_POOL = { "rf~", "zz", "*", "{id}", "A", "~", "%2A", "<other>", "x y" }
local METHODS = { "GET", "GET", "POST" }
local REQUEST_METHODS = { "GET", "POST", "get", "PUT" }
local CLASSES = { "HTTP_500", "HTTP_502", "HTTP_503", "HTTP_5XX", "HTTP_4XX", "HTTP_429", "TIMEOUT" }
local JITTERS = { "none", "full", "equal", "decorrelated" }

local pick, subset = oracle.pick, oracle.subset

local function shape(endpoint) return (endpoint:gsub("{[^}]*}", "{}")) end

-- A pattern of 0..3 segments: literals of the case, {param}s, and sometimes a last "*".
local function random_endpoint(rng, literals)
  local segs = {}
  for i = 1, rng(4) - 1 do
    local r = rng(10)
    segs[i] = r <= 5 and pick(rng, literals) or "{p" .. i .. "}"
  end
  if rng(4) == 1 then segs[#segs + 1] = "*" end
  return pick(rng, METHODS) .. " /" .. table.concat(segs, "/")
end

local function random_route(rng, literals)
  local budget = 500 * rng(8)
  local per = math.min(budget, 250 * rng(4))
  local base_ms = 50 * (rng(4) - 1)
  return { endpoint = random_endpoint(rng, literals), maxAttempts = rng(4), perAttemptTimeoutMs = per,
    totalBudgetMs = budget, minAttemptMs = math.min(per, 100 * (rng(3) - 1)), retryable = subset(rng, CLASSES),
    notRetryable = json.array(), idempotencyRequired = rng(2) == 1 and { "GET", "POST" } or json.array(),
    backoff = { baseMs = base_ms, multiplier = pick(rng, { 1, 2 }), maxMs = base_ms + 100 * (rng(3) - 1),
      jitter = pick(rng, JITTERS) },
    retryAfter = { honor = rng(2) == 1, maxMs = 1000 * rng(3) } }
end

-- Adds r unless a route of the same shape is there (the lock would refuse it).
local function add(routes, r)
  for _, o in ipairs(routes) do if shape(o.endpoint) == shape(r.endpoint) then return false end end
  routes[#routes + 1] = r
  return true
end

-- A quarter of the locks start with a family that leaves a last "*" only the paths with an empty segment:
-- P, P/{q}/* and P/* (P/{q}/* takes P/x and longer, P takes P itself, P/* keeps P/ and P//x).
local function random_lock(rng, literals)
  local routes = {}
  if rng(4) == 1 then
    local p = random_route(rng, literals)
    p.endpoint = p.endpoint:gsub("/%*$", "")
    local sep = p.endpoint:sub(-1) == "/" and "" or "/"
    for _, tail in ipairs({ "", sep .. "{q}/*", sep .. "*" }) do
      local r = random_route(rng, literals)
      r.endpoint = p.endpoint .. tail
      add(routes, r)
    end
  end
  for _ = 1, 1 + rng(4) do add(routes, random_route(rng, literals)) end
  return { version = 1, routes = routes }
end

-- One field of one route changed, or a route added, removed or moved to another endpoint; half the time a
-- second change of another field elsewhere (as an attacker adds a small narrowing, so that the diff has something
-- to say).
local function mutate(rng, t, literals)
  local c = json.decode(json.encode(t))
  for round = 1, rng(2) do
    local r = c.routes[rng(#c.routes)]
    local what = rng(10)
    if what == 1 then r.maxAttempts = rng(4)
    elseif what == 2 then
      r.totalBudgetMs = 500 * rng(8)
      r.perAttemptTimeoutMs = math.min(r.perAttemptTimeoutMs, r.totalBudgetMs)
      r.minAttemptMs = math.min(r.minAttemptMs, r.perAttemptTimeoutMs)
    elseif what == 3 then r.retryable = subset(rng, CLASSES)
    elseif what == 4 then r.idempotencyRequired = rng(2) == 1 and { "GET", "POST" } or json.array()
    elseif what == 5 then r.backoff.jitter = pick(rng, JITTERS)
    elseif what == 6 then r.retryAfter.honor = not r.retryAfter.honor
    elseif what == 7 and #c.routes > 1 then table.remove(c.routes, rng(#c.routes))
    elseif what == 8 and round == 1 then
      local moved = json.decode(json.encode(r))
      moved.endpoint = random_endpoint(rng, literals)
      for i, o in ipairs(c.routes) do
        if o == r then table.remove(c.routes, i) break end
      end
      if not add(c.routes, moved) then c.routes[#c.routes + 1] = r end
    elseif what == 9 then add(c.routes, random_route(rng, literals))
    else r.minAttemptMs = math.min(r.perAttemptTimeoutMs, 100 * (rng(3) - 1)) end
  end
  return c
end

-- Every path of 0..4 segments over alphabet, the ones of up to 2 segments also with a query and a fragment,
-- and paths that do not start with "/".
local function all_paths(alphabet)
  local paths = { "", "a", "?x", "#" }
  local function walk(prefix, depth)
    paths[#paths + 1] = prefix == "" and "/" or prefix
    if depth <= 2 then
      paths[#paths + 1] = (prefix == "" and "/" or prefix) .. "?q=/x"
      paths[#paths + 1] = (prefix == "" and "/" or prefix) .. "#f"
    end
    if depth == 4 then return end
    for _, s in ipairs(alphabet) do walk(prefix .. "/" .. s, depth + 1) end
  end
  walk("", 0)
  return paths
end

local function seeds()
  local s = {}
  for n in (os.getenv("RF_DIFF_PARTITION_SEEDS") or "1,2,3,4"):gmatch("%d+") do s[#s + 1] = tonumber(n) end
  return s
end

describe("diff partition property: every request up to 4 segments that gains means WIDENING", function()
  local cases = tonumber(os.getenv("RF_DIFF_PARTITION_CASES") or "120")

  for _, seed in ipairs(seeds()) do
    it("seed " .. seed .. ": " .. cases .. " lock pairs, every request checked", function()
      local rng = oracle.rng(seed)
      local loaded, gained_cases, requests, cli_runs = 0, 0, 0, 0
      for case = 1, cases do
        local literals, seen = {}, {}
        for _ = 1, 1 + rng(3) do
          local l = pick(rng, LOCK_POOL)
          if not seen[l] then seen[l] = true; literals[#literals + 1] = l end
        end
        local ta = random_lock(rng, literals)
        local tb = mutate(rng, ta, literals)
        local alphabet = { "" }
        for _, l in ipairs(literals) do alphabet[#alphabet + 1] = l end
        for _ = 1, 2 do
          local f = pick(rng, FRESH_POOL)
          if not seen[f] then seen[f] = true; alphabet[#alphabet + 1] = f end
        end
        local text_a, text_b = json.encode(ta), json.encode(tb)
        local pa, pb = rf.load_string(text_a), rf.load_string(text_b)
        if pa and pb then
          loaded = loaded + 1
          local ch = diff.compare(pa, pb)
          local widened = diff.widens(ch)
          local ca, cb, first = {}, {}, nil
          for _, method in ipairs(REQUEST_METHODS) do
            for _, path in ipairs(all_paths(alphabet)) do
              requests = requests + 1
              if oracle.gains(oracle.effects(pa, method, path, ca), oracle.effects(pb, method, path, cb)) then
                first = first or (method .. " " .. path)
                assert(widened, string.format("seed %d case %d: %q gains, but the diff says %s:\n%s\n%s\n%s", seed,
                  case, method .. " " .. path, diff.verdict(ch), text_a, text_b, table.concat(diff.lines(ch), "\n")))
              end
            end
          end
          if first then
            gained_cases = gained_cases + 1
            if cli_runs < 2 then -- the exit code is the diff's verdict: checked on the first two per seed
              cli_runs = cli_runs + 1
              local dir = h.temp_dir("diff-partition")
              h.write_file(dir .. "/old.lock.json", text_a)
              h.write_file(dir .. "/new.lock.json", text_b)
              local out, err, code = h.run_cli("diff", dir .. "/old.lock.json", dir .. "/new.lock.json")
              os.execute("rm -rf " .. h.shell_quote(dir))
              assert.equal(1, code, first .. " gains:\n" .. out .. err)
            end
          end
        end
      end
      assert.is_true(loaded >= cases * 0.8, "only " .. loaded .. " of " .. cases .. " pairs loaded")
      assert.is_true(gained_cases >= cases / 5, "only " .. gained_cases .. " pairs had a request that gains")
      assert.equal(2, cli_runs)
      assert.is_true(requests >= loaded * 4 * 150, "checked " .. requests .. " requests")
    end)
  end
end)
