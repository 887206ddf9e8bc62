/*
 * Fuzz target: the decision-table reader (lua/retryfreeze/decision_table.lua, parse) on arbitrary file
 * contents read through core.read_file as `retryfreeze check --table` reads them, then run against a fixed
 * lock and every failing row formatted.
 * Invariants:
 *   - nothing raises: parse answers a table or nil, "NAME:LINE: message"; run answers results or nil, message;
 *   - no cell of an accepted table holds a NUL byte (the engine would read a different fact);
 *   - every row's line number is within the text, in increasing order;
 *   - results count every row once: passed + failed = #rows, and each failing row formats to a string.
 */
#include "fuzz_lua.h"

const char fz_lua_check[] =
    "local rf = require 'retryfreeze'\n"
    "local core = require 'retryfreeze.core'\n"
    "local dt = require 'retryfreeze.decision_table'\n"
    "local policy = assert(rf.load(FZ_LOCK))\n"
    "local function fail(fmt, ...) error('invariant violated: ' .. string.format(fmt, ...), 0) end\n"
    "function fz_check(path, bytes)\n"
    "  local text = assert(core.read_file(path, core.TABLE_MAX_BYTES, 'decision table'))\n"
    "  if text ~= bytes then fail('core.read_file changed the bytes') end\n"
    "  local tbl, err = dt.parse(text, 't')\n"
    "  if not tbl then\n"
    "    if type(err) ~= 'string' or not err:match('^t:%d+: .') then fail('message %q', tostring(err)) end\n"
    "    return\n"
    "  end\n"
    "  local lines, last = select(2, text:gsub('\\n', '')) + 1, 0\n"
    "  for _, row in ipairs(tbl.rows) do\n"
    "    if row.line <= last or row.line > lines then fail('row line %d after %d of %d', row.line, last, lines) end\n"
    "    last = row.line\n"
    "    for k, v in pairs(row.facts) do\n"
    "      if type(v) == 'string' and v:find('\\0', 1, true) then fail('a NUL in fact %s', k) end\n"
    "    end\n"
    "  end\n"
    "  local results, rerr = dt.run(policy, tbl, { seed = 1 })\n"
    "  if not results then\n"
    "    if type(rerr) ~= 'string' then fail('run: %s', tostring(rerr)) end\n"
    "    return\n"
    "  end\n"
    "  if results.passed + results.failed ~= #tbl.rows or #results.rows ~= #tbl.rows then\n"
    "    fail('%d passed + %d failed for %d rows', results.passed, results.failed, #tbl.rows)\n"
    "  end\n"
    "  for _, r in ipairs(results.rows) do\n"
    "    if not r.ok and type(dt.format_failure(r, 't')) ~= 'string' then fail('format_failure') end\n"
    "  end\n"
    "end\n";
