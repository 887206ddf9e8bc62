--- Output files, one place for every writer of the library and the CLI (a report, stats and metrics, the
--- pairing log; the ledger's C writer takes the same path): retryfreeze.core's write_file, append_file and
--- check_output over core/include/retryfreeze/output.h. A symlink is written through to its target and stays a
--- link; a directory, FIFO, socket or device is refused with a message naming the path; "-" is standard output
--- where a whole file is written, and refused where a file is appended to and read back.
local core = require "retryfreeze.core"

local M = {}

--- Replaces the whole content of the file at path with text, atomically (a temporary file beside the target,
--- fsync, rename over it); "-" writes to standard output.
-- @param path string; text string (any bytes); what string: the output's name in messages ("report")
-- @return true, or nil, message, kind ("refused": not a file that may be written; "failed": a system call)
M.write = core.write_file

--- Appends text to the file at path (created when missing) with one write(2) on an O_APPEND descriptor.
-- @param path string; text string; what string ("pairing log")
-- @return true, or nil, message, kind (as M.write; "-" is refused)
M.append = core.append_file

--- Checks a command's outputs before its run, so that a bad path fails at once instead of after it (nothing is
--- written; a path where nothing is yet passes).
-- @param outputs array of {path, "replace"|"append", what}; an entry whose path is nil is skipped
-- @return true, or nil, the first refusal's message
function M.check(outputs)
  for i = 1, #outputs do
    local o = outputs[i]
    if o[1] ~= nil then
      local ok, why = core.check_output(o[1], o[2], o[3])
      if not ok then return nil, why end
    end
  end
  return true
end

--- The stream a command's own text goes to: err when one of its output paths is "-" (standard output then
--- carries that output, whole), else out.
-- @param out, err file handles; ... the command's output paths (nil for an output not asked for)
-- @return out or err
function M.text_stream(out, err, ...)
  for i = 1, select("#", ...) do
    if select(i, ...) == "-" then return err end
  end
  return out
end

return M
