--- A seeded Park-Miller (MINSTD) generator for the specs' adversarial draws: exact in doubles, so the same seed
-- gives the same draws on every Lua version and on LuaJIT (math.random differs between them).
-- Usage: local random, pick = require("spec.support.minstd")(seed)
--   random(n) -> an integer in 1..n; pick(list) -> one of list's elements.
return function(seed)
  local state = seed % 2147483646 + 1
  local function random(n)
    state = state * 16807 % 2147483647
    return state % n + 1
  end
  local function pick(list) return list[random(#list)] end
  return random, pick
end
