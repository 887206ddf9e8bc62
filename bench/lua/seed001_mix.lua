-- The facts the port of seed 001's classifier (bench/lua/seed001_classifier.lua) and the decision forms are measured
-- on against it (bench_lua.lua, bench_luajit.lua), and checked on (spec/41-seed_port_spec.lua): 32 facts of a POST
-- /v1/jobs under examples/retry-budget.lock.json, in the seed's shape, its pinned cases among them: a keyed 503, a
-- POST without a key, 404 and 409, an unpinned source, Retry-After "3" and "9999". The seed's own mix is not in the
-- repository; this one is written from what is known of it (docs/porting.md, the pinned cases), with Retry-After in
-- 15 facts in every form core/src/engine/retry_after.c accepts (delay-seconds, with whitespace, an IMF-fixdate,
-- RFC 850 and asctime HTTP-dates, one in the past, an invalid value). Every fact with a Retry-After gives now_ms
-- (the clock otherwise), 1994-11-06T08:49:37Z, the Date the HTTP-dates are measured against.
-- bench/lua/decide_mix.lua, the 6-fact mix of the minimal port, stays the data of the other ratios.
local now = 784111777000 -- Sun, 06 Nov 1994 08:49:37 GMT
local date = "Sun, 06 Nov 1994 08:49:37 GMT"
local function post(facts)
  facts.method, facts.path = "POST", "/v1/jobs"
  facts.attempts, facts.elapsed_ms = facts.attempts or 1, facts.elapsed_ms or 100
  if facts.retry_after ~= nil then facts.now_ms = now end
  return facts
end
return {
  post { status = 503, idempotency_key = "k" }, -- the seed retried it; this lock's HANDLER_5XX does not
  post { status = 503, idempotency_key = "k", retry_after = "1" },
  post { status = 504, idempotency_key = "k" },
  post { status = 504, idempotency_key = "k", attempts = 2 },
  post { status = 500, idempotency_key = "k" },
  post { status = 404, idempotency_key = "k" },
  post { status = 409, idempotency_key = "k" },
  post { status = 400, idempotency_key = "k" },
  post { status = 504 }, -- a POST without a key
  post { status = 429, retry_after = "1" },
  post { transport = "timeout", elapsed_ms = 2000 },
  post { transport = "timeout", idempotency_key = "k", elapsed_ms = 2000 },
  post { transport = "connect-reset", idempotency_key = "k", elapsed_ms = 50 },
  post { transport = "got-nothing", idempotency_key = "k" },
  post { transport = "dns", idempotency_key = "k" },
  post { transport = "connect-reset", idempotency_key = "k", elapsed_ms = 2400 }, -- no time left: the deadline
  post { status = 200 },
  post { status = 201, idempotency_key = "k" },
  post { status = 504, idempotency_key = "k", source = "llm" }, -- an unpinned source
  post { status = 429, idempotency_key = "k", retry_after = "1", source = "pinned-map" },
  post { status = 429, idempotency_key = "k", retry_after = "1" },
  post { status = 429, idempotency_key = "k", retry_after = "0" },
  post { status = 429, idempotency_key = "k", retry_after = "2" },
  post { status = 429, idempotency_key = "k", retry_after = "3" }, -- 3000 ms: more than the 2.4 s left
  post { status = 429, idempotency_key = "k", retry_after = "9999" }, -- over the cap (retryAfter.maxMs)
  post { status = 429, idempotency_key = "k", retry_after = " 1 " },
  post { status = 429, idempotency_key = "k", retry_after = "soon" },
  post { status = 429, idempotency_key = "k", retry_after = "1", attempts = 2 },
  post { status = 429, idempotency_key = "k", retry_after = "Sun, 06 Nov 1994 08:49:38 GMT", date = date },
  post { status = 429, idempotency_key = "k", retry_after = "Sunday, 06-Nov-94 08:49:39 GMT", date = date },
  post { status = 429, idempotency_key = "k", retry_after = "Sun Nov  6 08:49:38 1994" }, -- against now_ms
  post { status = 429, idempotency_key = "k", retry_after = "Sun, 06 Nov 1994 08:49:30 GMT", date = date },
}
