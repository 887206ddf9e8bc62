-- Redirects by RFC 9110 §15.4 against real nginx: every status 301, 302,
-- 303, 307, 308 × GET, POST, PUT, with what each hop delivered read from nginx's access log ($request_method,
-- $content_length, $request_length, and $request_body where nginx proxies the landing request to a sink);
-- Retry-After on a 3xx; Authorization and Cookie kept from other origins; redirect loops ended by
-- max_redirects as TOO_MANY_REDIRECTS with exactly max_redirects + 1 requests sent, the ledger agreeing.
local rf = require "retryfreeze"
local servers = require "spec.support.servers"

local LOCK = [[
{
  "version": 1,
  "defaults": {
    "maxAttempts": 3, "perAttemptTimeoutMs": 2000, "totalBudgetMs": 6000,
    "retryable": ["HTTP_503"], "notRetryable": ["HTTP_4XX"],
    "backoff": {"baseMs": 10, "multiplier": 2, "maxMs": 100, "jitter": "none"},
    "retryAfter": {"honor": true, "maxMs": 3000}
  },
  "routes": [
    {"endpoint": "GET /*"},
    {"endpoint": "POST /*"},
    {"endpoint": "PUT /*"},
    {"endpoint": "HEAD /*"},
    {"endpoint": "GET /short", "totalBudgetMs": 500, "perAttemptTimeoutMs": 500}
  ]
}
]]

if servers.missing("redirects against nginx", "nginx") then return end

describe("redirects against nginx (RFC 9110 §15.4)", function()
  local policy, ng, base, other

  setup(function()
    policy = assert(rf.load_string(LOCK, "60-redirect.lock"))
    local err
    ng, err = servers.nginx(2, function(ports)
      local p1, p2 = ports[1], ports[2]
      local blocks = { "server {", "  listen 127.0.0.1:" .. p1 .. ";", "  client_body_buffer_size 64k;" }
      for _, s in ipairs({ 301, 302, 303, 307, 308 }) do
        blocks[#blocks + 1] = ("  location = /r/%d { return %d /landing; }"):format(s, s)
      end
      for _, line in ipairs({
        -- The landing request is proxied to a sink, so nginx reads its body and can log it ($request_body).
        "  location = /landing { proxy_pass http://127.0.0.1:" .. p2 .. "/sink; }",
        "  location = /loop { return 302 /loop; }",
        "  location = /loop307 { return 307 /loop307; }",
        "  location = /ra303 { add_header Retry-After 1 always; return 303 /landing; }",
        "  location = /ra-long { add_header Retry-After 30 always; return 303 /landing; }",
        "  location = /short { add_header Retry-After 1 always; return 302 /landing; }",
        "  location = /cross-host { return 302 http://localhost:" .. p1 .. "/landing; }",
        "  location = /cross-port { return 302 http://127.0.0.1:" .. p2 .. "/other; }",
        "  location = /same-origin { return 302 /landing; }",
        "  location = /ftp { return 302 ftp://127.0.0.1/file; }",
        "}",
        "server {",
        "  listen 127.0.0.1:" .. p2 .. ";",
        "  location = /sink { access_log off; return 200 \"landed\\n\"; }",
        "  location = /other { return 200 \"other\\n\"; }",
        "}",
      }) do blocks[#blocks + 1] = line end
      return table.concat(blocks, "\n")
    end)
    assert(ng, err)
    base, other = ng.url_of(1), ng.url_of(2)
  end)

  teardown(function()
    if ng then ng.stop() end
  end)

  -- The access log lines written since `mark` (a count), parsed. nginx logs a request after its response
  -- is sent, so the lines may trail the client by a moment: wait (bounded) for `want` of them, then a little
  -- longer, so a line too many would show.
  local function since(mark, want)
    ng.await_lines(mark + (want or 1))
    os.execute("sleep 0.05")
    local lines = ng.log_lines()
    local out = {}
    for i = mark + 1, #lines do
      local method, uri, len, proto, conn, auth, cookie, ua = lines[i]:match("^(%S+) (%S+) (%d+) (%S+) (%d+) ([^|]*)|([^|]*)|(.*)$")
      out[#out + 1] = { method = method, uri = uri, request_length = tonumber(len), protocol = proto,
        connection = conn, authorization = auth, cookie = cookie, user_agent = ua, line = lines[i] }
    end
    return out
  end
  -- The log's line count once it has settled: a previous test's last line may still be on its way.
  local function mark()
    local n = #ng.log_lines()
    for _ = 1, 20 do
      os.execute("sleep 0.05")
      local again = #ng.log_lines()
      if again == n then return n end
      n = again
    end
    return n
  end

  local function client(opts)
    opts = opts or {}
    opts.policy, opts.base_url, opts.rng_seed = policy, opts.base_url or base, 1
    if opts.follow_redirects == nil then opts.follow_redirects = true end
    return rf.client(opts)
  end

  -- One request through a fresh client(opts); returns its response and the log's mark from before it was sent.
  local function request_once(opts, req)
    local c = client(opts)
    local m = mark()
    local r = c:request(req)
    c:close()
    return r, m
  end

  local BODY = "payload"

  -- RFC 9110 §15.4.2–15.4.9: what the second hop must be.
  local function expected(status, method)
    if status == 303 then return "GET", false end
    if (status == 301 or status == 302) and method == "POST" then return "GET", false end
    return method, method ~= "GET"
  end

  for _, status in ipairs({ 301, 302, 303, 307, 308 }) do
    for _, method in ipairs({ "GET", "POST", "PUT" }) do
      local hop_method, hop_body = expected(status, method)
      it(("%d after %s: the next hop is %s %s a body"):format(status, method, hop_method,
        hop_body and "with" or "without"), function()
        local c = client()
        local m = mark()
        local r = c:request{ method = method, path = "/r/" .. status, body = method ~= "GET" and BODY or nil,
          headers = method ~= "GET" and { ["Content-Type"] = "text/plain" } or nil }
        c:close()
        assert.same({ true, 200, "success", 2, "landed\n" }, { r.ok, r.status, r.outcome, r.attempts, r.body })
        assert.same({ "HTTP_" .. status, "redirect" }, { r.tries[1].class, r.tries[1].reason })
        assert.same({ "HTTP_200", "success" }, { r.tries[2].class, r.tries[2].reason })
        local log = since(m, 2)
        assert.equal(2, #log, table.concat({ log[1] and log[1].line or "", log[2] and log[2].line or "" }, "\n"))
        assert.same({ method, "/r/" .. status }, { log[1].method, log[1].uri })
        assert.same({ hop_method, "/landing" }, { log[2].method, log[2].uri })
        -- $request_length is what nginx read: the redirecting location does not read a body, the landing one
        -- (proxied) does. So with the URI's length difference taken out, a hop that carries the body is the
        -- first request plus the body; a hop that dropped it also lost Content-Type and Content-Length.
        local adjusted = log[2].request_length - (#"/landing" - #("/r/" .. status)) - (#hop_method - #method)
        local first_len = log[1].request_length
        if method == "GET" then
          assert.equal(first_len, adjusted)
        elseif hop_body then
          assert.equal(first_len + #BODY, adjusted)
        else
          assert.equal(first_len - #"Content-Type: text/plain\r\n" - #"Content-Length: 7\r\n", adjusted)
        end
      end)
    end
  end

  it("delivers the body itself on 307 and 308 (the sink reads it)", function()
    -- $request_length counts what nginx read; the same request with an empty body is shorter by exactly
    -- the body, so the difference proves the bytes arrived.
    local c = client()
    local m = mark()
    c:request{ method = "PUT", path = "/r/308", body = BODY }
    c:request{ method = "PUT", path = "/r/308", body = ("x"):rep(#BODY) }
    c:request{ method = "PUT", path = "/r/308", body = "" }
    c:close()
    local log = since(m, 6)
    assert.equal(6, #log)
    assert.same({ "PUT", "PUT", "PUT" }, { log[2].method, log[4].method, log[6].method })
    assert.equal(log[2].request_length, log[4].request_length)
    assert.equal(#BODY + #"Content-Length: 7\r\n" - #"Content-Length: 0\r\n", log[2].request_length - log[6].request_length)
  end)

  it("keeps the method and ignores nothing when follow_redirects is off: the 3xx is the answer", function()
    local r, m = request_once({ follow_redirects = false }, { method = "POST", path = "/r/303", body = BODY })
    assert.same({ true, 303, 1 }, { r.ok, r.status, r.attempts })
    assert.equal(1, #since(m, 1))
  end)

  it("waits the Retry-After of a followed 3xx before the next hop (RFC 9110 §10.2.3)", function()
    local r, m = request_once(nil, { method = "GET", path = "/ra303" })
    assert.same({ true, 200, 2 }, { r.ok, r.status, r.attempts })
    assert.same({ "HTTP_303", "redirect", "1" }, { r.tries[1].class, r.tries[1].reason, r.tries[1].retry_after })
    assert.equal(1000, r.tries[2].delay_ms)
    assert.is_true(r.elapsed_ms >= 1000)
    assert.equal(2, #since(m, 2))
  end)

  it("stops with retry-after-exceeds-budget when a 3xx asks for more than retryAfter.maxMs", function()
    local r, m = request_once(nil, { method = "GET", path = "/ra-long" })
    assert.same({ false, 303, "deadline", "retry-after-exceeds-budget", 1 },
      { r.ok, r.status, r.outcome, r.reason, r.attempts })
    assert.equal("30", r.tries[1].retry_after)
    assert.is_true(r.elapsed_ms < 1000)
    assert.equal(1, #since(m, 1))
  end)

  it("stops with retry-after-exceeds-budget when a 3xx's Retry-After passes the deadline", function()
    local r = request_once(nil, { method = "GET", path = "/short" })
    assert.same({ false, "deadline", "retry-after-exceeds-budget", 1 }, { r.ok, r.outcome, r.reason, r.attempts })
  end)

  it("sends Authorization and Cookie to the same origin only", function()
    local c = client{ headers = { Authorization = "Bearer client-wide" } }
    local m = mark()
    c:request{ method = "GET", path = "/same-origin", headers = { Cookie = "session=1" } }
    c:request{ method = "GET", path = "/cross-host", headers = { Cookie = "session=2" } }
    c:close()
    local log = since(m, 4)
    assert.equal(4, #log)
    assert.same({ "Bearer client-wide", "session=1" }, { log[2].authorization, log[2].cookie })
    -- localhost is another origin than 127.0.0.1, though the same socket: no credentials.
    assert.same({ "/landing", "-", "-" }, { log[4].uri, log[4].authorization, log[4].cookie })
    assert.same({ "Bearer client-wide", "session=2" }, { log[3].authorization, log[3].cookie })
  end)

  it("drops credentials for another port of the same host", function()
    local r, m = request_once({ headers = { Authorization = "Bearer x" } }, { method = "GET", path = "/cross-port" })
    assert.same({ true, 200, "other\n", 2 }, { r.ok, r.status, r.body, r.attempts })
    local log = since(m, 2)
    assert.same({ "/other", "-" }, { log[2].uri, log[2].authorization })
  end)

  it("does not follow a Location that is not http or https", function()
    local r = request_once(nil, { method = "GET", path = "/ftp" })
    assert.same({ true, 302, 1 }, { r.ok, r.status, r.attempts })
  end)

  describe("redirect loops", function()
    it("ends a GET loop after max_redirects + 1 requests as TOO_MANY_REDIRECTS, terminal", function()
      local path = os.tmpname()
      local ledger = assert(rf.ledger.open(path))
      local r, m = request_once({ max_redirects = 3, ledger = ledger }, { method = "GET", path = "/loop" })
      ledger:close()
      assert.same({ false, "terminal", "status-not-retryable", 302, 4 },
        { r.ok, r.outcome, r.reason, r.status, r.attempts })
      assert.same({ "HTTP_302", "HTTP_302", "HTTP_302", "TOO_MANY_REDIRECTS" },
        { r.tries[1].class, r.tries[2].class, r.tries[3].class, r.tries[4].class })
      assert.equal("too-many-redirects", r.tries[4].transport)
      assert.equal(4, #since(m, 4))
      local last
      local it_, st = rf.ledger.read(path)
      for rec in it_, st do last = rec end
      os.remove(path)
      assert.same({ 4, "terminal", "TOO_MANY_REDIRECTS" }, { last.attempts, last.outcome, last.tries[4].class })
      assert.equal(4, #last.tries)
    end)

    it("defaults to 10 redirects: 11 requests", function()
      local r, m = request_once(nil, { method = "GET", path = "/loop" })
      assert.same({ "terminal", 11, "TOO_MANY_REDIRECTS" }, { r.outcome, r.attempts, r.tries[11].class })
      assert.equal(11, #since(m, 11))
    end)

    it("holds the largest max_redirects (30): 31 tries in the response and in the ledger", function()
      local path = os.tmpname()
      local ledger = assert(rf.ledger.open(path))
      local r, m = request_once({ max_redirects = 30, ledger = ledger }, { method = "GET", path = "/loop" })
      ledger:close()
      assert.same({ "terminal", 31, 31, "TOO_MANY_REDIRECTS" }, { r.outcome, r.attempts, #r.tries, r.tries[31].class })
      assert.equal(31, #since(m, 31))
      local last
      local it_, st = rf.ledger.read(path)
      for rec in it_, st do last = rec end
      os.remove(path)
      assert.same({ 31, 31 }, { last.attempts, #last.tries })
    end)

    it("ends a POST 307 loop after max_redirects + 1 requests, each with its body", function()
      local r, m = request_once({ max_redirects = 5 }, { method = "POST", path = "/loop307", body = BODY, idempotency_key = "k-307" })
      assert.same({ "terminal", "TOO_MANY_REDIRECTS", 6 }, { r.outcome, r.tries[6].class, r.attempts })
      local log = since(m, 6)
      assert.equal(6, #log)
      for i = 2, 6 do
        assert.same({ "POST", log[1].request_length }, { log[i].method, log[i].request_length })
      end
    end)

    it("never retries TOO_MANY_REDIRECTS, and a lock cannot make it retryable", function()
      local lock = LOCK:gsub('"retryable": %["HTTP_503"%]', '"retryable": ["HTTP_503", "TOO_MANY_REDIRECTS"]')
      local p, err = rf.load_string(lock, "bad.lock")
      assert.is_nil(p)
      assert.matches("TOO_MANY_REDIRECTS cannot be retryable", err, 1, true)
    end)

    it("refuses max_redirects outside 1..30", function()
      for _, bad in ipairs({ 0, 31, -1, 2.5, "3" }) do
        assert.has_error(function() rf.client{ policy = policy, base_url = base, max_redirects = bad } end,
          "rf.client: max_redirects must be an integer 1..30")
      end
    end)

    it("follows and limits redirects the same way in scheduled flows (retryfreeze.scheduler)", function()
      local scheduler = require "retryfreeze.scheduler"
      local c = client{ max_redirects = 2 }
      local m = mark()
      local got = {}
      local failed = scheduler.run(c, 4, 2, function(i)
        local r = c:request{ method = "GET", path = i % 2 == 1 and "/loop" or "/r/303" }
        got[i] = { r.attempts, r.tries[#r.tries].class }
      end)
      c:close()
      assert.equal(0, failed)
      assert.same({ { 3, "TOO_MANY_REDIRECTS" }, { 2, "HTTP_200" }, { 3, "TOO_MANY_REDIRECTS" }, { 2, "HTTP_200" } }, got)
      assert.equal(10, #since(m, 10))
    end)

    it("counts hops the same way in client:all", function()
      local c = client{ max_redirects = 2 }
      local m = mark()
      local rs = c:all{ { method = "GET", path = "/loop" }, { method = "GET", path = "/r/301" } }
      c:close()
      assert.same({ 3, "TOO_MANY_REDIRECTS" }, { rs[1].attempts, rs[1].tries[3].class })
      assert.same({ 2, 200 }, { rs[2].attempts, rs[2].status })
      assert.equal(5, #since(m, 5))
    end)
  end)

  -- `other` is the second server's URL; unused but for a direct sanity check that it answers.
  it("the second server answers directly", function()
    local r = request_once({ base_url = other }, { method = "GET", path = "/other" })
    assert.equal(200, r.status)
  end)
end)
