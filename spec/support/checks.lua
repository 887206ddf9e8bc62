-- The pass/fail tally of a ctest check script (spec/*_check.lua): each check prints "ok: " or "FAIL: " and what it
-- checked; the end keeps the work folder only when a check failed (so that its logs can be read), prints a summary
-- line and exits 0 or 1.
local q = require("spec.support.shell").q

--- A new tally for the check script called name (the summary line's first word).
-- @param name string: e.g. "layers"
-- @return table: check(ok, what) counts and prints one check; finish(dir) ends the script (never returns)
return function(name)
  local failures = 0
  local M = {}

  function M.check(ok, what)
    print((ok and "ok: " or "FAIL: ") .. what)
    if not ok then failures = failures + 1 end
  end

  function M.finish(dir)
    if failures == 0 then os.execute("rm -rf " .. q(dir)) else print("  kept: " .. dir) end
    print(failures == 0 and name .. ": all checks passed" or (name .. ": " .. failures .. " checks failed"))
    os.exit(failures == 0 and 0 or 1)
  end

  return M
end
