-- HTTP/2: http_version = "2" against nginx's http2 listeners, over TLS (ALPN) and in clear text
-- (h2c with prior knowledge); client:all multiplexes its requests as streams of one connection. nginx's
-- access log ($server_protocol, $connection) is the witness.
local rf = require "retryfreeze"
local h = require "spec.helper"
local servers = require "spec.support.servers"

local LOCK = [[
{"endpoint": "GET /*", "maxAttempts": 2, "perAttemptTimeoutMs": 3000, "totalBudgetMs": 6000, "retryable": []}
]]

if servers.missing("HTTP/2", "nginx", "openssl") then return end

describe("HTTP/2 against nginx", function()
  local policy, ng, h2s, h2c

  setup(function()
    policy = assert(rf.load_string(LOCK, "63.lock"))
    ng = assert(servers.nginx_tls(2, function(ports, certs)
      return table.concat({
        servers.tls_server(ports[1], certs, "h2", { listen = "http2" }),
        ("server { listen 127.0.0.1:%d http2; location / { return 200 \"h2c\\n\"; } }"):format(ports[2]),
      }, "\n")
    end))
    h2s, h2c = ng.url_of(1, "https"), ng.url_of(2)
  end)

  teardown(function()
    if ng then ng.stop() end
  end)

  -- The log lines for a path once `want` of them are written: {protocol, connection}.
  local function seen(path, want)
    return h.poll(100, 0.02, function()
      local out = {}
      for _, line in ipairs(ng.log_lines()) do
        local uri, proto, conn = line:match("^%S+ (%S+) %d+ (%S+) (%d+)")
        if uri == path then out[#out + 1] = { protocol = proto, connection = conn } end
      end
      return #out >= want, out
    end)
  end

  local function client(base, version)
    return rf.client{ policy = policy, base_url = base, rng_seed = 1, http_version = version,
      tls = { ca_file = ng.certs .. "/ca.pem" } }
  end

  it("is available in this libcurl, and --version says so", function()
    assert.is_true(rf.libcurl.http2, "this libcurl has no HTTP/2 (nghttp2): the specs below cannot run")
    local out = h.run_cli("--version")
    assert.matches("HTTP/2: yes", out, 1, true)
  end)

  -- One request each: over TLS or in clear text, with http_version "2" or the default; the protocol nginx logged.
  for _, case in ipairs({
    { "speaks HTTP/2 over TLS when asked (ALPN)", "tls", "2", "/tls-h2", "h2\n", "HTTP/2.0" },
    { "stays on HTTP/1.1 by default, even where the server offers h2", "tls", nil, "/tls-default", "h2\n", "HTTP/1.1" },
    { "speaks h2c (prior knowledge) over http://", "clear", "2", "/clear-h2", "h2c\n", "HTTP/2.0" },
  }) do
    local name, over, version, path, body, protocol = case[1], case[2], case[3], case[4], case[5], case[6]
    it(name, function()
      local c = client(over == "tls" and h2s or h2c, version)
      local r = c:request{ method = "GET", path = path }
      c:close()
      assert.same({ true, 200, body }, { r.ok, r.status, r.body })
      assert.equal(protocol, seen(path, 1)[1].protocol)
    end)
  end

  it("multiplexes client:all on one connection", function()
    local c = client(h2s, "2")
    local reqs = {}
    for i = 1, 20 do reqs[i] = { method = "GET", path = "/mux" } end
    local rs = c:all(reqs)
    c:close()
    for i = 1, 20 do assert.same({ true, 200 }, { rs[i].ok, rs[i].status }) end
    local lines = seen("/mux", 20)
    assert.equal(20, #lines)
    local conns = {}
    for _, l in ipairs(lines) do
      assert.equal("HTTP/2.0", l.protocol)
      conns[l.connection] = true
    end
    local n = 0
    for _ in pairs(conns) do n = n + 1 end
    assert.equal(1, n)
  end)

  it("opens one connection per request on HTTP/1.1 in client:all (the contrast)", function()
    local c = client(h2s)
    local reqs = {}
    for i = 1, 5 do reqs[i] = { method = "GET", path = "/no-mux" } end
    c:all(reqs)
    c:close()
    local conns, n = {}, 0
    for _, l in ipairs(seen("/no-mux", 5)) do
      if not conns[l.connection] then n = n + 1 end
      conns[l.connection] = true
    end
    assert.is_true(n > 1, "HTTP/1.1 requests in parallel need their own connections")
  end)

  it("refuses any other http_version", function()
    assert.has_error(function() client(h2s, "3") end, 'rf.client: http_version must be "1.1" or "2", got "3"')
  end)
end)
