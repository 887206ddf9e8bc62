--- `retryfreeze check LOCK`: validates a lock, prints its digest and the effective policy (defaults
--- applied). Exit 0 when valid, 2 when the lock is invalid or unreadable.
local rf = require "retryfreeze"
local cli_args = require "retryfreeze.cli_args"

local M = {
  summary = "validate a lock; print its digest and effective policy",
  usage = "retryfreeze check LOCK\n\n  Validates LOCK completely and prints its digest and the effective policy\n"
    .. "  (every default applied). Exit 0 valid, 2 invalid or unreadable.",
}

function M.run(args, out, err)
  local opts, pos = cli_args.parse(args, {})
  if not opts or #pos ~= 1 then
    err:write("retryfreeze check: ", pos or "expected exactly one LOCK", "\nusage: ", M.usage, "\n")
    return 2
  end
  local policy, why = rf.load(pos[1])
  if not policy then
    err:write("retryfreeze check: invalid lock: ", why, "\n")
    return 2
  end
  out:write("ok: ", pos[1], "\n", "digest: ", policy.digest, "\n", policy:effective_json(), "\n")
  return 0
end

return M
