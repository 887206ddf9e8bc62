/*
 * Fuzz target: the pairing-log reader (lua/retryfreeze/signoff.lua, signoff.read) on arbitrary file contents,
 * then signoff.latest and signoff.verify against a fixed lock, as `retryfreeze verify` runs them.
 * Invariants:
 *   - nothing raises: the reader answers a log or nil, message, code;
 *   - a refusal is "tampered" (a memfd is never missing or unreadable) and names PATH:LINE;
 *   - an accepted log has its entries in line order, the chain unbroken (each "previous" is the entry before
 *     it), no string holding NUL, torn false or the last line's number when the text does not end in "\n";
 *   - verify answers a result whose status is one of signed, not-widened, widened, unsigned.
 */
#include "fuzz_lua.h"

const char fz_lua_check[] =
    "local rf = require 'retryfreeze'\n"
    "local signoff = require 'retryfreeze.signoff'\n"
    "local json = require 'retryfreeze.json'\n"
    "local policy = assert(rf.load(FZ_LOCK))\n"
    "local function fail(fmt, ...) error('invariant violated: ' .. string.format(fmt, ...), 0) end\n"
    "local function no_nul(v, at)\n"
    "  if type(v) == 'string' and v:find('\\0', 1, true) then fail('a NUL in %s', at) end\n"
    "  if type(v) == 'table' then for k, x in pairs(v) do no_nul(k, at); no_nul(x, at .. '.' .. tostring(k)) end end\n"
    "end\n"
    "function fz_check(path, text)\n"
    "  local log, err, code = signoff.read(path)\n"
    "  if not log then\n"
    "    if code ~= 'tampered' then fail('code %s: %s', tostring(code), tostring(err)) end\n"
    "    local p = path:gsub('%p', '%%%0')\n"
    "    if not err:match('^' .. p .. ':%d+: tampered entry: .') then fail('message %q', err) end\n"
    "    return\n"
    "  end\n"
    "  local lines = select(2, text:gsub('\\n', ''))\n"
    "  if text:sub(-1) ~= '\\n' and #text > 0 then\n"
    "    if log.torn ~= lines + 1 then fail('torn %s for %d lines', tostring(log.torn), lines + 1) end\n"
    "  elseif log.torn ~= false then fail('torn %s for a text ending in a newline', tostring(log.torn)) end\n"
    "  local prev = json.null\n"
    "  for i, e in ipairs(log.entries) do\n"
    "    if e.line ~= i then fail('entry %d is line %s', i, tostring(e.line)) end\n"
    "    if e.previous ~= prev then fail('entry %d does not chain', i) end\n"
    "    prev = e.entry\n"
    "    no_nul(e, '$')\n"
    "  end\n"
    "  signoff.latest(log)\n"
    "  local r = signoff.verify(policy, log, signoff.lock_name(FZ_LOCK, path))\n"
    "  local ok = { signed = true, ['not-widened'] = true, widened = true, unsigned = true }\n"
    "  if type(r) ~= 'table' or not ok[r.status] then fail('verify status %s', tostring(r and r.status)) end\n"
    "end\n";
