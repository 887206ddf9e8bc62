-- The command-line options of the Lua benches, read one way: `--name VALUE`, `--flag`, and `--sizes 1000,20000`.
-- Loaded with dofile as ../lib/options.lua from the bench's own folder (bench_diff runs without the source root on
-- package.path).

--- Reads args (default the script's arg) into opts, which holds the defaults. An unknown argument, or an option
--- without its value, ends the bench (exit 2) naming it.
-- @param bench string: the bench's name for the message
-- @param opts table: the defaults, changed in place and returned
-- @param spec table: option -> {field, kind}; kind "value" (the next argument, a string), "integer" (the next
--   argument, an integer), "flag" (true when present), "sizes" (the next argument's integers, in order)
-- @return opts
return function(bench, opts, spec, args)
  args = args or arg
  local i = 1
  while i <= #args do
    local a = args[i]
    local s = spec[a]
    if not s or (s[2] ~= "flag" and args[i + 1] == nil) then
      io.stderr:write(bench, ": unknown argument or missing value: ", a, "\n")
      os.exit(2)
    end
    local field, kind, v = s[1], s[2], args[i + 1]
    if kind == "flag" then
      opts[field] = true
    else
      if kind == "value" then
        opts[field] = v
      elseif kind == "integer" then
        opts[field] = math.tointeger(tonumber(v))
      else
        opts[field] = {}
        for n in v:gmatch("%d+") do opts[field][#opts[field] + 1] = math.tointeger(tonumber(n)) end
      end
      i = i + 1
    end
    i = i + 1
  end
  return opts
end
