-- The client on real networks: TLS against nginx with a private CA and certificates made here
-- with openssl (trusted with tls.ca_file, CURL_CA_BUNDLE or SSL_CERT_FILE; unknown CA, hostname mismatch,
-- expired, client certificate required), verify = false with its one warning, a real forward proxy
-- (tinyproxy: its log shows the request) set by option or by http_proxy, no_proxy bypassing it, a refusing
-- proxy as PROXY_REFUSED, the User-Agent, and connect_timeout_ms. Environment variables are set for a child
-- Lua process only (the spec's own environment stays as it was).
local rf = require "retryfreeze"
local h = require "spec.helper"
local servers = require "spec.support.servers"

local LOCK = [[
{
  "version": 1,
  "defaults": {
    "maxAttempts": 2, "perAttemptTimeoutMs": 2000, "totalBudgetMs": 5000,
    "retryable": [], "notRetryable": ["HTTP_4XX"],
    "backoff": {"baseMs": 10, "multiplier": 2, "maxMs": 100, "jitter": "none"}
  },
  "routes": [
    {"endpoint": "GET /*"},
    {"endpoint": "GET /retried", "retryable": ["TLS_FAILURE", "PROXY_REFUSED", "TIMEOUT"]}
  ]
}
]]

if servers.missing("TLS and proxies", "nginx", "openssl") then return end

--- Runs a Lua snippet in a child lua5.4 with the given environment variables, and none of the TLS and
--- proxy variables this machine may have set; returns stdout, stderr.
local function child(env, snippet)
  local prefix = { "env" }
  for _, name in ipairs({ "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "http_proxy", "https_proxy",
    "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY" }) do
    prefix[#prefix + 1] = "-u " .. name
  end
  for k, v in pairs(env) do prefix[#prefix + 1] = k .. "=" .. h.shell_quote(v) end
  local err_file = os.tmpname()
  local script = os.tmpname()
  h.write_file(script, 'local rf = require "retryfreeze"\n' .. snippet)
  local cmd = table.concat(prefix, " ") .. " " .. h.lua_env() .. h.child_lua .. " " .. script .. " 2>" .. err_file
  local p = io.popen(cmd)
  local out = p:read("a")
  p:close()
  local err = h.read_file(err_file)
  os.remove(err_file)
  os.remove(script)
  return out, err
end

describe("TLS against nginx with a private CA", function()
  local policy, ng, certs, https, plain

  setup(function()
    policy = assert(rf.load_string(LOCK, "61-tls.lock"))
    ng = assert(servers.nginx_tls(5, function(ports, dir)
      local function tls_server(i, cert, extra)
        return servers.tls_server(ports[i], dir, "tls:" .. ports[i], { cert = cert, extra = extra })
      end
      return table.concat({
        tls_server(1, "server"),
        tls_server(2, "wronghost"),
        tls_server(3, "expired"),
        tls_server(4, "server", "ssl_verify_client on; ssl_client_certificate " .. dir .. "/ca.pem;"),
        ("server { listen 127.0.0.1:%d; location / { return 200 \"origin\\n\"; } }"):format(ports[5]),
      }, "\n")
    end))
    certs = ng.certs
    https = function(i) return ng.url_of(i, "https") end
    plain = ng.url_of(5)
  end)

  teardown(function()
    if ng then ng.stop() end
  end)

  local function get(opts, path)
    opts.policy, opts.rng_seed = policy, 1
    local c = rf.client(opts)
    local r = c:request{ method = "GET", path = path or "/x" }
    c:close()
    return r
  end

  it("trusts the private CA given as tls.ca_file", function()
    local r = get{ base_url = https(1), tls = { ca_file = certs .. "/ca.pem" } }
    assert.same({ true, 200, "tls:" .. ng.ports[1] .. "\n" }, { r.ok, r.status, r.body })
  end)

  it("trusts a CA directory given as tls.ca_path (c_rehash layout)", function()
    local dir = certs .. "/hashed"
    os.execute("mkdir -p " .. dir .. " && cp " .. certs .. "/ca.pem " .. dir .. "/ && " ..
      h.shell_quote(servers.openssl_bin) .. " rehash " .. dir .. " 2>/dev/null")
    local r = get{ base_url = https(1), tls = { ca_path = dir, ca_file = certs .. "/other-ca.pem" } }
    assert.same({ true, 200 }, { r.ok, r.status })
  end)

  it("fails with TLS_FAILURE naming an unknown CA without it, and does not retry what is not listed", function()
    local r = get{ base_url = https(1) }
    assert.same({ false, "terminal", "TLS_FAILURE", "tls", 1 },
      { r.ok, r.outcome, r.tries[1].class, r.tries[1].transport, r.attempts })
    assert.matches("^TLS: unknown CA", r.tries[1].error)
    r = get{ base_url = https(1), tls = { ca_file = certs .. "/other-ca.pem" } }
    assert.matches("^TLS: unknown CA", r.tries[1].error)
  end)

  it("names a hostname mismatch", function()
    local r = get{ base_url = https(2), tls = { ca_file = certs .. "/ca.pem" } }
    assert.same({ "TLS_FAILURE", "tls" }, { r.tries[1].class, r.tries[1].transport })
    assert.matches("^TLS: hostname mismatch", r.tries[1].error)
  end)

  it("names an expired certificate", function()
    local r = get{ base_url = https(3), tls = { ca_file = certs .. "/ca.pem" } }
    assert.same({ "TLS_FAILURE", "tls" }, { r.tries[1].class, r.tries[1].transport })
    assert.matches("^TLS: certificate expired", r.tries[1].error)
  end)

  it("presents a client certificate when nginx requires one (nginx answers 400 without it)", function()
    local r = get{ base_url = https(4), tls = { ca_file = certs .. "/ca.pem" } }
    -- nginx completes the handshake and refuses in HTTP: a 400, not retried (HTTP_4XX is notRetryable).
    assert.same({ false, 400, "HTTP_400", "terminal" }, { r.ok, r.status, r.tries[1].class, r.outcome })
    assert.matches("No required SSL certificate was sent", r.body, 1, true)
    r = get{ base_url = https(4), tls = { ca_file = certs .. "/ca.pem", cert = certs .. "/client.pem",
      key = certs .. "/client.key" } }
    assert.same({ true, 200 }, { r.ok, r.status })
    r = get{ base_url = https(4), tls = { ca_file = certs .. "/ca.pem", cert = certs .. "/client.pem",
      key = certs .. "/client-enc.key", key_password = "secret" } }
    assert.same({ true, 200 }, { r.ok, r.status })
    r = get{ base_url = https(4), tls = { ca_file = certs .. "/ca.pem", cert = certs .. "/client.pem",
      key = certs .. "/client-enc.key", key_password = "wrong" } }
    assert.same({ false, "TLS_FAILURE", "tls" }, { r.ok, r.tries[1].class, r.tries[1].transport })
    assert.matches("^TLS: client certificate or key unusable", r.tries[1].error)
  end)

  it("classifies a server's TLS alert for a missing client certificate as TLS_FAILURE (openssl s_server)", function()
    local srv = assert(servers.s_server(("-cert %s/server.pem -key %s/server.key -CAfile %s/ca.pem -Verify 1")
      :format(certs, certs, certs)))
    local ok, err = pcall(function()
      local r = get{ base_url = "https://127.0.0.1:" .. srv.port, tls = { ca_file = certs .. "/ca.pem" } }
      assert.same({ false, "TLS_FAILURE", "tls", "terminal" },
        { r.ok, r.tries[1].class, r.tries[1].transport, r.outcome })
      assert.matches("client certificate", r.tries[1].error)
      r = get{ base_url = "https://127.0.0.1:" .. srv.port, tls = { ca_file = certs .. "/ca.pem",
        cert = certs .. "/client.pem", key = certs .. "/client.key" } }
      assert.same({ true, 200 }, { r.ok, r.status }, ("the try: %s %s after %d ms"):format(
        tostring(r.tries[1] and r.tries[1].class), tostring(r.tries[1] and r.tries[1].error), r.elapsed_ms))
    end)
    srv.stop()
    assert(ok, err)
  end)

  it("retries a TLS failure only where the lock lists it, and counts each attempt", function()
    local r = get({ base_url = https(3), tls = { ca_file = certs .. "/ca.pem" } }, "/retried")
    assert.same({ "exhausted", 2, "TLS_FAILURE", "TLS_FAILURE" },
      { r.outcome, r.attempts, r.tries[1].class, r.tries[2].class })
  end)

  it("honours CURL_CA_BUNDLE, then SSL_CERT_FILE, like the curl tool; tls.ca_file wins over both", function()
    local snippet = ([[
      local p = assert(rf.load_string(%q))
      local c = rf.client{ policy = p, base_url = %q, rng_seed = 1 }
      local r = c:request{ method = "GET", path = "/x" }
      io.write(r.status, " ", r.tries[1].class, "\n")
      c = rf.client{ policy = p, base_url = %q, rng_seed = 1, tls = { ca_file = %q } }
      r = c:request{ method = "GET", path = "/x" }
      io.write(r.status, " ", r.tries[1].class, "\n")
    ]]):format(LOCK, https(1), https(1), certs .. "/other-ca.pem")
    assert.equal("200 HTTP_200\n0 TLS_FAILURE\n", (child({ CURL_CA_BUNDLE = certs .. "/ca.pem" }, snippet)))
    assert.equal("200 HTTP_200\n0 TLS_FAILURE\n", (child({ SSL_CERT_FILE = certs .. "/ca.pem" }, snippet)))
    -- CURL_CA_BUNDLE comes first.
    assert.equal("0 TLS_FAILURE\n0 TLS_FAILURE\n", (child({ CURL_CA_BUNDLE = certs .. "/other-ca.pem",
      SSL_CERT_FILE = certs .. "/ca.pem" }, snippet)))
  end)

  it("turns verification off only for an explicit verify = false, warning once per client on stderr", function()
    local out, err = child({}, ([[
      local p = assert(rf.load_string(%q))
      local c = rf.client{ policy = p, base_url = %q, rng_seed = 1, tls = { verify = false } }
      for _ = 1, 3 do io.write(c:request{ method = "GET", path = "/x" }.status, "\n") end
      local d = rf.client{ policy = p, base_url = %q, rng_seed = 1, tls = { verify = true } }
      io.write(d:request{ method = "GET", path = "/x" }.tries[1].class, "\n")
    ]]):format(LOCK, https(2), https(2)))
    assert.equal("200\n200\n200\nTLS_FAILURE\n", out)
    local _, warnings = err:gsub("TLS verification is off", "")
    assert.equal(1, warnings, err)
    assert.matches("tls.verify = false", err, 1, true)
  end)

  it("refuses a CA file, CA directory, certificate or key that cannot be read, naming the option", function()
    assert.has_error(function() get{ base_url = https(1), tls = { ca_file = certs .. "/nope.pem" } } end,
      "rf.client: tls.ca_file " .. certs .. "/nope.pem: No such file or directory")
    assert.has_error(function() get{ base_url = https(1), tls = { ca_path = certs .. "/ca.pem" } } end,
      "rf.client: tls.ca_path " .. certs .. "/ca.pem: not a directory")
    assert.has_error(function() get{ base_url = https(1), tls = { cert = certs } } end,
      "rf.client: tls.cert " .. certs .. ": not a regular file")
    local _, err = child({ CURL_CA_BUNDLE = certs .. "/missing.pem" }, ([[
      local p = assert(rf.load_string(%q))
      rf.client{ policy = p, base_url = "https://127.0.0.1:1", rng_seed = 1 }
    ]]):format(LOCK))
    assert.matches("rf.client: CURL_CA_BUNDLE " .. certs:gsub("%p", "%%%0") .. "/missing.pem: No such file", err)
    -- An http client is not refused for the environment's TLS settings.
    local out = child({ CURL_CA_BUNDLE = certs .. "/missing.pem" }, ([[
      local p = assert(rf.load_string(%q))
      rf.client{ policy = p, base_url = "http://127.0.0.1:1", rng_seed = 1 }
      io.write("created")
    ]]):format(LOCK))
    assert.equal("created", out)
  end)

  it("refuses a bad tls table", function()
    assert.has_error(function() get{ base_url = https(1), tls = { verify = "no" } } end,
      "rf.client: tls.verify must be a boolean, got string")
    assert.has_error(function() get{ base_url = https(1), tls = { cafile = "x" } } end,
      "rf.client: tls: unknown option 'cafile' (did you mean 'ca_file'?)")
    assert.has_error(function() get{ base_url = https(1), tls = "x" } end, "rf.client: tls must be a table, got string")
    assert.has_error(function() get{ base_url = https(1), tls = { key = "k.pem" } } end,
      "rf.client: tls.key needs tls.cert (the client certificate it belongs to)")
  end)

  describe("User-Agent", function()
    -- The User-Agent nginx logged for the request to path (waits, bounded, for its line).
    local function ua_of(path)
      return h.poll(100, 0.02, function()
        for _, line in ipairs(ng.log_lines()) do
          if line:match("^%S+ " .. path:gsub("%p", "%%%0") .. " ") then return true, line:match("|([^|]*)$") end
        end
        return false
      end)
    end

    it("defaults to retryfreeze/VERSION libcurl/X", function()
      assert.equal(200, get({ base_url = plain }, "/ua-default").status)
      assert.equal("retryfreeze/" .. rf.VERSION .. " libcurl/" .. rf.libcurl.version, ua_of("/ua-default"))
    end)

    it("is overridable, and refuses CR/LF", function()
      assert.equal(200, get({ base_url = plain, user_agent = "billing-worker/2.1" }, "/ua").status)
      assert.equal("billing-worker/2.1", ua_of("/ua"))
      assert.has_error(function() get{ base_url = plain, user_agent = "a\r\nX-Evil: 1" } end,
        "rf.client: user_agent must not contain control characters (CR, LF, …)")
    end)
  end)

  describe("through a forward proxy (tinyproxy)", function()
    if not servers.tinyproxy_bin then
      pending("tinyproxy not installed (bash .ci/deps)")
      return
    end
    local px
    setup(function()
      local err
      px, err = servers.tinyproxy()
      assert(px, err)
    end)
    teardown(function() if px then px.stop() end end)

    local function proxy_saw(path)
      for _ = 1, 50 do
        if px.log_text():find("GET " .. plain .. path, 1, true) then return true end
        os.execute("sleep 0.02")
      end
      return false
    end

    it("sends the request through the proxy option: the proxy's log shows it", function()
      local r = get({ base_url = plain, proxy = px.url }, "/via-option")
      assert.same({ true, 200, "origin\n" }, { r.ok, r.status, r.body })
      assert.is_true(proxy_saw("/via-option"), px.log_text())
    end)

    it("honours http_proxy, and no_proxy bypasses it", function()
      local snippet = ([[
        local p = assert(rf.load_string(%q))
        local c = rf.client{ policy = p, base_url = %q, rng_seed = 1 }
        local r = c:request{ method = "GET", path = arg_path }
        io.write(r.status, "\n")
      ]]):format(LOCK, plain)
      local out = child({ http_proxy = px.url }, 'arg_path = "/via-env"\n' .. snippet)
      assert.equal("200\n", out)
      assert.is_true(proxy_saw("/via-env"))
      out = child({ http_proxy = px.url, no_proxy = "127.0.0.1" }, 'arg_path = "/bypassed"\n' .. snippet)
      assert.equal("200\n", out)
      os.execute("sleep 0.1")
      assert.is_nil(px.log_text():find("/bypassed", 1, true))
    end)

    it("an explicit proxy = \"\" ignores the environment", function()
      local out = child({ http_proxy = px.url }, ([[
        local p = assert(rf.load_string(%q))
        local c = rf.client{ policy = p, base_url = %q, rng_seed = 1, proxy = "" }
        io.write(c:request{ method = "GET", path = "/no-proxy-option" }.status, "\n")
      ]]):format(LOCK, plain))
      assert.equal("200\n", out)
      os.execute("sleep 0.1")
      assert.is_nil(px.log_text():find("/no-proxy-option", 1, true))
    end)

    it("classifies a refusing proxy as PROXY_REFUSED, a refusing origin behind no_proxy as CONNECT_REFUSED", function()
      local dead = servers.closed_port()
      local r = get({ base_url = plain, proxy = "http://127.0.0.1:" .. dead }, "/retried")
      assert.same({ "PROXY_REFUSED", "proxy-refused", 2, "exhausted" },
        { r.tries[1].class, r.tries[1].transport, r.attempts, r.outcome })
      assert.matches("^proxy refused the connection", r.tries[1].error)
      local out = child({ http_proxy = px.url, no_proxy = "127.0.0.1" }, ([[
        local p = assert(rf.load_string(%q))
        local c = rf.client{ policy = p, base_url = %q, rng_seed = 1 }
        io.write(c:request{ method = "GET", path = "/x" }.tries[1].class, "\n")
      ]]):format(LOCK, "http://127.0.0.1:" .. dead))
      assert.equal("CONNECT_REFUSED\n", out)
    end)
  end)

  describe("connect_timeout_ms", function()
    it("bounds the connect, not the whole attempt", function()
      -- 100::1 is in IPv6's discard prefix (RFC 6666): a connect there hangs until the timeout, where IPv6
      -- routes at all. Elsewhere it fails at once, and this spec says so rather than pass.
      local r = get({ base_url = "http://[100::1]:81", connect_timeout_ms = 150 }, "/retried")
      if r.tries[1].class ~= "TIMEOUT" then
        pending("no route that swallows SYNs here (" .. tostring(r.tries[1].error) .. ")")
        return
      end
      assert.is_true(r.tries[1].elapsed_ms >= 140 and r.tries[1].elapsed_ms < 1000, tostring(r.tries[1].elapsed_ms))
      assert.equal(2000, r.tries[1].timeout_ms)
    end)

    it("refuses a value outside 1..600000", function()
      assert.has_error(function() get{ base_url = plain, connect_timeout_ms = 0 } end,
        "rf.client: connect_timeout_ms must be an integer 1..600000")
    end)
  end)
end)
