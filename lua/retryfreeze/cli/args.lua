--- Command-line option parsing for the retryfreeze subcommands: "--name value" and "--name=value" forms,
--- typed by a spec table. Unknown options and missing values are usage errors (exit 2), never ignored.
local M = {}

--- @param args table: the arguments after the subcommand name
--- @param spec table: {["--name"] = "string"|"integer"|"flag"|"list"}
--- @return opts table (keys without the leading dashes, '-' → '_'), positionals table; or nil, message
function M.parse(args, spec)
  local opts, positionals = {}, {}
  local i = 1
  while i <= #args do
    local a = args[i]
    local name, inline = a:match("^(%-%-[%w%-]+)=(.*)$")
    name = name or a
    if a == "--" then
      table.move(args, i + 1, #args, #positionals + 1, positionals)
      break
    elseif name:sub(1, 2) == "--" then
      local kind = spec[name]
      if kind == nil then return nil, "unknown option " .. name end
      local key = name:sub(3):gsub("%-", "_")
      if kind == "flag" then
        if inline then return nil, name .. " takes no value" end
        opts[key] = true
      else
        local v = inline
        if v == nil then
          i = i + 1
          v = args[i]
          if v == nil then return nil, "option " .. name .. " needs a value" end
        end
        if kind == "integer" then
          local n = math.tointeger(tonumber(v))
          if n == nil or not v:match("^%-?%d+$") then
            return nil, string.format("option %s needs an integer, got '%s'", name, v)
          end
          v = n
        elseif kind == "number" then
          local n = tonumber(v)
          if n == nil then return nil, string.format("option %s needs a number, got '%s'", name, v) end
          v = n
        end
        if kind == "list" then
          opts[key] = opts[key] or {}
          table.insert(opts[key], v)
        else
          opts[key] = v
        end
      end
    else
      positionals[#positionals + 1] = a
    end
    i = i + 1
  end
  return opts, positionals
end

return M
