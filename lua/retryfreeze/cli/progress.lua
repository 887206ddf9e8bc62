--- The progress bar of the long-running commands (`soak`, `demo`): "[#####.....] 120/300  24 req/s" redrawn on
--- standard error in place, only when standard error is a terminal, so piped or redirected output never holds it.
local math = require("retryfreeze.compat").math

local M = {}

--- The least CPU time, in seconds, between two redraws (the last one is always drawn): a redraw is a formatted
--- write to the terminal, dearer than a fast request.
M.REDRAW_SECONDS = 0.1

--- Whether file descriptor fd (2: standard error) is a terminal (`test -t`, isatty(3)).
-- @param fd integer
-- @return boolean
function M.is_tty(fd) return os.execute("test -t " .. math.tointeger(fd)) == true end

--- A progress bar for n units of work, drawn on w (a retryfreeze.cli writer: its redraw), or nil when standard
--- error is not a terminal (then the caller draws nothing and writes no newline).
-- @param w writer (ctx.err); n integer > 0: the units the run does
-- @return bar {update = function(done) (redraws for done of n units, at most every REDRAW_SECONDS of CPU and
--   always at n), finish = function() (ends the line)}, or nil
function M.bar(w, n)
  if not M.is_tty(2) then return nil end
  local t0, drawn_at, width = os.time(), -1, 30
  local bar = {}
  function bar.update(done)
    local now = os.clock()
    if done ~= n and now - drawn_at < M.REDRAW_SECONDS then return end
    drawn_at = now
    local filled = math.floor(done * width / n)
    local secs = math.max(os.time() - t0, 1)
    w:redraw(string.format("[%s%s] %d/%d  %.0f req/s ", string.rep("#", filled), string.rep(".", width - filled),
      done, n, done / secs))
  end
  function bar.finish() w:write("\n") end
  return bar
end

return M
