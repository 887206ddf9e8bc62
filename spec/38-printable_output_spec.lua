-- No text the command line prints can steer a terminal: a value from a ledger, a lock, a pairing log, a decision
-- table, a file name or an argument that holds control characters (C0, DEL, C1 as UTF-8 U+0080–U+009F and as
-- raw bytes 0x80–0x9F, ESC sequences, CR, a line feed) or bytes that are not UTF-8 is printed written out
-- (util.printable: \u00XX, \xHH), never as those bytes, and never starts a line of its own. Each command is fed
-- such a value through every input it shows; every byte of its stdout and stderr is checked, and a JSON output
-- must decode to the exact value.
local h = require "spec.helper"
local cli = require "retryfreeze.cli"
local json = require "retryfreeze.json"
local util = require "retryfreeze.util"
local utf8 = require("retryfreeze.compat").utf8

-- What a JSON string in a ledger, a lock or a pairing log can hold (any character but NUL): a terminal title
-- (OSC … BEL), clear screen, a carriage return over a fake verdict, CSI as a C1 character, C1's ends, DEL, a tab,
-- and a line feed before text that must not start a line.
local HOSTILE = "\27]0;pwned\7\27[2J\r gate: pass \194\155[31m\194\128\194\159\127\t|\nFAKE-LINE"
-- What a file name, an argument or a table cell can hold besides: C1 as raw bytes and bytes that are not
-- UTF-8 (a lone 0xFF, a truncated sequence, an overlong "/", a surrogate).
local RAW = "\27[2J\r\155[31m\128\159\255\254\194\192\175\237\160\128\127"
-- HOSTILE as it is printed: the first control character of it, written out.
local SHOWN = "\\u001b]0;pwned\\u0007\\u001b[2J\\u000d"

--- Fails unless text is safe for a terminal: no C0 control but tab and line feed, no DEL, no C1 (as UTF-8 or raw),
--- well-formed UTF-8, and no line that a value started (FAKE-LINE follows a line feed inside HOSTILE).
local function assert_printable(where, text)
  local shown = ("%q"):format(text)
  local at = text:find("[%z\1-\8\11-\31\127]")
  assert.is_nil(at, where .. ": a control byte at " .. tostring(at) .. ": " .. shown)
  assert.is_nil(text:find("\194[\128-\159]"), where .. ": a C1 control: " .. shown)
  assert.is_truthy(utf8.len(text), where .. ": not UTF-8: " .. shown)
  assert.is_nil(text:find("\nFAKE%-LINE") or text:find("^FAKE%-LINE"), where .. ": a value began a line: " .. shown)
end

-- Whether a decoded JSON value holds the string s (as a value or a key), anywhere.
local function holds(v, s)
  if v == s then return true end
  if type(v) ~= "table" then return false end
  for k, x in pairs(v) do
    if k == s or holds(x, s) then return true end
  end
  return false
end

local q = h.shell_quote
local dir, lock, ledger, wider, script

local function record(fields)
  local r = { ts = "2026-11-29T17:00:00.000Z", route = "POST /v1/jobs", method = "POST", path = "/v1/jobs",
    key = json.null, policy = "sha256:" .. ("a"):rep(64), attempts = 1, elapsed_ms = 5, outcome = "success",
    reason = "success", ok = true, status = 200, body_len = 0, tries = json.array{ { class = "HTTP_200", status = 200,
      elapsed_ms = 5, delay_ms = 0, reason = "success", retry_after = json.null } } }
  for k, v in pairs(fields) do r[k] = v end
  return json.encode(r, { "ts", "route", "method", "path", "key", "policy", "attempts", "elapsed_ms", "outcome",
    "reason", "ok", "status", "body_len", "tries" }) .. "\n"
end

setup(function()
  dir = h.temp_dir("printable")
  lock = h.write_file(dir .. "/jobs.lock.json", h.read_file(h.desk_lock))
  local with_comment, n = h.read_file(h.desk_lock):gsub('"%$comment":%s*"[^"]*"', function()
    return '"$comment": ' .. json.encode(HOSTILE)
  end, 1)
  assert(n == 1, h.desk_lock .. " has no $comment to change")
  wider = h.write_file(dir .. "/commented.lock.json", with_comment)
  ledger = h.write_file(dir .. "/ledger.jsonl", record{ route = HOSTILE } .. record{ reason = HOSTILE, host = HOSTILE }
    .. record{ outcome = HOSTILE })
  script = h.write_file(dir .. "/raise.lua", "error(" .. ("%q"):format(HOSTILE) .. ", 0)\n")
  -- An nginx configuration whose proxy_next_upstream names a hostile condition (a quoted word holds any byte).
  h.write_file(dir .. "/hostile.conf", "http { server { location /v1/ { proxy_pass http://127.0.0.1:1; "
    .. 'proxy_next_upstream "' .. HOSTILE .. '"; } } }\n')
end)
teardown(function() os.execute("rm -rf " .. q(dir)) end)

-- Each command line, with the placeholders filled in at run time (LOCK, LEDGER, OTHER: the lock with a hostile
-- $comment, DIR, SCRIPT), and what must show: `shows` in stdout or stderr (the value written out), `json` when
-- stdout is JSON that must hold HOSTILE exactly.
local cases = {
  { "stats", "LEDGER", shows = "out", code = 0 },
  { "stats", "LEDGER", "--by", "host", shows = "out", code = 0 },
  { "stats", "LEDGER", "--format", "openmetrics", shows = "out", code = 0 },
  { "stats", "LEDGER", "--json", json = true, code = 0 },
  { "stats", "DIR/" .. RAW .. ".jsonl", shows = "err" },
  { "gate", "LEDGER", "--route", HOSTILE, shows = "out", code = 0 },
  { "gate", "LEDGER", "--route", "NOPE /nope", shows = "err" },
  { "replay", "LEDGER", "--lock", "LOCK", shows = "out", code = 0 },
  { "replay", "LEDGER", "--lock", "LOCK", "--json", json = true, code = 0 },
  { "replay", "DIR/" .. RAW .. ".jsonl", "--lock", "LOCK", shows = "err" },
  { "gate", "--replay", "LEDGER", "--lock", "LOCK", "--route", HOSTILE, shows = "err" },
  { "diff", "LOCK", "OTHER", shows = "out", code = 0 },
  { "diff", "LOCK", "OTHER", "--json", json = true, code = 0 },
  { "signoff", "LOCK", "--by", HOSTILE, "--by", "Bo", "--note", HOSTILE, "--log", "DIR/log.jsonl", shows = "out",
    code = 0 },
  { "verify", "LOCK", "--log", "DIR/log.jsonl", shows = "out", code = 0 },
  { "check", "DIR/" .. RAW .. ".lock.json", shows = "err" },
  { "check", "LOCK", "--table", "TABLE", shows = "out", code = 1 },
  { "report", "LEDGER", "-o", "DIR/" .. RAW .. ".html", shows = "out", code = 0 },
  -- the page itself, on standard output: ledger strings in its HTML and in its JSON data, written out
  { "report", "LEDGER", "-o", "-", page = true, code = 0 },
  { "replay", "LEDGER", "--lock", "LOCK", "--report", "-", page = true, code = 0 },
  { "model", "LOCK", "--route", HOSTILE, shows = "err" },
  { "export", "LOCK", "--to", "grpc", "--accept", HOSTILE, shows = "err" },
  { "export", "DIR/" .. RAW .. ".lock.json", "--to", "grpc", shows = "err" },
  { "import", "DIR/hostile.conf", "--from", "nginx", shows = "err", code = 1 },
  { "import", "DIR/" .. RAW .. ".conf", "--from", "nginx", shows = "err" },
  { "decide", "LOCK", "--method", "GET", "--path", "/x", "--transport", HOSTILE, shows = "err" },
  { "decide", "LOCK", "--method", HOSTILE, "--path", "/x", shows = "err" },
  { "budget", "show", HOSTILE, "--redis", "redis://127.0.0.1:1", shows = "err" },
  { "soak", "LOCK", "--url", "http://" .. HOSTILE, shows = "err" },
  { "demo", "--examples", "DIR/" .. HOSTILE, shows = "err" },
  { "run", "SCRIPT", shows = "err", code = 1 },
  { "run", "DIR/" .. RAW .. ".lua", shows = "err" },
  { "serve", "--faults", HOSTILE, shows = "err" },
}

describe("text output writes control characters out", function()
  it("feeds every command", function()
    local fed = {}
    for _, c in ipairs(cases) do fed[c[1]] = true end
    for _, name in ipairs(cli.commands) do assert.is_true(fed[name], "no case feeds " .. name) end
  end)

  for i, case in ipairs(cases) do
    it(case[1] .. " #" .. i, function()
      -- A decision table whose one row fails (a keyless POST is not retried), its note hostile (a table cell
      -- holds no tab or line feed).
      h.write_file(dir .. "/table.tsv", "note\tmethod\tpath\tstatus\texpect\n" .. RAW .. "\tPOST\t/v1/jobs\t503\tretry\n")
      local words = {}
      for k, a in ipairs(case) do
        a = a:gsub("^LOCK$", lock):gsub("^LEDGER$", ledger):gsub("^OTHER$", wider):gsub("^SCRIPT$", script)
          :gsub("^TABLE$", dir .. "/table.tsv"):gsub("^DIR/", dir .. "/")
        words[k] = q(a)
      end
      local out, err, code = h.sh("cd " .. q(dir) .. " && timeout 60 " .. q(h.cli:sub(1, 1) == "/" and h.cli
        or (io.popen("pwd"):read("*l") .. "/" .. h.cli)) .. " " .. table.concat(words, " "))
      assert.equal(case.code or 2, code, ("%q"):format(err))
      assert_printable("stdout", out)
      assert_printable("stderr", err)
      if case.page then
        assert.is_truthy(out:find("\\u001b]0;pwned\\u0007\\u001b[2J", 1, true), "the page does not show the value")
        local data = assert(out:match('<script type="application/json" id="rf%-data">(.-)</script>'))
        assert.is_true(holds(assert(json.decode(data)), HOSTILE), "the page's data does not hold the exact value")
      elseif case.json then
        local doc = assert(json.decode(out), "stdout is not JSON: " .. out)
        assert.is_true(holds(doc, HOSTILE), "the JSON does not hold the exact value")
      elseif case.shows then
        local text = case.shows == "out" and out or err
        local found = text:find(SHOWN, 1, true) or text:find(util.printable(RAW), 1, true)
          or text:find("\\\\u001b]0;pwned", 1, true) -- OpenMetrics escapes the backslash of \u001b again
        assert.is_truthy(found, "the value is not shown written out: " .. ("%q"):format(text))
      end
    end)
  end
end)

describe("util.printable", function()
  it("writes out C0, DEL and C1 as \\u00XX and stray bytes as \\xHH; keeps the rest", function()
    assert.equal("a\\u000ab\\u0009c\\u001b[2J\\u000d\\u007f", util.printable("a\nb\tc\27[2J\r\127"))
    assert.equal("a\nb\tc\\u001b", util.printable("a\nb\tc\27", "text"))
    assert.equal("\\u0080\\u009b\\u009f \194\160 é → 😀", util.printable("\194\128\194\155\194\159 \194\160 é → 😀"))
    assert.equal("\\x80\\x9b\\x9f\\xff\\xc0\\xaf\\xed\\xa0\\x80\\xf4\\x90\\x80\\x80\\xe2\\x82",
      util.printable("\128\155\159\255\192\175\237\160\128\244\144\128\128\226\130"))
    assert.equal("\\ufffd\\ufffd\\u009b", util.printable("\155\255\194\155", "json"))
    assert.equal("\\u0000x", util.printable("\0x"))
    assert.equal("plain text, no change", util.printable("plain text, no change"))
  end)

  it("is the identity on printable UTF-8 and leaves no control byte in any byte string", function()
    -- Every byte value alone and after each lead byte: the output is printable, and valid UTF-8 in text mode.
    for a = 0, 255 do
      for _, s in ipairs({ string.char(a), string.char(a) .. "x", string.char(0xC2, a), string.char(0xE2, 0x82, a),
        string.char(0xF0, 0x9F, 0x98, a) }) do
        for _, mode in ipairs({ false, "text", "json" }) do
          local p = util.printable(s, mode or nil)
          assert_printable(("%q %s"):format(s, tostring(mode)), (p:gsub("[\t\n]", "")))
          if utf8.len(s) and not s:find("[%z\1-\31\127]") and not s:find("\194[\128-\159]") then
            assert.equal(s, p)
          end
        end
      end
    end
  end)

  it("a JSON document stays the same JSON document", function()
    local doc = { route = HOSTILE, list = json.array{ "\127", "\194\155", "tab\there" } }
    local text = util.printable(json.encode(doc), "json")
    assert_printable("json", text)
    assert.same(doc.route, json.decode(text).route)
    assert.same({ "\127", "\194\155", "tab\there" }, { table.unpack(json.decode(text).list) })
  end)
end)

describe("util.well_formed_utf8", function()
  it("keeps well-formed UTF-8 as it is and replaces each stray byte with U+FFFD", function()
    local R = "\239\191\189"
    assert.equal("abc/items/1", util.well_formed_utf8("abc/items/1"))
    assert.equal("é€\240\159\152\128\194\133", util.well_formed_utf8("é€\240\159\152\128\194\133"))
    assert.equal(R .. "(", util.well_formed_utf8("\195("))
    assert.equal(R .. R .. "x", util.well_formed_utf8("\255\254x"))
    assert.equal("a" .. R .. R .. "b", util.well_formed_utf8("a\226\130b")) -- a truncated sequence: one per byte
    assert.equal(R .. R .. R, util.well_formed_utf8("\237\160\128")) -- a surrogate is no sequence
    assert.equal(R .. R, util.well_formed_utf8("\192\175")) -- nor an overlong "/"
    -- every byte value after a well-formed prefix: the result is UTF-8, and a byte below 0x80 is kept
    for b = 0, 255 do
      local out = util.well_formed_utf8("é" .. string.char(b) .. "z")
      assert.is_truthy(utf8.len(out), ("byte %d: %q"):format(b, out))
      if b < 0x80 then assert.equal("é" .. string.char(b) .. "z", out) end
    end
    local raw = util.well_formed_utf8(RAW)
    assert.is_truthy(utf8.len(raw), ("%q"):format(raw))
  end)
end)
