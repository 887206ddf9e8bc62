-- retryfreeze.compat on every Lua the module supports (this spec runs under 5.1, 5.2, 5.3, 5.4 and LuaJIT):
-- what the library and the CLI use of the 5.2+ standard library is there, with 5.2's behaviour.
local compat = require "retryfreeze.compat"

describe("retryfreeze.compat", function()
  describe("searchpath (package.searchpath, Lua 5.2+)", function()
    it("finds a module on a path, replacing the dots of its name", function()
      local found = compat.searchpath("retryfreeze.report", "./lua/?.lua;./lua/?/init.lua")
      assert.equal("./lua/retryfreeze/report.lua", found)
      assert.equal("./lua/retryfreeze/init.lua", compat.searchpath("retryfreeze", "./nowhere/?.lua;./lua/?/init.lua"))
    end)

    it("returns nil and every file it tried when nothing is there", function()
      local found, tried = compat.searchpath("no.such", "./a/?.lua;./b/?.so")
      assert.is_nil(found)
      -- The list's layout differs between Lua versions (5.4 drops the leading "\n\t"); both files are named.
      assert.truthy(tried:find("no file './a/no/such.lua'", 1, true))
      assert.truthy(tried:find("no file './b/no/such.so'", 1, true))
    end)
  end)

  it("flow.run loads and runs a script on this Lua (5.1 loads text with loadstring, 5.2+ with load)", function()
    local h = require "spec.helper"
    local dir = h.temp_dir()
    h.write_file(dir .. "/f.lua", "local a, b = ...; _G.rf_compat_seen = { a, b, arg[0] }")
    assert.is_true(require("retryfreeze.flow").run(dir .. "/f.lua", { "x", "y" }))
    assert.same({ "x", "y", dir .. "/f.lua" }, _G.rf_compat_seen)
    _G.rf_compat_seen = nil
    os.execute("rm -rf " .. h.shell_quote(dir))
  end)

  it("report.vendor_dir locates the chart library through it", function()
    local dir = assert(require("retryfreeze.report").vendor_dir())
    assert.truthy(dir:find("retryfreeze/vendor/vega$"))
    assert.truthy(io.open(dir .. "/LICENSE.vega")):close()
  end)
end)
