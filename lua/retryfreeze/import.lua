--- `retryfreeze import`: the effective retry policy of another layer's configuration, written as a lock, so that
--- `retryfreeze diff SIGNED IMPORTED` and `verify` judge it against the signed one. One importer per target, in
--- M.importers (an Envoy importer is one more row); each reads its own syntax and gives a lock table or refuses
--- what no lock can say. An import never claims less than the configuration does: where the lock cannot say a
--- rule exactly, the import takes the wider reading and says so in a note (and in the lock's `$comment`).
local M = {}

--- The importers by target name: each is a module with
---   read(path, opts) → lock table, notes (array of strings) | nil, message, code
--- where code 1 means the configuration holds something no lock can say (the message names the directive or
--- JSON path and where it is), 2 bad input (unreadable file, a syntax error).
M.importers = {
  nginx = "retryfreeze.import_nginx",
  grpc = "retryfreeze.import_grpc",
}

--- The target names, sorted (for the CLI's choices and its messages).
M.targets = {}
for name in pairs(M.importers) do M.targets[#M.targets + 1] = name end
table.sort(M.targets)

--- Reads a configuration of the given target and returns its effective retry policy as a lock.
-- @param target string: a key of M.importers
-- @param path string: the configuration file
-- @param opts table|nil: the importer's options (nginx: prefix = the directory relative includes start from)
-- @return lock table, notes | nil, message, code (1 cannot be said by a lock, 2 bad input)
function M.read(target, path, opts)
  local name = M.importers[target]
  if not name then
    return nil, string.format("unknown target %q (one of: %s)", tostring(target), table.concat(M.targets, ", ")), 2
  end
  return require(name).read(path, opts or {})
end

return M
