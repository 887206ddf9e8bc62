-- What the Lua benches share (loaded with dofile as ../lib/rounds.lua from the bench's own folder, so that it runs
-- under any Lua): timing variants in alternating rounds, and the `ratio:` line bench/run collects.
local M = {}

--- Runs every variant `rounds` times, the variants alternating so that none gets a warmer cache (and a JIT has
--- compiled every loop before the best round), a full garbage collection before each run.
-- @param variants list of {name = string, run = function, calls = integer|nil (calls one run makes; default iters)}
-- @param rounds integer; iters integer: the calls a run makes unless the variant says
-- @return table name -> the best round's ns per call
function M.best_ns(variants, rounds, iters)
  local best = {}
  for _ = 1, rounds do
    for _, v in ipairs(variants) do
      collectgarbage("collect")
      local t0 = os.clock()
      v.run()
      local ns = (os.clock() - t0) / (v.calls or iters) * 1e9
      best[v.name] = math.min(best[v.name] or math.huge, ns)
    end
  end
  return best
end

--- The median of a list of ratios: the middle one, or the mean of the two middle ones. Sorts the list in place.
-- @param list a non-empty array of numbers
-- @return number
function M.median(list)
  table.sort(list)
  local n = #list
  local half = math.floor(n / 2) -- no `//`: LuaJIT's benches load this file too
  return n % 2 == 1 and list[half + 1] or (list[half] + list[half + 1]) / 2
end

--- Prints one `ratio:` line (the convention bench/run collects): "ratio: NAME: VALUEx (target OP Tx) met|NOT MET".
-- @param name string; value number: the measured ratio; op ">=" or "<="; target number
function M.ratio(name, value, op, target)
  local met = (op == ">=" and value >= target) or (op == "<=" and value <= target)
  print(string.format("ratio: %s: %.2fx (target %s %gx) %s", name, value, op, target, met and "met" or "NOT MET"))
end

return M
