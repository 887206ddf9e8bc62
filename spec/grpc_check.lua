-- ctest grpc: `retryfreeze export LOCK --to grpc` under a real gRPC client and server (python3-grpcio,
-- spec/grpc/grpc_calls.py). For every route of every gRPC example lock, a grpcio server answers the route's method
-- with a chosen status and counts the calls, and a grpcio channel makes one call under the exported service config:
-- the server counts the lock's attempts (min(maxAttempts, 5): gRPC's cap) for a retryable status, and one for a status
-- the lock does not retry and for OK; a hedged route's config is taken, and grpc-core (which does not hedge) makes one
-- attempt. The exported
-- configs are valid for grpcio, and a deliberately invalid one is refused (so a config grpcio ignored could not
-- pass). Each call runs in a process of its own (grpc-core keeps a retry throttle per server for the process) and
-- has a 5 s deadline; ~5 s in all.
-- Usage: lua5.4 spec/grpc_check.lua BUILD_DIR SOURCE_DIR [PYTHON] (PYTHON: an interpreter with grpcio, default
-- /usr/bin/python3, where Debian's python3-grpcio installs it).
local build, src, python = arg[1], arg[2], arg[3] or "/usr/bin/python3"
dofile(src .. "/spec/support/check_paths.lua")(build, src)
local rf = require "retryfreeze"
local json = require "retryfreeze.json"
local shell = require "spec.support.shell"
local sh, q = shell.sh, shell.q
local checks = require("spec.support.checks")("grpc")
local check = checks.check

local dir = sh("mktemp -d /tmp/rf-grpc.XXXXXX"):gsub("%s+$", "")
local cli = build .. "/bin/retryfreeze"
local LOCKS = { "examples/grpc.lock.json" }

--- One call under config: {calls, code, details, stderr} from grpc_calls.py.
local function call(config, method, status)
  local input, errf = dir .. "/case.json", dir .. "/case.err"
  local f = assert(io.open(input, "w"))
  f:write(json.encode({ { config = config, method = method, status = status } }))
  f:close()
  local out = sh(q(python) .. " " .. q(src .. "/spec/grpc/grpc_calls.py") .. " < " .. q(input) .. " 2> " .. q(errf))
  local ok, res = pcall(json.decode, out)
  local r = ok and res[1] or { calls = -1, code = "no result: " .. out, details = "" }
  r.stderr = assert(io.open(errf)):read("a")
  return r
end

-- A gRPC status the route's list does not name (the first of the codes in order), or nil.
local function status_not_in(list)
  local named = {}
  for _, c in ipairs(list) do named[c] = true end
  for _, c in ipairs(rf.grpc_classes) do
    if not named[c] then return c:sub(6) end
  end
end

-- The first gRPC class of a list (a retryable list also names the transport failures gRPC reports as a code).
local function first_grpc(list)
  for _, c in ipairs(list) do
    if c:match("^GRPC_") then return c end
  end
  error("no GRPC_* class in " .. table.concat(list, ", "))
end

-- The method a call to the route uses: the route's own, or for POST /pkg.Svc/* one no other route names.
local function method_of(endpoint)
  local path = endpoint:match("^POST (.*)$")
  return (path:gsub("/%*$", "/RetryfreezeAnyMethod"))
end

for _, lock in ipairs(LOCKS) do
  local policy = assert(rf.load(src .. "/" .. lock))
  local cfg_path = dir .. "/" .. lock:gsub("[/.]", "_") .. ".json"
  local rc = os.execute(q(cli) .. " export " .. q(src .. "/" .. lock) .. " --to grpc -o " .. q(cfg_path))
  check(rc == true or rc == 0, lock .. ": exported to grpc without a loss")
  local config = assert(io.open(cfg_path)):read("a")
  check(json.decode(config).methodConfig ~= nil, lock .. ": the export is a service config with methodConfig")
  for _, r in ipairs(policy:routes()) do
    local method = method_of(r.endpoint)
    if r.hedging then
      -- grpc-core (under grpcio, C++, Ruby, PHP) accepts a hedgingPolicy but does not hedge: one attempt, which the
      -- export says in a note. The count shows that the config was taken and that nothing was widened.
      local nf = first_grpc(r.hedging.non_fatal_classes)
      local got = call(config, method, nf:sub(6))
      check(got.calls == 1 and got.code == nf:sub(6),
        string.format("%s %s: a non-fatal %s under hedgingPolicy: %d attempt counted, want 1 (grpc-core does not "
          .. "hedge) (%s)", lock, r.endpoint, nf, got.calls, got.code))
    else
      local retryable = first_grpc(r.retryable)
      local got = call(config, method, retryable:sub(6))
      local want = math.min(r.max_attempts, 5)
      check(got.calls == want and got.code == retryable:sub(6),
        string.format("%s %s: a retryable %s: %d attempts counted, want the lock's %d (%s)", lock, r.endpoint,
          retryable, got.calls, want, got.code))
    end
    local fatal = status_not_in(r.hedging and r.hedging.non_fatal_classes or r.retryable)
    local got = call(config, method, fatal)
    check(got.calls == 1 and got.code == fatal,
      string.format("%s %s: a status the lock does not retry (%s): %d attempt counted, want 1", lock, r.endpoint,
        fatal, got.calls))
    got = call(config, method, "OK")
    check(got.calls == 1 and got.code == "OK", string.format("%s %s: OK: %d attempt counted, want 1", lock,
      r.endpoint, got.calls))
  end
  -- The same config made invalid (maxAttempts 1, which gRPC refuses in a retryPolicy): grpcio refuses it, so the
  -- calls above ran under the exported config and not under none.
  local bad = json.decode(config)
  local mc
  for _, m in ipairs(bad.methodConfig) do if m.retryPolicy then mc = m end end
  mc.retryPolicy.maxAttempts = 1
  local name = mc.name[1]
  local got = call(json.encode(bad), "/" .. name.service .. "/" .. (name.method or "RetryfreezeAnyMethod"),
    "UNAVAILABLE")
  check(got.calls == 0 and got.code == "INVALID_ARGUMENT"
    and got.stderr:find("errors validating service config", 1, true) ~= nil,
    lock .. ": grpcio refuses the config made invalid (retryPolicy.maxAttempts 1): " .. got.code .. ", "
    .. got.calls .. " calls")
end

-- retryfreeze's own client against the grpcio server over HTTP/2 (h2c): grpcio answers HTTP 200 and puts the status
-- in grpc-status, a header of a trailers-only response or a trailer after the message (libcurl hands trailers to the
-- header callback), which the client reads: the try is of class GRPC_<name>, decided as the lock says, and the ledger
-- records its grpc_status; an OK call is a success.
if rf.libcurl.http2 then
  local policy = assert(rf.load(src .. "/examples/grpc.lock.json"))
  for _, case in ipairs({ { "UNAVAILABLE", 4, "GRPC_UNAVAILABLE", "exhausted" }, { "OK", 1, "HTTP_200", "success" },
    { "INVALID_ARGUMENT", 1, "GRPC_INVALID_ARGUMENT", "terminal" },
    { "TRAILER_INVALID_ARGUMENT", 1, "GRPC_INVALID_ARGUMENT", "terminal" } }) do
    local port_file = dir .. "/port." .. case[1]
    local server = assert(io.popen(q(python) .. " " .. q(src .. "/spec/grpc/grpc_calls.py") .. " serve " .. case[1]
      .. " " .. q(port_file) .. " > " .. q(port_file .. ".calls"), "w"))
    local port
    for _ = 1, 100 do -- up to 5 s for grpcio to start
      local f = io.open(port_file)
      if f then
        port = tonumber(f:read("l"))
        f:close()
        break
      end
      sh("sleep 0.05")
    end
    local ledger_path = dir .. "/ledger." .. case[1] .. ".jsonl"
    local r
    if port then
      local ledger = assert(rf.ledger.open(ledger_path))
      local client = rf.client{ policy = policy, base_url = "http://127.0.0.1:" .. port, http_version = "2",
        ledger = ledger, headers = { ["Content-Type"] = "application/grpc" } }
      -- a gRPC message: not compressed, 1 byte long
      r = client:request{ method = "POST", path = "/retryfreeze.test.Echo/Get", body = "\0\0\0\0\1x" }
      client:close()
      ledger:close()
    end
    server:close()
    local calls = json.decode(assert(io.open(port_file .. ".calls")):read("a")).calls
    local first = r and r.tries[1] or {}
    if case[2] > 1 then
      -- The retry's verdict, on the first try. The retry itself is not counted: libcurl 7.88 fails a second request
      -- on an HTTP/2 connection grpcio served before ("Error in the HTTP2 framing layer"; the curl command line
      -- does the same), so what the client sends next is libcurl's, not the lock's.
      check(r ~= nil and first.class == case[3] and first.reason == "pinned-status" and first.grpc_status == 14
        and calls >= 1, string.format("client, grpc-status %s: the first try is %s (grpc_status %s), retried "
          .. "(%s), server counted %s", case[1], first.class, first.grpc_status, first.reason, calls))
    else
      check(r ~= nil and r.outcome == case[4] and #r.tries == 1 and calls == 1 and first.class == case[3],
        string.format("client, grpc-status %s: outcome %s, %s tries of class %s, server counted %s; want %s, 1 of %s",
          case[1], r and r.outcome, r and #r.tries, first.class, calls, case[4], case[3]))
    end
    local line = assert(io.open(ledger_path)):read("a")
    local want = case[1] == "OK" and not line:find("grpc_status", 1, true)
      or line:find('"tries":[{"class":"' .. case[3] .. '","status":200,', 1, true) ~= nil
      and line:find('"grpc_status":' .. (case[1] == "UNAVAILABLE" and 14 or 3), 1, true) ~= nil
    check(want, "client, grpc-status " .. case[1] .. ": the ledger records the try's class and grpc_status")
  end
else
  check(false, "libcurl has no HTTP/2, which a gRPC call needs")
end

checks.finish(dir)
