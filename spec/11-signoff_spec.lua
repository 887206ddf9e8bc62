-- The pairing log: `retryfreeze signoff` / `verify`, retryfreeze.signoff, and pinned loads. The log verifies
-- itself (every entry's hash, the chain, each stored policy against its digest), is shared by several locks,
-- and passes a lock that is signed off or only narrowed since.
local h = require "spec.helper"
local rf = require "retryfreeze"
local json = require "retryfreeze.json"
local signoff = require "retryfreeze.signoff"
local _ -- the unused first result of h.run_cli

local lock_v1 = '{"endpoint":"POST /v1/jobs","maxAttempts":2,"perAttemptTimeoutMs":2000,"totalBudgetMs":2500,'
  .. '"retryable":["HTTP_504"]}'
local lock_v2 = lock_v1:gsub('"maxAttempts":2', '"maxAttempts":4') -- widens
local lock_v3 = lock_v1:gsub('"totalBudgetMs":2500', '"totalBudgetMs":2200') -- narrows
local other_v1 = '{"endpoint":"GET /v1/jobs/{id}","maxAttempts":3,"perAttemptTimeoutMs":500,"totalBudgetMs":2000,'
  .. '"retryable":["HTTP_503"]}'

local read, write = h.try_read_file, h.write_file -- read: nil where the log is not (yet) written

local function lines_of(text)
  local t = {}
  for l in text:gmatch("([^\n]*)\n") do t[#t + 1] = l end
  return t
end

local function digest_of(text) return assert(rf.load_string(text)).digest end

describe("sign-off", function()
  local dir, lock, other, log

  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    lock, other, log = dir .. "/jobs.lock.json", dir .. "/reads.lock.json", dir .. "/pairing-log.jsonl"
    write(lock, lock_v1)
    write(other, other_v1)
  end)

  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  local function sign(path, ...)
    local out, err, code = h.run_cli("signoff", path, ...)
    assert.equal(0, code, err)
    return out
  end

  describe("signers", function()
    it("needs two distinct names, given as --by twice or as \"A & B\"", function()
      local out, err, code = h.run_cli("signoff", lock, "--by", "Ana Ruiz")
      assert.equal(2, code)
      assert.equal("", out)
      assert.matches('a pairing sign-off needs two distinct names (--by "A" --by "B" or "A & B"), got only '
        .. '"Ana Ruiz"; sign alone with --solo (recorded as such)', err, 1, true)
      _, err, code = h.run_cli("signoff", lock, "--by", "Ana Ruiz & ana ruiz")
      assert.equal(2, code)
      assert.matches("got only \"Ana Ruiz\"", err, 1, true)
      assert.is_nil(read(log))
      out = sign(lock, "--by", "Ana Ruiz", "--by", "Bo Chen")
      assert.matches("^signed off jobs%.lock%.json sha256:%x+ by Ana Ruiz & Bo Chen %(.*pairing%-log%.jsonl line 1%)\n$",
        out)
      sign(lock, "--by", "Ana Ruiz & Bo Chen")
      local entries = assert(signoff.read(log)).entries
      assert.same({ "Ana Ruiz", "Bo Chen" }, entries[1].by)
      assert.same({ "Ana Ruiz", "Bo Chen" }, entries[2].by)
      assert.same({ false, false }, { entries[1].solo, entries[2].solo })
    end)

    it("--solo signs alone and is recorded; --solo with two names is refused", function()
      local out = sign(lock, "--by", "Ana Ruiz", "--solo")
      assert.matches("by Ana Ruiz %(solo%)", out)
      local e = assert(signoff.read(log)).entries[1]
      assert.same({ { "Ana Ruiz" }, true }, { e.by, e.solo })
      local _, err, code = h.run_cli("signoff", lock, "--by", "Ana & Bo", "--solo")
      assert.equal(2, code)
      assert.matches("--solo signs alone, but --by names 2 people", err, 1, true)
      _, err, code = h.run_cli("signoff", lock)
      assert.equal(2, code)
      assert.matches("--by NAME is required", err, 1, true)
    end)

    it("a hand-written entry with one signer and solo false is tampered", function()
      sign(lock, "--by", "Ana", "--by", "Bo")
      local e = assert(signoff.read(log)).entries[1]
      e.by = json.array({ "Ana" })
      local line = signoff.encode(e)
      write(log, line .. "\n")
      local _, err, code = h.run_cli("verify", lock)
      assert.equal(2, code)
      assert.matches(':1: tampered entry: "by" has one name but "solo" is false', err, 1, true)
    end)
  end)

  describe("entries", function()
    it("name the lock relative to the log, carry its canonical policy and chain to the line before", function()
      sign(lock, "--by", "Ana & Bo", "--note", "first")
      sign(other, "--by", "Ana & Bo")
      write(lock, lock_v2)
      local out = sign(lock, "--by", "Ana & Bo")
      assert.matches("changes since sha256:%x+ %(line 1%): 1 widening, 0 narrowing, 0 neutral\n"
        .. "WIDENING  POST /v1/jobs  maxAttempts 2 → 4\n$", out)
      local text = read(log)
      local raw = lines_of(text)
      assert.equal(3, #raw)
      local l = assert(signoff.read(log))
      local e1, e2, e3 = l.entries[1], l.entries[2], l.entries[3]
      assert.same({ "jobs.lock.json", "reads.lock.json", "jobs.lock.json" }, { e1.lock, e2.lock, e3.lock })
      assert.equal(assert(rf.load_string(lock_v1)):canonical_json(), e1.policy)
      assert.equal(digest_of(lock_v1), e1.digest)
      assert.equal(json.null, e1.previous)
      assert.equal(e1.entry, e2.previous)
      assert.equal(e2.entry, e3.previous)
      assert.equal(signoff.sha256(raw[1]:match('^(.*),"entry":"sha256:%x+"}$') .. "}"), e1.entry)
      assert.matches('^{"date":"%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ","lock":"jobs%.lock%.json","digest":"sha256:%x+",'
        .. '"policy":"{.*}","by":%["Ana","Bo"%],"solo":false,"note":"first","changes":{"widening":0,"narrowing":0,'
        .. '"neutral":0,"lines":%[%]},"previous":null,"entry":"sha256:%x+"}$', raw[1])
      assert.same({ 1, 0, 0, { "WIDENING  POST /v1/jobs  maxAttempts 2 → 4" } }, { e3.changes.widening,
        e3.changes.narrowing, e3.changes.neutral, e3.changes.lines })
      -- A lock in a subfolder, signed into a log above it, is named by its relative path.
      assert(os.execute("mkdir -p '" .. dir .. "/api'"))
      write(dir .. "/api/x.lock.json", other_v1)
      sign(dir .. "/api/x.lock.json", "--by", "Ana & Bo", "--log", log)
      assert.equal("api/x.lock.json", signoff.latest(assert(signoff.read(log))).lock)
      assert.equal("api/x.lock.json", signoff.lock_name(dir .. "/api/./x.lock.json", log))
      assert.equal("../jobs.lock.json", signoff.lock_name(lock, dir .. "/api/log.jsonl"))
    end)

    it("records the widening of a route that takes requests from a wider one", function()
      local svc = dir .. "/service.lock.json"
      local text = assert(read("examples/service.lock.json"))
      write(svc, text)
      sign(svc, "--by", "Ana & Bo")
      local doc = json.decode(text)
      table.insert(doc.routes, { endpoint = "GET /v1/jobs/*", maxAttempts = 3 })
      write(svc, json.encode(doc))
      local out = sign(svc, "--by", "Ana & Bo")
      assert.matches("1 widening, 0 narrowing, 0 neutral\nWIDENING  GET /v1/jobs/%*  takes GET /v1/jobs", out)
      assert.equal(1, signoff.latest(assert(signoff.read(log))).changes.widening)
    end)
  end)

  describe("verify", function()
    it("passes a signed lock and fails an unsigned widening with the changes", function()
      sign(lock, "--by", "Ana & Bo")
      local out, err, code = h.run_cli("verify", lock)
      assert.equal("", err)
      assert.equal(0, code)
      assert.matches("^log verified: .*pairing%-log%.jsonl, 1 entry, every hash and stored policy checked\n"
        .. "signed off: jobs%.lock%.json sha256:%x+ on %S+ by Ana & Bo %(.*line 1%)\n$", out)
      write(lock, lock_v2)
      out, _, code = h.run_cli("verify", lock)
      assert.equal(1, code)
      assert.matches("\nlock changed; pairing sign%-off required\n  lock:   .*\n  signed: sha256:%x+ on %S+ by Ana & Bo "
        .. "%(.*line 1%)\nWIDENING  POST /v1/jobs  maxAttempts 2 → 4\n$", out)
      sign(lock, "--by", "Ana & Bo")
      _, _, code = h.run_cli("verify", lock)
      assert.equal(0, code)
    end)

    -- Fault 5: only widening needs a sign-off.
    it("passes a narrowing-only change since the last sign-off, and says so", function()
      sign(lock, "--by", "Ana & Bo")
      write(lock, lock_v3)
      local out, _, code = h.run_cli("verify", lock)
      assert.equal(0, code)
      assert.matches("\nnot widened: jobs%.lock%.json sha256:%x+ is not signed off, but every change since its last "
        .. "sign%-off %(.*line 1, sha256:%x+%) is narrowing or neutral\nNARROWING  POST /v1/jobs  totalBudgetMs 2500 "
        .. "→ 2200\n$", out)
      -- A rollback to an earlier, wider signed version is judged against the latest sign-off: widening.
      sign(lock, "--by", "Ana & Bo")
      write(lock, lock_v1)
      out, _, code = h.run_cli("verify", lock)
      assert.equal(1, code)
      assert.matches("this digest was signed off earlier %(.*line 1%) but is not the latest sign%-off", out)
    end)

    -- Fault 4: two locks in one folder share the log without breaking each other.
    it("keeps locks that share a log apart", function()
      sign(lock, "--by", "Ana & Bo")
      sign(other, "--by", "Ana & Bo")
      local _, _, code = h.run_cli("verify", lock)
      assert.equal(0, code)
      _, _, code = h.run_cli("verify", other)
      assert.equal(0, code)
      write(lock, lock_v2)
      sign(lock, "--by", "Ana & Bo")
      local out
      out, _, code = h.run_cli("verify", other)
      assert.equal(0, code, out)
      assert.matches("signed off: reads%.lock%.json", out)
      -- A lock the log never signed.
      local third = dir .. "/third.lock.json"
      write(third, lock_v3)
      out, _, code = h.run_cli("verify", third)
      assert.equal(1, code)
      assert.matches("no sign%-off exists for third%.lock%.json in ", out)
    end)

    -- A widening that an enumeration of sampled request shapes missed: verify judges with the diff's own
    -- partition of the request space (spec/support/diff_attacks.lua).
    for _, name in ipairs({ "placeholder", "empty_segment" }) do
      it("fails a widening of requests only a complete partition finds (" .. name .. ")", function()
        local old_text, new_text, route = require("spec.support.diff_attacks")[name]()
        write(lock, old_text)
        sign(lock, "--by", "Ana & Bo")
        write(lock, new_text)
        local out, _, code = h.run_cli("verify", lock)
        assert.equal(1, code, out)
        assert.matches("\nlock changed; pairing sign%-off required\n", out)
        assert.matches("\nWIDENING  " .. route:gsub("%p", "%%%0") .. "  maxAttempts 1 → 10\n", out)
      end)
    end

    it("a missing log exits 1", function()
      local out, _, code = h.run_cli("verify", lock)
      assert.equal(1, code)
      assert.matches("no sign%-off exists: .* not found", out)
    end)
  end)

  -- Fault 3: the log did not verify its own entries.
  describe("a tampered log", function()
    local function tamper(edit)
      os.remove(log)
      sign(lock, "--by", "Ana & Bo")
      sign(other, "--by", "Ana & Bo")
      local raw = lines_of(read(log))
      edit(raw)
      write(log, table.concat(raw, "\n") .. "\n")
      local out, err, code = h.run_cli("verify", lock)
      assert.equal("", out)
      assert.equal(2, code)
      return err
    end

    it("an entry's digest set to a widened lock's digest: its own hash no longer matches", function()
      local wide = digest_of(lock_v2)
      local err = tamper(function(raw) raw[2] = raw[2]:gsub('"digest":"sha256:%x+"', '"digest":"' .. wide .. '"') end)
      assert.matches(":2: tampered entry: the line hashes to sha256:%x+, not to its \"entry\" sha256:%x+ %(the line "
        .. "was edited%)", err)
    end)

    it("the digest and the entry hash both rewritten: the stored policy does not hash to the digest", function()
      local wide = digest_of(lock_v2)
      local err = tamper(function(raw)
        local line = raw[1]:gsub('"digest":"sha256:%x+"', '"digest":"' .. wide .. '"')
        local head = line:match('^(.*),"entry":"sha256:%x+"}$')
        raw[1] = head .. ',"entry":"' .. signoff.sha256(head .. "}") .. '"}'
      end)
      assert.matches(':1: tampered entry: "policy" does not match "digest": the stored policy\'s digest is sha256:%x+, '
        .. "not " .. wide, err)
    end)

    it("a whole entry rewritten consistently breaks the next line's previous", function()
      local err = tamper(function(raw)
        local e = assert(json.decode(raw[1]))
        local p = assert(rf.load_string(lock_v2))
        e.policy, e.digest = p:canonical_json(), p.digest
        raw[1] = signoff.encode(e)
      end)
      assert.matches(':2: tampered entry: "previous" is sha256:%x+ but the line before hashes to sha256:%x+', err)
    end)

    it("a deleted first line, a swapped order, an empty line, an unknown field, bad JSON", function()
      assert.matches(':1: tampered entry: "previous" is sha256:%x+ but the line before hashes to null',
        tamper(function(raw) table.remove(raw, 1) end))
      assert.matches(":1: tampered entry: ", tamper(function(raw) raw[1], raw[2] = raw[2], raw[1] end))
      assert.matches(":2: tampered entry: empty line", tamper(function(raw) table.insert(raw, 2, "") end))
      assert.matches(':1: tampered entry: unknown field "x"', tamper(function(raw) raw[1] = raw[1]:gsub("^{", '{"x":1,') end))
      assert.matches(":1: tampered entry: not valid JSON", tamper(function(raw) raw[1] = raw[1]:sub(1, -3) end))
    end)

    it("an entry in the old, unchained format is refused with the way out", function()
      write(log, '{"date":"2026-11-29T17:55:29Z","digest":"' .. digest_of(lock_v1) .. '","by":"A & B","note":"",'
        .. '"previous":null,"changes":{"widening":0,"narrowing":0,"neutral":0,"lines":[]}}\n')
      local _, err, code = h.run_cli("verify", lock)
      assert.equal(2, code)
      assert.matches('missing field "lock" (an entry in the old, unchained format: sign the locks again into a new log)',
        err, 1, true)
    end)
  end)

  describe("a torn last line", function()
    it("is ignored by verify and refused by signoff", function()
      sign(lock, "--by", "Ana & Bo")
      local text = read(log)
      write(log, text .. '{"date":"2026-')
      local out, err, code = h.run_cli("verify", lock)
      assert.equal(0, code, out)
      assert.matches(":2: torn last line ignored", err)
      _, err, code = h.run_cli("signoff", lock, "--by", "Ana & Bo")
      assert.equal(2, code)
      assert.matches(":2: the last line is torn", err)
      assert.equal(text .. '{"date":"2026-', read(log))
    end)
  end)

  describe("--base git:REV", function()
    if not h.has_git then
      pending("git is not installed")
      return
    end
    local function git(args) h.git(dir, args) end

    it("passes when the committed log is a prefix, fails when an entry was rewritten or removed", function()
      git("init -q .")
      git("commit -q --allow-empty -m empty")
      -- No log at HEAD yet: nothing to compare, the check passes.
      sign(lock, "--by", "Ana & Bo")
      local out, err, code = h.run_cli("verify", lock, "--base", "git:HEAD")
      assert.equal(0, code, err)
      assert.matches("\nlog at HEAD is a prefix %(0 lines kept, 1 added%)\n", out)
      git("add -A")
      git("commit -q -m signed")
      sign(other, "--by", "Ana & Bo")
      out, err, code = h.run_cli("verify", lock, "--base", "git:HEAD")
      assert.equal(0, code, err)
      assert.matches("log at HEAD is a prefix %(1 line kept, 1 added%)", out)
      -- The whole log rewritten consistently (a forged history) verifies alone, but not against HEAD.
      local e = assert(signoff.read(log)).entries
      e[1].note = "rewritten"
      local first = signoff.encode(e[1])
      e[2].previous = first:match('"entry":"(sha256:%x+)"}$')
      write(log, first .. "\n" .. signoff.encode(e[2]) .. "\n")
      _, _, code = h.run_cli("verify", lock)
      assert.equal(0, code)
      _, err, code = h.run_cli("verify", lock, "--base", "git:HEAD")
      assert.equal(2, code)
      assert.matches("the log at HEAD is not a prefix of this one: line 1 differs from the base log's", err, 1, true)
      write(log, "")
      _, err, code = h.run_cli("verify", lock, "--base", "git:HEAD")
      assert.equal(2, code)
      assert.matches("lines were deleted", err, 1, true)
      _, err, code = h.run_cli("verify", lock, "--base", "git:no-such-rev")
      assert.equal(2, code)
      assert.matches("git:no%-such%-rev: git show failed", err)
      _, err, code = h.run_cli("verify", lock, "--base", "HEAD")
      assert.equal(2, code)
      assert.matches("--base must be git:REV", err, 1, true)
    end)
  end)

  describe("evidence (signoff --evidence REPLAY.json)", function()
    local reads_v1 = '{"endpoint":"GET /x/{i}","maxAttempts":3,"perAttemptTimeoutMs":2000,"totalBudgetMs":20000,'
      .. '"retryable":["HTTP_503"],"backoff":{"baseMs":1,"maxMs":5}}'
    local reads_v2 = reads_v1:gsub('"maxAttempts":3', '"maxAttempts":5')
    local x, ledger, evidence

    -- A ledger recorded under reads_v1, and `replay --json` of it under the lock at path, saved as the evidence.
    local function replay_to(path, out)
      local text, err, code = h.run_cli("replay", ledger, "--lock", path, "--json", "--seed", "4")
      assert.equal(0, code, err)
      write(out, text)
      return json.decode(text)
    end

    before_each(function()
      x, ledger, evidence = dir .. "/x.lock.json", dir .. "/recorded.jsonl", dir .. "/replay.json"
      write(x, reads_v1)
      local out, err, code = h.run_cli("soak", x, "--requests", "50", "--concurrency", "4", "--faults", "503=0.3",
        "--seed", "4", "--ledger", ledger, "--min-successes", "1000000", "--min-requests", "1000000")
      assert(code == 0 or code == 1, tostring(out) .. tostring(err))
      write(x, reads_v2)
    end)

    it("records the ledgers' digests and the predicted figures in the entry, and verify shows them", function()
      local r = replay_to(x, evidence)
      local out = sign(x, "--by", "Ana & Bo", "--evidence", evidence)
      local ledger_digest, evidence_digest = signoff.sha256(read(ledger)), signoff.sha256(read(evidence))
      local e = assert(signoff.read(log)).entries[1]
      local ev = e.evidence
      assert.same({ "replay.json", evidence_digest, digest_of(reads_v2), 4 }, { ev.file, ev.sha256, ev.candidate,
        ev.seed })
      assert.same({ { path = ledger, sha256 = ledger_digest, lines = 50 } }, ev.ledgers)
      assert.same({ { digest = digest_of(reads_v1), requests = 50 } }, ev.locks)
      for _, k in ipairs({ "requests", "successes", "success_rate", "attempts", "attempts_per_success",
        "retried_success_ratio", "upstream_attempts", "extra_attempts", "exact", "modelled" }) do
        assert.equal(r.predicted[k], ev.predicted[k], k)
      end
      assert.same({ r.interval.whole.success_rate_lo, r.interval.whole.success_rate_hi }, ev.interval.success_rate)
      assert.equal(r.interval.whole.beyond == true, ev.beyond)
      local shown = string.format("evidence: replay.json %s (replay under %s, seed 4)\n  ledger %s %s (50 lines)\n"
        .. "  recorded under %s (50 requests)\n  predicted: success_rate %.4f [%.4f, %.4f]", evidence_digest,
        digest_of(reads_v2), ledger, ledger_digest, digest_of(reads_v1), r.predicted.success_rate,
        r.interval.whole.success_rate_lo, r.interval.whole.success_rate_hi)
      assert.matches(shown, out, 1, true)
      local vout, verr, code = h.run_cli("verify", x)
      assert.equal(0, code, verr)
      assert.matches(shown, vout, 1, true)
      assert.matches(string.format("  predicted: 50 requests, %d attempts (%+d), %d exact, %d modelled",
        r.predicted.upstream_attempts, r.predicted.extra_attempts, r.predicted.exact, r.predicted.modelled), vout, 1,
        true)
      -- the figures are in the hashed line: editing one is a tampered entry
      local line = read(log):gsub('"success_rate":[%d.e-]+,', '"success_rate":0.999,', 1)
      write(log, line)
      local _, terr, tcode = h.run_cli("verify", x)
      assert.equal(2, tcode)
      assert.matches(":1: tampered entry: the line hashes to", terr, 1, true)
    end)

    it("refuses evidence that does not parse, is not a replay, is of another lock, or whose ledger changed", function()
      local function refused(file, message)
        local out, err, code = h.run_cli("signoff", x, "--by", "Ana & Bo", "--evidence", file)
        assert.same({ 2, "" }, { code, out })
        assert.matches(message, err, 1, true)
        assert.is_nil(read(log), "nothing signed")
      end
      refused(dir .. "/none.json", "--evidence: cannot open evidence " .. dir .. "/none.json: No such file or directory")
      write(evidence, "{\"candidate\": ")
      refused(evidence, "--evidence " .. evidence .. ": not valid JSON: byte ")
      write(evidence, "[]")
      refused(evidence, "--evidence " .. evidence .. ": $ is not an object (expected the output of `retryfreeze "
        .. "replay --json`)")
      write(evidence, '{"candidate":"sha256:12"}')
      refused(evidence, ": $.candidate is not a lock digest")
      -- a replay under the lock as it was, not the one being signed
      local old = dir .. "/x-v1.lock.json"
      write(old, reads_v1)
      replay_to(old, evidence)
      refused(evidence, string.format("--evidence %s: the replay's candidate is %s, not the lock being signed (%s): "
        .. "replay the ledgers under this lock and cite that", evidence, digest_of(reads_v1), digest_of(reads_v2)))
      -- a replay of this lock that misses a field signoff records
      local r = replay_to(x, evidence)
      r.predicted.success_rate = nil
      write(evidence, json.encode(r))
      refused(evidence, ": $.predicted.success_rate is not a number")
      -- the ledger grew since the replay, or is gone
      replay_to(x, evidence)
      local text = read(ledger)
      write(ledger, text .. text:match("^[^\n]*\n"))
      refused(evidence, string.format("--evidence %s: ledger %s has 51 lines, the replay read 50: it changed since "
        .. "the replay (replay it again)", evidence, ledger))
      os.remove(ledger)
      refused(evidence, string.format("--evidence %s: $.ledgers[0]: cannot open ledger %s: No such file or "
        .. "directory", evidence, ledger))
      local _, err, code = h.run_cli("signoff", x, "--by", "Ana & Bo", "--evidence", "")
      assert.equal(2, code)
      assert.matches("--evidence REPLAY.json names no file (an empty path)", err, 1, true)
    end)

    it("a log refuses an entry whose evidence is not of its digest, or is malformed, as tampered", function()
      replay_to(x, evidence)
      sign(x, "--by", "Ana & Bo", "--evidence", evidence)
      local e = assert(signoff.read(log)).entries[1]
      local function tampered(edit, message)
        local copy = json.decode(e.raw)
        edit(copy)
        write(log, signoff.encode(copy) .. "\n") -- hashed anew: only the shape check can refuse it
        local _, err, code = h.run_cli("verify", x)
        assert.equal(2, code)
        assert.matches(":1: tampered entry: " .. message, err, 1, true)
      end
      tampered(function(c) c.evidence.candidate = digest_of(reads_v1) end,
        '"evidence.candidate" is ' .. digest_of(reads_v1) .. ", not the entry's digest " .. digest_of(reads_v2))
      tampered(function(c) c.evidence.ledgers[1].sha256 = "md5:x" end,
        'bad "evidence.ledgers[0]" (expected {path, sha256, lines})')
      tampered(function(c) c.evidence.interval.success_rate = json.array({ 0.9, 0.1 }) end,
        'bad "evidence.interval.success_rate" (expected [lo, hi])')
      tampered(function(c) c.evidence.extra = 1 end, 'unknown field "evidence.extra"')
      -- and an entry without evidence (every entry before it existed) still verifies
      local plain = json.decode(e.raw)
      plain.evidence = nil
      write(log, signoff.encode(plain) .. "\n")
      local _, err, code = h.run_cli("verify", x)
      assert.equal(0, code, err)
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
  -- Fault 4: the example locks share examples/pairing-log.jsonl; both verify.
  for _, lock in ipairs({ "examples/retry-budget.lock.json", "examples/service.lock.json" }) do
    it("retryfreeze verify " .. lock .. " exits 0", function()
      local out, err, code = h.run_cli("verify", lock)
      assert.equal("", err)
      assert.equal(0, code, out)
      assert.matches("\nsigned off: " .. lock:match("[^/]+$"):gsub("%p", "%%%0") .. " sha256:%x+ on ", out)
    end)
  end
end)

-- `git show` (verify --base, diff git:REV:PATH) is bounded in time: a git that never ends (a partial clone
-- fetching a blob over a network that hangs) is ended after retryfreeze.git.TIMEOUT_S with every process it
-- started, and the command says so. Here a fake git on PATH whose child sleeps and holds the pipe: ending git
-- alone would leave the read waiting for the child.
describe("git show", function()
  it("is ended after TIMEOUT_S, with the processes it started, and both readers say why", function()
    local dir = h.temp_dir("git-hang")
    write(dir .. "/git", "#!/bin/sh\nsleep 600\n")
    assert(os.execute("chmod +x " .. h.shell_quote(dir .. "/git")))
    local script = [[
      require("retryfreeze.git").TIMEOUT_S = 1
      local _, e1 = require("retryfreeze.diff").load("git:HEAD:examples/service.lock.json")
      local e2 = select(2, require("retryfreeze.signoff").git_text("HEAD", "examples/pairing-log.jsonl"))
      print(e1)
      print(e2)
    ]]
    local t0 = os.time()
    local out, err, code = h.run_lua(script, { timeout_s = 30, lua = "env PATH=" .. h.shell_quote(dir) .. ":\"$PATH\" " .. h.child_lua })
    local took = os.time() - t0
    os.execute("rm -rf " .. h.shell_quote(dir))
    assert.equal(0, code, err)
    assert.equal("git:HEAD:examples/service.lock.json: git show "
      .. "HEAD:examples/service.lock.json did not finish within 1 s and was ended (a partial clone fetching the blob "
      .. "from its remote?)\n"
      .. "git:HEAD: git show HEAD:./pairing-log.jsonl did not finish within 1 s and was "
      .. "ended (a partial clone fetching the blob from its remote?)\n", out)
    assert.is_true(took <= 6, "took " .. took .. " s") -- two 1 s bounds; before, the read waited for the sleep
  end)
end)
