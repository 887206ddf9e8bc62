--- retryfreeze: retry policy from a pinned lock. A thin face over the C engine (retryfreeze.core): it
--- composes, it never re-decides. See docs/lua.md for every function's shapes and units.
local core = require "retryfreeze.core"

local M = {}

--- The library version ("MAJOR.MINOR.PATCH"), from CMake's project(VERSION).
M.VERSION = core.VERSION

--- Stable reason strings, request outcomes (the ledger's `outcome`), transport outcomes, jitter kinds and wait
--- header names, in the engine's order (copies).
M.reasons = core.reasons
M.outcomes = core.outcomes
M.transports = core.transports
M.jitters = core.jitters
M.wait_headers = core.wait_headers

--- The gRPC failure classes, GRPC_<name> of the status codes 1..16 at [code] (a copy of the engine's RF_GRPC_CLASSES).
M.grpc_classes = core.grpc_classes

--- The lock schema: a fresh array of its rows, one per lock field, in docs/lock.md's order (docs/lua.md,
--- docs/c-api.md `retryfreeze/lock_schema.h`): {path = "backoff.baseMs", key, parent (the object's path, nil at
--- the top), place ("route", "lock" or "multi"), type, min, max, decimals, if_absent, default_json, default (its
--- decoded value), canonical, widens, view (its key in policy:routes() and policy.gate), about}. A copy: changing it
--- changes nothing.
function M.lock_schema()
  local json = require "retryfreeze.json"
  local rows = core.lock_schema()
  for _, row in ipairs(rows) do
    if row.default_json then row.default = json.decode(row.default_json) end
  end
  return rows
end

--- Checks a number as the loader checks the lock field at path: rf.lock_field_check("gate.maxRetryRatio", 11) →
--- nil, "must be a number from 0 to 10, got 11"; true when a lock would take it. Raises for a path no field has or a
--- field that is not a number.
M.lock_field_check = core.lock_field_check

--- Whether decisions run through LuaJIT's FFI (docs/lua.md, "LuaJIT: the FFI path"): true under LuaJIT unless the
--- environment had RF_NO_FFI=1 when the module opened or a sandbox took `ffi` out; false on every other Lua.
M.ffi = core.ffi

--- The libcurl the client runs on: {version = "7.88.1", ssl = "OpenSSL/…" or nil, http2 = bool}.
M.libcurl = core.libcurl

local function check_pin(policy, source, opts)
  if opts == nil or opts.pin == nil then return policy end
  if type(opts.pin) ~= "string" or not opts.pin:match("^sha256:%x+$") or #opts.pin ~= 71 then
    error("bad argument 'pin' (expected \"sha256:<64 hex>\", got " .. tostring(opts.pin) .. ")", 3)
  end
  if policy.digest ~= opts.pin then
    return nil, string.format("%s: digest %s does not match the pinned %s", source, policy.digest, opts.pin)
  end
  return policy
end

--- Loads and validates a lock file.
-- @param path string: the *.lock.json file
-- @param opts table|nil: {pin = "sha256:…"} refuses a lock whose digest differs
-- @return policy (immutable userdata); or nil, "path: $.json.path: message" for an invalid lock; or nil, one
--   sentence naming the path once for a file it cannot read ("cannot open lock PATH: No such file or directory",
--   "cannot open lock PATH: it is a directory, not a regular file", "lock PATH is over the 1048576 byte limit")
function M.load(path, opts)
  if type(path) ~= "string" then error("bad argument #1 to 'load' (string expected, got " .. type(path) .. ")", 2) end
  local policy, err = core.load_file(path)
  if not policy then return nil, err end
  return check_pin(policy, path, opts)
end

--- Loads and validates a lock from a string.
-- @param text string: the JSON text
-- @param chunkname string|nil: name used in error messages (default "lock")
-- @param opts table|nil: {pin = "sha256:…"}
-- @return policy, or nil, "chunkname: $.json.path: message"
function M.load_string(text, chunkname, opts)
  if type(text) ~= "string" then
    error("bad argument #1 to 'load_string' (string expected, got " .. type(text) .. ")", 2)
  end
  local policy, err = core.load_string(text, chunkname)
  if not policy then return nil, err end
  return check_pin(policy, chunkname or "lock", opts)
end

--- A seeded jitter RNG: rf.rng(seed) with an integer seed; the same seed gives the same delays.
M.rng = core.rng

--- Parses a Retry-After value (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.
-- @param value string; now_ms integer|nil (Unix ms; default: the clock); date string|nil (the Date header)
-- @return delay in ms (uncapped: caps are policy), or nil, why ("absent", "invalid", "too-long", "no-clock")
M.parse_retry_after = core.parse_retry_after

--- Parses one wait header's value by its own rule (docs/lock.md, retryAfter.headers).
-- @param name string: a lowercase wait header name ("retry-after-ms", "ratelimit", "grpc-retry-pushback-ms", …);
--   an unknown name raises
-- @param value string; now_ms integer|nil (Unix ms; default: the clock); date string|nil (the Date header)
-- @return delay in ms, or nil, why ("absent", "invalid", "too-long", "no-clock", "stop": gRPC pushback says
--   do not retry)
M.parse_wait_header = core.parse_wait_header

--- An HTTP client under a policy (libcurl; see docs/lua.md for every option and field).
-- rf.client{policy=, base_url=, ledger=, headers={Name="value"}, rng_seed=, retry_budget=true|false,
--   max_redirects=, tls={ca_file=, ca_path=, cert=, key=, key_password=, verify=}, proxy=, connect_timeout_ms=,
--   user_agent=, http_version="1.1"|"2", follow_redirects=false, max_body_bytes=16 MiB, on_attempt=function(try, verdict)}
-- client:request{method=, path=, query=, headers=, body=, idempotency_key=, deadline_ms=, timeout_ms=,
--   on_attempt=} → response
--   {status, ok, outcome, reason, attempts, elapsed_ms, body, headers, tries, route [, ledger_error]};
--   outcome: success | terminal | exhausted | deadline | throttled | refused. An HTTP or transport failure is
--   a response; misuse (a bad argument, a closed client) raises. on_attempt returning false stops early.
-- client:all{req, …} → responses in order (concurrent, curl multi). client:close() (also <close>, __gc).
M.client = core.client

--- One logical request driven by the host's transport: rf.flow(policy, request, io) → the response table of
--- client:request, with the same outcomes, reasons, tries and ledger line (docs/embedding.md).
M.flow = require("retryfreeze.io_flow").flow

--- A retry budget (gRPC A6 retryThrottling) that clients and flows can share; needs the lock's retryBudget.
-- rf.retry_budget(policy) keeps the bucket in this process; rf.retry_budget(policy, {redis = "redis://host:
-- port/db", timeout_ms = 20, idle_ttl_ms = 3600000}) keeps it in Redis under retryBudget.shared.name, shared by
-- every process of a fleet; a decision waits at most timeout_ms for Redis, then uses the local bucket
-- (verdict.budget = "local-fallback"). "rediss://user:password@host:port/db" speaks TLS with an ACL user, with
-- ca_file, ca_path, cert and key as the client's tls options (docs/fleet.md). budget:tokens(),
-- budget:is_shared(), budget:close().
-- Pass it as rf.client{…, retry_budget = budget}; rf.client{…, retry_budget = {redis = …}} makes one.
M.retry_budget = core.retry_budget

--- A random idempotency key: a UUID v4 from the OS CSPRNG.
M.new_key = core.new_key

--- The wall clock: rf.now_ms() → integer milliseconds since the Unix epoch (CLOCK_REALTIME, the clock of the
--- ledger's ts and of HTTP-date arithmetic). It can step (NTP, an operator): never time an interval with it.
M.now_ms = core.wall_ms

--- The monotonic clock: rf.monotonic_ms() → integer milliseconds on CLOCK_MONOTONIC, the clock the client
--- measures elapsed_ms and deadlines on. It never goes back; its zero is unspecified (the boot, on Linux), so
--- only differences mean anything. It is what rf.flow's io.now_ms wants.
M.monotonic_ms = core.monotonic_ms

--- The append-only JSONL ledger.
-- rf.ledger.open(path [, {fsync = "none"|"line"}]) → ledger, or nil, message
-- rf.ledger.read(path [, {skip_corrupt = true}]) → iterator, state: `for rec in it, state do … end`; then
--   state.torn is false or the torn last line's number; a corrupt line raises "path:line: …" unless skipped.
-- ledger:hold(max_bytes) holds lines and writes them in batches of whole lines, at most BATCH_BYTES (256 KiB) each;
--   ledger:flush() writes the held ones; ledger:held() counts them (docs/lua.md, "Ledger").
M.ledger = { open = core.ledger_open, read = core.ledger_read, BATCH_BYTES = core.LEDGER_BATCH_BYTES }

--- rf.ledger.stats(paths [, {skip_corrupt = true}]) → stats, or nil, message (see docs/evidence.md).
-- Loaded on first use: `require "retryfreeze"` itself loads only the binding and rf.flow's loop, so that it
-- works where a host forbids coroutines at load time (nginx's init_by_lua and init_worker_by_lua, where
-- lua-compat53's module, which the statistics use on LuaJIT, could not load).
function M.ledger.stats(paths, opts) return require("retryfreeze.ledger_stats").stats(paths, opts) end

--- rf.replay(ledger_paths, candidate_policy [, opts]) → result, or nil, message: the recorded requests decided again
--- under the candidate, recorded and predicted figures side by side (retryfreeze.replay, docs/evidence.md "Replay").
-- Loaded on first use, as rf.ledger.stats.
function M.replay(paths, policy, opts) return require("retryfreeze.replay").replay(paths, policy, opts) end

return M
