local h = require "spec.helper"

describe("retryfreeze check", function()
  it("validates a lock, prints the digest and the effective policy, exits 0", function()
    local out, _, code = h.run_cli("check", h.desk_lock)
    assert.equal(0, code)
    assert.matches("^ok: examples/retry%-budget%.lock%.json\ndigest: sha256:%x+\n", out)
    assert.matches('"minAttemptMs":%s*200', out)
    assert.matches('"idempotencyRequired":%s*%["DELETE", "PATCH", "POST"%]', out)
  end)

  it("prints the error and exits 2 on an invalid lock", function()
    local path = h.temp_file('{"endpoint":"GET /a","maxAttempts":0}')
    local out, err, code = h.run_cli("check", path)
    os.remove(path)
    assert.equal(2, code)
    assert.equal("", out)
    assert.equal("retryfreeze check: invalid lock: " .. path .. ": $.maxAttempts: must be an integer from 1 to 10, got 0\n", err)
  end)

  it("--gateway says which routes the gateway serves natively and why not the others", function()
    local out, err, code = h.run_cli("check", "examples/gateway/gateway.lock.json", "--gateway")
    assert.equal(0, code, err)
    assert.matches("\nnative GET /echo\nnative GET /fail\nnative GET /items/%*\nnative POST /v1/jobs\n$", out)
    local path = h.temp_file([[{"version": 1, "defaults": {"maxAttempts": 3, "perAttemptTimeoutMs": 1000, "totalBudgetMs": 3000,
      "retryable": ["HTTP_503"]},
      "routes": [{"endpoint": "GET /waits", "backoff": {"baseMs": 20, "maxMs": 40}, "retryAfter": {"honor": false}},
                 {"endpoint": "GET /now", "backoff": {"baseMs": 0, "maxMs": 0}, "retryAfter": {"honor": false}},
                 {"endpoint": "GET /hedged", "backoff": {"baseMs": 0, "maxMs": 0}, "retryAfter": {"honor": false},
                  "hedging": {"maxAttempts": 2, "hedgingDelayMs": 50}},
                 {"endpoint": "GET /once", "maxAttempts": 1}]}]])
    out, err, code = h.run_cli("check", path, "--gateway")
    os.remove(path)
    assert.equal(1, code, err)
    assert.matches("\nnot%-native GET /hedged: hedging: [^\n]+\n", out)
    assert.matches("\nnative GET /now\n", out)
    -- one attempt: no retry, so neither its backoff nor its Retry-After can ask for a wait
    assert.matches("\nnative GET /once\n", out)
    assert.matches("\nnot%-native GET /waits: backoff: the retry after attempt 1 waits up to 20 ms, and a gateway's "
      .. "tries never wait %(set backoff.baseMs and backoff.maxMs to 0%)\n", out)
    -- the lean form: no route with propagation either (gateway.lock.json has it on every route)
    out, err, code = h.run_cli("check", "examples/gateway/gateway.lock.json", "--gateway", "--lean")
    assert.equal(1, code, err)
    local _, n = out:gsub("\nnot%-native [^\n]+: propagation: a caller's headers are read, and the overloaded header "
      .. "told, only by the Lua gateway's full form %(its access and header_filter phases%), which this gateway is "
      .. "not %(remove propagation, or serve the route from that form%)", "")
    assert.equal(4, n, out)
    out, err, code = h.run_cli("check", "examples/gateway/lean.lock.json", "--gateway", "--lean")
    assert.equal(0, code, err)
    assert.matches("\nnative GET /echo\nnative GET /fail\nnative GET /items/%*\nnative POST /v1/jobs\n$", out)
    local _, usage
    _, usage, code = h.run_cli("check", "examples/gateway/lean.lock.json", "--lean")
    assert.equal(2, code)
    assert.matches("%-%-lean needs %-%-gateway", usage)
    _, usage, code = h.run_cli("check", "examples/gateway/gateway.lock.json", "--gateway", "--table", "x.tsv")
    assert.equal(2, code)
    assert.matches("%-%-gateway does not go with %-%-table", usage)
  end)

  it("exits 2 on bad usage and 0 on --help", function()
    local _, _, code = h.run_cli("check")
    assert.equal(2, code)
    local out
    out, _, code = h.run_cli("check", "--help")
    assert.equal(0, code)
    assert.matches("^usage: retryfreeze check LOCK", out)
    _, _, code = h.run_cli("frobnicate")
    assert.equal(2, code)
    out, _, code = h.run_cli("--help")
    assert.equal(0, code)
    assert.matches("check", out)
    assert.matches("decide", out)
  end)

  it("prints a command's generated help for `help COMMAND` and for --help anywhere before --", function()
    local general = h.run_cli("help")
    local out, err, code = h.run_cli("help", "check")
    assert.equal(0, code)
    assert.equal("", err)
    assert.are_not.equal(general, out)
    assert.matches("^usage: retryfreeze check LOCK %[%-%-table TABLE%.tsv%] %[%-%-seed N%] %[%-%-gateway%] %[%-%-lean%]\n", out)
    -- the options list comes from the parser's option table: the kind of value each takes, and what it does
    assert.matches("\n   %-%-seed <N> +the jitter seed of every table row %(default 1; only with %-%-table%)\n", out)
    assert.matches("\n   %-%-table <TABLE%.tsv> +run this decision table %(facts %-> expected verdict%) instead of", out)
    local same = h.run_cli("check", "--help")
    assert.equal(out, same)
    same = h.run_cli("check", h.desk_lock, "--help")
    assert.equal(out, same)
    out, err, code = h.run_cli("help", "gate")
    assert.equal(0, code)
    assert.equal("", err)
    assert.matches("\n   %-%-forbid%-reason <REASON> +no request may end with this reason; repeatable\n", out)
    assert.matches("\n   %-%-skip%-corrupt +count and skip corrupt ledger lines instead of stopping\n", out)
    -- run passes its arguments on: only a first --help is the command's
    out, err, code = h.run_cli("help", "run")
    assert.equal(0, code)
    assert.equal("", err)
    assert.matches("^usage: retryfreeze run FLOW%.lua", out)
  end)

  it("suggests the command or option meant, and exits 2", function()
    -- Each case: the arguments, and stderr whole (a string) or its start (a pattern, in a table); stdout is empty.
    for _, case in ipairs({
      { { "chek", h.desk_lock },
        "retryfreeze: unknown command 'chek'\nDid you mean 'check'?\nretryfreeze help lists the commands.\n" },
      { { "help", "chek" }, "retryfreeze help: unknown command 'chek'\nDid you mean 'check'?\n" },
      { { "help", "args" }, "retryfreeze help: unknown command 'args'\n" }, -- a module of the CLI, not a command
      { { "check", h.desk_lock, "--tabel", "t.tsv" },
        { "^retryfreeze check: unknown option '%-%-tabel'\nDid you mean '%-%-table'%?\nusage: retryfreeze check" } },
      { { "stats", "--json=yes", "x" }, { "^retryfreeze stats: option '%-%-json' does not take arguments\n" } },
      { { "check", h.desk_lock, "--seed" }, { "^retryfreeze check: option '%-%-seed' requires an argument\n" } },
    }) do
      local out, err, code = h.run_cli(table.unpack(case[1]))
      assert.equal(2, code, table.concat(case[1], " "))
      assert.equal("", out)
      if type(case[2]) == "table" then assert.matches(case[2][1], err) else assert.equal(case[2], err) end
    end
  end)

  it("passes an option value that starts with '-' to the command, which checks it", function()
    local _, err, code = h.run_cli("decide", h.desk_lock, "--method", "GET", "--path", "/x", "--now-ms", "-5")
    assert.equal(2, code)
    assert.matches("^retryfreeze decide: %-%-now%-ms must be in 0%.%.%d+, got %-5\n", err)
  end)

  it("prints the version", function()
    local out, _, code = h.run_cli("--version")
    assert.equal(0, code)
    local rf = require("retryfreeze")
    assert.equal(("retryfreeze %s\nlibcurl %s%s, HTTP/2: %s\n"):format(rf.VERSION, rf.libcurl.version,
      rf.libcurl.ssl and " " .. rf.libcurl.ssl or "", rf.libcurl.http2 and "yes" or "no"), out)
  end)
end)

describe("retryfreeze decide", function()
  it("prints the verdict as one JSON line", function()
    local out, _, code = h.run_cli("decide", h.desk_lock, "--method", "POST", "--path", "/v1/jobs",
      "--status", "429", "--retry-after", "1", "--idempotency-key", "k", "--elapsed-ms", "100")
    assert.equal(0, code)
    assert.equal('{"retry":true,"reason":"pinned-status","class":"HTTP_429","delay_ms":1000,"timeout_ms":1400,'
      .. '"retry_after":"honored","retry_after_header":"retry-after","route":"POST /v1/jobs"}\n', out)
  end)

  it("takes wait headers with --hint NAME=VALUE, and refuses one the route does not read", function()
    local lock = h.temp_file([[{"endpoint": "GET /x", "maxAttempts": 3, "perAttemptTimeoutMs": 1000,
      "totalBudgetMs": 60000, "retryable": ["HTTP_429"],
      "retryAfter": {"headers": ["grpc-retry-pushback-ms", "retry-after-ms", "ratelimit"]}}]])
    local out, _, code = h.run_cli("decide", lock, "--method", "GET", "--path", "/x", "--status", "429",
      "--hint", "retry-after-ms=250", "--hint", 'ratelimit="default";r=0;t=3')
    assert.equal(0, code)
    assert.equal('{"retry":true,"reason":"pinned-status","class":"HTTP_429","delay_ms":250,"timeout_ms":1000,'
      .. '"retry_after":"honored","retry_after_header":"retry-after-ms","route":"GET /x"}\n', out)
    out, _, code = h.run_cli("decide", lock, "--method", "GET", "--path", "/x", "--status", "429",
      "--hint=grpc-retry-pushback-ms=-1")
    assert.equal(0, code)
    assert.matches('"retry":false,"reason":"server%-pushback".*"retry_after_header":"grpc%-retry%-pushback%-ms"', out)
    local err
    out, err, code = h.run_cli("decide", lock, "--method", "GET", "--path", "/x", "--status", "429",
      "--hint", "retry-after=1")
    assert.equal(2, code)
    assert.equal("", out)
    assert.matches("does not read retry%-after", err)
    _, err, code = h.run_cli("decide", lock, "--method", "GET", "--path", "/x", "--hint", "x-wait=1")
    assert.equal(2, code)
    assert.matches("unknown header 'x%-wait'", err)
    _, err, code = h.run_cli("decide", lock, "--method", "GET", "--path", "/x", "--hint", "retry-after-ms")
    assert.equal(2, code)
    assert.matches("%-%-hint needs NAME=VALUE", err)
  end)

  it("decides unpinned-source for --source '' as for any source but pinned-map", function()
    local args = { "decide", h.desk_lock, "--method", "POST", "--path", "/v1/jobs", "--status", "504",
      "--idempotency-key", "k", "--seed", "1" }
    -- Each case: the --source value (false: no --source) and what the verdict must say.
    for _, case in ipairs({
      { false, '"retry":true,"reason":"pinned%-status"' },
      { "", '^{"retry":false,"reason":"unpinned%-source"' },
      { "llm", '^{"retry":false,"reason":"unpinned%-source"' },
      { "pinned-map ", '^{"retry":false,"reason":"unpinned%-source"' },
      { "pinned-map", '"retry":true,"reason":"pinned%-status"' },
    }) do
      local a = { table.unpack(args) }
      if case[1] then a[#a + 1], a[#a + 2] = "--source", case[1] end
      local out, _, code = h.run_cli(table.unpack(a))
      assert.equal(0, code, tostring(case[1]))
      assert.matches(case[2], out)
      assert.matches('"route":"POST /v1/jobs"}', out, 1, true) -- unpinned-source too names the route it matched
    end
    local out, _, code = h.run_cli("decide", h.desk_lock, "--method", "GET", "--path", "/nowhere", "--status", "503",
      "--source", "llm")
    assert.equal(0, code)
    assert.equal('{"retry":false,"reason":"unpinned-source","class":"HTTP_503","delay_ms":0,"timeout_ms":0,'
      .. '"retry_after":"absent"}\n', out) -- no route matched: none named, as for no-route
  end)

  it("is deterministic with --seed", function()
    local args = { "decide", h.desk_lock, "--method", "POST", "--path", "/v1/jobs", "--status", "504",
      "--idempotency-key", "k", "--seed", "5" }
    local a = h.run_cli(table.unpack(args))
    local b = h.run_cli(table.unpack(args))
    assert.equal(a, b)
    assert.matches('"retry":true', a)
  end)

  it("exits 2 on a bad fact or a missing option", function()
    local _, err, code = h.run_cli("decide", h.desk_lock, "--method", "POST", "--path", "/v1/jobs",
      "--transport", "boom")
    assert.equal(2, code)
    assert.matches("^retryfreeze decide: %-%-transport must be one of ok, timeout", err)
    _, err, code = h.run_cli("decide", h.desk_lock, "--method", "POST")
    assert.equal(2, code)
    assert.matches("^retryfreeze decide: %-%-path PATH is required\nusage: retryfreeze decide LOCK %-%-method METHOD "
      .. "%-%-path PATH ", err)
    -- valid options but two positional arguments: a usage error, not a crash
    _, err, code = h.run_cli("decide", h.desk_lock, "extra", "--method", "POST", "--path", "/x")
    assert.equal(2, code)
    assert.matches("^retryfreeze decide: expected exactly one LOCK\nusage:", err)
    _, err, code = h.run_cli("decide", h.desk_lock, "--method", "POST", "--path", "/x", "--status", "abc")
    assert.equal(2, code)
    assert.matches("needs an integer", err)
  end)
end)

-- Demo from a rock (no retryfreeze-serve beside the command) or outside the
-- checkout (no examples/) checks what it needs before it prints or starts anything, and says what to set.
-- The rock here is a Lua 5.4 one: pending in a build without the 5.4 module (RF_LUA=luajit).
local describe_54 = h.has_module("5.4") and describe or pending
describe_54("retryfreeze demo checks what it needs first", function()
  local root = (io.popen("pwd"):read("*l"))
  local dir, rock
  setup(function()
    dir = h.temp_dir()
    -- The rock's command: bindings/cli_main.lua on the stock lua5.4, no bindir, run from a folder outside the
    -- checkout with absolute library paths (as a LuaRocks tree gives them).
    rock = string.format("cd %s && env %%s LUA_PATH=%s LUA_CPATH=%s lua5.4 %s", h.shell_quote(dir),
      h.shell_quote(root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;;"),
      h.shell_quote((h.build_dir:match("^/") and h.build_dir or root .. "/" .. h.build_dir) .. "/lib/lua/5.4/?.so;;"),
      h.shell_quote(root .. "/bindings/cli_main.lua"))
  end)
  teardown(function() os.execute("rm -rf " .. h.shell_quote(dir)) end)

  -- The rock builds no retryfreeze-serve; the demo says so, and what to run instead, in one line.
  local rock_demo = "retryfreeze demo: the demo needs retryfreeze-serve, a C program a LuaRocks install does not "
    .. "build: run build/bin/retryfreeze demo from a CMake build of the checkout, or set RF_SERVE=<checkout>/build/"
    .. "bin/retryfreeze-serve (and, outside the checkout, pass --examples <checkout>/examples)\n"

  it("without RF_SERVE, a rock's demo says the rock cannot run it and what to run instead (exit 2)", function()
    local out, err, code = h.sh(rock:format("-u RF_SERVE") .. " demo --requests 1")
    assert.equal(2, code, err)
    assert.equal("", out)
    assert.equal(rock_demo, err)
    assert.is_nil(io.open(dir .. "/demo-ledger.jsonl"))
  end)

  -- A real rock has no examples/ either: the missing upstream, which --examples cannot fix, is named first.
  it("without RF_SERVE or the examples, a rock's demo names the upstream, not --examples (exit 2)", function()
    local out, err, code = h.sh(rock:format("-u RF_SERVE") .. " demo --requests 1 --examples " .. h.shell_quote(dir))
    assert.equal(2, code, err)
    assert.equal("", out)
    assert.equal(rock_demo, err)
  end)

  it("serve from a rock without RF_SERVE says what to set (exit 127, as for a missing command)", function()
    local out, err, code = h.sh(rock:format("-u RF_SERVE") .. " serve --port 0")
    assert.equal(127, code, err)
    assert.equal("", out)
    assert.matches("^retryfreeze serve: no retryfreeze%-serve to start: [^\n]*set RF_SERVE to one", err)
  end)

  it("an RF_SERVE that is not an executable file is named (exit 2)", function()
    local out, err, code = h.sh(rock:format("RF_SERVE=/nonexistent/retryfreeze-serve") .. " demo --requests 1")
    assert.equal(2, code, err)
    assert.equal("", out)
    assert.equal("retryfreeze demo: RF_SERVE names /nonexistent/retryfreeze-serve, which is not an executable "
      .. "file\n", err)
  end)

  it("without the examples, names --examples before printing or starting anything (exit 2)", function()
    local serve = (h.bindir:match("^/") and h.bindir or root .. "/" .. h.bindir) .. "/retryfreeze-serve"
    local out, err, code = h.sh(rock:format("RF_SERVE=" .. h.shell_quote(serve)) .. " demo --requests 1 --examples "
      .. h.shell_quote(dir))
    assert.equal(2, code, err)
    assert.equal("", out)
    assert.equal("retryfreeze demo: " .. dir .. " lacks jobs_flow.lua, retry-budget.lock.json, service.lock.json: "
      .. "--examples DIR names the folder that holds them (examples/ of a retryfreeze checkout)\n", err)
    assert.is_nil(io.open(dir .. "/demo-ledger.jsonl"))
  end)
end)

-- `--ledger <TEXT>` said nothing of what to pass: an option's declaration names its value, <TEXT>/<N>/<X> are
-- only the fallback of an option that names none.
describe("every command's --help names what each option takes", function()
  local cases = {
    demo = { "--ledger <FILE>", "--examples <DIR>", "--report <FILE>", "--faults <SPEC>", "--requests <N>" },
    soak = { "--concurrency <N>", "--url <URL>", "--script <FLOW.lua>", "--max-retry-ratio <X>" },
    gate = { "--lock <LOCK>", "--route <ROUTE>", "--forbid-reason <REASON>", "--min-success-rate <R>" },
    budget = { "--redis <URL>", "--timeout-ms <MS>" },
    decide = { "--elapsed-ms <MS>", "--now-ms <MS>", "--hint <NAME=VALUE>", "--date <HTTP-DATE>" },
    check = { "--table <TABLE.tsv>" },
    verify = { "--base <git:REV>", "--log <FILE>" },
    report = { "--output <FILE>", "--lock <LOCK>" },
  }
  for name, want in pairs(cases) do
    it(name, function()
      local out, err, code = h.run_cli("help", name)
      assert.equal(0, code, err)
      for _, text in ipairs(want) do
        assert.is_truthy(out:find("\n%s+" .. text:gsub("%p", "%%%0") .. "  "), name .. " --help lacks " .. text
          .. ":\n" .. out)
      end
    end)
  end

  it("an option that names no value falls back to its kind's placeholder", function()
    local args = require "retryfreeze.cli.args"
    local x = args.command{ name = "x", options = { { "--a", "string", "a" }, { "--b", "integer", "b" },
      { "--c", "number FACTOR", "c" } } }
    local out = args.help(x)
    assert.matches("\n%s+%-%-a <TEXT>  ", out)
    assert.matches("\n%s+%-%-b <N>  ", out)
    assert.matches("\n%s+%-%-c <FACTOR>  ", out)
    assert.matches("^usage: retryfreeze x %[%-%-a TEXT%] %[%-%-b N%] %[%-%-c FACTOR%]\n", out)
    local opts = args.parse(x, { "--c", "1.5", "--b", "-3" })
    assert.same({ b = -3, c = 1.5 }, opts)
  end)
end)

-- `--table <TEXT>  text` said nothing. Every option of every command says what it does in --help.
describe("every command's --help describes each option", function()
  local cli = require "retryfreeze.cli"
  local generic = { ["text"] = true, ["an integer"] = true, ["a number"] = true,
    ["text; repeatable, each use adds one"] = true, ["a flag (takes no value)"] = true }
  for _, name in ipairs(cli.commands) do
    local mod = cli.load_command(name)
    if mod then
      it(name, function()
        local out, err, code = h.run_cli("help", name)
        assert.equal(0, code, err)
        for _, row in ipairs(mod.options) do
          local opt = row[1]
          local line = out:match("\n%s+[^\n]-" .. opt:gsub("%p", "%%%0") .. "[^\n]-  +([^\n]+)")
          assert.is_truthy(line, name .. " --help has no line for " .. opt .. ":\n" .. out)
          assert.is_falsy(generic[line], name .. " --help: " .. opt .. " says only '" .. tostring(line) .. "'")
          local shown = row.short or opt -- the synopsis names an option by its short form when it has one
          assert.is_truthy(out:find(shown, 1, true) < out:find("\nOptions:", 1, true), name .. ": the synopsis lacks " .. opt)
        end
      end)
    end
  end
end)

-- The library is usable without its command line: no module of lua/retryfreeze/ outside cli/ requires one of
-- cli/ (a `require("retryfreeze.cli.…")` in any form, at load time or inside a function).
describe("the library", function()
  it("requires no module of the command line", function()
    local p = io.popen("ls lua/retryfreeze/*.lua")
    local files = p:read("a")
    p:close()
    local n = 0
    for file in files:gmatch("[^\n]+") do
      n = n + 1
      local src = h.read_file(file)
      assert.is_nil(src:find("[\"']retryfreeze%.cli[%.\"']"), file .. " requires a module of the command line")
    end
    assert.is_true(n >= 15)
  end)
end)
