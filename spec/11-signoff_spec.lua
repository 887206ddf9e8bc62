-- The pairing log: `retryfreeze signoff` / `verify`, retryfreeze.signoff, and pinned loads.
local h = require "spec.helper"
local rf = require "retryfreeze"
local json = require "retryfreeze.json"
local signoff = require "retryfreeze.signoff"

local lock_v1 = '{"endpoint":"POST /v1/jobs","maxAttempts":2,"perAttemptTimeoutMs":2000,"totalBudgetMs":2500,'
  .. '"retryable":["HTTP_504"]}'
local lock_v2 = lock_v1:gsub('"maxAttempts":2', '"maxAttempts":4')
local lock_v3 = lock_v1:gsub('"totalBudgetMs":2500', '"totalBudgetMs":2200')

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local function lines_of(text)
  local t = {}
  for l in text:gmatch("([^\n]*)\n") do t[#t + 1] = l end
  return t
end

describe("sign-off", function()
  local dir, lock, log

  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    lock, log = dir .. "/jobs.lock.json", dir .. "/pairing-log.jsonl"
    write(lock, lock_v1)
  end)

  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  local function digest() return assert(rf.load(lock)).digest end

  describe("round trip", function()
    it("verify fails without a log, signoff creates it, verify passes", function()
      local out, err, code = h.run_cli("verify", lock)
      assert.equal(1, code)
      assert.equal("", err)
      assert.equal("lock changed; pairing sign-off required\n  no sign-off exists: " .. log .. " not found\n"
        .. "  lock:   " .. lock .. " " .. digest() .. "\n", out)

      out, err, code = h.run_cli("signoff", lock, "--by", "Ana Ruiz & Bo Chen", "--note", "first lock")
      assert.equal("", err)
      assert.equal(0, code)
      assert.equal("signed off " .. digest() .. " by Ana Ruiz & Bo Chen (" .. log .. " line 1)\n", out)

      out, err, code = h.run_cli("verify", lock)
      assert.equal("", err)
      assert.equal(0, code)
      assert.matches("^signed off: " .. lock:gsub("%p", "%%%0") .. " " .. digest() .. " on %d%d%d%d%-%d%d%-%d%dT"
        .. "%d%d:%d%d:%d%dZ by Ana Ruiz & Bo Chen %(" .. log:gsub("%p", "%%%0") .. " line 1%)\n$", out)
    end)

    it("writes one JSON line per entry with date, digest, by, note, previous and changes", function()
      assert.equal(0, select(3, h.run_cli("signoff", lock, "--by", "Ana", "--note", "first")))
      local first = digest()
      write(lock, lock_v2)
      assert.equal(0, select(3, h.run_cli("signoff", lock, "--by", "Ana & Bo")))
      local lines = lines_of(assert(read(log)))
      assert.equal(2, #lines)
      local e1, e2 = assert(json.decode(lines[1])), assert(json.decode(lines[2]))
      assert.matches("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$", e1.date)
      assert.equal(first, e1.digest)
      assert.equal("Ana", e1.by)
      assert.equal("first", e1.note)
      assert.equal(json.null, e1.previous)
      assert.same({ widening = 0, narrowing = 0, neutral = 0, lines = json.array() }, e1.changes)
      assert.equal(digest(), e2.digest)
      assert.equal("", e2.note)
      assert.equal(first, e2.previous)
      assert.same(json.array({ "WIDENING  POST /v1/jobs  maxAttempts 2 → 4" }), e2.changes.lines)
      assert.equal(1, e2.changes.widening)
      assert.equal(0, e2.changes.narrowing)
      -- the stored policy reloads to the signed digest
      assert.equal(digest(), assert(signoff.signed_policy(e2)).digest)
      assert.matches('^{"date":"[^"]+","digest":"sha256:%x+","by":"Ana & Bo","note":"","previous":"sha256:%x+",'
        .. '"changes":{"widening":1,"narrowing":0,"neutral":0,"lines":%[', lines[2])
    end)

    it("signoff prints the changes since the previous sign-off; an existing line is never rewritten", function()
      h.run_cli("signoff", lock, "--by", "Ana")
      local before = read(log)
      write(lock, lock_v3)
      local out, _, code = h.run_cli("signoff", lock, "--by", "Bo", "--log", log)
      assert.equal(0, code)
      assert.matches("^signed off sha256:%x+ by Bo %(.* line 2%)\nchanges since sha256:%x+: 0 widening, 1 narrowing, "
        .. "0 neutral\nNARROWING  POST /v1/jobs  totalBudgetMs 2500 → 2200\n$", out)
      local after = read(log)
      assert.equal(before, after:sub(1, #before))
    end)

    it("verify lists the changes since the last signed digest and exits 1", function()
      h.run_cli("signoff", lock, "--by", "Ana")
      local signed = digest()
      write(lock, lock_v2)
      local out, _, code = h.run_cli("verify", lock)
      assert.equal(1, code)
      local l = lines_of(out)
      assert.equal("lock changed; pairing sign-off required", l[1])
      assert.equal("  lock:   " .. lock .. " " .. digest(), l[2])
      assert.matches("^  signed: " .. signed .. " on %S+ by Ana %(.* line 1%)$", l[3])
      assert.equal("WIDENING  POST /v1/jobs  maxAttempts 2 → 4", l[4])
      assert.equal(4, #l)
    end)

    it("a rolled-back lock is not the latest sign-off", function()
      h.run_cli("signoff", lock, "--by", "Ana")
      write(lock, lock_v2)
      h.run_cli("signoff", lock, "--by", "Ana")
      write(lock, lock_v1)
      local out, _, code = h.run_cli("verify", lock)
      assert.equal(1, code)
      assert.matches("this digest was signed off earlier %(.* line 1%) but is not the latest sign%-off", out)
      assert.matches("\nNARROWING  POST /v1/jobs  maxAttempts 4 → 2\n$", out)
    end)

    it("--log chooses another log", function()
      local other = dir .. "/other.jsonl"
      assert.equal(0, select(3, h.run_cli("signoff", lock, "--by", "Ana", "--log", other)))
      assert.is_nil(read(log))
      assert.equal(1, select(3, h.run_cli("verify", lock)))
      assert.equal(0, select(3, h.run_cli("verify", lock, "--log", other)))
    end)

    it("signoff needs --by and a valid lock", function()
      local _, err, code = h.run_cli("signoff", lock)
      assert.equal(2, code)
      assert.matches("^retryfreeze signoff: %-%-by \"NAMES\" is required\n", err)
      write(lock, '{"endpoint":"POST /v1/jobs"}')
      _, err, code = h.run_cli("signoff", lock, "--by", "Ana")
      assert.equal(2, code)
      assert.matches("^retryfreeze signoff: invalid lock: ", err)
      assert.is_nil(read(log))
    end)
  end)

  describe("a tampered log", function()
    local function signed_log()
      h.run_cli("signoff", lock, "--by", "Ana")
      write(lock, lock_v2)
      h.run_cli("signoff", lock, "--by", "Bo")
      return lines_of(read(log))
    end

    local function expect_tampered(text, line, why)
      write(log, text)
      local out, err, code = h.run_cli("verify", lock)
      assert.equal(2, code)
      assert.equal("", out)
      assert.equal("retryfreeze verify: " .. log .. ":" .. line .. ": tampered entry: " .. why .. "\n", err)
      out, err, code = h.run_cli("signoff", lock, "--by", "Eve")
      assert.equal("", out)
      assert.equal(2, code)
      assert.equal("retryfreeze signoff: " .. log .. ":" .. line .. ": tampered entry: " .. why .. "\n", err)
      assert.equal(text, read(log))
    end

    it("not valid JSON", function()
      local l = signed_log()
      expect_tampered(l[1] .. "\n" .. l[2]:sub(1, -2) .. "\n", 2, "not valid JSON: byte " .. #l[2]
        .. ": unexpected end of text")
    end)

    it("a missing field", function()
      local l = signed_log()
      expect_tampered(l[1]:gsub('"by":"Ana",', "") .. "\n" .. l[2] .. "\n", 1, 'missing field "by"')
    end)

    it("an unknown field", function()
      local l = signed_log()
      expect_tampered(l[1]:gsub('^{', '{"approved":true,') .. "\n", 1, 'unknown field "approved"')
    end)

    it("a bad digest format", function()
      local l = signed_log()
      expect_tampered(l[1] .. "\n" .. l[2]:gsub('"digest":"sha256:(%x+)"', '"digest":"sha256:%1ff"') .. "\n", 2,
        'bad digest format (expected "sha256:<64 lowercase hex>")')
    end)

    it("a bad date", function()
      local l = signed_log()
      expect_tampered(l[1]:gsub('"date":"[^"]+"', '"date":"yesterday"') .. "\n", 1,
        'bad date (expected UTC RFC 3339 "YYYY-MM-DDTHH:MM:SSZ")')
    end)

    it("an entry removed from the middle breaks the chain", function()
      local l = signed_log()
      local first = l[1]:match('"digest":"(sha256:%x+)"')
      local d0 = string.rep("0", 64)
      local forged = l[1]:gsub('"digest":"sha256:%x+"', '"digest":"sha256:' .. d0 .. '"')
      expect_tampered(forged .. "\n" .. l[2] .. "\n", 2, '"previous" is ' .. first
        .. " but the entry before it signed sha256:" .. d0)
    end)

    it("an empty line", function()
      local l = signed_log()
      expect_tampered(l[1] .. "\n\n" .. l[2] .. "\n", 2, "empty line")
    end)
  end)

  describe("a torn last line", function()
    it("verify reports it and ignores it", function()
      h.run_cli("signoff", lock, "--by", "Ana")
      local text = read(log)
      write(log, text .. '{"date":"2025-01-01T00:00:00Z","digest":"sha256:ab')
      local out, err, code = h.run_cli("verify", lock)
      assert.equal(0, code)
      assert.equal("retryfreeze verify: " .. log .. ":2: torn last line ignored\n", err)
      assert.matches("^signed off: ", out)
    end)

    it("a complete entry without its newline is torn too", function()
      h.run_cli("signoff", lock, "--by", "Ana")
      local first = read(log)
      write(lock, lock_v2)
      h.run_cli("signoff", lock, "--by", "Bo")
      local both = read(log)
      write(log, both:sub(1, -2))
      local out, err, code = h.run_cli("verify", lock)
      assert.equal(1, code)
      assert.equal("retryfreeze verify: " .. log .. ":2: torn last line ignored\n", err)
      assert.matches("^lock changed; pairing sign%-off required\n", out)
      assert.truthy(#first < #both)
    end)

    it("signoff refuses to append after it, and leaves the log as it was", function()
      h.run_cli("signoff", lock, "--by", "Ana")
      local torn = read(log) .. '{"date":'
      write(log, torn)
      local _, err, code = h.run_cli("signoff", lock, "--by", "Bo")
      assert.equal(2, code)
      assert.equal("retryfreeze signoff: " .. log .. ":2: the last line is torn (no newline); the log is "
        .. "append-only, so remove the partial line by hand before signing off\n", err)
      assert.equal(torn, read(log))
    end)
  end)

  describe("a log without entries", function()
    it("verify exits 1 saying no sign-off exists", function()
      write(log, "")
      local out, _, code = h.run_cli("verify", lock)
      assert.equal(1, code)
      assert.equal("lock changed; pairing sign-off required\n  no sign-off exists: " .. log .. " has no entries\n"
        .. "  lock:   " .. lock .. " " .. digest() .. "\n", out)
    end)
  end)

  describe("the library", function()
    it("read reports a missing log with the code 'missing'", function()
      local log_, err, code = signoff.read(dir .. "/none.jsonl")
      assert.is_nil(log_)
      assert.equal(dir .. "/none.jsonl: no such file", err)
      assert.equal("missing", code)
    end)

    it("default_log is beside the lock", function()
      assert.equal("examples/pairing-log.jsonl", signoff.default_log("examples/service.lock.json"))
      assert.equal("pairing-log.jsonl", signoff.default_log("service.lock.json"))
      assert.equal("/pairing-log.jsonl", signoff.default_log("/x.lock.json"))
    end)

    it("entry, append, read and verify compose", function()
      local policy = assert(rf.load(lock))
      local e = signoff.entry(policy, { by = "Ana", date = "2025-03-04T05:06:07Z" })
      assert.equal(1, signoff.append(log, e))
      local l = assert(signoff.read(log))
      assert.equal(1, #l.entries)
      assert.is_false(l.torn)
      assert.equal("2025-03-04T05:06:07Z", l.entries[1].date)
      assert.equal(1, l.entries[1].line)
      local r = signoff.verify(policy, l)
      assert.is_true(r.ok)
      local p2 = assert(rf.load_string(lock_v2))
      r = signoff.verify(p2, l)
      assert.is_false(r.ok)
      assert.equal("maxAttempts", r.changes[1].field)
      assert.has_error(function() signoff.entry(policy, { by = " " }) end,
        "bad argument #2 to 'entry' (by = \"NAMES\" is required)")
    end)

    it("appends with one write(2) on an O_APPEND descriptor", function()
      if not os.execute("command -v strace >/dev/null 2>&1") then
        pending("strace is not installed")
        return
      end
      h.run_cli("signoff", lock, "--by", "Ana")
      local trace = dir .. "/trace"
      local cli = h.cli
      local cmd = string.format("strace -f -e trace=openat,write -o '%s' '%s' signoff '%s' --by Bo >/dev/null 2>&1",
        trace, cli, lock)
      assert.is_true(os.execute(cmd))
      local t = read(trace)
      local fd = t:match('openat%([^\n]*pairing%-log%.jsonl", O_WRONLY|O_CREAT|O_APPEND[^\n]*= (%d+)')
      assert.truthy(fd)
      local writes = 0
      for n in t:gmatch("write%(" .. fd .. ", [^\n]*= (%d+)") do
        writes = writes + 1
        assert.equal(#lines_of(read(log))[2] + 1, tonumber(n))
      end
      assert.equal(1, writes)
    end)
  end)
end)

describe("pinned load", function()
  local svc = "examples/service.lock.json"

  it("loads when the digest matches the pin", function()
    local d = assert(rf.load(svc)).digest
    local p = assert(rf.load(svc, { pin = d }))
    assert.equal(d, p.digest)
    local text = assert(read(svc))
    assert.equal(d, assert(rf.load_string(text, "svc", { pin = d })).digest)
  end)

  it("refuses a lock whose digest differs, naming both digests", function()
    local d = assert(rf.load(svc)).digest
    local pin = "sha256:" .. string.rep("0", 64)
    local p, err = rf.load(svc, { pin = pin })
    assert.is_nil(p)
    assert.equal(svc .. ": digest " .. d .. " does not match the pinned " .. pin, err)
  end)

  it("raises on a malformed pin", function()
    assert.has_error(function() rf.load(svc, { pin = "sha256:abc" }) end,
      "bad argument 'pin' (expected \"sha256:<64 hex>\", got sha256:abc)")
  end)
end)

describe("the project's own sign-off (the CI step)", function()
  it("retryfreeze verify examples/service.lock.json exits 0", function()
    local out, err, code = h.run_cli("verify", "examples/service.lock.json")
    assert.equal("", err)
    assert.equal(0, code, out)
    assert.matches("^signed off: examples/service%.lock%.json sha256:%x+ on ", out)
  end)
end)
