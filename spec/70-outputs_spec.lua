-- Outputs never replace what they point at. Every command that writes a file, given as its output each thing a
-- path can point at: a symlink to a regular file (written through: the link stays, the target gets the content),
-- a directory, a character device (as root a copy of /dev/null in the spec's directory: run against a broken
-- writer as root, /dev/null itself would be replaced), a FIFO (each refused at once with exit 2 and a message naming the path,
-- and left as it was), and "-" (standard output where a whole file is written; refused where a file is appended
-- to and read back). Before, `report -o LINK` replaced the link with a regular file, and `-o FIFO` replaced the
-- FIFO, both with exit 0. The kinds and their wording come from one C module (core/src/engine/output_file.c,
-- tested case by case in spec/core/test_output.c); this spec checks that every writer goes through it.
local rf = require "retryfreeze"
local h = require "spec.helper"

local q = h.shell_quote

-- A character device: as root, a copy of /dev/null of the spec's own in dir (a broken writer run as root would
-- replace /dev/null itself: a rename over it succeeds); else /dev/null, which only root could replace.
local function null_device(dir)
  local p = dir .. "/null"
  local made = os.execute("mknod -m 666 " .. q(p) .. " c 1 3 2>/dev/null")
  return (made == true or made == 0) and p or "/dev/null" -- Lua 5.1 and LuaJIT return the status
end

local function kind_of(path)
  local _, _, code = h.sh("test -L " .. q(path))
  if code == 0 then return "link" end
  for _, k in ipairs({ { "-d", "directory" }, { "-p", "fifo" }, { "-c", "device" }, { "-f", "file" } }) do
    local _, _, c = h.sh("test " .. k[1] .. " " .. q(path))
    if c == 0 then return k[2] end
  end
  return "none"
end

describe("every command that writes a file", function()
  local dir, ledger, lock, null

  setup(function()
    dir = h.temp_dir("outputs")
    null = null_device(dir)
    -- A small ledger to report on, written by the client (one refused connection per request).
    ledger = dir .. "/in.jsonl"
    lock = dir .. "/lock.json"
    h.write_file(lock, h.read_file(h.desk_lock))
    local l = assert(rf.ledger.open(ledger))
    local c = rf.client{ policy = assert(rf.load(h.desk_lock)), base_url = "http://127.0.0.1:1", ledger = l }
    for _ = 1, 3 do c:request{ method = "GET", path = "/v1/jobs" } end
    c:close()
    l:close()
  end)

  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  -- Each writer: how to run it with P as its output, what its output looks like (a Lua pattern), and whether it
  -- replaces the file whole or appends to it. Run in a child process with a timeout: a FIFO must not block.
  local fresh = 0
  local function scratch_ledger()
    fresh = fresh + 1
    return dir .. "/run" .. fresh .. ".jsonl"
  end
  local writers = {
    { name = "report -o", mode = "replace", what = "report", looks = "^<!DOCTYPE html>",
      args = function(p) return { "report", ledger, "-o", p } end },
    { name = "stats --output", mode = "replace", what = "stats output", looks = "^ledgers: 1 file, 3 lines",
      args = function(p) return { "stats", ledger, "--output", p } end },
    { name = "stats --format openmetrics --output", mode = "replace", what = "stats output",
      looks = "^# HELP retryfreeze_requests_total",
      args = function(p) return { "stats", ledger, "--format", "openmetrics", "--output", p } end },
    { name = "replay --report", mode = "replace", what = "report", looks = "^<!DOCTYPE html>",
      args = function(p) return { "replay", ledger, "--lock", lock, "--report", p } end },
    { name = "report --replay -o", mode = "replace", what = "report", looks = "^<!DOCTYPE html>",
      args = function(p) return { "report", ledger, "--lock", lock, "--replay", "-o", p } end },
    { name = "soak --report", mode = "replace", what = "report", looks = "^<!DOCTYPE html>",
      args = function(p) return { "soak", lock, "--requests", "5", "--ledger", scratch_ledger(), "--report", p } end },
    { name = "demo --report", mode = "replace", what = "report", looks = "^<!DOCTYPE html>",
      args = function(p) return { "demo", "--requests", "5", "--ledger", scratch_ledger(), "--report", p } end },
    { name = "soak --ledger", mode = "append", what = "ledger", looks = '^{"ts":"',
      args = function(p) return { "soak", lock, "--requests", "5", "--ledger", p } end },
    { name = "demo --ledger", mode = "append", what = "ledger", looks = '^{"ts":"',
      args = function(p) return { "demo", "--requests", "5", "--ledger", p } end },
    { name = "signoff --log", mode = "append", what = "pairing log", looks = '^{"date":"',
      args = function(p) return { "signoff", lock, "--by", "Ana", "--by", "Bo", "--log", p } end },
  }

  local function run(w, p)
    local args = w.args(p)
    for i, a in ipairs(args) do args[i] = q(a) end
    return h.sh("timeout 60 " .. q(h.cli) .. " " .. table.concat(args, " "))
  end

  for _, w in ipairs(writers) do
    it(w.name .. ": a symlink to a regular file is written through; the link stays", function()
      local target, link = dir .. "/target-" .. w.name:gsub("%W", "_"), dir .. "/link-" .. w.name:gsub("%W", "_")
      h.write_file(target, "")
      assert(os.execute("ln -s " .. q(target) .. " " .. q(link)))
      local _, err, code = run(w, link)
      assert.equal(0, code, err)
      assert.equal("link", kind_of(link))
      assert.equal("file", kind_of(target))
      assert.matches(w.looks, h.read_file(target))
    end)

    local refusals = {
      { "a directory", function() local p = dir .. "/adir"; os.execute("mkdir -p " .. q(p)); return p end,
        "directory", "it is a directory, not a regular file" },
      { "a character device", function() return null end, "device", "it is a character device, not a regular file" },
      { "a FIFO", function()
          local p = dir .. "/fifo"
          if kind_of(p) ~= "fifo" then assert(os.execute("mkfifo " .. q(p))) end
          return p
        end, "fifo", "it is a FIFO, not a regular file" },
    }
    for _, r in ipairs(refusals) do
      it(w.name .. ": " .. r[1] .. " is refused with exit 2, naming it, and left as it was", function()
        local p = r[2]()
        local verb = w.mode == "replace" and "write" or "open"
        local out, err, code = run(w, p)
        assert.equal(2, code, out .. err)
        assert.matches("cannot " .. verb .. " " .. w.what .. " " .. p .. ": " .. r[4], err, 1, true)
        assert.equal(1, select(2, err:gsub("\n", ""))) -- one line, no traceback
        assert.equal(r[3], kind_of(p))
      end)
    end

    it(w.name .. ": - " .. (w.mode == "replace" and "is standard output" or "is refused: nothing to read back"),
      function()
        local out, err, code = run(w, "-")
        if w.mode == "replace" then
          assert.equal(0, code, err)
          assert.matches(w.looks, out) -- the output alone: the command's own text went to stderr
        else
          assert.equal(2, code, out .. err)
          assert.matches("cannot open " .. w.what .. " -: standard output cannot be appended to and read back", err,
            1, true)
        end
        assert.equal("none", kind_of("-")) -- no file called "-" made in the working directory
      end)
  end

  it("rf.ledger.open (every ledger writer of the library) writes through a symlink and refuses the rest", function()
    local target, link = dir .. "/lib-target.jsonl", dir .. "/lib-link.jsonl"
    h.write_file(target, "")
    assert(os.execute("ln -s " .. q(target) .. " " .. q(link)))
    local l = assert(rf.ledger.open(link))
    local c = rf.client{ policy = assert(rf.load(h.desk_lock)), base_url = "http://127.0.0.1:1", ledger = l }
    c:request{ method = "GET", path = "/v1/jobs" }
    c:close()
    l:close()
    assert.equal("link", kind_of(link))
    assert.matches('^{"ts":"[^\n]+\n$', h.read_file(target))
    for _, p in ipairs({ dir .. "/adir", null, dir .. "/fifo", "-" }) do
      local ok, why = rf.ledger.open(p)
      assert.is_nil(ok)
      assert.matches("cannot open ledger " .. p .. ": ", why, 1, true)
    end
  end)
end)
