--- Decision tables: rows of facts → expected verdict, run against a policy (`retryfreeze check LOCK --table`).
---
--- Format (docs/governance.md): tab-separated UTF-8 text. Lines whose first non-blank character is '#' and
--- blank lines are ignored. The first other line is the header: it names the columns, each at most once —
---   facts:    method, path (both required), status, transport, retry_after, date, attempts, elapsed_ms,
---             idempotency_key, source, now_ms, and hint:NAME for each wait header NAME of rf.wait_headers
---             (facts.hints[NAME]: "hint:retry-after-ms", "hint:ratelimit", …; docs/lock.md#wait-headers)
---   expected: expect ("retry" or "stop"), reason, delay_ms, timeout_ms, retry_after_header, and hedge: the
---             hedging the request gets (policy:hedging; docs/lock.md#hedging): "no" (sent one attempt at a time),
---             "yes" (hedged) or "after N" (hedged, one more attempt every N ms, hedging.hedgingDelayMs)
---             — each row needs expect or hedge (or both), and the header one of them
---   note:     free text, printed with a failing row, never decided on
--- Every row has exactly as many cells as the header. An empty cell is an absent fact or an unchecked
--- expectation. Integer columns (status, attempts, elapsed_ms, now_ms, delay_ms, timeout_ms) take decimal digits
--- only. A trailing CR (CRLF files) is dropped; nothing else is trimmed, since spaces can be facts.
---
--- Each row is decided with a fresh jitter RNG seeded with the same seed (default 1), so a row's delay_ms does
--- not depend on the rows before it and the same table always gives the same delays.
local math = require("retryfreeze.compat").math
local core = require "retryfreeze.core"
local rf = require "retryfreeze"
local util = require "retryfreeze.util"

local M = {}

--- The seed every row's jitter RNG starts from unless the caller passes another.
M.DEFAULT_SEED = 1

--- Fact columns, in the order they are printed.
M.FACT_COLUMNS = { "method", "path", "status", "transport", "retry_after", "date", "attempts", "elapsed_ms",
  "idempotency_key", "source", "now_ms" }

--- Hint columns: "hint:" .. a wait header name, one per rf.wait_headers, in the engine's order.
M.HINT_COLUMNS = {}
for i, name in ipairs(rf.wait_headers) do M.HINT_COLUMNS[i] = "hint:" .. name end

--- Expectation columns.
M.EXPECT_COLUMNS = { "expect", "reason", "delay_ms", "timeout_ms", "retry_after_header", "hedge" }

local integer_columns = { status = true, attempts = true, elapsed_ms = true, now_ms = true,
  delay_ms = true, timeout_ms = true }

local function set_of(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

local fact_set = set_of(M.FACT_COLUMNS)
local hint_set = set_of(M.HINT_COLUMNS)
local expect_set = set_of(M.EXPECT_COLUMNS)
local reason_set = set_of(rf.reasons)

local function split_tabs(line)
  local cells = {}
  for cell in (line .. "\t"):gmatch("([^\t]*)\t") do cells[#cells + 1] = cell end
  return cells
end

-- The header line's columns, or nil, message.
local function parse_header(line)
  local columns, seen = {}, {}
  for i, cell in ipairs(split_tabs(line)) do
    local col = cell:match("^%s*(.-)%s*$")
    if not (fact_set[col] or hint_set[col] or expect_set[col] or col == "note") then
      return nil, string.format("unknown column \"%s\" (facts: %s, hint:NAME for a wait header NAME; expected: %s; "
        .. "note)", col, table.concat(M.FACT_COLUMNS, ", "), table.concat(M.EXPECT_COLUMNS, ", "))
    end
    if seen[col] then return nil, string.format("column \"%s\" appears twice", col) end
    seen[col] = true
    columns[i] = col
  end
  for _, required in ipairs({ "method", "path" }) do
    if not seen[required] then return nil, string.format("the header has no \"%s\" column", required) end
  end
  if not (seen.expect or seen.hedge) then return nil, "the header has no \"expect\" or \"hedge\" column" end
  return columns
end

-- One data line as a row, or nil, message.
local function parse_row(line, n, columns)
  local cells = split_tabs(line)
  if #cells ~= #columns then
    return nil, string.format("%d cells, but the header has %d columns", #cells, #columns)
  end
  local row = { line = n, facts = {}, expect = {} }
  for i, col in ipairs(columns) do
    local v = cells[i]
    if v ~= "" then
      if integer_columns[col] then
        if not v:match("^%d+$") or math.tointeger(tonumber(v)) == nil then
          return nil, string.format("column \"%s\" needs a non-negative integer, got \"%s\"", col, v)
        end
        v = math.tointeger(tonumber(v))
      end
      if fact_set[col] then
        row.facts[col] = v
      elseif hint_set[col] then
        row.facts.hints = row.facts.hints or {}
        row.facts.hints[col:sub(6)] = v
      elseif col == "expect" then
        if v ~= "retry" and v ~= "stop" then
          return nil, string.format("expect must be retry or stop, got \"%s\"", v)
        end
        row.expect.retry = v == "retry"
      elseif col == "reason" then
        if not reason_set[v] then return nil, string.format("unknown reason \"%s\"", v) end
        row.expect.reason = v
      elseif col == "hedge" then
        local after = v:match("^after (%d+)$")
        if v == "yes" or v == "no" then
          row.expect.hedge = { hedged = v == "yes" }
        elseif after and math.tointeger(tonumber(after)) then
          row.expect.hedge = { hedged = true, delay_ms = math.tointeger(tonumber(after)) }
        else
          return nil, string.format("hedge must be yes, no or \"after N\" (N ms), got \"%s\"", v)
        end
      elseif col == "note" then
        row.note = v
      else
        row.expect[col] = v
      end
    end
  end
  if row.facts.method == nil or row.facts.path == nil then return nil, "method and path are required" end
  if row.expect.retry == nil and row.expect.hedge == nil then
    return nil, "expect (retry or stop) or hedge (yes, no or after N) is required"
  end
  return row
end

--- Parses a decision table.
-- @param text string: the TSV text
-- @param name string|nil: the table's name in messages (default "table")
-- @return table {name = name, columns = {header names…}, rows = {row…}} where a row is
--   {line = integer, facts = {fact → string|integer, hints = {[name] = string}|nil}, expect = {retry =
--   boolean|nil, reason = string|nil, delay_ms = integer|nil, timeout_ms = integer|nil, retry_after_header =
--   string|nil, hedge = {hedged = boolean, delay_ms = integer|nil}|nil}, note = string|nil};
--   or nil, "name:LINE: message" for a malformed table (unknown, duplicate or missing column, wrong number of
--   cells, a non-integer in an integer column, expect not retry|stop, hedge not yes|no|after N, a row with
--   neither expect nor hedge, an unknown reason, a NUL byte, no header, no rows)
function M.parse(text, name)
  if type(text) ~= "string" then error("bad argument #1 to 'parse' (string expected, got " .. type(text) .. ")", 2) end
  name = name or "table"
  local columns, rows, n = nil, {}, 0
  text = text:gsub("^\239\187\191", "")
  for line in (text:sub(-1) == "\n" and text or text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    line = line:gsub("\r$", "")
    local nul = line:find("\0", 1, true) -- C would read the cell only up to it: refuse, never cut
    if nul then return nil, string.format("%s:%d: a NUL byte at column %d (text cells may not hold NUL)", name, n, nul) end
    if not (line:match("^%s*$") or line:match("^%s*#")) then -- not a blank line or a comment
      local value, why
      if columns == nil then
        value, why = parse_header(line)
        columns = value
      else
        value, why = parse_row(line, n, columns)
        rows[#rows + 1] = value
      end
      if value == nil then return nil, string.format("%s:%d: %s", name, n, why) end
    end
  end
  if columns == nil then return nil, string.format("%s:%d: no header row", name, n) end
  if #rows == 0 then return nil, string.format("%s:%d: no rows", name, n) end
  return { name = name, columns = columns, rows = rows }
end

local function quote(v)
  v = tostring(v)
  if v == "" or v:find("[%s\"=]") then return string.format("%q", v) end
  return v
end

--- Facts as one line: "method=POST path=/v1/jobs status=504 attempts=1 hint:retry-after-ms=250" (known keys in
--- column order, then the hints in rf.wait_headers order, then any others sorted; values with spaces, quotes
--- or '=' are quoted).
-- @param facts table
-- @return string
function M.format_facts(facts)
  local parts, seen = {}, { hints = true }
  for _, k in ipairs(M.FACT_COLUMNS) do
    if facts[k] ~= nil then parts[#parts + 1] = k .. "=" .. quote(facts[k]) end
    seen[k] = true
  end
  local hints = type(facts.hints) == "table" and facts.hints or {}
  for _, name in ipairs(rf.wait_headers) do
    if hints[name] ~= nil then parts[#parts + 1] = "hint:" .. name .. "=" .. quote(hints[name]) end
  end
  if facts.hints ~= nil and type(facts.hints) ~= "table" then seen.hints = nil end
  local rest = {}
  for k in pairs(facts) do
    if not seen[k] then rest[#rest + 1] = tostring(k) end
  end
  table.sort(rest)
  for _, k in ipairs(rest) do parts[#parts + 1] = k .. "=" .. quote(facts[k]) end
  return table.concat(parts, " ")
end

--- A verdict as one line: "retry pinned-status delay_ms=88 timeout_ms=2000 class=HTTP_504 retry_after=absent
--- route=POST /v1/jobs" (stop verdicts omit delay_ms and timeout_ms, which are 0; retry_after_header=NAME follows
--- retry_after when the verdict names a wait header).
-- @param v table: a verdict from policy:decide
-- @return string
function M.format_verdict(v)
  local s = (v.retry and "retry " or "stop ") .. tostring(v.reason)
  if v.retry then s = s .. string.format(" delay_ms=%d timeout_ms=%d", v.delay_ms, v.timeout_ms) end
  s = s .. " class=" .. tostring(v.class) .. " retry_after=" .. tostring(v.retry_after)
  if v.retry_after_header then s = s .. " retry_after_header=" .. v.retry_after_header end
  return s .. " route=" .. (v.route or "none")
end

--- A request's hedging as one line: "hedged delay_ms=50 max_attempts=3 route=GET /quote" or "not hedged
--- mutating-without-idempotency route=POST /v1/jobs".
-- @param h table: from policy:hedging
-- @return string
function M.format_hedging(h)
  local s = h.hedged and string.format("hedged delay_ms=%d max_attempts=%d", h.delay_ms, h.max_attempts)
    or "not hedged " .. tostring(h.reason)
  return s .. " route=" .. (h.route or "none")
end

-- A hedge expectation as a cell spells it: "no", "yes", "after 50".
local function hedge_cell(e)
  if not e.hedged then return "no" end
  return e.delay_ms and "after " .. e.delay_ms or "yes"
end

--- An expectation as one line: "stop status-not-retryable", "retry pinned-status delay_ms=1000",
--- "hedge=after 50" (a row's hedge expectation follows its verdict expectation).
-- @param e table: a row's expect table
-- @return string
function M.format_expect(e)
  local parts = {}
  if e.retry ~= nil then
    local s = e.retry and "retry" or "stop"
    if e.reason then s = s .. " " .. e.reason end
    if e.delay_ms then s = s .. " delay_ms=" .. e.delay_ms end
    if e.timeout_ms then s = s .. " timeout_ms=" .. e.timeout_ms end
    if e.retry_after_header then s = s .. " retry_after_header=" .. e.retry_after_header end
    parts[1] = s
  end
  if e.hedge then parts[#parts + 1] = "hedge=" .. hedge_cell(e.hedge) end
  return table.concat(parts, " ")
end

--- Whether a request's hedging (policy:hedging) is what a hedge expectation says.
-- @param h table: from policy:hedging
-- @param e table: {hedged = boolean, delay_ms = integer|nil}
-- @return boolean
function M.hedging_matches(h, e)
  return h.hedged == e.hedged and (e.delay_ms == nil or h.delay_ms == e.delay_ms)
end

--- Reads and parses a table file as `retryfreeze check --table` does: a regular file of at most
--- core.TABLE_MAX_BYTES, named by its path in every message.
-- @param path string
-- @return table as parse() returns it; or nil, message: the reader's ("cannot open decision table PATH: …", a FIFO
--   or a file over the cap) or "malformed table: PATH:LINE: …"
function M.read(path)
  if type(path) ~= "string" then error("bad argument #1 to 'read' (string expected, got " .. type(path) .. ")", 2) end
  local text, err = core.read_file(path, core.TABLE_MAX_BYTES, "decision table")
  if not text then return nil, err end
  local tbl, why = M.parse(text, path)
  if not tbl then return nil, "malformed table: " .. why end
  return tbl
end

--- Runs a parsed table against a policy.
-- @param policy policy
-- @param tbl table from parse()
-- @param opts table|nil: {seed = integer} (default M.DEFAULT_SEED)
-- @return results {passed = n, failed = n, rows = {{row = row, verdict = verdict, ok = boolean,
--   mismatches = {"retry"|"reason"|"delay_ms"|"timeout_ms"|"retry_after_header"|"hedge", …}, hedging = table|nil
--   (policy:hedging's answer, for a row with a hedge expectation)}…}}; verdict is nil for a row without expect;
--   or nil, "name:LINE: message" when the engine refuses a row's facts (an unknown transport, a hint the route
--   does not read)
function M.run(policy, tbl, opts)
  local seed = opts and opts.seed or M.DEFAULT_SEED
  local results = { passed = 0, failed = 0, rows = {} }
  local function refused(row, why)
    local msg = tostring(why):gsub("^bad argument #%d+ to '[^']*' %((.*)%)$", "%1")
    return nil, string.format("%s:%d: %s", tbl.name, row.line, msg)
  end
  for _, row in ipairs(tbl.rows) do
    local e, mismatches, v, h = row.expect, {}, nil, nil
    if e.retry ~= nil then
      local ok, verdict = pcall(policy.decide, policy, row.facts, rf.rng(seed))
      if not ok then return refused(row, verdict) end
      v = verdict
      if v.retry ~= e.retry then mismatches[#mismatches + 1] = "retry" end
      for _, k in ipairs({ "reason", "delay_ms", "timeout_ms", "retry_after_header" }) do
        if e[k] ~= nil and v[k] ~= e[k] then mismatches[#mismatches + 1] = k end
      end
    end
    if e.hedge then
      local ok, hedging = pcall(policy.hedging, policy, row.facts)
      if not ok then return refused(row, hedging) end
      h = hedging
      if not M.hedging_matches(h, e.hedge) then mismatches[#mismatches + 1] = "hedge" end
    end
    local pass = #mismatches == 0
    results.rows[#results.rows + 1] = { row = row, verdict = v, hedging = h, ok = pass, mismatches = mismatches }
    if pass then results.passed = results.passed + 1 else results.failed = results.failed + 1 end
  end
  return results
end

--- A failing row as printed by `retryfreeze check --table`: one string of four lines, each ending in a newline —
--- the location, the mismatched fields and the note; the facts; the expected verdict; the actual verdict. A
--- control character in a cell is written out (util.format), so each of them stays one line.
-- @param r table: one entry of run()'s results.rows
-- @param name string: the table's name
-- @return string
function M.format_failure(r, name)
  local row = r.row
  local actual = {}
  if r.verdict then actual[1] = M.format_verdict(r.verdict) end
  if r.hedging then actual[#actual + 1] = "hedge: " .. M.format_hedging(r.hedging) end
  return util.format("%s:%d: FAIL (%s differ)%s\n  facts:    %s\n  expected: %s\n  actual:   %s\n", name, row.line,
    table.concat(r.mismatches, ", "), row.note and " — " .. row.note or "", M.format_facts(row.facts),
    M.format_expect(row.expect), table.concat(actual, "; "))
end

return M
