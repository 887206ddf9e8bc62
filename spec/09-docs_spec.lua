-- The documentation cannot drift from the code: every reason, outcome, transport and command the code knows
-- is in the README's tables, and the README names nothing the code does not know.
local rf = require "retryfreeze"

local function readme_section(title)
  local text = assert(io.open("README.md")):read("a")
  local body = text:match("\n## " .. title .. "\n(.-)\n## ")
  return assert(body, "README.md has no section '## " .. title .. "'")
end

--- First-column backquoted names of the markdown table rows in text.
local function first_column(text)
  local names = {}
  for name in text:gmatch("\n| `([%w%-]+)`[^|]*|") do names[#names + 1] = name end
  table.sort(names)
  return names
end

local function sorted(list)
  local copy = table.move(list, 1, #list, 1, {})
  table.sort(copy)
  return copy
end

describe("README.md", function()
  it("lists exactly the engine's reasons", function()
    local documented = first_column(readme_section("Reasons"))
    local code = sorted(rf.reasons)
    -- stopped-by-caller is the client's: it is documented with the outcomes.
    for i, r in ipairs(code) do if r == "stopped-by-caller" then table.remove(code, i) end end
    assert.same(code, documented)
  end)

  it("lists exactly the client's outcomes", function()
    assert.same({ "deadline", "exhausted", "refused", "success", "terminal", "throttled" },
      first_column(readme_section("Request flows")))
  end)

  it("names every transport outcome in the failure-class table", function()
    local section = readme_section("Failure classes")
    for _, t in ipairs(rf.transports) do
      assert.is_truthy(section:find("`" .. t .. "`", 1, true), "transport " .. t .. " is not documented")
    end
  end)

  it("documents every command the CLI dispatches, and each has --help", function()
    local section = readme_section("Commands")
    local cli = require "retryfreeze.cli"
    for _, name in ipairs(cli.commands) do
      local ok = pcall(require, "retryfreeze.cli." .. name)
      if ok then assert.is_truthy(section:find("`" .. name, 1, true), "command " .. name .. " is not in README") end
    end
  end)
end)
