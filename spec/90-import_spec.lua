-- `retryfreeze import --from nginx`: the tokenizer against nginx's syntax (quotes, escapes, comments, empty blocks,
-- includes), what the import reads and what it refuses (exit 1 naming the directive and its file:line), and the
-- governance proof: `diff SIGNED IMPORTED` exits 1 for a configuration wider than the signed lock, 0 for a
-- narrower one. Real nginx counting the attempts is ctest import_nginx (spec/import_nginx_check.lua).
local h = require "spec.helper"
local json = require "retryfreeze.json"
local nginx = require "retryfreeze.import_nginx"
local grpc = require "retryfreeze.import_grpc"
local import = require "retryfreeze.import"
local rf = require "retryfreeze"

describe("retryfreeze import --from nginx", function()
  local scratch = h.scratch()
  teardown(scratch.remove)
  local dir = scratch.track(h.sh("mktemp -d /tmp/rf-import-spec.XXXXXX"):gsub("%s+$", ""))

  local function write(name, text) return h.write_file(dir .. "/" .. name, text) end
  local function conf(location_body, http_extra, name)
    return write(name or "nginx.conf", "events {}\nhttp {\n" .. (http_extra or "")
      .. "  upstream pool { server 127.0.0.1:1; server 127.0.0.1:2; server 127.0.0.1:3; }\n"
      .. "  server {\n    listen 8080;\n    location /v1/ {\n      proxy_pass http://pool;\n"
      .. location_body .. "\n    }\n  }\n}\n")
  end
  local function import_cli(path)
    local out, err, code = h.run_cli("import", path, "--from", "nginx")
    return out, err, code
  end
  local function route(out, endpoint)
    for _, r in ipairs(json.decode(out).routes) do
      if r.endpoint == endpoint then return r end
    end
  end

  it("docs/cli.md's table of conditions is the importer's (M.CLASSES)", function()
    local text = h.read_file("docs/cli.md")
    local section = assert(text:match("| condition | classes |(.-)\n\n"))
    local documented = {}
    for cond, classes in section:gmatch("\n| `([%w_]+)` | ([^\n]*) |") do
      local list = {}
      if not classes:match("^none") then
        for c in classes:gmatch("`([%u%d_]+)`") do list[#list + 1] = c end
      end
      documented[cond] = list
    end
    assert.same(nginx.CLASSES, documented)
  end)

  describe("the tokenizer", function()
    it("reads quotes, escapes and comments as nginx does", function()
      -- The comment swallows "; {": the directive goes on into line 2. A "\\;" stays as written (nginx unescapes
      -- only quotes, backslash, t, r and n).
      local tree = nginx.parse('a "x;y" \'q\\\'s\' # c ; {\nb "#not" w\\;x;\nc\n"\\t";', "t.conf")
      assert.same({ "x;y", "q's", "b", "#not", "w\\;x" }, tree[1].args)
      assert.equal(1, tree[1].line)
      assert.same({ "\t" }, tree[2].args)
      assert.equal(3, tree[2].line)
      assert.equal("a#b", nginx.parse("k a#b;", "t")[1].args[1])
      -- "}" ends no word (only a space, ";" or "{" does), and a quoted "{" or ";" is text.
      assert.same({ "b}c", "{;}" }, nginx.parse("a b}c '{;}';", "t")[1].args)
    end)

    it("keeps ${var} in one word and reads an empty block", function()
      local tree = nginx.parse("set $x ${a}b; e { }", "t")
      assert.equal("${a}b", tree[1].args[2])
      assert.same({}, tree[2].block)
    end)

    it("refuses broken syntax with file:line", function()
      for _, c in ipairs({ { "a {", "t:1: unexpected end of file" }, { "a;\n}", "t:2: unexpected \"}\"" },
        { 'a "x', "unexpected end of file in a double-quoted string" }, { ";", "t:1: unexpected \";\"" },
        { 'a "x"y;', "unexpected \"y\" after a quoted string" }, { "a b", "expecting \";\" or \"}\"" } }) do
        local ok, e = pcall(nginx.parse, c[1], "t")
        assert.is_false(ok)
        assert.truthy(e.text:find(c[2], 1, true), e.text)
      end
    end)

    it("reads nginx times", function()
      assert.equal(5400000, nginx.time_ms("1h30m"))
      assert.equal(500, nginx.time_ms("500ms"))
      assert.equal(30000, nginx.time_ms("30"))
      assert.is_nil(nginx.time_ms("30s1h"))
      assert.is_nil(nginx.time_ms("5x"))
    end)
  end)

  describe("what nginx retries", function()
    it("defaults to error timeout, one attempt per server, POST only before sending", function()
      local out, err, code = import_cli(conf("proxy_read_timeout 2s; proxy_send_timeout 1s; proxy_connect_timeout 500ms;"))
      assert.equal(0, code, err)
      local get = route(out, "GET /v1/*")
      assert.equal(3, get.maxAttempts)
      assert.same({ "CONNECT_REFUSED", "CONNECT_RESET", "TLS_FAILURE", "TIMEOUT" }, get.retryable)
      assert.equal(3500, get.perAttemptTimeoutMs)
      assert.equal(10500, get.totalBudgetMs)
      assert.same({ "CONNECT_REFUSED", "TLS_FAILURE", "TIMEOUT" }, route(out, "POST /v1/*").retryable)
      assert.truthy(err:find("note: a POST", 1, true))
    end)

    it("inherits from http and replaces, never merges, below", function()
      local out, err, code = import_cli(conf("proxy_next_upstream http_503 non_idempotent;",
        "  proxy_next_upstream error http_502; proxy_next_upstream_tries 2; proxy_next_upstream_timeout 3s;\n"))
      assert.equal(0, code, err)
      local post = route(out, "POST /v1/*")
      assert.same({ "HTTP_503" }, post.retryable)
      assert.equal(2, post.maxAttempts)
      assert.equal(180000 + 3000, post.totalBudgetMs)
    end)

    it("reads an include relative to the main file's directory, unknown directives ignored", function()
      h.sh("mkdir -p " .. h.shell_quote(dir .. "/inc"))
      write("inc/loc.conf", "proxy_next_upstream off; # from an include\nsome_module_directive 'x' \"y\";\n")
      local out, err, code = import_cli(conf("include inc/loc.conf;"))
      assert.equal(0, code, err)
      assert.equal(1, route(out, "GET /v1/*").maxAttempts)
      assert.same({}, route(out, "GET /v1/*").retryable)
    end)

    it("ignores locations without proxy_pass and redirects into them (nginx's default 50x page)", function()
      local path = write("quiet.conf", "http { server {\n error_page 500 502 503 504 /50x.html;\n"
        .. " location = /50x.html { root html; }\n location /api { root x; }\n location ~ \\.png$ { root x; }\n"
        .. " location @named { return 404; }\n location / { proxy_pass http://127.0.0.1:9; } } }")
      local out, err, code = import_cli(path)
      assert.equal(0, code, err)
      assert.equal(1, route(out, "GET /*").maxAttempts)
      assert.is_nil(route(out, "GET /api"))
    end)

    it("maps an exact location to its path", function()
      local path = write("exact.conf", "http { server { location = /health { proxy_pass http://127.0.0.1:9; } } }")
      local out, err, code = import_cli(path)
      assert.equal(0, code, err)
      assert.equal(1, route(out, "GET /health").maxAttempts)
    end)
  end)

  describe("refuses what no lock can say", function()
    local cases = {
      { "location ~ ^/v2 { proxy_pass http://pool; }", "nginx.conf:8: location ~ ^/v2: a regular expression" },
      { "location /api { proxy_pass http://pool; }", "nginx.conf:8: location /api: a prefix that does not end in /" },
      { "location /v3/ { proxy_pass http://$host; }", "nginx.conf:8: proxy_pass http://$host: a variable" },
      { "location /v3/ { proxy_pass http://backend.example; }", "nginx.conf:8: proxy_pass http://backend.example: a name" },
      { "location /v3/ { include missing.conf; }", "nginx.conf:8: include missing.conf: cannot read" },
      { "location /v3/ { if ($x) { proxy_pass http://pool; } }", "nginx.conf:8: proxy_pass inside if" },
      { "location /v3/ { proxy_pass http://pool; proxy_next_upstream http_418; }", "http_418: not a condition" },
      { "location /v3/ { proxy_pass http://pool; proxy_connect_timeout 5parsecs; }", "not a time nginx reads" },
      { "location /v3/ { rewrite ^ /v1/ last; }", "nginx.conf:8: rewrite: moves requests" },
      { "location @fallback { proxy_pass http://pool; }", "a named location" },
      { "location /v3/ { grpc_pass grpc://127.0.0.1:1; }", "nginx.conf:8: grpc_pass: only proxy_pass is imported" },
      { "location /v3/ { limit_except GET { proxy_pass http://pool; } }", "proxy_pass inside limit_except" },
      { "error_page 404 /v1/missing; location /v1/ { proxy_pass http://pool; }",
        "nginx.conf:8: error_page /v1/missing: an internal redirect into location /v1/ (" },
      { "location /v3/ { try_files $uri /v1/index; } location /v1/ { proxy_pass http://pool; }",
        "try_files /v1/index: an internal redirect into location /v1/" },
    }
    for _, c in ipairs(cases) do
      it(c[1], function()
        local path = write("nginx.conf", "events {}\nhttp {\n"
          .. "  upstream pool { server 127.0.0.1:1; server 127.0.0.1:2; }\n  server {\n    listen 8080;\n"
          .. "    # a comment with proxy_pass http://$nothing; and \"quotes\n\n    " .. c[1] .. "\n  }\n}\n")
        local out, err, code = import_cli(path)
        assert.equal(1, code, out .. err)
        assert.equal("", out)
        assert.truthy(err:find(c[2], 1, true), err)
      end)
    end

    it("keepalive with proxy_next_upstream error (a cached connection's failure is a free try)", function()
      local path = write("keep.conf", "http { upstream k { server 127.0.0.1:1; server 127.0.0.1:2;\n keepalive 8; }\n"
        .. " server { location / { proxy_pass http://k; } } }")
      local _, err, code = import_cli(path)
      assert.equal(1, code)
      assert.truthy(err:find("keep.conf:2: keepalive in upstream k: with proxy_next_upstream error", 1, true), err)
      -- Without error in proxy_next_upstream the servers bound the tries again.
      h.write_file(path, "http { upstream k { server 127.0.0.1:1; server 127.0.0.1:2; keepalive 8; }\n"
        .. " server { location / { proxy_pass http://k; proxy_next_upstream http_503; } } }")
      local out, err2, code2 = import_cli(path)
      assert.equal(0, code2, err2)
      assert.equal(2, route(out, "GET /*").maxAttempts)
    end)

    it("eleven servers with unlimited tries", function()
      local servers = {}
      for i = 1, 11 do servers[i] = "server 127.0.0.1:" .. i .. ";" end
      local path = write("many.conf", "http { upstream big { " .. table.concat(servers, " ")
        .. " } server { location / { proxy_pass http://big; } } }")
      local _, err, code = import_cli(path)
      assert.equal(1, code)
      assert.truthy(err:find("11 tries", 1, true), err)
    end)

    it("a syntax error is bad input (exit 2)", function()
      local _, err, code = import_cli(write("bad.conf", "http { server { location / { proxy_pass http://x; }"))
      assert.equal(2, code)
      assert.truthy(err:find("bad.conf:1: unexpected end of file", 1, true), err)
    end)
  end)

  describe("diff SIGNED IMPORTED", function()
    local signed = [[{"version": 1, "defaults": {"minAttemptMs": 0, "idempotencyRequired": [],
      "backoff": {"baseMs": 0, "maxMs": 0, "multiplier": 1, "jitter": "none"}, "retryAfter": {"honor": false},
      "perAttemptTimeoutMs": 180000, "totalBudgetMs": 360000, "maxAttempts": 2,
      "retryable": ["CONNECT_REFUSED", "CONNECT_RESET", "TLS_FAILURE", "TIMEOUT", "HTTP_503"]},
      "routes": [{"endpoint": "GET /v1/*"}, {"endpoint": "HEAD /v1/*"}, {"endpoint": "PUT /v1/*"},
      {"endpoint": "DELETE /v1/*"}, {"endpoint": "OPTIONS /v1/*"},
      {"endpoint": "POST /v1/*"}, {"endpoint": "PATCH /v1/*"}, {"endpoint": "LOCK /v1/*"}]}]]

    local function diff_against(location_body)
      local lock = write("signed.lock.json", signed)
      local imported = dir .. "/imported.lock.json"
      local _, err, code = h.run_cli("import", conf(location_body), "--from", "nginx", "-o", imported)
      assert.equal(0, code, err)
      return h.run_cli("diff", lock, imported, "--log", dir .. "/none.jsonl")
    end

    it("exits 1 for a configuration wider than the signed lock", function()
      local out, _, code = diff_against("proxy_next_upstream error timeout http_503 http_500;")
      assert.equal(1, code)
      assert.truthy(out:find("WIDENING", 1, true), out)
      assert.truthy(out:find("maxAttempts 2 → 3", 1, true), out)
    end)

    it("exits 0 for a narrower one", function()
      local out, err, code = diff_against("proxy_next_upstream_tries 2; proxy_next_upstream error;")
      assert.equal(0, code, out .. err)
      assert.falsy(out:find("WIDENING", 1, true), out)
    end)
  end)
end)

describe("retryfreeze import --from grpc", function()
  local scratch = h.scratch()
  teardown(scratch.remove)
  local function write(doc) return scratch.file(type(doc) == "string" and doc or json.encode(doc)) end
  local retry = { maxAttempts = 3, initialBackoff = "0.1s", maxBackoff = "1s", backoffMultiplier = 2,
    retryableStatusCodes = { "UNAVAILABLE" } }
  local function config(mc, top)
    local doc = { methodConfig = { mc } }
    for k, v in pairs(top or {}) do doc[k] = v end
    return write(doc)
  end
  local function copy(t, extra)
    local c = {}
    for k, v in pairs(t) do c[k] = v end
    for k, v in pairs(extra or {}) do c[k] = v end
    return c
  end

  it("reads names, the retry policy, the deadline and retryThrottling", function()
    local lock, notes = import.read("grpc", config({ name = { { service = "pkg.Echo", method = "Say" },
      { service = "pkg.Other" }, {} }, timeout = "2.5s", retryPolicy = copy(retry, { maxAttempts = 7,
      retryableStatusCodes = { "UNAVAILABLE", 8 }, perAttemptRecvTimeout = "0.5s" }) },
      { retryThrottling = { maxTokens = 10, tokenRatio = 0.1239 } }))
    assert.truthy(lock, notes)
    local endpoints = {}
    for i, r in ipairs(lock.routes) do endpoints[i] = r.endpoint end
    assert.same({ "POST /*", "POST /pkg.Echo/Say", "POST /pkg.Other/*" }, endpoints)
    local r = lock.routes[2]
    assert.equal(5, r.maxAttempts) -- gRPC's cap, said in a note
    assert.truthy(table.concat(notes, "\n"):find("maxAttempts 7: gRPC treats it as 5", 1, true))
    assert.same({ "GRPC_UNAVAILABLE", "CONNECT_REFUSED", "CONNECT_RESET", "DNS_FAILURE", "TLS_FAILURE",
      "GRPC_RESOURCE_EXHAUSTED" }, r.retryable)
    assert.equal(500, r.perAttemptTimeoutMs)
    assert.equal(2500, r.totalBudgetMs)
    assert.same({ baseMs = 100, maxMs = 1000, multiplier = 2, jitter = "full" }, r.backoff)
    assert.same({ maxTokens = 10, tokenRatio = 0.123 }, lock.retryBudget)
  end)

  it("refuses an unknown key anywhere, naming its JSON path", function()
    local cases = {
      { { name = { {} }, timeout = "1s", retryPolicy = copy(retry, { maxAttemps = 3 }) },
        "$.methodConfig[0].retryPolicy.maxAttemps: unknown key" },
      { { name = { {} }, timeout = "1s", retrypolicy = retry }, "$.methodConfig[0].retrypolicy: unknown key" },
      { { name = { { service = "a.B", methd = "M" } }, timeout = "1s" }, "$.methodConfig[0].name[0].methd: unknown key" },
    }
    for _, c in ipairs(cases) do
      local lock, why, code = import.read("grpc", config(c[1]))
      assert.is_nil(lock)
      assert.equal(1, code)
      assert.truthy(why:find(c[2], 1, true), why)
    end
    local _, why, code = import.read("grpc", config({ name = { {} }, timeout = "1s" }, { retryThrotling = {} }))
    assert.equal(1, code)
    assert.truthy(why:find("$.retryThrotling: unknown key", 1, true), why)
  end)

  it("refuses what no lock can say and what gRPC itself refuses", function()
    local cases = {
      { { name = { {} }, retryPolicy = retry }, 1, "$.methodConfig[0].timeout: absent" },
      { { name = { {} }, timeout = "1s", retryPolicy = copy(retry, { retryableStatusCodes = { "OK" } }) }, 1,
        "retryableStatusCodes[0]: \"OK\" is no gRPC status code" },
      { { name = { {} }, timeout = "1s", retryPolicy = copy(retry, { backoffMultiplier = 0.5 }) }, 1,
        "backoffMultiplier: 0.5: a lock's multiplier is 1..10" },
      { { name = { {} }, timeout = "1s", retryPolicy = copy(retry, { maxAttempts = 1 }) }, 2,
        "maxAttempts: must be an integer of at least 2" },
      { { name = { {} }, timeout = "1s", retryPolicy = copy(retry, { initialBackoff = "100ms" }) }, 2,
        "initialBackoff: must be a duration" },
      { { name = { {} }, timeout = "1s", retryPolicy = retry, hedgingPolicy = { maxAttempts = 2 } }, 2,
        "retryPolicy and hedgingPolicy are exclusive" },
      { { name = { { method = "M" } }, timeout = "1s" }, 2, "name[0].method: a method needs its service" },
      { { name = { {}, { service = "" } }, timeout = "1s" }, 2, "POST /* is also named at $.methodConfig[0].name[0]" },
      { { name = { {} }, timeout = "1s", hedgingPolicy = { maxAttempts = 3 } }, 1, "hedgingDelay: 0 ms" },
    }
    for _, c in ipairs(cases) do
      local lock, why, code = import.read("grpc", config(c[1]))
      assert.is_nil(lock)
      assert.equal(c[2], code, why)
      assert.truthy(why:find(c[3], 1, true), why)
    end
    local _, why, code = import.read("grpc", write("{\"methodConfig\": [}"))
    assert.equal(2, code)
    assert.truthy(why:find("not JSON", 1, true), why)
  end)

  it("reads proto3 JSON durations", function()
    assert.equal(100, grpc.duration_ms("0.1s"))
    assert.equal(1, grpc.duration_ms("0.000000001s")) -- rounded up: never a shorter wait
    assert.is_nil(grpc.duration_ms("1.s"))
    assert.is_nil(grpc.duration_ms("-1s"))
    assert.is_nil(grpc.duration_ms("1"))
  end)

  it("holds its status names to the vocabulary's GRPC_ classes, in code order", function()
    local header = "core/include/retryfreeze/vocabulary.h"
    if not h.read_file(header):find("#define RF_GRPC_CLASSES", 1, true) then
      return pending("this tree's vocabulary has no RF_GRPC_CLASSES")
    end
    local tokens = {}
    for i, e in ipairs(h.x_macro(header, "RF_GRPC_CLASSES")) do tokens[i] = e[2] end
    local mine = {}
    for i, name in ipairs(grpc.STATUS) do mine[i] = "GRPC_" .. name end
    assert.same(tokens, mine)
  end)

  describe("through the CLI and diff", function()
    local has_grpc = rf.load_string('{"endpoint": "POST /a", "maxAttempts": 1, "perAttemptTimeoutMs": 1, '
      .. '"totalBudgetMs": 1, "retryable": ["GRPC_UNAVAILABLE"]}', "probe") ~= nil
    local signed = json.encode({ version = 1, defaults = { minAttemptMs = 0, idempotencyRequired = json.array(),
      perAttemptTimeoutMs = 2000, totalBudgetMs = 2000, maxAttempts = 3,
      backoff = { baseMs = 100, maxMs = 1000, multiplier = 2, jitter = "full" },
      retryAfter = { honor = true, headers = { "grpc-retry-pushback-ms" }, maxMs = 2000 },
      retryable = { "GRPC_UNAVAILABLE", "CONNECT_REFUSED", "CONNECT_RESET", "DNS_FAILURE", "TLS_FAILURE" } },
      routes = { { endpoint = "POST /pkg.Echo/*" } } })

    local function diff_against(policy)
      local lock = scratch.file(signed)
      local imported = scratch.track(os.tmpname())
      local _, err, code = h.run_cli("import", config({ name = { { service = "pkg.Echo" } }, timeout = "2s",
        retryPolicy = policy }), "--from", "grpc", "-o", imported)
      assert.equal(0, code, err)
      return h.run_cli("diff", lock, imported, "--log", imported .. ".none")
    end

    it("decides as the channel would: a retryable code retried up to the capped maxAttempts, others stopped", function()
      if not has_grpc then return pending("this build has no GRPC_* classes") end
      local path = scratch.track(os.tmpname())
      local _, err, code = h.run_cli("import", config({ name = { { service = "pkg.Echo" } }, timeout = "2s",
        retryPolicy = copy(retry, { maxAttempts = 9 }) }), "--from", "grpc", "-o", path)
      assert.equal(0, code, err)
      assert.truthy(err:find("maxAttempts 9: gRPC treats it as 5", 1, true), err)
      local policy = assert(rf.load(path))
      local function decide(grpc_status, attempts)
        return policy:decide{ method = "POST", path = "/pkg.Echo/Say", status = 200, grpc_status = grpc_status,
          attempts = attempts, elapsed_ms = 0 }
      end
      assert.is_true(decide(14, 4).retry)
      assert.is_false(decide(14, 5).retry) -- the fifth attempt is gRPC's last
      assert.equal("status-not-retryable", decide(3, 1).reason)
      assert.is_true(policy:decide{ method = "POST", path = "/pkg.Echo/Say", transport = "connect-refused",
        attempts = 1, elapsed_ms = 0 }.retry) -- UNAVAILABLE to the channel
    end)

    it("exits 1 for a service config wider than the signed lock", function()
      if not has_grpc then return pending("this build has no GRPC_* classes") end
      local out, _, code = diff_against(copy(retry, { maxAttempts = 4 }))
      assert.equal(1, code)
      assert.truthy(out:find("maxAttempts 3 → 4", 1, true), out)
    end)

    it("exits 0 for a narrower one", function()
      if not has_grpc then return pending("this build has no GRPC_* classes") end
      local out, err, code = diff_against(copy(retry, { maxAttempts = 2 }))
      assert.equal(0, code, out .. err)
    end)
  end)
end)
