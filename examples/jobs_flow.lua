-- jobs_flow.lua — the demo's request flow. Submits jobs (POST /v1/jobs, each with its own idempotency key)
-- under the original pairing lock, then reads, lists and cancels jobs under the multi-route service lock.
-- Every attempt's timeout, every retry and every wait comes from the engine's verdicts.
--
-- Usage: retryfreeze run examples/jobs_flow.lua BASE_URL LEDGER [REQUESTS] [SEED]
-- `retryfreeze demo` also hands it a function(done, requests), called after each batch: its progress bar.
local rf = require "retryfreeze"
local on_progress = select(5, ...)

local base_url, ledger_path = arg[1], arg[2]
local requests = math.tointeger(tonumber(arg[3] or "300"))
local seed = math.tointeger(tonumber(arg[4] or "1"))
if not base_url or not ledger_path or not requests then
  io.stderr:write("usage: retryfreeze run examples/jobs_flow.lua BASE_URL LEDGER [REQUESTS] [SEED]\n")
  os.exit(2)
end

local here = arg[0]:match("^(.*)/[^/]*$") or "."
local desk = assert(rf.load(here .. "/retry-budget.lock.json"))
local service = assert(rf.load(here .. "/service.lock.json"))
local ledger <close> = assert(rf.ledger.open(ledger_path))

-- Requests go out in concurrent batches (curl multi); each keeps its own attempt loop and deadline.
local BATCH <const> = 25

local done = 0
local function run_batches(client, make_request, n)
  local responses = {}
  for first = 1, n, BATCH do
    local batch = {}
    for i = first, math.min(n, first + BATCH - 1) do batch[#batch + 1] = make_request(i) end
    for _, r in ipairs(client:all(batch)) do
      if r.ledger_error then error("ledger: " .. r.ledger_error) end
      responses[#responses + 1] = r
    end
    done = done + #batch
    if on_progress then on_progress(done, requests) end
  end
  return responses
end

-- Idempotency keys: one per logical request, the same on every attempt. A real flow takes rf.new_key();
-- the demo derives them from the seed and the request number, because the seeded upstream draws each
-- request's faults from its identity (the key), so the same seed gives the same counts run after run.
local function demo_key(phase, i) return string.format("demo-%d-%s-%d", seed, phase, i) end

-- 1. Submit jobs under the desk's lock: a keyed POST, the same key on every attempt.
local jobs_client <close> = rf.client{ policy = desk, base_url = base_url, ledger = ledger, rng_seed = seed }
local submit_n = requests * 2 // 3
run_batches(jobs_client, function(i)
  return { method = "POST", path = "/v1/jobs", body = '{"kind":"render"}', idempotency_key = demo_key("submit", i),
           headers = { ["Content-Type"] = "application/json" } }
end, submit_n)

-- 2. Read, list and cancel under the service lock (with its client-wide retry budget).
local svc_client <close> = rf.client{ policy = service, base_url = base_url, ledger = ledger, rng_seed = seed + 1,
                                      retry_budget = true }
run_batches(svc_client, function(i)
  local kind = i % 3
  if kind == 0 then return { method = "GET", path = "/v1/jobs/" .. i } end
  if kind == 1 then return { method = "GET", path = "/v1/queues", query = "page=" .. i } end
  return { method = "DELETE", path = "/v1/jobs/" .. i, idempotency_key = demo_key("cancel", i) }
end, requests - submit_n)
