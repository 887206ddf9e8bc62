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

local sorted = require("spec.helper").sorted

describe("README.md", function()
  it("lists exactly the engine's reasons", function()
    local documented = first_column(readme_section("Reasons"))
    -- stopped-by-caller (the client's on_attempt hook) included: a user meets it in ledgers and stats.
    assert.same(sorted(rf.reasons), documented)
  end)

  it("names every field a ledger line holds, as it is on disk", function()
    -- A real line: a keyed request retried once under a retry budget, through rf.flow with a host transport.
    local policy = assert(rf.load("examples/service.lock.json"))
    local path = os.tmpname()
    local ledger = assert(rf.ledger.open(path))
    local clock, replies = 0, { { status = 503 }, { status = 200 } }
    rf.flow(policy, { method = "POST", path = "/v1/jobs", idempotency_key = "k" }, {
      send = function() clock = clock + 10 return table.remove(replies, 1) end,
      sleep = function(ms) clock = clock + ms end, now_ms = function() return clock end,
      ledger = ledger, retry_budget = rf.retry_budget(policy) })
    ledger:close()
    local line = assert(io.open(path)):read("l")
    os.remove(path)
    local keys = {}
    for k in pairs(require("retryfreeze.json").decode(line)) do keys[#keys + 1] = k end
    table.sort(keys)
    local section = readme_section("Request flows")
    local list = assert(section:match("Each line holds (.-)%. "), "README.md: no 'Each line holds …' sentence")
    local named = {}
    for name in list:gsub("%b()", ""):gmatch("`([%w_]+)`") do named[#named + 1] = name end -- (…) explains a field
    assert.same(keys, sorted(named))
  end)

  it("pairs each decision table with the lock it was written for", function()
    -- `check LOCK --table TABLE` with concrete example paths must pass as written (a table pins one lock).
    local text = assert(io.open("README.md")):read("a")
    local n = 0
    for lock, tsv in text:gmatch("retryfreeze check (examples/[%w%-%.]+) %-%-table (examples/[%w%-%.]+)") do
      n = n + 1
      local h = require "spec.helper"
      local _, err, code = h.run_cli("check", lock, "--table", tsv)
      assert.equal(0, code, "README: check " .. lock .. " --table " .. tsv .. ": " .. err)
    end
    assert.is_true(n >= 2, "README.md names no lock/table pairs")
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

describe("docs/lock.md, The digest", function()
  local text = assert(io.open("docs/lock.md")):read("*a")
  local section = assert(text:match("\n## The digest\n(.-)\n## "), "docs/lock.md has no section '## The digest'")

  it("names every field the canonical form writes only sometimes, and its default when it has one", function()
    local checked = 0
    for _, row in ipairs(rf.lock_schema()) do
      local optional_object = row.place == "route" and row.type == "object" and row.if_absent == "none"
      if row.canonical == "unless-default" or row.canonical == "null-when-none" or optional_object then
        checked = checked + 1
        assert.is_truthy(section:find("`" .. row.path .. "`", 1, true),
          row.path .. " (canonical " .. row.canonical .. ") is not named in The digest")
        if row.canonical == "unless-default" and row.default_json then
          assert.is_truthy(section:find("`" .. row.default_json .. "`", 1, true),
            row.path .. ": its default " .. row.default_json .. " is not named in The digest")
        end
      end
    end
    assert.is_true(checked >= 6)
  end)
end)
