-- The shared retry budget on the Redis people run: TLS (rediss://) and ACL users. Real parts: redis-server with
-- --tls-port only, its certificate from a private CA made here with the openssl CLI (spec/support/servers.lua),
-- ACL users in its redis.conf, one server that asks for no client certificate and one that requires it, all on
-- free loopback ports and stopped in teardown. Without redis-server the specs are pending.
local rf = require "retryfreeze"
local h = require "spec.helper"
local redis_server = require "spec.redis_server"
local servers = require "spec.support.servers"

-- A password with every character a URL's userinfo must escape: URLs carry it percent-encoded.
local PASSWORD, PASSWORD_IN_URL = "Tls-s3cret:@/%", "Tls-s3cret%3A%40%2F%25"
-- The budget's ACL user may run the script and nothing else (docs/fleet.md: the rules it needs); `budget show`
-- reads with GET and PTTL; the others each lack one rule.
local USERS = {
  "app on >" .. PASSWORD .. " ~retryfreeze:budget:* +evalsha +script|load +get +set",
  "reader on >pw ~retryfreeze:budget:* +get +pttl",
  "noeval on >pw ~retryfreeze:budget:* +script|load +get +set",
}
-- A refusal must come back at once: within a quarter of timeout_ms, net of the machine's stall. The timeout is
-- long, so that a TLS handshake a loaded machine slows (under ASan at load 20: past 1 s) still ends in the refusal
-- under test rather than in the deadline, and a budget that waited for its deadline still fails the bound.
local TIMEOUT_MS = 2000
local AT_ONCE_MS = TIMEOUT_MS / 4
-- `budget show`'s --timeout-ms where its deadline is not what is tested: the longest it takes.
local SHOW_TIMEOUT = "10000"

local function lock_text(name)
  return ([[{"version": 1,
  "defaults": {"maxAttempts": 2, "perAttemptTimeoutMs": 1000, "totalBudgetMs": 3000,
               "retryable": ["HTTP_503"], "backoff": {"baseMs": 1, "maxMs": 1, "jitter": "none"}},
  "routes": [{"endpoint": "GET /storm"}],
  "retryBudget": {"maxTokens": 10, "tokenRatio": 0.1, "shared": {"name": "@NAME@"}}}]]):gsub("@NAME@", name)
end

-- A child's program: decisions on one budget made with OPTS (a Lua table constructor), three flows of one
-- failed attempt and its retry, the third after the reconnection backoff (100 ms); each flow's ledger line goes
-- to LEDGER. Prints "budget ms" per flow, its time net of the machine's stall.
local CHILD = [[
local rf = require "retryfreeze"
local stall = require "spec.support.stall"
local policy = assert(rf.load_string(LOCK))
local budget = rf.retry_budget(policy, OPTS)
local ledger = assert(rf.ledger.open(LEDGER))
for i = 1, 3 do
  if i == 3 then os.execute("sleep 0.15") end
  local t0, s0 = stall.now_ms(), stall.ms()
  local r = rf.flow(policy, { method = "GET", path = "/storm" }, {
    send = function() return { status = 503, transport = "ok", headers = {} } end,
    sleep = function() end, now_ms = function() return 0 end, ledger = ledger, retry_budget = budget })
  print(r.budget, (stall.now_ms() - t0) - (stall.ms() - s0))
end
ledger:close()
budget:close()
]]

describe("a retry budget shared through Redis over TLS, with ACL users", function()
  local skip = not redis_server.available()
  local certs, srv, mtls

  setup(function()
    if skip then return end
    certs = servers.temp_dir("redis-certs")
    servers.make_certs(certs)
    srv = assert(redis_server.start{ tls = { dir = certs }, users = USERS })
    mtls = assert(redis_server.start{ tls = { dir = certs, auth_clients = "yes" }, users = USERS })
  end)

  teardown(function()
    if srv then srv.stop() end
    if mtls then mtls.stop() end
    if certs then os.execute("rm -rf " .. h.shell_quote(certs)) end
  end)

  local function it_redis(name, fn)
    if skip then pending(name .. " (no redis-server)") else it(name, fn) end
  end

  --- rediss://USERINFO127.0.0.1:PORT/0 for the server s.
  local function url(s, userinfo) return "rediss://" .. userinfo .. "127.0.0.1:" .. s.port .. "/0" end

  it_redis("the budget's ACL user over rediss:// with ca_file: every decision is shared, the bucket in Redis",
    function()
      local policy = assert(rf.load_string(lock_text("tls-flow")))
      local budget = rf.retry_budget(policy, { redis = url(srv, "app:" .. PASSWORD_IN_URL .. "@"),
        ca_file = certs .. "/ca.pem", timeout_ms = 2000 })
      assert.is_true(budget:is_shared())
      local answers = { 503, 200 }
      local r = rf.flow(policy, { method = "GET", path = "/storm" }, {
        send = function() return { status = table.remove(answers, 1), transport = "ok", headers = {} } end,
        sleep = function() end, now_ms = function() return 0 end, retry_budget = budget })
      budget:close()
      assert.same({ true, 2, "shared" }, { r.ok, r.attempts, r.budget })
      -- 10 − 1 (the 503) + 0.1 (the success) = 9.1 tokens, in thousandths, in Redis.
      assert.equal("9100", srv.cli("GET", "retryfreeze:budget:tls-flow"):match("%d+"))
    end)

  it_redis("a server that requires a client certificate: shared with cert and key", function()
    local policy = assert(rf.load_string(lock_text("tls-mtls")))
    local budget = rf.retry_budget(policy, { redis = url(mtls, "app:" .. PASSWORD_IN_URL .. "@"),
      ca_file = certs .. "/ca.pem", cert = certs .. "/client.pem", key = certs .. "/client.key", timeout_ms = 2000 })
    local r = rf.flow(policy, { method = "GET", path = "/storm" }, {
      send = function() return { status = 200, transport = "ok", headers = {} } end,
      sleep = function() end, now_ms = function() return 0 end, retry_budget = budget })
    budget:close()
    assert.same({ true, "shared" }, { r.ok, r.budget })
  end)

  it_redis("`budget show` over TLS: --ca-file trusts the private CA; without it the system's CAs do not", function()
    srv.cli("SET", "retryfreeze:budget:tls-shown", "7500", "PX", "60000")
    local reader = url(srv, "reader:pw@")
    local _, out, err, code
    out, err, code = h.run_cli("budget", "show", "tls-shown", "--timeout-ms", SHOW_TIMEOUT, "--redis", reader,
      "--ca-file", certs .. "/ca.pem")
    assert.equal(0, code, err)
    assert.matches("^tls%-shown tokens 7%.5 idle expiry in %d+ ms\n$", out)
    out, err, code = h.run_cli("budget", "show", "tls-shown", "--timeout-ms", SHOW_TIMEOUT, "--redis", reader)
    assert.equal(1, code, out)
    assert.equal("retryfreeze budget: TLS handshake with redis 127.0.0.1:" .. srv.port
      .. ": TLS: unknown CA (the issuer is not trusted: set ca_file)\n", err)
    _, err, code = h.run_cli("budget", "show", "tls-shown", "--timeout-ms", SHOW_TIMEOUT, "--redis",
      url(mtls, "reader:pw@"), "--ca-file", certs .. "/ca.pem", "--cert", certs .. "/client.pem", "--key",
      certs .. "/client.key")
    assert.equal(0, code, err)
    _, err, code = h.run_cli("budget", "show", "x", "--redis", reader, "--ca-file", certs .. "/missing.pem")
    assert.equal(2, code)
    assert.matches("--ca-file " .. certs .. "/missing.pem: No such file or directory", err, 1, true)
    _, err, code = h.run_cli("budget", "show", "x", "--redis", srv.url:gsub("^rediss", "redis"), "--ca-file",
      certs .. "/ca.pem")
    assert.equal(2, code)
    assert.matches("--ca-file needs a rediss:// URL (TLS); redis:// is plain TCP", err, 1, true)
    _, err, code = h.run_cli("budget", "show", "x", "--redis", reader, "--key", certs .. "/client.key")
    assert.equal(2, code)
    assert.matches("--key", err, 1, true)
  end)

  it_redis("a wrong password, an untrusted certificate, a missing permission, no client certificate: each "
    .. "falls back at once and is said once on stderr, never with the password", function()
    local ca, other = certs .. "/ca.pem", certs .. "/other-ca.pem"
    local cases = {
      { "wrong password", srv, "app:wrong@", { ca_file = ca }, "redis AUTH failed: WRONGPASS invalid "
        .. "username-password pair or user is disabled. (check the user and password in the URL)" },
      { "untrusted certificate (another CA)", srv, "app:" .. PASSWORD_IN_URL .. "@", { ca_file = other },
        "TLS handshake with redis 127.0.0.1:" .. srv.port .. ": TLS: unknown CA (the issuer is not trusted: set "
        .. "ca_file)" },
      { "untrusted certificate (the system's CAs)", srv, "app:" .. PASSWORD_IN_URL .. "@", {},
        "TLS: unknown CA (the issuer is not trusted: set ca_file)" },
      { "missing permission (no +evalsha)", srv, "noeval:pw@", { ca_file = ca },
        "redis EVALSHA failed: NOPERM this user has no permissions to run the 'evalsha' command (the budget's ACL "
        .. "user needs ~retryfreeze:budget:* +evalsha +script|load +get +set" },
      { "no client certificate (tls-auth-clients yes)", mtls, "app:" .. PASSWORD_IN_URL .. "@", { ca_file = ca },
        "a server that wants a client certificate does this: set cert and key)" },
    }
    for _, c in ipairs(cases) do
      local name, server, userinfo, opts, says = c[1], c[2], c[3], c[4], c[5]
      opts.redis, opts.timeout_ms = url(server, userinfo), TIMEOUT_MS
      local ledger = os.tmpname()
      local fields = {}
      for k, v in pairs(opts) do -- %q of a number is a quoted string under LuaJIT and 5.1
        fields[#fields + 1] = ("%s = " .. (math.type(v) == "integer" and "%d" or "%q")):format(k, v)
      end
      local source = CHILD:gsub("LOCK", function() return ("%q"):format(lock_text("tls-refused")) end)
        :gsub("OPTS", function() return "{ " .. table.concat(fields, ", ") .. " }" end)
        :gsub("LEDGER", function() return ("%q"):format(ledger) end)
      local out, err, code = h.run_lua(source)
      h.clean_exit(out, err, code)
      local worst, flows = 0, 0
      for budget, ms in out:gmatch("(%S+)%s+(%-?[%d.]+)\n") do
        assert.equal("local-fallback", budget, name)
        worst, flows = math.max(worst, tonumber(ms)), flows + 1
      end
      print(string.format("\nrediss:// %-45s worst of 3 decisions %.0f ms (timeout_ms %d)", name, worst, TIMEOUT_MS))
      assert.equal(3, flows, name .. ": " .. out)
      assert.is_true(worst <= AT_ONCE_MS, name .. ": a flow took " .. worst .. " ms")
      local said = {}
      for line in err:gmatch("[^\n]+") do
        if line:find("^retryfreeze: shared retry budget") then said[#said + 1] = line end
      end
      assert.equal(1, #said, name .. ": " .. err)
      assert.matches("retryfreeze: shared retry budget tls-refused at rediss://" .. userinfo:gsub(":.*", ":***@")
        .. "127.0.0.1:" .. server.port .. "/0 falls back to the local bucket: ", said[1], 1, true)
      assert.matches(says, said[1], 1, true)
      assert.matches("(said once per budget for this kind of failure)", said[1], 1, true)
      for _, text in ipairs({ err, out, h.read_file(ledger) }) do
        assert.is_nil(text:find(PASSWORD, 1, true), name)
        assert.is_nil(text:find(PASSWORD_IN_URL, 1, true), name)
      end
      os.remove(ledger)
    end
  end)
end)

describe("rf.retry_budget's TLS options", function()
  local policy = assert(rf.load_string(lock_text("tls-options")))

  it("need redis, and rediss://; each file is read when the budget is made, naming the option", function()
    local dir = h.temp_dir("redis-tls-options")
    local junk = h.write_file(dir .. "/junk.pem", "not a certificate\n")
    local cases = {
      { { ca_file = junk }, "rf.retry_budget: ca_file needs redis" },
      { { redis = "redis://h", ca_file = junk }, "rf.retry_budget: ca_file needs a rediss:// URL (TLS); redis:// is "
        .. "plain TCP" },
      { { redis = "rediss://h", ca_file = dir .. "/missing.pem" }, "rf.retry_budget: ca_file " .. dir
        .. "/missing.pem: No such file or directory" },
      { { redis = "rediss://h", ca_path = junk }, "rf.retry_budget: ca_path " .. junk .. ": not a directory" },
      { { redis = "rediss://h", key = junk }, "rf.retry_budget: key needs cert (the client certificate it belongs to)" },
      { { redis = "rediss://h", cert = junk }, "rf.retry_budget: cert " .. junk .. ": not a PEM certificate" },
      { { redis = "rediss://h", ca_file = 5 }, "rf.retry_budget: ca_file must be a path string (a PEM file of CAs "
        .. "to trust)" },
      { { redis = "rediss://h", ca_file = "a\0b" }, "rf.retry_budget: ca_file must not contain a NUL byte" },
      { { redis = "rediss://h", tls = {} }, "rf.retry_budget: unknown option 'tls'" },
      { { redis = "rediss://secret@h" }, "rf.retry_budget: url has a user but no password: write user:password@ "
        .. "(an ACL user) or :password@ (the default user)" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(rf.retry_budget, policy, c[1])
      assert.is_false(ok)
      assert.matches(c[2], tostring(err), 1, true)
    end
    -- The same options through rf.client's retry_budget table.
    local ok, err = pcall(rf.client, { policy = policy, base_url = "http://127.0.0.1:1",
      retry_budget = { redis = "rediss://h", ca_file = dir .. "/missing.pem" } })
    assert.is_false(ok)
    assert.matches("ca_file " .. dir .. "/missing.pem: No such file or directory", tostring(err), 1, true)
    os.execute("rm -rf " .. h.shell_quote(dir))
  end)
end)
