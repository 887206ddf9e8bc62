-- retryfreeze.json: the strict decoder and the encoder the governance files use.
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
      assert.equal(1000.0, v.a[5])
      if h.has_integers then assert.equal("float", math.type(v.a[5])) end -- Lua 5.1/LuaJIT: doubles only
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

    it("keeps integers that fit and makes floats of the rest", function()
      if h.has_integers then
        assert.equal(math.maxinteger, json.decode("9223372036854775807"))
        assert.equal("float", math.type(json.decode("9223372036854775808")))
      else -- doubles only: integers are exact up to 2^53 - 1
        assert.equal(2 ^ 53 - 1, json.decode("9007199254740991"))
        assert.equal(-(2 ^ 53 - 1), json.decode("-9007199254740991"))
      end
    end)

    local bad = {
      { "", "byte 1: unexpected end of text" },
      { "   ", "byte 4: unexpected end of text" },
      { "01", "byte 1: bad number" },
      { "1.", "byte 1: bad number" },
      { "1e", "byte 1: bad number" },
      { "-", "byte 1: bad number" },
      { ".5", "byte 1: unexpected character '.'" },
      { "+1", "byte 1: unexpected character '+'" },
      { "1e999", "byte 1: number out of range" },
      { "NaN", "byte 1: unexpected character 'N'" },
      { "nul", "byte 1: unexpected character 'n'" },
      { "[1,]", "byte 4: unexpected character ']'" },
      { "[1 2]", "byte 4: expected ',' or ']'" },
      { "[1", "byte 3: unexpected end of text" },
      { '{"a":1,}', "byte 8: expected a string key" },
      { '{"a" 1}', "byte 6: expected ':'" },
      { '{"a":1 "b":2}', "byte 8: expected ',' or '}'" },
      { '{"a":1,"a":2}', 'byte 8: duplicate key "a"' },
      { "{a:1}", "byte 2: expected a string key" },
      { '"abc', "byte 1: unterminated string" },
      { '"a\nb"', "byte 3: control character in string" },
      { '"\\x"', "byte 2: bad escape '\\x'" },
      { '"\\u12"', "byte 2: bad \\u escape" },
      { '"\\ud800"', "byte 2: unpaired surrogate in \\u escape" },
      { '"\\udc00"', "byte 2: unpaired surrogate in \\u escape" },
      { "1 2", "byte 3: trailing data after the JSON value" },
      { "{} x", "byte 4: trailing data after the JSON value" },
      { "// c\n1", "byte 1: unexpected character '/'" },
      { string.rep("[", 129) .. string.rep("]", 129), "byte 129: nesting deeper than 128" },
    }
    for _, b in ipairs(bad) do
      it(string.format("refuses %q with its position", b[1]:sub(1, 20)), function()
        local v, err = json.decode(b[1])
        assert.is_nil(v)
        assert.equal(b[2], err)
      end)
    end

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
    end)
  end)
end)
