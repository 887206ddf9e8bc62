-- The ledger from Lua (I/O errors, torn and corrupt lines) and the shipped example flows under `retryfreeze run`.
local rf = require "retryfreeze"
local h = require "spec.helper"
local upstream = require "retryfreeze.upstream"

local desk = assert(rf.load(h.desk_lock))
local write = h.write_file

describe("rf.ledger", function()
  it("reports a failed append (a full disk) to the caller in the response, and the request still completes", function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local path = os.tmpname()
    local script = h.temp_file(string.format([[
      local rf = require "retryfreeze"
      local ledger = assert(rf.ledger.open(%q))
      local c = rf.client{ policy = assert(rf.load(%q)), base_url = %q, ledger = ledger }
      local r = c:request{ method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key() }
      print(r.ok, r.ledger_error)
    ]], path, h.desk_lock, up.url))
    -- A file size limit of 0 blocks (SIGXFSZ ignored): every append fails as on a full disk, with EFBIG.
    local p = io.popen("sh -c \"trap '' XFSZ; ulimit -f 0; exec " .. h.cli .. " run '" .. script .. "'\"")
    local out = p:read("a")
    p:close()
    up.stop()
    os.remove(script)
    os.remove(path)
    assert.matches("^true\t[^\n]*cannot append to ledger [^\n]*: File too large\n$", out)
  end)

  it("returns nil and the reason when a ledger cannot be opened", function()
    local l, err = rf.ledger.open("/nonexistent-dir/ledger.jsonl")
    assert.is_nil(l)
    assert.matches("No such file or directory", err)
  end)

  it("reads records, reports a torn last line without failing, and raises on a corrupt line with its number", function()
    local path = os.tmpname()
    local led = assert(rf.ledger.open(path))
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local c = rf.client{ policy = desk, base_url = up.url, ledger = led }
    for _ = 1, 3 do c:request{ method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key() } end
    c:close()
    led:close()
    up.stop()
    local f = assert(io.open(path, "ab"))
    f:write('{"ts":"2026-11-29T17:20:01.123Z","route":"POST /v1/jo') -- a crash mid-write
    f:close()
    local n = 0
    local it, st = rf.ledger.read(path)
    for rec in it, st do
      n = n + 1
      assert.equal("success", rec.outcome)
    end
    assert.equal(3, n)
    assert.equal(4, st.torn)
    -- the same bytes followed by a newline and another line (as a later writer terminates the fragment): still
    -- torn, and the reader reads on
    local text = assert(io.open(path, "rb")):read("a")
    local first = text:match("^[^\n]*\n")
    write(path, text .. "\n" .. first)
    n = 0
    it, st = rf.ledger.read(path)
    for _ in it, st do n = n + 1 end
    assert.same({ 4, 4, 1, 5 }, { n, st.torn, st.torn_lines, st.lines })
    -- a line that is no record's start is corrupt, which is an error
    write(path, text .. "\nnot a record\n" .. first)
    it, st = rf.ledger.read(path)
    local ok, err = pcall(function() for _ in it, st do end end)
    assert.is_false(ok)
    assert.matches(path:gsub("%p", "%%%0") .. ":5: corrupt ledger line", err)
    -- skip_corrupt counts it instead
    n = 0
    it, st = rf.ledger.read(path, { skip_corrupt = true })
    for _ in it, st do n = n + 1 end
    assert.same({ 4, 1, 1 }, { n, st.corrupt, st.torn_lines })
    os.remove(path)
  end)
end)

describe("retryfreeze serve", function()
  it("becomes the server: SIGTERM to the pid the shell started stops it and leaves nothing behind", function()
    local out = os.tmpname()
    local p = io.popen(string.format("%s serve --port 0 --max-seconds 30 >%s 2>/dev/null & echo $!", h.cli, out))
    local pid = p:read("l")
    p:close()
    local line
    for _ = 1, 50 do
      line = io.open(out):read("l")
      if line then break end
      os.execute("sleep 0.1")
    end
    assert.matches("^listening on 127%.0%.0%.1:%d+$", line)
    assert.equal("retryfreeze-ser", io.open("/proc/" .. pid .. "/comm"):read("l"))
    os.execute("kill -TERM " .. pid)
    for _ = 1, 50 do
      if not io.open("/proc/" .. pid .. "/comm") then break end
      os.execute("sleep 0.1")
    end
    local comm = io.open("/proc/" .. pid .. "/comm")
    local alive = comm and comm:read("l")
    assert.is_true(alive == nil or alive:match("defunct") ~= nil or alive ~= "retryfreeze-ser", "the server is still running")
    os.remove(out)
  end)
end)

describe("the example flows", function()
  it("refund_flow.lua refunds with keys and never twice", function()
    local up = assert(upstream.start{ bindir = h.bindir, faults = "503=0.2,ra=0", seed = 9, max_seconds = 60 })
    local out, err, code = h.run_cli("run", "examples/refund_flow.lua", up.url, "30")
    local stats = assert(upstream.stats(up.url))
    up.stop()
    assert.equal(0, code, err)
    assert.matches("success%s+%d+", out)
    assert.equal(0, stats.duplicate_executions)
    assert.equal(30, stats.keys)
  end)

  it("run reports a missing script and a script error", function()
    local _, err, code = h.run_cli("run", "/nonexistent/flow.lua")
    assert.equal(2, code) -- input that cannot be used, as a missing lock or ledger is for the other commands
    assert.equal("retryfreeze run: cannot open script /nonexistent/flow.lua: No such file or directory\n", err)
    local path = h.temp_file("error('boom from the flow')")
    _, err, code = h.run_cli("run", path)
    os.remove(path)
    assert.equal(1, code)
    assert.matches("boom from the flow", err)
  end)
end)
