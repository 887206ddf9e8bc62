-- The facts policy:decide is measured on (bench_lua.lua, bench_lua_calls.lua): a keyed 504 (retry), a 500
-- (stop), a 429 with Retry-After, a client timeout without a key, a success and an unrouted GET.
return {
  { method = "POST", path = "/v1/jobs", status = 504, idempotency_key = "k", attempts = 1, elapsed_ms = 100 },
  { method = "POST", path = "/v1/jobs", status = 500, idempotency_key = "k", attempts = 1, elapsed_ms = 100 },
  { method = "POST", path = "/v1/jobs", status = 429, retry_after = "1", idempotency_key = "k", attempts = 1,
    elapsed_ms = 100, now_ms = 784111777000 },
  { method = "POST", path = "/v1/jobs", transport = "timeout", attempts = 1, elapsed_ms = 2000 },
  { method = "POST", path = "/v1/jobs", status = 200, attempts = 1, elapsed_ms = 100 },
  { method = "GET", path = "/v1/jobs", status = 503, attempts = 1, elapsed_ms = 100 },
}
