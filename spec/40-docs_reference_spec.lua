-- The reference docs cannot drift from the code. Each check derives its list from the code itself (the
-- loader's own messages, the C registration arrays and X-macros, the Lua module tables, the CLI's usage
-- strings) and compares it with the doc's tables, both ways.
local rf = require "retryfreeze"
local json = require "retryfreeze.json"

local helper = require "spec.helper"
local read, sorted, split_list = helper.read_file, helper.sorted, helper.split_list

local function keys_of(set)
  local list = {}
  for k in pairs(set) do list[#list + 1] = k end
  table.sort(list)
  return list
end

local function set_of(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

--- The body of every heading of the given level ("##" or "###"): {title = body}, plus the titles in order.
-- A body runs to the next heading of the same or a higher level.
local function sections(text, level)
  local out, order = {}, {}
  local title, lines = nil, {}
  local function flush()
    if title then
      out[title] = table.concat(lines, "\n")
      order[#order + 1] = title
    end
  end
  local fenced = false
  for line in (text .. "\n"):gmatch("(.-)\n") do
    if line:match("^```") then fenced = not fenced end
    local hashes, t = line:match("^(#+) (.*)$")
    if hashes and #hashes <= #level and not fenced then
      flush()
      title, lines = #hashes == #level and t or nil, {}
    elseif title then
      lines[#lines + 1] = line
    end
  end
  flush()
  return out, order
end

local function cells_of(line)
  local cells = {}
  for cell in line:sub(2):gmatch("%s*(.-)%s*|") do cells[#cells + 1] = cell end
  return cells
end

--- The cells of every body row of the markdown tables in text (the header and separator rows left out);
--- each row's `header` is its table's header cells. With `first_header`, only the tables whose first
--- header cell is that word.
local function table_rows(text, first_header)
  local rows, in_table, header = {}, false, nil
  for line in (text .. "\n"):gmatch("(.-)\n") do
    if line:match("^|") then
      if not in_table then
        in_table, header = "header", cells_of(line)
      elseif line:match("^|%-") then
        in_table = "body"
      elseif in_table == "body" and (first_header == nil or header[1] == first_header) then
        local cells = cells_of(line)
        cells.header = header
        rows[#rows + 1] = cells
      end
    else
      in_table = false
    end
  end
  return rows
end

--- The text of a cell that is exactly one `code span`, else nil.
local function code(cell)
  return cell and cell:match("^`([^`]*)`$")
end

--- The first-column names (code spans) of the table rows in text (of the tables headed first_header).
local function first_column(text, first_header)
  local names = {}
  for _, cells in ipairs(table_rows(text, first_header)) do
    local name = code(cells[1])
    if name then names[#names + 1] = name end
  end
  return names
end


--- The C string literal arguments of every call `fname(` in src: for each call, its argument number
--- `arg` (1-based) as the concatenation of its literals (adjacent literals join, as in C).
local function c_format_args(src, fname, arg)
  local formats = {}
  local pos = 1
  while true do
    local s, e = src:find(fname .. "(", pos, true)
    if not s then break end
    local depth, i, n, current, args = 1, e + 1, 1, {}, {}
    while depth > 0 and i <= #src do
      local ch = src:sub(i, i)
      if ch == '"' then
        local j = i + 1
        while src:sub(j, j) ~= '"' do j = j + (src:sub(j, j) == "\\" and 2 or 1) end
        current[#current + 1] = src:sub(i + 1, j - 1)
        i = j
      elseif ch == "(" then
        depth = depth + 1
      elseif ch == ")" then
        depth = depth - 1
      elseif ch == "," and depth == 1 then
        args[n] = table.concat(current)
        n, current = n + 1, {}
      end
      i = i + 1
    end
    args[n] = table.concat(current)
    if args[arg] and args[arg] ~= "" then
      formats[#formats + 1] = (args[arg]:gsub('\\"', '"'):gsub("\\\\", "\\"))
    end
    pos = e + 1
  end
  return formats
end

--- A Lua pattern that matches what a printf format prints, within one line and one code span: each
--- conversion (%s, %lld, %.17g, …) matches any text without a backquote or a newline; %% prints one %.
local function format_pattern(fmt)
  local parts = {}
  for chunk in (fmt:gsub("%%%%", "\0") .. "%s"):gmatch("(.-)%%[%-#0-9%.%*]*[lz]*[dsgucx]") do
    parts[#parts + 1] = (chunk:gsub("%z", "%%"):gsub("%p", "%%%0"))
  end
  return table.concat(parts, "[^`\n]-")
end

-- ---------------------------------------------------------------------------------------------------------
-- docs/lock.md
-- ---------------------------------------------------------------------------------------------------------

describe("docs/lock.md", function()
  local doc = read("docs/lock.md")
  local top = sections(doc, "##")
  local B = assert(doc:match("%*%*B%*%* stands for the valid flat lock%s*`([^`]+)`"), "docs/lock.md defines no B")

  -- The keys the loader allows in one place, from its own "unknown key" message.
  local function allowed(text)
    local p, err = rf.load_string(text, "lock")
    assert.is_nil(p, "the probe lock loaded: " .. text)
    local list = assert(err:match("%(allowed here: (.*)%)$"), "no allowed list in: " .. err)
    local extra = list:match(" %(or ([^)]*)%)$")
    list = list:gsub(" %(or [^)]*%)$", "")
    local keys = split_list(list)
    if extra then
      for k in extra:gmatch("[^/]+") do keys[#keys + 1] = k end
    end
    return keys
  end

  local function with(members) return B:sub(1, -2) .. ", " .. members .. "}" end
  local contexts = {
    flat = allowed(with('"zzz": 1')),
    multi = allowed('{"version": 1, "routes": [' .. B .. '], "zzz": 1}'),
    defaults = allowed('{"version": 1, "defaults": {"zzz": 1}, "routes": [' .. B .. ']}'),
    route = allowed('{"version": 1, "routes": [{"zzz": 1}]}'),
    backoff = allowed(with('"backoff": {"zzz": 1}')),
    retryAfter = allowed(with('"retryAfter": {"zzz": 1}')),
    retryBudget = allowed(with('"retryBudget": {"zzz": 1}')),
    ["retryBudget.shared"] = allowed(with('"retryBudget": {"maxTokens": 1, "tokenRatio": 1, "shared": {"zzz": 1}}')),
    gate = allowed(with('"gate": {"zzz": 1}')),
    hedging = allowed(with('"hedging": {"zzz": 1}')),
    propagation = allowed(with('"propagation": {"zzz": 1}')),
  }
  local fields = assert(top["Fields"], "docs/lock.md has no '## Fields'")
  local sub = sections(fields, "###")

  it("names exactly the keys the loader accepts, everywhere", function()
    local accepted = {}
    for _, ctx in ipairs({ "flat", "multi", "defaults", "route" }) do
      for _, k in ipairs(contexts[ctx]) do accepted[k] = true end
    end
    for _, obj in ipairs({ "backoff", "retryAfter", "retryBudget", "retryBudget.shared", "gate", "hedging",
      "propagation" }) do
      for _, k in ipairs(contexts[obj]) do accepted[k == "$comment" and k or obj .. "." .. k] = true end
    end
    local documented = {}
    for _, name in ipairs(first_column(fields, "field")) do
      if documented[name] then error("docs/lock.md documents " .. name .. " twice") end
      documented[name] = true
    end
    assert.same(keys_of(accepted), keys_of(documented))
  end)

  it("puts each key in the table of the place it is allowed", function()
    local function names(title, prefix)
      local body = assert(sub[title], "docs/lock.md has no '### " .. title .. "' under '## Fields'")
      local list = {}
      for _, n in ipairs(first_column(body, "field")) do
        if prefix then
          assert.equal(prefix, n:sub(1, #prefix), n .. " is in the " .. title .. " table")
          n = n:sub(#prefix + 1)
        end
        list[#list + 1] = n
      end
      return list
    end
    assert.same(sorted(contexts.multi), sorted(names("Top level")))
    local route = names("Route fields")
    route[#route + 1] = "$comment"
    assert.same(sorted(contexts.route), sorted(route))
    assert.same(sorted(contexts.route), sorted(contexts.defaults))
    local flat = { "retryBudget", "gate", "transparentRetry", "version", "defaults", "routes" }
    table.move(route, 1, #route, #flat + 1, flat)
    assert.same(sorted(contexts.flat), sorted(flat))
    for _, obj in ipairs({ "backoff", "retryAfter", "retryBudget", "gate", "propagation" }) do
      local list, nested = {}, {} -- a nested object's keys (retryBudget.shared.name) sit in its parent's table
      for _, n in ipairs(names(obj, obj .. ".")) do
        local parent, key = n:match("^(.-)%.([^.]+)$")
        if parent then
          nested[parent] = nested[parent] or { "$comment" }
          table.insert(nested[parent], key)
        else
          list[#list + 1] = n
        end
      end
      for parent, keys in pairs(nested) do
        assert.same(sorted(assert(contexts[obj .. "." .. parent], obj .. "." .. parent)), sorted(keys))
      end
      list[#list + 1] = "$comment"
      assert.same(sorted(contexts[obj]), sorted(list))
    end
  end)

  -- The lock schema's rows (rf.lock_schema(), the engine's table) against the Fields tables, cell by cell: each
  -- field's type and range, default, widening direction and meaning as its row says. How the page words each kind
  -- of value is written here once.
  describe("the Fields tables say what the lock schema says", function()
    local rows = {}
    for _, cells in ipairs(table_rows(fields, "field")) do
      local name = code(cells[1])
      if name then rows[name] = cells end
    end
    local function cell(cells, title)
      for i, h in ipairs(cells.header) do
        if h == title then return cells[i] end
      end
      error("no column '" .. title .. "'")
    end
    local function num(x) return string.format("%.15g", x) end
    local type_says = {
      integer = function(r) return r.min == r.max and "exactly " .. num(r.min) or "integer " .. num(r.min) .. ".." .. num(r.max) end,
      decimal = function(r) return "number " .. num(r.min) .. ".." .. num(r.max) end,
      boolean = function() return "boolean" end,
      object = function() return "object" end,
      endpoint = function(r) return r.min .. ".." .. r.max .. " characters" end,
      name = function(r) return r.min .. ".." .. r.max .. " characters" end,
      header = function(r) return "header name of " .. r.min .. ".." .. r.max .. " characters" end,
      classes = function() return "array of failure classes" end,
      methods = function(r) return "at most " .. r.max end,
      ["wait-headers"] = function(r) return "array of " .. r.min .. ".." .. r.max end,
      reasons = function() return "array of distinct" end,
      routes = function(r) return "array of " .. r.min .. ".." .. r.max end,
      ["class-limits"] = function(r) return "integer " .. r.min .. "..maxAttempts" end,
      jitter = function() return "jitter kinds" end,
    }
    local widens_says = {
      grows = "it grows", shrinks = "it shrinks", ["true-to-false"] = "`true` → `false`",
      ["false-to-true"] = "from `false` to `true`", removed = "it is removed", ["any-change"] = "change",
      ["item-removed"] = "is removed", ["delay-window"] = "delay window", retryable = "becomes retryable",
      ["own-method"] = "own method", ["class-attempts"] = "limit is raised", requests = "some request",
      fields = "fields", never = "never", hedges = "hedged attempts",
    }
    local function default_says(r)
      if r.if_absent == "required" then return "^required" end
      if r.type == "object" and r.default_json then return "subfield" end
      if r.default_json == nil then return "^n[oe][nt]e?" end -- "none…" or "not checked"
      if math.type(r.default) then return "^" .. r.default_json end
      local shown = type(r.default) == "string" and r.default or r.default_json
      return "`" .. shown:gsub("%p", "%%%0") .. "`"
    end
    for _, r in ipairs(rf.lock_schema()) do
      it(r.path, function()
        local cells = assert(rows[r.path], "docs/lock.md has no row for " .. r.path)
        local range = cell(cells, "type and range")
        assert.is_truthy(range:find(type_says[r.type](r), 1, true), r.path .. ": '" .. range .. "' lacks '"
          .. type_says[r.type](r) .. "'")
        if r.about then assert.is_truthy(range:find(r.about, 1, true), r.path .. ": lacks '" .. r.about .. "'") end
        local default = cell(cells, "default")
        assert.is_truthy(default:find(default_says(r)), r.path .. ": default '" .. default .. "'")
        local when = cell(cells, "widening when")
        assert.is_truthy(when:find(widens_says[r.widens], 1, true), r.path .. ": '" .. when .. "' lacks '"
          .. widens_says[r.widens] .. "'")
        if r.if_absent == "none" and r.default_json == nil and (r.widens == "grows" or r.widens == "shrinks") then
          assert.is_truthy(when:find("or is dropped", 1, true), r.path .. ": its absence is the loosest")
        end
      end)
    end
  end)

  it("is right that the effective policy is itself a lock with the same digest", function()
    for _, path in ipairs({ "examples/service.lock.json", "examples/retry-budget.lock.json" }) do
      local p = assert(rf.load(path))
      assert.equal(p.digest, assert(rf.load_string(p:effective_json())).digest, path)
      assert.equal(p.digest, assert(rf.load_string(p:canonical_json())).digest, path)
    end
  end)

  it("lists exactly the engine's wait headers (RF_WAIT_HEADERS), in its order, and the loader's list agrees", function()
    local section = assert(sub["Wait headers"], "docs/lock.md has no '### Wait headers' under '## Fields'")
    assert.same(rf.wait_headers, first_column(section, "header"))
    local src = read("core/include/retryfreeze/vocabulary.h")
    local body = assert(src:match("#define RF_WAIT_HEADERS%(X%)(.-[^\\])\n"), "no RF_WAIT_HEADERS")
    local from_macro = {}
    for name in body:gmatch('X%([%w_]+,%s*"([^"]+)"%)') do from_macro[#from_macro + 1] = name end
    assert.same(rf.wait_headers, from_macro)
    local _, err = rf.load_string(B:sub(1, -2) .. ', "retryAfter": {"headers": ["nope"]}}')
    local listed = assert(err:match("%(supported: (.*)%)$"), err)
    assert.same(rf.wait_headers, split_list(listed))
  end)

  it("documents classLimits and retryAfter.headers with the defaults the loader applies", function()
    local p = assert(rf.load_string(B))
    local r = p:routes()[1]
    assert.same({ "retry-after" }, r.retry_after.headers)
    assert.same({}, r.class_limits)
    local route_rows, ra_rows = {}, {}
    for _, cells in ipairs(table_rows(sub["Route fields"], "field")) do route_rows[code(cells[1])] = cells end
    for _, cells in ipairs(table_rows(sub["retryAfter"], "field")) do ra_rows[code(cells[1])] = cells end
    assert.is_truthy(route_rows.classLimits[3]:find("`{}`", 1, true))
    assert.is_truthy(ra_rows["retryAfter.headers"][3]:find('`["retry-after"]`', 1, true))
  end)

  it("lists exactly the engine's jitter kinds", function()
    assert.same(sorted(rf.jitters), sorted(first_column(sub["backoff"], "jitter")))
  end)

  it("says which way each number widens, as retryfreeze diff judges it", function()
    local diff = require "retryfreeze.diff"
    -- maxAttempts 4 and maxMs 300: retries 1..3 have caps 100, 200 and 300 (capped from 400), so baseMs,
    -- multiplier and maxMs each move a delay window (the diff judges windows, not fields).
    local base = json.decode([[{"endpoint": "GET /x", "maxAttempts": 4, "perAttemptTimeoutMs": 1000,
      "totalBudgetMs": 4000, "minAttemptMs": 200, "retryable": ["HTTP_503"],
      "backoff": {"baseMs": 100, "multiplier": 2, "maxMs": 300}, "retryAfter": {"honor": true, "maxMs": 2000},
      "propagation": {}, "retryBudget": {"maxTokens": 10, "tokenRatio": 0.5},
      "gate": {"maxRetriedSuccess": 0.5, "maxAttemptsPerSuccess": 2, "maxTerminalRate": 0.5, "maxRetryRatio": 1,
               "minSuccessRate": 0.5, "minSuccesses": 10}}]])
    -- The fields of an optional object or of retryBudget's other form are probed on a base that has them.
    local token_budget = base.retryBudget
    local ratio_budget = { retryRatio = 0.5, minRetriesPerSecond = 1, ttlMs = 1000 }
    local function base_for(name)
      base.retryBudget = ratio_budget[name:match("^retryBudget%.(%w+)$") or ""] and ratio_budget or token_budget
      base.hedging = name:match("^hedging%.") and { maxAttempts = 3, hedgingDelayMs = 100 } or nil
    end
    local checked = 0
    for _, cells in ipairs(table_rows(fields, "field")) do
      local name, when = code(cells[1]), cells[#cells]
      local grows, shrinks = when:find("grows", 1, true), when:find("shrinks", 1, true)
      local flips = when:find("`true` → `false`", 1, true)
      if grows or shrinks or flips then
        base_for(name)
        local old = assert(rf.load_string(json.encode(base)))
        local obj, key = name:match("^(%w+)%.(%w+)$")
        local holder = obj and base[obj] or base
        key = key or name
        local v, was = holder[key], holder[key]
        if v == nil then -- a field the base leaves at its default: probed from the default (the schema's row)
          for _, row in ipairs(rf.lock_schema()) do
            if row.path == name then v = row.default end
          end
        end
        assert(v ~= nil, "no probe value for " .. name .. ": give it a default or extend this test")
        if flips then
          holder[key] = false
        else
          holder[key] = math.type(v) == "integer" and v + 1 or v + 0.25
        end
        local changes = diff.compare(old, assert(rf.load_string(json.encode(base))))
        holder[key] = was
        assert.equal(1, #changes, name)
        local expect = (grows or flips) and "widening" or "narrowing"
        assert.equal(expect, changes[1].kind, name .. ": docs/lock.md says '" .. when .. "'")
        checked = checked + 1
      end
    end
    assert.is_true(checked >= 15)
  end)

  describe("refusals", function()
    local refusals = assert(top["Refusals"], "docs/lock.md has no '## Refusals'")

    -- B with members set: each replaces B's member of the same name.
    -- The top-level members of an object's inner text, split at commas outside strings and brackets.
    local function members_of(inner)
      local list, depth, start, in_string, i = {}, 0, 1, false, 1
      while i <= #inner do
        local ch = inner:sub(i, i)
        if in_string then
          if ch == "\\" then i = i + 1 elseif ch == '"' then in_string = false end
        elseif ch == '"' then
          in_string = true
        elseif ch == "[" or ch == "{" then
          depth = depth + 1
        elseif ch == "]" or ch == "}" then
          depth = depth - 1
        elseif ch == "," and depth == 0 then
          list[#list + 1] = inner:sub(start, i - 1):match("^%s*(.-)%s*$")
          start = i + 1
        end
        i = i + 1
      end
      list[#list + 1] = inner:sub(start):match("^%s*(.-)%s*$")
      return list
    end

    local function b_with(members)
      local new_keys = {}
      for _, m in ipairs(members_of(members)) do new_keys[m:match('^"([^"]+)"')] = true end
      local out = {}
      for _, m in ipairs(members_of(B:sub(2, -2))) do
        if not new_keys[m:match('^"([^"]+)"')] then out[#out + 1] = m end
      end
      out[#out + 1] = members
      return "{" .. table.concat(out, ", ") .. "}"
    end

    it("B is valid and every example of B's members rebuilds it", function()
      assert.is_truthy(rf.load_string(B))
      assert.equal(rf.load_string(B).digest, rf.load_string(b_with('"maxAttempts": 2')).digest)
    end)

    local examples = 0
    for _, cells in ipairs(table_rows(refusals, "refused")) do
      local example, message = code(cells[2]), code(cells[3])
      if #cells == 3 and example then
        examples = examples + 1
        it("refuses " .. cells[1], function()
          assert(message, "the message of '" .. cells[1] .. "' is not one code span")
          local text
          if example:match("^[{%[B]") then
            text = example:gsub("%f[%w]B%f[%W]", function() return B end)
          else
            text = b_with(example)
          end
          local p, err = rf.load_string(text, "lock")
          assert.is_nil(p, "loaded: " .. text)
          -- "allowed here: …" stands for the keys of the object, which the Fields tables list (checked above)
          if message:find("allowed here: …)", 1, true) then err = err:gsub("allowed here: .*%)$", "allowed here: …)") end
          assert.equal("lock: " .. message, err)
        end)
      end
    end

    it("has examples", function() assert.is_true(examples >= 50) end)

    it("documents every message the loader can give", function()
      local formats = {}
      for _, file in ipairs({ "lock_load.c", "lock_fields.c", "lock_schema.c", "lock_canonical.c", "policy.c",
        "class_limits.c", "failure_class.c", "route_index.c", "propagation.c" }) do
        for _, f in ipairs(c_format_args(read("core/src/engine/" .. file), "rfi_fail", 3)) do formats[#formats + 1] = f end
      end
      for _, f in ipairs(c_format_args(read("core/src/engine/endpoint.c"), "snprintf", 3)) do formats[#formats + 1] = f end
      assert.is_true(#formats >= 40)
      for _, fmt in ipairs(formats) do
        assert.is_truthy(refusals:find(format_pattern(fmt)),
          "docs/lock.md '## Refusals' lacks the loader's message \"" .. fmt .. "\"")
      end
    end)
  end)
end)

-- ---------------------------------------------------------------------------------------------------------
-- docs/reasons.md
-- ---------------------------------------------------------------------------------------------------------

--- The entries of the X-macro `name` defined in a C header: a list of {c_name, string, rest…}.
local x_macro = require("spec.helper").x_macro

local function strings_of(entries)
  local list = {}
  for i, e in ipairs(entries) do list[i] = e[2] end
  return list
end

describe("docs/reasons.md", function()
  local doc = read("docs/reasons.md")
  local top = sections(doc, "##")
  local function section(title) return assert(top[title], "docs/reasons.md has no '## " .. title .. "'") end

  it("lists exactly the engine's reasons, in the order rf_decide checks them", function()
    assert.same(rf.reasons, first_column(section("Reasons"), "reason"))
  end)

  it("gives each reason the retry flag of RF_REASONS", function()
    local flag = {}
    for _, e in ipairs(x_macro("core/include/retryfreeze/vocabulary.h", "RF_REASONS")) do flag[e[2]] = e[3] end
    for _, cells in ipairs(table_rows(section("Reasons"), "reason")) do
      local reason = code(cells[1])
      assert.equal(flag[reason] == "1" and "yes" or "no", cells[2], reason)
    end
  end)

  it("lists exactly the transport outcomes, each with the class it gives", function()
    assert.same(sorted(rf.transports), sorted(first_column(section("Transport outcomes"), "transport")))
    local policy = assert(rf.load("examples/retry-budget.lock.json"))
    for _, cells in ipairs(table_rows(section("Transport outcomes"), "transport")) do
      local t = code(cells[1])
      if t ~= "ok" then
        assert.is_truthy(cells[2]:find("`" .. policy:classify{ transport = t } .. "`", 1, true), t)
      end
    end
  end)

  it("lists exactly the class tokens a lock accepts, and every named class", function()
    local _, err = rf.load_string('{"endpoint": "GET /x", "maxAttempts": 1, "perAttemptTimeoutMs": 1, '
      .. '"totalBudgetMs": 1, "retryable": ["NOPE"]}')
    local list = assert(err:match("unknown failure class \"NOPE\" %((.*)%)$"), err)
    list = list:gsub("or the aliases ", ""):gsub("HTTP_<100..599>", "HTTP_<nnn>")
    local documented = first_column(section("Failure classes"), "class")
    assert.same(sorted(split_list(list)), sorted(documented))
    local named = strings_of(x_macro("core/include/retryfreeze/vocabulary.h", "RF_NAMED_CLASSES"))
    local doc_set = set_of(documented)
    for _, c in ipairs(named) do assert.is_true(doc_set[c], "named class " .. c .. " is not documented") end
    -- Every class loads; TOO_MANY_REDIRECTS only in notRetryable (a lock may not make a loop retryable).
    for _, c in ipairs(documented) do
      if c ~= "HTTP_<nnn>" then
        local lists = c == "TOO_MANY_REDIRECTS" and '"retryable": [], "notRetryable": ["' .. c .. '"]'
          or '"retryable": ["' .. c .. '"]'
        assert.is_truthy(rf.load_string('{"endpoint": "GET /x", "maxAttempts": 1, "perAttemptTimeoutMs": 1, '
          .. '"totalBudgetMs": 1, ' .. lists .. '}'), c .. " does not load")
      end
    end
  end)

  it("lists exactly RF_OUTCOMES, each with the reasons rf_outcome_of maps to it", function()
    local outcomes = strings_of(x_macro("core/include/retryfreeze/outcome.h", "RF_OUTCOMES"))
    local rows = table_rows(section("Outcomes"), "outcome")
    local documented = {}
    for i, cells in ipairs(rows) do documented[i] = code(cells[1]) end
    assert.same(sorted(outcomes), sorted(documented))
    -- rf_outcome_of: `case RF_REASON_…:` lines up to each `return RF_OUTCOME_…;`, default → its return.
    local reason_str, outcome_str = {}, {}
    for _, e in ipairs(x_macro("core/include/retryfreeze/vocabulary.h", "RF_REASONS")) do reason_str[e[1]] = e[2] end
    for _, e in ipairs(x_macro("core/include/retryfreeze/outcome.h", "RF_OUTCOMES")) do outcome_str[e[1]] = e[2] end
    local src = read("core/src/engine/outcome.c")
    local body = assert(src:match("rf_outcome rf_outcome_of%(rf_reason reason%) (%b{})"))
    local mapped, pending = {}, {}
    for word, name in body:gmatch("(%a+) (RF_[%u_]+)") do
      if word == "case" then
        pending[#pending + 1] = reason_str[name]
      elseif word == "return" then
        for _, r in ipairs(pending) do mapped[r] = outcome_str[name] end
        pending = {}
      end
    end
    local default = outcome_str[body:match("default: return (RF_OUTCOME_[%u_]+)")]
    assert.is_truthy(default)
    local stops = {}
    for _, e in ipairs(x_macro("core/include/retryfreeze/vocabulary.h", "RF_REASONS")) do
      if e[3] == "0" then stops[#stops + 1] = e[2] end
    end
    local seen = {}
    for _, cells in ipairs(rows) do
      local outcome = code(cells[1])
      for r in cells[2]:gmatch("`([%w%-]+)`") do
        assert.equal(mapped[r] or default, outcome, "reason " .. r .. " is listed under outcome " .. outcome)
        seen[r] = true
      end
    end
    for _, r in ipairs(stops) do assert.is_true(seen[r], "stopping reason " .. r .. " has no outcome row") end
  end)

  it("lists exactly RF_RETRY_AFTER_USES", function()
    local uses = strings_of(x_macro("core/include/retryfreeze/vocabulary.h", "RF_RETRY_AFTER_USES"))
    assert.same(sorted(uses), sorted(first_column(section("Retry-After in a verdict"), "retry_after")))
  end)
end)

-- ---------------------------------------------------------------------------------------------------------
-- docs/lua.md
-- ---------------------------------------------------------------------------------------------------------

--- The body of the C function `name` in src.
local function c_function(src, name)
  return assert(src:match("[%s%*]" .. name .. "%([^)]*%)%s*(%b{})"), "no C function " .. name)
end

--- The names of a C array of luaL_Reg or of strings: `static const … name[] = {…}`.
local function c_array(src, name)
  local body = assert(src:match(name .. "%[%] = (%b{})"), "no C array " .. name)
  local names = {}
  for n in body:gmatch('"([%w_]+)"') do names[#names + 1] = n end
  return names
end

--- The keys a C function stores into Lua tables (lua_setfield, set_str, set_int, set_ratio; and a response's fields,
--- named F_<key> in lua_client.c: set_integer(L, names, F_status, …), push_key(L, names, F_body)).
local function c_table_keys(body)
  local keys = {}
  for k in body:gmatch('lua_setfield%(L, %-?%d+, "([%w_]+)"%)') do keys[#keys + 1] = k end
  for k in body:gmatch('set_%a+%(L, "([%w_]+)"') do keys[#keys + 1] = k end
  for k in body:gmatch('set_%a+%(L, names, F_([%w_]+)') do keys[#keys + 1] = k end
  for k in body:gmatch('push_key%(L, names, F_([%w_]+)') do keys[#keys + 1] = k end
  return keys
end

--- Every identifier-like word inside a code span of text.
local function code_words(text)
  local words = {}
  for span in text:gmatch("`([^`\n]+)`") do
    for w in span:gmatch("[%a_][%w_]*") do words[w] = true end
  end
  return words
end

describe("docs/lua.md", function()
  local doc = read("docs/lua.md")
  local top = sections(doc, "##")
  local words = code_words(doc)
  local policy_src, client_src = read("bindings/lua_policy.c"), read("bindings/lua_client.c")
  local response_src = read("bindings/lua_response.c")
  local ledger_src = read("bindings/lua_ledger.c")

  local policy_methods = c_array(policy_src, "policy_methods")
  local policy_fields = {}
  for k in c_function(policy_src, "l_policy_index"):gmatch('strcmp%(k, "([%w_]+)"%)') do
    policy_fields[#policy_fields + 1] = k
  end
  local client_methods = c_array(client_src, "methods")
  local rng_methods = keys_of(debug.getmetatable(rf.rng(1)).__index)
  local ledger_path = os.tmpname()
  local ledger = assert(rf.ledger.open(ledger_path))
  local ledger_methods = keys_of(debug.getmetatable(ledger).__index)
  ledger:close()
  os.remove(ledger_path)

  it("documents every public field of require 'retryfreeze'", function()
    local section = assert(top["`rf` — the module"], "docs/lua.md has no '## `rf` — the module'")
    local documented = set_of(first_column(section, "name"))
    local function walk(t, prefix)
      for k, v in pairs(t) do
        assert.is_true(documented[prefix .. k], prefix .. k .. " is not in the rf table of docs/lua.md")
        if type(v) == "table" and k == "ledger" then walk(v, prefix .. k .. ".") end
      end
    end
    walk(rf, "rf.")
  end)

  it("names no rf.x that does not exist", function()
    for path in doc:gmatch("%f[%w_]rf%.([%a_][%w_%.]*)") do
      local v = rf
      for part in path:gsub("%.$", ""):gmatch("[^.]+") do
        assert.equal("table", type(v), "docs/lua.md names rf." .. path)
        v = v[part]
      end
      assert.is_not_nil(v, "docs/lua.md names rf." .. path .. ", which does not exist")
    end
  end)

  it("documents every policy method and field the binding registers, and no other", function()
    assert.is_true(#policy_methods >= 7 and #policy_fields >= 3)
    for _, m in ipairs(policy_methods) do
      assert.is_truthy(doc:find("policy:" .. m .. "[({]"), "policy:" .. m .. " is not documented")
    end
    for _, f in ipairs(policy_fields) do
      assert.is_truthy(doc:find("`policy." .. f .. "`", 1, true), "policy." .. f .. " is not documented")
    end
    local methods, fields = set_of(policy_methods), set_of(policy_fields)
    for m in doc:gmatch("%f[%w_]policy:([%a_][%w_]*)") do
      assert.is_true(methods[m], "docs/lua.md names policy:" .. m .. ", which does not exist")
    end
    for f in doc:gmatch("%f[%w_]policy%.([%a_][%w_]*)") do
      assert.is_true(fields[f], "docs/lua.md names policy." .. f .. ", which does not exist")
    end
  end)

  it("documents every client, rng and ledger method, and marks the scheduler's as internal", function()
    assert.is_true(#client_methods >= 7)
    for obj, list in pairs({ client = client_methods, rng = rng_methods, ledger = ledger_methods }) do
      for _, m in ipairs(list) do
        assert.is_truthy(doc:find(obj .. ":" .. m:gsub("%p", "%%%0") .. "[({]"), obj .. ":" .. m .. " is not documented")
      end
      local known = set_of(list)
      for m in doc:gmatch("%f[%w_]" .. obj .. ":([%a_][%w_]*)") do
        assert.is_true(known[m], "docs/lua.md names " .. obj .. ":" .. m .. ", which does not exist")
      end
    end
    for _, m in ipairs(client_methods) do
      if m:sub(1, 1) == "_" then
        local row = doc:match("\n(| `client:" .. m:gsub("%p", "%%%0") .. "%([^\n]*)")
        assert.is_truthy(row and row:find("internal", 1, true), "client:" .. m .. " is not marked internal")
      end
    end
  end)

  it("states client:all's concurrency range and default as client.h defines them", function()
    local header = read("core/include/retryfreeze/client.h")
    local default = assert(header:match("#define RF_ALL_CONCURRENCY (%d+)"))
    local max = assert(header:match("#define RF_ALL_CONCURRENCY_MAX (%d+)"))
    local row = assert(doc:match("\n(| `client:all%([^\n]*)"), "no client:all row")
    assert.is_truthy(row:find("`options.concurrency`: the most requests in flight at once, an integer 1.." .. max
      .. ", default " .. default .. " ", 1, true), row)
    for _, k in ipairs(c_array(client_src, "all_keys")) do
      assert.is_true(words[k] == true, "docs/lua.md does not name client:all's option " .. k)
    end
    local capi = read("docs/c-api.md")
    assert.is_truthy(capi:find("`RF_ALL_CONCURRENCY` (" .. default .. ",", 1, true))
    assert.is_truthy(capi:find("`RF_ALL_CONCURRENCY_MAX`\n(" .. max .. ",", 1, true))
  end)

  it("documents every key of the tables the binding reads and builds", function()
    -- The policy's views (policy:routes(), policy.gate, policy.retry_budget) hold a field of docs/lock.md under its
    -- path in snake case (its row's view: spec/core/test_lock_schema.c), which lua.md says once instead of naming
    -- each key; the keys the binding adds of its own are named.
    local shapes = {
      facts = c_array(policy_src, "fact_keys"),
      verdict = c_array(policy_src, "verdict_key_names"),
      budget = c_table_keys(c_function(policy_src, "l_budget")),
      route = c_table_keys(c_function(policy_src, "l_routes")),
      client_options = c_array(client_src, "client_keys"),
      request = c_array(client_src, "request_keys"),
      try = c_table_keys(c_function(response_src, "push_try_named")),
      response = c_table_keys(c_function(response_src, "push_response_named")),
      record = c_table_keys(c_function(ledger_src, "push_record")),
      read_state = { "torn", "corrupt", "lines" },
    }
    for shape, keys in pairs(shapes) do
      assert.is_true(#keys > 1, shape)
      for _, k in ipairs(keys) do
        assert.is_true(words[k] == true, "docs/lua.md does not name the " .. shape .. " key " .. k)
      end
    end
  end)

  describe("Lua modules", function()
    local modules = { "scheduler", "spec", "ledger_stats", "replay", "gate", "model", "diff", "signoff",
      "decision_table" }
    for _, name in ipairs(modules) do
      it("documents retryfreeze." .. name .. " exactly", function()
        local section = assert(top["`retryfreeze." .. name .. "`"], "no '## `retryfreeze." .. name .. "`'")
        local mod = require("retryfreeze." .. name)
        for k in pairs(mod) do
          assert.is_truthy(section:find("%f[%w_]" .. name .. "%." .. k .. "%f[^%w_]"),
            "retryfreeze." .. name .. "." .. k .. " is not documented")
        end
        for k in section:gmatch("%f[%w_]" .. name .. "%.([%a_][%w_]*)") do
          assert.is_not_nil(mod[k], "docs/lua.md names " .. name .. "." .. k .. ", which does not exist")
        end
      end)
    end

    it("documents exactly the assertions retryfreeze.spec registers", function()
      local registered = {}
      for n in read("lua/retryfreeze/spec.lua"):gmatch('assert:register%("assertion", "([%w_]+)"') do
        registered[#registered + 1] = n
      end
      local section = top["`retryfreeze.spec`"]
      assert.same(sorted(registered), sorted((function()
        local list = {}
        for _, cells in ipairs(table_rows(section, "assertion")) do
          list[#list + 1] = assert(cells[1]:match("^`assert%.([%w_]+)%("), cells[1])
        end
        return list
      end)()))
      local known = set_of(registered)
      for n in section:gmatch("assert%.is_not%.([%w_]+)") do assert.is_true(known[n], "assert.is_not." .. n) end
      for _, n in ipairs(registered) do
        assert.is_truthy(section:find("`assert.is_not." .. n .. "`", 1, true), "assert.is_not." .. n)
      end
    end)

    it("names every module of lua/retryfreeze, as documented or internal", function()
      local p = io.popen("cd lua/retryfreeze && ls *.lua cli/*.lua")
      local listing = p:read("a")
      p:close()
      for file in listing:gmatch("([%w_/]+)%.lua\n") do
        local stem = file:gsub("/init$", ""):gsub("/", ".")
        local name = stem:match("^cli%.") and stem ~= "cli.args" and "cli.<command>" or stem
        if stem ~= "init" then
          assert.is_truthy(top["`retryfreeze." .. name .. "`"] or doc:find("\n| `retryfreeze." .. name .. "` |", 1, true),
            "docs/lua.md does not name the module retryfreeze." .. stem)
        end
      end
    end)
  end)
end)

-- ---------------------------------------------------------------------------------------------------------
-- docs/cli.md
-- ---------------------------------------------------------------------------------------------------------

--- The `--options` named in text.
local function options_in(text)
  local set = {}
  for o in text:gmatch("%f[%-%w]%-%-[%a][%w%-]*") do set[o] = true end
  return set
end

describe("docs/cli.md", function()
  local h = require "spec.helper"
  local cli = require "retryfreeze.cli"
  local doc = read("docs/cli.md")
  local top = sections(doc, "##")

  local commands = {}
  for _, name in ipairs(cli.commands) do
    local ok, mod = pcall(require, "retryfreeze.cli." .. name)
    if ok then commands[name] = mod end
  end

  it("names no command the CLI lacks", function()
    local known = set_of(cli.commands)
    for _, name in ipairs(cli.builtins) do known[name] = true end
    local n = 0
    for title in pairs(top) do
      local name = title:match("^`retryfreeze (%S+)`$")
      if name then
        n = n + 1
        assert.is_true(known[name] == true, "docs/cli.md has a section for '" .. name .. "', which is no command")
      end
    end
    assert.is_true(n >= 12)
    for name in doc:gmatch("`retryfreeze ([%l]+)[ `]") do
      assert.is_true(known[name] == true, "docs/cli.md names 'retryfreeze " .. name .. "', which is no command")
    end
  end)

  for _, name in ipairs(cli.commands) do
    it("documents every option of retryfreeze " .. name, function()
      local mod = commands[name]
      if not mod then return end -- the command's module is absent in this build
      local section = assert(top["`retryfreeze " .. name .. "`"], "docs/cli.md has no '## `retryfreeze " .. name .. "`'")
      -- Outside the synopsis: each option must be explained, not only listed.
      local documented = options_in((section:gsub("\n```.-\n```", "")))
      local accepted = options_in(mod.usage)
      -- The command's option table (the usage names an option by its short form when it has one).
      for _, row in ipairs(mod.options) do accepted[row[1]] = true end
      for o in pairs(accepted) do
        assert.is_true(documented[o] == true, "docs/cli.md: retryfreeze " .. name .. " does not document " .. o)
      end
      if name == "serve" then -- serve passes every argument through to retryfreeze-serve
        local out, _, status = h.run_cli("serve", "--help-upstream")
        assert.equal(0, status)
        for o in pairs(options_in(out)) do accepted[o] = true end
      end
      accepted["--help"] = true
      for o in pairs(documented) do
        assert.is_true(accepted[o] == true, "docs/cli.md: retryfreeze " .. name .. " has no option " .. o)
      end
    end)
  end

  for _, name in ipairs(cli.commands) do
    it("shows the synopsis of retryfreeze " .. name .. " that its --help prints", function()
      local mod = commands[name]
      if not mod then return end -- the command's module is absent in this build
      local section = assert(top["`retryfreeze " .. name .. "`"], "docs/cli.md has no '## `retryfreeze " .. name .. "`'")
      local block = assert(section:match("\n```\n(.-)\n```"), "docs/cli.md: retryfreeze " .. name .. " has no synopsis")
      assert.equal(mod.synopsis, block)
      local out = h.run_cli("help", name)
      assert.equal("usage: " .. mod.synopsis .. "\n", out:sub(1, #mod.synopsis + 8))
    end)
  end

  it("prints the version rf.VERSION holds", function()
    local out, _, status = h.run_cli("--version")
    assert.equal(0, status)
    assert.equal("retryfreeze " .. rf.VERSION .. "\n", out:match("^[^\n]*\n"))
  end)
end)

-- ---------------------------------------------------------------------------------------------------------
-- docs/c-api.md
-- ---------------------------------------------------------------------------------------------------------

--- A header's code: comments removed (so a stale name in a comment proves nothing).
local function c_code(src)
  return (src:gsub("/%*.-%*/", " "):gsub("//[^\n]*", ""))
end

--- A prototype in one canonical spelling: whitespace collapsed, none inside the parentheses' edges.
local function prototype(text)
  return (text:gsub("%s+", " "):gsub("%( ", "("):gsub(" %)", ")"):match("^%s*(.-)%s*$"))
end

--- The RF_API declarations of a header's code: {name = prototype without RF_API}, and the names in order.
--- Text without its preprocessor lines and their continuations (#define RF_API …, the X-macro lists).
local function without_directives(text)
  local lines, in_directive = {}, false
  for line in (text .. "\n"):gmatch("(.-)\n") do
    if line:match("^%s*#") then in_directive = true end
    if not in_directive then lines[#lines + 1] = line end
    in_directive = in_directive and line:match("\\%s*$") ~= nil
  end
  return table.concat(lines, "\n")
end

local function rf_api_functions(code_text)
  local body = without_directives(code_text)
  local funcs, order = {}, {}
  for decl in body:gmatch("RF_API%s+([^;]+);") do
    local name = assert(decl:match("([%w_]+)%s*%("), decl)
    funcs[name] = prototype(decl)
    order[#order + 1] = name
  end
  return funcs, order
end

--- Every identifier-like word inside an inline code span of text, fenced blocks left out.
local function inline_code_words(text) return code_words((text:gsub("\n```[^\n]*\n.-\n```", "\n"))) end

describe("docs/c-api.md", function()
  local doc = read("docs/c-api.md")
  local top = sections(doc, "##")
  local header_dir = "core/include/retryfreeze/"
  local listing = io.popen("cd " .. header_dir .. " && ls *.h")
  local header_names = {}
  for name in listing:read("a"):gmatch("([%w_]+%.h)\n") do header_names[#header_names + 1] = name end
  listing:close()
  assert.is_true(#header_names >= 10)
  local code_of, all_code = {}, {}
  for _, name in ipairs(header_names) do
    code_of[name] = c_code(read(header_dir .. name))
    all_code[#all_code + 1] = code_of[name]
  end
  all_code = table.concat(all_code, "\n")

  it("documents every RF_API function under its header with the header's prototype, and no other", function()
    local count = 0
    for _, header in ipairs(header_names) do
      local declared = rf_api_functions(code_of[header])
      local section = assert(top["`retryfreeze/" .. header .. "`"], "docs/c-api.md has no '## `retryfreeze/" .. header .. "`'")
      local documented = {}
      local subs, order = sections(section, "###")
      for _, title in ipairs(order) do
        local names = {}
        for name in title:gmatch("`([%w_]+)`") do names[#names + 1] = name end
        assert.is_true(#names > 0, "'### " .. title .. "' names no function")
        local block = assert(subs[title]:match("\n```c\n(.-)\n```"), "'### " .. title .. "' has no ```c prototype block")
        local protos = {}
        for decl in block:gmatch("([^;]+);") do
          protos[assert(decl:match("([%w_]+)%s*%("), decl)] = prototype(decl)
        end
        assert.same(sorted(names), sorted(keys_of(protos)), "'### " .. title .. "': the heading and its prototypes")
        for _, name in ipairs(names) do
          assert.is_nil(documented[name], name .. " is documented twice")
          assert.is_not_nil(declared[name], "docs/c-api.md documents " .. name .. " under " .. header
            .. ", which declares no such RF_API function")
          assert.equal(declared[name], protos[name], name .. ": the prototype in docs/c-api.md differs from " .. header)
          documented[name] = true
        end
      end
      for name in pairs(declared) do
        assert.is_true(documented[name] == true, header .. " declares " .. name .. ", which docs/c-api.md does not document")
        count = count + 1
      end
    end
    assert.is_true(count >= 80, "only " .. count .. " RF_API functions found: is the header parser broken?")
    for title in pairs(top) do
      local h = title:match("^`retryfreeze/([%w_]+%.h)`$")
      if h then assert.is_not_nil(code_of[h], "docs/c-api.md has a section for " .. h .. ", which is no header") end
    end
  end)

  -- The house rule: every public C function has a doc comment. One comment may head a group of declarations on
  -- consecutive lines (the _name functions); anything else between a comment and its declaration breaks the tie.
  it("finds a doc comment above every RF_API declaration in the headers", function()
    for _, header in ipairs(header_names) do
      local src = without_directives(read(header_dir .. header))
      local prev_end
      for start, decl, stop in src:gmatch("()RF_API%s+([^;]+);()") do
        local before = src:sub(prev_end or 1, start - 1)
        local commented = before:match("%*/%s*$") ~= nil
        local grouped = prev_end ~= nil and before:match("^%s*$") ~= nil and select(2, before:gsub("\n", "")) <= 1
        assert.is_true(commented or grouped, header .. ": " .. decl:match("([%w_]+)%s*%(") .. " has no doc comment")
        prev_end = stop
      end
    end
  end)

  it("names no rf_ or RF_ identifier the headers lack", function()
    local known = {}
    for w in all_code:gmatch("[%a_][%w_]*") do known[w] = true end
    local n = 0
    for w in pairs(inline_code_words(doc)) do
      if w:match("^rf_") or w:match("^RF_") then
        n = n + 1
        assert.is_true(known[w] == true, "docs/c-api.md names " .. w .. ", which no public header defines")
      end
    end
    assert.is_true(n >= 150)
  end)

  it("names every public type, macro and plain enumerator", function()
    local words = inline_code_words(doc)
    local required = {}
    for name in all_code:gmatch("#define%s+(RF_[%w_]+)") do required[name] = true end
    for name in all_code:gmatch("}%s*(rf_[%w_]+)%s*;") do required[name] = true end
    for name in all_code:gmatch("typedef%s+struct%s+[%w_]+%s+(rf_[%w_]+)%s*;") do required[name] = true end
    for name in all_code:gmatch("typedef[^;{]-%(%*%s*(rf_[%w_]+)%)") do required[name] = true end
    for body in all_code:gmatch("typedef%s+enum%s+[%w_]+%s*(%b{})") do
      if not body:find("(", 1, true) then -- an X-macro enum's constants are tabled in reasons.md and lock.md
        for name in body:gmatch("(RF_[%u%d_]+)%s*[=,}]") do required[name] = true end
      end
    end
    assert.is_true(required.rf_policy and required.rf_attempt_hook and required.RF_LEDGER_FSYNC_LINE
      and required.RF_MAX_TRIES and required.rf_error)
    for name in pairs(required) do
      assert.is_true(words[name] == true, "docs/c-api.md does not name the public " .. name)
    end
  end)

  it("names exactly the CMake package, targets and pkg-config module the install exports", function()
    local install = read("cmake/install.cmake")
    local list = assert(install:match("install%(TARGETS%s+([^)]-)%s+EXPORT%s+retryfreezeTargets"),
      "cmake/install.cmake exports no retryfreezeTargets")
    local namespace = assert(install:match("install%(EXPORT retryfreezeTargets NAMESPACE ([%w_]+::)"))
    local exported = {}
    for t in list:gmatch("[%w_]+") do exported[namespace .. t] = true end
    local named = {}
    for t in doc:gmatch("(" .. namespace:gsub("%p", "%%%0") .. "[%w_]+)") do named[t] = true end
    assert.same(keys_of(exported), keys_of(named))
    local linking = assert(top["Linking"], "docs/c-api.md has no '## Linking'")
    local targets_table = {}
    for _, cells in ipairs(table_rows(linking, "target")) do targets_table[#targets_table + 1] = code(cells[1]) end
    assert.same(keys_of(exported), sorted(targets_table))
    -- The package name (retryfreezeConfig.cmake) and the pkg-config module with its libraries.
    local package = assert(install:match("%${CMAKE_BINARY_DIR}/([%w_]+)Config%.cmake%.in"))
    assert.is_truthy(doc:find("find_package(" .. package .. " ", 1, true), "docs/c-api.md has no find_package(" .. package)
    local pc_name = assert(install:match("\nName: ([%w_]+)\n"))
    assert.is_truthy(doc:find("pkg-config --cflags --libs " .. pc_name, 1, true))
    local pc_libs = assert(install:match("\nLibs: ([^\n]+)\n"))
    assert.is_truthy(doc:find("`Libs: " .. pc_libs .. "`", 1, true), "docs/c-api.md does not quote the .pc's Libs: " .. pc_libs)
    for _, field in ipairs({ "Requires", "Requires.private" }) do
      local value = assert(install:match("\n" .. field:gsub("%p", "%%%0") .. ": ([^\n]+)\n"))
      assert.is_truthy(doc:find("`" .. field .. ": " .. value .. "`", 1, true), "docs/c-api.md does not quote " .. field)
    end
  end)
end)

-- ---------------------------------------------------------------------------------------------------------
-- Links between the docs
-- ---------------------------------------------------------------------------------------------------------

--- GitHub's anchor of a heading: lowercased, punctuation but '-' and '_' dropped, spaces to '-'.
local function slug(title)
  return (title:lower():gsub("[^%w%s%-_]", ""):gsub("%s", "-"))
end

describe("the reference docs' links", function()
  for _, file in ipairs({ "lock", "reasons", "lua", "cli", "c-api" }) do
    it("resolve in docs/" .. file .. ".md", function()
      local text = read("docs/" .. file .. ".md")
      for target, anchor in text:gmatch("%]%(([%w_%-%.]*)#([^)]+)%)") do
        local path = "docs/" .. (target == "" and file .. ".md" or target)
        local headings, fenced = {}, false
        for line in (read(path) .. "\n"):gmatch("(.-)\n") do
          if line:match("^```") then fenced = not fenced end
          local title = line:match("^#+ (.*)$")
          if title and not fenced then headings[slug(title)] = true end
        end
        assert.is_true(headings[anchor] == true, file .. ".md links to " .. path .. "#" .. anchor .. ", which has no such heading")
      end
      for target in text:gmatch("%]%(([%w_%-%.]+%.md)%)") do
        assert.is_truthy(io.open("docs/" .. target), file .. ".md links to a missing docs/" .. target)
      end
    end)
  end
end)

-- ---------------------------------------------------------------------------------------------------------
-- The benchmarks' paths
-- ---------------------------------------------------------------------------------------------------------

--- The files under dir (a path from the source root), sorted; build trees and hidden files left out.
local function files_under(dir)
  local p = assert(io.popen("find " .. dir .. " -type f ! -name '.*' | sort"))
  local list = {}
  for line in p:lines() do list[#list + 1] = line end
  p:close()
  return list
end

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

describe("bench/", function()
  it("has every file in bench/README.md's table, and the table names only files that exist", function()
    local listed = {}
    for name in read("bench/README.md"):gmatch("\n| `([^`]+)` |") do
      assert.is_true(exists("bench/" .. name), "bench/README.md lists bench/" .. name .. ", which does not exist")
      listed["bench/" .. name] = true
    end
    for _, path in ipairs(files_under("bench")) do
      if path ~= "bench/README.md" then
        assert.is_true(listed[path] == true, path .. " is not in bench/README.md's table")
      end
    end
  end)

  it("is named by existing paths in the docs, the build files and the benches themselves", function()
    local texts = { "README.md", "spec/README.md", "spec/ledger_gen.lua", ".luacheckrc", "bindings/lua_policy.c" }
    for _, dir in ipairs({ "docs", "cmake", "bench" }) do
      for _, path in ipairs(files_under(dir)) do texts[#texts + 1] = path end
    end
    local n = 0
    for _, file in ipairs(texts) do
      local text = read(file)
      -- A source path: "bench/" not after a path character (build outputs are "$build/bench/...", "BUILD/bench_x").
      for before, path in text:gmatch("(.?)(bench/[%w_%-/%.]+)") do
        path = path:gsub("%.+$", "")
        if not before:match("[%w_/%$%.]") and path ~= "bench/" then
          n = n + 1
          assert.is_true(exists(path), file .. " names " .. path .. ", which does not exist")
        end
      end
      for mod in text:gmatch("require%s*%(?%s*[\"']bench%.([%w_%.]+)[\"']") do
        local path = "bench/" .. mod:gsub("%.", "/") .. ".lua"
        assert.is_true(exists(path), file .. " requires bench." .. mod .. ", but there is no " .. path)
      end
      local here = file:match("^(.*)/[^/]*$")
      -- A path relative to the bench's own folder: `here .. "/x"` or `(arg[0]:match(...) or ".") .. "/x"`.
      local lua_text = file:match("%.lua$") and text or ""
      for _, pattern in ipairs({ 'here%s*%.%.%s*"/([^"]+)"', 'or "%."%)%s*%.%.%s*"/([^"]+)"' }) do
        for rel in lua_text:gmatch(pattern) do
          assert.is_true(exists(here .. "/" .. rel), file .. " opens " .. here .. "/" .. rel .. ", which does not exist")
        end
      end
      for rel in (file:match("%.[ch]$") and text or ""):gmatch("#include \"(%.%./[%w_/%.]+)\"") do
        assert.is_true(exists(here .. "/" .. rel), file .. " includes " .. here .. "/" .. rel .. ", which does not exist")
      end
    end
    assert.is_true(n > 50, "only " .. n .. " bench/ paths found: the pattern no longer matches the docs")
  end)
end)
