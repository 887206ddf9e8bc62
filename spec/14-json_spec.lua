-- retryfreeze.json: cJSON (through the binding) with the checks the governance files need around it.
local json = require "retryfreeze.json"
local h = require "spec.helper"

describe("retryfreeze.json", function()
  describe("decode", function()
    it("decodes objects, arrays, strings, numbers, booleans and null", function()
      local v = assert(json.decode(' {"a": [1, -2, 2.5, -0.015e0, 1E3, true, false, null], "b": {}, "c": [] } '))
      assert.equal(1, v.a[1])
      assert.equal("integer", math.type(v.a[1]))
      assert.equal(-2, v.a[2])
      assert.equal(2.5, v.a[3])
      assert.equal(-0.015, v.a[4])
      assert.equal(1000, v.a[5]) -- integral and exact: an integer, however it is written
      if h.has_integers then assert.equal("integer", math.type(v.a[5])) end -- Lua 5.1/LuaJIT: doubles only
      assert.is_true(v.a[6])
      assert.is_false(v.a[7])
      assert.equal(json.null, v.a[8])
      assert.equal(8, #v.a)
      assert.same({}, v.b)
      assert.equal(json.array_mt, getmetatable(v.c))
      assert.is_nil(getmetatable(v.b))
    end)

    it("decodes string escapes, \\u escapes and surrogate pairs to UTF-8", function()
      assert.equal('a"b\\c/d\b\f\n\r\t', json.decode('"a\\"b\\\\c\\/d\\b\\f\\n\\r\\t"'))
      assert.equal("é→😀", json.decode('"\\u00e9\\u2192\\ud83d\\ude00"'))
      assert.equal("raw → UTF-8 and DEL \127", json.decode('"raw → UTF-8 and DEL \127"'))
    end)

    it("makes integers of integral numbers below 2^53 (RFC 8259 §6) and floats of the rest it can hold", function()
      assert.equal(9007199254740991, json.decode("9007199254740991"))
      assert.equal(-9007199254740991, json.decode("-9007199254740991"))
      if h.has_integers then -- Lua 5.1/LuaJIT have doubles only
        assert.equal("integer", math.type(json.decode("-9007199254740991")))
        assert.equal("float", math.type(json.decode("9007199254740992")))
        assert.is_nil(json.decode("9223372036854775807")) -- no double holds it: refused, see below
        assert.equal("float", math.type(json.decode("2.5")))
      end
    end)

    -- cJSON names the byte where it stopped; the checks around it name the byte or the JSON path.
    local bad = {
      { "", "byte 1: unexpected end of text" },
      { "   ", "byte 4: unexpected end of text" },
      { "1e", "byte 2: trailing data after the JSON value" },
      { "-", "byte 1: not valid JSON (RFC 8259)" },
      { ".5", "byte 1: not valid JSON (RFC 8259)" },
      { "+1", "byte 1: not valid JSON (RFC 8259)" },
      { "1e999", "$: number out of range" },
      { "[1, 1e999]", "$[1]: number out of range" },
      { "NaN", "byte 1: not valid JSON (RFC 8259)" },
      { "nul", "byte 1: not valid JSON (RFC 8259)" },
      { "[1,]", "byte 4: not valid JSON (RFC 8259)" },
      { "[1 2]", "byte 4: not valid JSON (RFC 8259)" },
      { "[1", "byte 2: not valid JSON (RFC 8259)" },
      { '{"a":1,}', "byte 8: not valid JSON (RFC 8259)" },
      { '{"a" 1}', "byte 6: not valid JSON (RFC 8259)" },
      { '{"a":1 "b":2}', "byte 8: not valid JSON (RFC 8259)" },
      { '{"a":1,"a":2}', '$.a: duplicate key "a"' },
      { '{"a":{"b":[1,{"b":1,"b":2}]}}', '$.a.b[1].b: duplicate key "b"' },
      { "{a:1}", "byte 3: not valid JSON (RFC 8259)" },
      { '"abc', "byte 2: not valid JSON (RFC 8259)" },
      { '"\\x"', "byte 2: not valid JSON (RFC 8259)" },
      { '"\\u12"', "byte 2: not valid JSON (RFC 8259)" },
      { '"\\ud800"', "byte 2: not valid JSON (RFC 8259)" },
      { "1 2", "byte 3: trailing data after the JSON value" },
      { "{} x", "byte 4: trailing data after the JSON value" },
      { "// c\n1", "byte 1: not valid JSON (RFC 8259)" },
      -- the checks around cJSON: NUL bytes and \u0000 escapes, control characters cJSON would skip
      { "1\0", "byte 2: NUL byte (JSON text holds none)" },
      { '{"a\0b":1}', "byte 4: NUL byte (JSON text holds none)" },
      { '["a\\u0000b"]', "byte 4: \\u0000 escape (a NUL in a string is refused)" },
      { '["a\\\\\\u0000"]', "byte 6: \\u0000 escape (a NUL in a string is refused)" },
      { "\1 1", "byte 1: control character" },
      { string.rep("[", 129) .. string.rep("]", 129), "nesting deeper than 128" },
      { string.rep("[", 5000), "byte 1001: not valid JSON (RFC 8259)" },
    }
    for _, b in ipairs(bad) do
      it(string.format("refuses %q with its position", b[1]:sub(1, 20)), function()
        local v, err = json.decode(b[1])
        assert.is_nil(v)
        assert.equal(b[2], err)
      end)
    end

    it("keeps an escaped backslash before u0000 and nesting of 128", function()
      assert.equal("a\\u0000", json.decode('"a\\\\u0000"'))
      local v = assert(json.decode(string.rep("[", 128) .. string.rep("]", 128)))
      for _ = 1, 127 do v = v[1] end
      assert.same({}, v)
    end)

    it("raises on a non-string", function()
      assert.has_error(function() json.decode(nil) end, "bad argument #1 to 'decode' (string expected, got nil)")
    end)
  end)

  describe("encode", function()
    it("encodes values compactly with sorted keys, or the given order first", function()
      assert.equal('{"a":1,"b":[true,false,null],"c":"x"}',
        json.encode({ c = "x", a = 1, b = { true, false, json.null } }))
      assert.equal('{"z":1,"a":2}', json.encode({ a = 2, z = 1 }, { "z" }))
      assert.equal('{"z":1,"a":2}', json.encode({ a = 2, z = 1 }, { "z", "a", "z" }))
    end)

    it("encodes empty arrays marked with json.array, empty tables as objects", function()
      assert.equal('{"lines":[],"o":{}}', json.encode({ lines = json.array(), o = {} }))
    end)

    it("escapes quotes, backslashes and control characters, and keeps UTF-8", function()
      assert.equal('"a\\"b\\\\c\\n\\u0001→"', json.encode('a"b\\c\n\1→'))
    end)

    it("prints integers as integers and floats shortest-first", function()
      assert.equal("[3,0.1,2,1e+300]", json.encode({ 3, 0.1, 2.0, 1e300 }))
    end)

    it("round-trips", function()
      local v = { a = json.array({ 1, "two", json.null, { b = false } }), s = "é\t" }
      assert.same(v, json.decode(json.encode(v)))
    end)

    it("raises on what JSON cannot hold", function()
      assert.has_error(function() json.encode(0 / 0) end, "cannot encode a non-finite number")
      assert.has_error(function() json.encode({ [true] = 1 }) end, "cannot encode a non-string object key")
      assert.has_error(function() json.encode(print) end, "cannot encode a function")
      assert.has_error(function() json.encode("a\0b") end, "cannot encode a string holding a NUL byte")
      local cycle = {}
      cycle.self = cycle
      assert.has_error(function() json.encode(cycle) end, "cannot encode nesting deeper than 128 (a cycle?)")
    end)
  end)

  describe("numbers a double cannot hold as written (RFC 8259 §6)", function()
    it("decode refuses an integer beyond ±2^53 and a nonzero number that underflows, naming the byte", function()
      local beyond = "integer beyond 2^53 %(RFC 8259 §6%): a double cannot hold it exactly"
      for text, at in pairs({ ["[9007199254740993]"] = 2, ["[-9007199254740993]"] = 2, ["[12345678901234567890]"] = 2,
        ['{"a\\"":9007199254740999}'] = 8, ['[1, 9223372036854775807]'] = 5 }) do
        local v, err = json.decode(text)
        assert.is_nil(v, text)
        assert.matches("^byte " .. at .. ": " .. beyond .. "$", err)
      end
      local v, err = json.decode("[1e-400]")
      assert.is_nil(v)
      assert.equal("byte 2: nonzero number that underflows to 0", err)
    end)

    it("decode reads ±2^53, zeros, numbers inside strings and leading zeros as before", function()
      assert.same({ 9007199254740991, -9007199254740991 }, json.decode("[9007199254740991,-9007199254740991]"))
      assert.equal(2 ^ 53, json.decode("[9007199254740992]")[1])
      assert.same({ 0, 0, "9007199254740993", 1500 }, json.decode('[0.0, 0e5, "9007199254740993", 1.5e3]'))
    end)

    it("encode refuses an integer decode would refuse, so that everything it writes reads back", function()
      if h.has_integers then
        assert.has_error(function() json.encode({ math.maxinteger }) end,
          "cannot encode the integer 9223372036854775807: beyond 2^53 a JSON reader's double cannot hold it exactly")
        assert.has_error(function() json.encode({ n = -9007199254740993 }) end)
      else -- Lua 5.1 and LuaJIT: an integral double beyond 2^53
        assert.has_error(function() json.encode({ 2 ^ 60 }) end)
      end
      local edge = { 9007199254740992, -9007199254740992 }
      assert.same({ 2 ^ 53, -2 ^ 53 }, json.decode(json.encode(edge)))
    end)
  end)
end)
