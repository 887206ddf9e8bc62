-- Every input path: a FIFO, a device or a directory is refused with its name, never
-- waited on; every reader stops at its size cap; a NUL inside a lock, a pairing-log or a decision-table string
-- is refused where it is; and a ledger torn by kill -9 is repaired by the next writer and read on by `stats`.
local h = require "spec.helper"
local rf = require "retryfreeze"
local core = require "retryfreeze.core"
local upstream = require "retryfreeze.upstream"

local q, write, read = h.shell_quote, h.write_file, h.read_file

--- Runs the CLI under `timeout 20` (a reader that blocks on a FIFO fails instead of hanging busted).
local function run(...)
  local args = {}
  for i, a in ipairs({ ... }) do args[i] = q(a) end
  return h.sh("timeout 20 " .. h.cli .. " " .. table.concat(args, " "))
end

local dir
setup(function() dir = h.temp_dir() end)
teardown(function() os.execute("rm -rf " .. q(dir)) end)

describe("input paths take regular files only", function()
  local fifo, lock, log
  before_each(function()
    fifo = dir .. "/input.fifo"
    os.remove(fifo)
    assert(os.execute("mkfifo " .. q(fifo)))
    lock = dir .. "/jobs.lock.json"
    write(lock, read(h.desk_lock))
    log = dir .. "/pairing-log.jsonl"
    os.remove(log)
  end)
  after_each(function() os.remove(fifo) end)

  -- Each command line, with FIFO standing for the input under test.
  local cases = {
    { "check", "FIFO" },
    { "check", "LOCK", "--table", "FIFO" },
    { "decide", "FIFO", "--method", "GET", "--path", "/x" },
    { "model", "FIFO" },
    { "verify", "FIFO", "--log", "LOG" },
    { "verify", "LOCK", "--log", "FIFO" },
    { "signoff", "FIFO", "--by", "a, b", "--log", "LOG" },
    { "signoff", "LOCK", "--by", "a, b", "--log", "FIFO" },
    { "gate", "LEDGER", "--lock", "FIFO" },
    { "diff", "FIFO", "LOCK" },
    { "diff", "LOCK", "FIFO" },
    { "diff", "LOCK", "LOCK2", "--log", "FIFO" },
    { "stats", "FIFO" },
    { "gate", "FIFO", "--max-retry-ratio", "1" },
    { "soak", "LOCK", "--requests", "1", "--ledger", "FIFO" },
    { "soak", "LOCK", "--requests", "1", "--ledger", "LEDGER", "--script", "FIFO" },
    { "run", "FIFO" },
  }
  for _, case in ipairs(cases) do
    it("refuses a FIFO: retryfreeze " .. table.concat(case, " "), function()
      local ledger, lock2 = dir .. "/ledger.jsonl", dir .. "/wider.lock.json"
      write(ledger, "")
      write(lock2, (read(h.desk_lock):gsub('"maxAttempts": *2', '"maxAttempts": 3')))
      local args = {}
      for i, a in ipairs(case) do
        args[i] = a == "FIFO" and fifo or a == "LOCK" and lock or a == "LOG" and log or a == "LEDGER" and ledger or a == "LOCK2" and lock2 or a
      end
      local _, err, code = run(table.unpack(args))
      assert.equal(case.code or 2, code, err)
      assert.matches(fifo:gsub("%p", "%%%0") .. "[^\n]*is a FIFO, not a regular file", err)
    end)
  end

  -- A path that does not exist: exit 2 (input that cannot be used), and one sentence that names the path once,
  -- what it was meant to be and why: "cannot open lock PATH: No such file or directory" — not "invalid lock:
  -- PATH: cannot open lock PATH: …". The same for every reader.
  local missing_cases = {
    { "check", "MISSING", what = "lock" },
    { "check", "LOCK", "--table", "MISSING", what = "decision table" },
    { "decide", "MISSING", "--method", "GET", "--path", "/x", what = "lock" },
    { "model", "MISSING", what = "lock" },
    { "verify", "MISSING", what = "lock" },
    { "signoff", "MISSING", "--by", "a, b", "--log", "LOG", what = "lock" },
    { "gate", "LEDGER", "--lock", "MISSING", what = "lock" },
    { "diff", "MISSING", "LOCK", what = "lock" },
    { "diff", "LOCK", "MISSING", what = "lock" },
    { "stats", "MISSING", what = "ledger" },
    { "gate", "MISSING", "--max-retry-ratio", "1", what = "ledger" },
    { "report", "MISSING", "-o", "OUT", what = "ledger" },
    { "report", "LEDGER", "-o", "OUT", "--lock", "MISSING", what = "lock" },
    { "run", "MISSING", what = "script" },
    { "soak", "MISSING", what = "lock" },
  }
  for _, case in ipairs(missing_cases) do
    it("names a missing path once: retryfreeze " .. table.concat(case, " "), function()
      local missing, ledger = dir .. "/nope.input", dir .. "/ledger.jsonl"
      write(ledger, "")
      local args = {}
      for i, a in ipairs(case) do
        args[i] = a == "MISSING" and missing or a == "LOCK" and lock or a == "LOG" and log or a == "LEDGER" and ledger
          or a == "OUT" and dir .. "/out.html" or a
      end
      local _, err, code = run(table.unpack(args))
      assert.equal(2, code, err)
      assert.equal("retryfreeze " .. case[1] .. ": cannot open " .. case.what .. " " .. missing
        .. ": No such file or directory\n", err)
    end)
  end

  it("run refuses a directory and a script that does not compile (2), and exits 1 when the script raises", function()
    local _, err, code = run("run", dir)
    assert.equal(2, code, err)
    assert.equal("retryfreeze run: cannot open script " .. dir .. ": it is a directory, not a regular file\n", err)
    local bad = dir .. "/bad_flow.lua"
    write(bad, "local x = = 1\n")
    _, err, code = run("run", bad)
    assert.equal(2, code, err)
    assert.matches("^retryfreeze run: cannot load script " .. bad:gsub("%p", "%%%0") .. ": [^\n]*bad_flow%.lua:1:", err)
    write(bad, "error('boom')\n")
    _, err, code = run("run", bad)
    assert.equal(1, code, err)
    assert.matches("boom", err)
  end)

  local zero_cases = {
    { "check", "LOCK", "--table", "/dev/zero" },
    { "diff", "LOCK", "/dev/zero" },
    { "verify", "LOCK", "--log", "/dev/zero" },
    { "signoff", "LOCK", "--by", "a, b", "--log", "/dev/zero" },
    { "stats", "/dev/zero" },
    { "check", "/dev/zero" },
  }
  for _, case in ipairs(zero_cases) do
    it("refuses a device at once: retryfreeze " .. table.concat(case, " "), function()
      local args = {}
      for i, a in ipairs(case) do args[i] = a == "LOCK" and lock or a end
      local _, err, code = run(table.unpack(args))
      assert.equal(2, code, err)
      assert.matches("/dev/zero[^\n]*is a character device, not a regular file", err)
    end)
  end

  it("refuses a directory as a lock, naming it", function()
    local _, err, code = run("check", dir)
    assert.equal(2, code)
    assert.matches("is a directory, not a regular file", err)
  end)

  -- A sparse file one byte over each cap: refused by size, without reading it all.
  local function sparse(path, size)
    assert(os.execute("truncate -s " .. size .. " " .. q(path)))
    return path
  end

  -- Each reader given a file one byte over its cap: {what it reads, the file's name, its cap, the command and the
  -- option before the file (the lock comes first), what stderr must say before "is over the CAP byte limit"}.
  for _, c in ipairs({
    { "the decision-table reader", "big.tsv", core.TABLE_MAX_BYTES, { "check", "--table" }, "decision table [^\n]* " },
    { "the pairing-log reader", "big.jsonl", core.LOG_MAX_BYTES, { "verify", "--log" }, "pairing log [^\n]* " },
    { "the lock reader of diff", "big.lock.json", core.LOCK_MAX_BYTES, { "diff" }, "" },
  }) do
    it("stops " .. c[1] .. " at its cap", function()
      local args = { c[4][1], lock }
      if c[4][2] then args[#args + 1] = c[4][2] end
      args[#args + 1] = sparse(dir .. "/" .. c[2], c[3] + 1)
      local _, err, code = run(table.unpack(args))
      assert.equal(2, code)
      assert.matches(c[5] .. "is over the " .. c[3] .. " byte limit", err)
    end)
  end

  it("core.read_file: the text with its NUL bytes, or nil and the reason", function()
    local path = dir .. "/bytes"
    write(path, "a\0b")
    assert.equal("a\0b", core.read_file(path, 3, "table"))
    local text, err = core.read_file(path, 2, "table")
    assert.is_nil(text)
    assert.equal("table " .. path .. " is over the 2 byte limit", err)
    text, err = core.read_file(path .. "\0.x", 10, "table")
    assert.is_nil(text)
    assert.matches("NUL", err)
    assert.has_error(function() core.read_file(path, -1) end)
  end)
end)

describe("a path with a NUL byte is refused, never cut at the NUL", function()
  it("by rf.load, rf.ledger.open, rf.ledger.read and rf.ledger.stats", function()
    local p, err = rf.load(h.desk_lock .. "\0.extra")
    assert.is_nil(p)
    assert.matches("contains a NUL byte", err)
    local ledger = dir .. "/nul-path.jsonl"
    write(ledger, "")
    local l
    l, err = rf.ledger.open(ledger .. "\0.x")
    assert.is_nil(l)
    assert.matches("contains a NUL byte", err)
    assert.has_error(function() rf.ledger.read(ledger .. "\0.x") end)
    local ok, why = pcall(rf.ledger.read, ledger .. "\0.x")
    assert.is_false(ok)
    assert.matches("contains a NUL byte", why)
    local s
    s, err = rf.ledger.stats(ledger .. "\0.x")
    assert.is_nil(s)
    assert.matches("contains a NUL byte", err)
  end)
end)

describe("a NUL inside a string is refused where it is", function()
  it("in a lock key or value, escaped or raw", function()
    local base = '"endpoint":"GET /a","perAttemptTimeoutMs":100,"totalBudgetMs":1000'
    local p, err = rf.load_string('{' .. base .. ',"maxAttempts\\u0000 anything":10,"retryable":[]}')
    assert.is_nil(p)
    assert.equal("lock: $.maxAttempts\\u0000 anything: key contains a NUL character (\\u0000); lock strings may "
      .. "not hold NUL", err)
    p, err = rf.load_string('{' .. base .. ',"maxAttempts":3,"retryable":["HTTP_5XX\0 except 503"]}')
    assert.is_nil(p)
    assert.matches("^lock: %$%.retryable%[0%]: string contains a NUL character", err)
  end)

  it("in a decision table cell", function()
    local lock = dir .. "/t.lock.json"
    write(lock, read(h.desk_lock))
    local tsv = dir .. "/nul.tsv"
    write(tsv, "method\tpath\tstatus\texpect\nPOST\0GET\t/v1/jobs\t504\tstop\n")
    local _, err, code = run("check", lock, "--table", tsv)
    assert.equal(2, code)
    assert.matches(tsv:gsub("%p", "%%%0") .. ":2: [^\n]*NUL", err)
  end)

  it("in a pairing-log entry", function()
    local lock = dir .. "/p.lock.json"
    write(lock, read(h.desk_lock))
    local log = dir .. "/p-log.jsonl"
    os.remove(log)
    local _, err, code = run("signoff", lock, "--by", "ann, bob", "--log", log)
    assert.equal(0, code, err)
    local text = read(log):gsub('"by":%["ann","bob"%]', '"by":["ann\\u0000","bob"]')
    write(log, text)
    _, err, code = run("verify", lock, "--log", log)
    assert.equal(2, code)
    assert.matches(log:gsub("%p", "%%%0") .. ":1: tampered entry: [^\n]*NUL", err)
  end)
end)

describe("a ledger torn by kill -9", function()
  it("is repaired by the next writer, and stats reads on and exits 0 with a note", function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local ledger = dir .. "/killed.jsonl"
    os.remove(ledger)
    local script = dir .. "/writer.lua"
    write(script, ([[
      local rf = require "retryfreeze"
      local led = assert(rf.ledger.open(%q))
      local c = rf.client{ policy = assert(rf.load(%q)), base_url = %q, ledger = led }
      local n = tonumber(arg and arg[1]) or math.huge
      local i = 0
      while i < n do
        i = i + 1
        c:request{ method = "POST", path = "/v1/jobs", idempotency_key = rf.new_key() }
        if i == 3 then io.stdout:write("ready\n") io.stdout:flush() end
      end
    ]]):format(ledger, h.desk_lock, up.url))
    -- A writer in a loop, killed with SIGKILL once it has appended a few lines.
    local p = io.popen("echo $$; exec " .. h.cli .. " run " .. q(script), "r")
    local pid = assert(math.tointeger(tonumber(p:read("l"))))
    assert.equal("ready", p:read("l"))
    os.execute("kill -9 " .. pid)
    p:close()
    local before = read(ledger)
    local whole = select(2, before:gsub("\n", ""))
    assert.is_true(whole >= 3)
    -- SIGKILL seldom lands inside write(2): make sure a fragment is there, as a kill mid-append leaves it.
    if before:sub(-1) == "\n" then
      local f = assert(io.open(ledger, "ab"))
      f:write(before:match("([^\n]*)\n$"):sub(1, 120))
      f:close()
    end
    whole = whole + 1 -- the fragment's line: the one written here, or the kill's own (after the whole lines)
    -- The restarted writer: its first record must not be glued onto the fragment.
    local out = run("run", script, "2")
    assert.equal("", out)
    up.stop()
    local text = read(ledger)
    assert.equal("\n", text:sub(-1))
    local requests = 0
    local it, st = rf.ledger.read(ledger)
    for _ in it, st do requests = requests + 1 end
    assert.equal(1, st.torn_lines)
    assert.equal(whole, st.torn)
    assert.equal(whole - 1 + 2, requests)
    local sout, serr, code = run("stats", ledger)
    assert.equal(0, code, serr)
    assert.matches("torn line: " .. ledger:gsub("%p", "%%%0") .. ":" .. whole, sout)
    assert.matches("requests%s+" .. requests .. "\n", sout)
  end)
end)
