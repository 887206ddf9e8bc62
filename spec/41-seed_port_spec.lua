-- The benches' port of seed 001's classifier (bench/lua/seed001_classifier.lua) against what it claims in its header
-- and in the docs that quote ratios against it (bench/README.md, docs/lua.md, README "Performance"): the seed's
-- pinned cases, Retry-After read as the engine reads it, and the engine's verdicts on the bench's 32-fact mix
-- (bench/lua/seed001_mix.lua) wherever their rules overlap. A port that decided less than it says would make the
-- ratios measured against it say more than they do. Every case runs over both of its Retry-After parsers
-- ("patterns", the default, and "bytes"): the benches time both, so both must decide the same.
local rf = require "retryfreeze"
local h = require "spec.helper"

local port = dofile("bench/lua/seed001_classifier.lua")
local now = 784111777000 -- Sun, 06 Nov 1994 08:49:37 GMT
local later = 2846188800000 -- 2060-03-11T00:00:00Z: the RFC 850 year resolved against another reference

describe("the port of seed 001's classifier (bench/lua/seed001_classifier.lua)", function()
  it("parses Retry-After with string patterns unless told otherwise, and refuses a parser it does not have", function()
    assert.equal(port.PARSERS.patterns, port.retry_after)
    assert.are_not.equal(port.PARSERS.patterns, port.PARSERS.bytes)
    local opts = { retryable = { "HTTP_503" }, max_attempts = 3, seed = 1 }
    assert.is_function(port.new(opts))
    for _, parse in ipairs({ "regex", "", false }) do
      opts.parse = parse
      local ok, err = pcall(port.new, opts)
      assert.is_false(ok)
      assert.matches(string.format('seed001_classifier.new: opts.parse must be "patterns" or "bytes", got %q',
        tostring(parse)), err, 1, true)
    end
  end)
end)

for _, parse in ipairs({ "patterns", "bytes" }) do
  --- The seed's classifier with its pinned statuses, its maxAttempts 3 (four tries) and the default cap.
  local function seed001()
    return port.new({ retryable = port.SEED001_PINNED.retryable, not_retryable = port.SEED001_PINNED.not_retryable,
      max_attempts = 3, base_ms = 100, max_ms = 10000, seed = 1, parse = parse })
  end

  describe("the port of seed 001's classifier, Retry-After parsed with " .. parse, function()
    it("decides seed 001's pinned cases: a keyed 503 retries, a POST without a key stops, 404 and 409 never retry",
      function()
        local decide = seed001()
        local v = decide({ method = "POST", status = 503, idempotency_key = "k", attempts = 1 })
        assert.is_true(v.retry)
        assert.equal("retryable", v.reason)
        assert.equal("HTTP_503", v.class)
        assert.is_true(v.delay_ms >= 0 and v.delay_ms <= 100, "full jitter over 100 ms, got " .. v.delay_ms)
        assert.same({ retry = false, reason = "mutating-without-idempotency", delay_ms = 0, class = "HTTP_503" },
          decide({ method = "POST", status = 503, attempts = 1 }))
        assert.same({ retry = false, reason = "mutating-without-idempotency", delay_ms = 0, class = "HTTP_503" },
          decide({ method = "POST", status = 503, idempotency_key = "", attempts = 1 }))
        assert.is_true(decide({ method = "GET", status = 503, attempts = 1 }).retry, "a GET needs no key")
        for _, status in ipairs({ 404, 409 }) do
          for attempts = 1, 3 do -- within the seed's count: the class stops them
            assert.same({ retry = false, reason = "status-not-retryable", delay_ms = 0, class = "HTTP_" .. status },
              decide({ method = "GET", status = status, idempotency_key = "k", attempts = attempts }))
          end
        end
      end)

    it("fails closed on an unpinned source: any source but exactly \"pinned-map\", the empty one included", function()
      local decide = seed001()
      for _, source in ipairs({ "llm", "", "pinned-map ", "PINNED-MAP" }) do
        assert.same({ retry = false, reason = "unpinned-source", delay_ms = 0, class = "HTTP_503" },
          decide({ method = "POST", status = 503, idempotency_key = "k", source = source }), source)
      end
      assert.is_true(decide({ method = "POST", status = 503, idempotency_key = "k", source = "pinned-map" }).retry)
    end)

    it("counts attempts from 0: its maxAttempts 3 gives four tries, then stops with budget-exhausted", function()
      local decide = seed001()
      for attempts = 1, 3 do -- the seed's counter 0, 1, 2
        assert.is_true(decide({ method = "GET", status = 503, attempts = attempts }).retry, "attempts " .. attempts)
      end
      for attempts = 4, 6 do
        assert.same({ retry = false, reason = "budget-exhausted", delay_ms = 0, class = "HTTP_503" },
          decide({ method = "GET", status = 503, attempts = attempts }))
      end
    end)

    it("honours Retry-After \"3\" as 3000 ms and stops on \"9999\", over its cap", function()
      local decide = seed001()
      assert.same({ retry = true, reason = "retryable", delay_ms = 3000, class = "HTTP_503", retry_after = "honored" },
        decide({ method = "POST", status = 503, idempotency_key = "k", retry_after = "3" }))
      assert.same({ retry = false, reason = "retry-after-too-long", delay_ms = 0, class = "HTTP_503",
        retry_after = "honored" }, decide({ method = "POST", status = 503, idempotency_key = "k", retry_after = "9999" }))
      local capped = port.new({ retryable = { "HTTP_503" }, max_attempts = 3, retry_after_max_ms = 3000, base_ms = 100,
        max_ms = 10000, seed = 1, parse = parse })
      assert.equal(3000, capped({ method = "GET", status = 503, retry_after = "3" }).delay_ms, "the cap itself is allowed")
      assert.equal("retry-after-too-long", capped({ method = "GET", status = 503, retry_after = "4" }).reason)
      local deaf = port.new({ retryable = { "HTTP_503" }, max_attempts = 3, honor_retry_after = false, base_ms = 100,
        max_ms = 100, seed = 1, parse = parse })
      local v = deaf({ method = "GET", status = 503, retry_after = "9999" })
      assert.is_true(v.retry and v.delay_ms <= 100 and v.retry_after == nil, "retryAfter.honor false: the backoff")
      v = decide({ method = "GET", status = 503, retry_after = "soon" })
      assert.is_true(v.retry and v.delay_ms <= 100)
      assert.equal("ignored-invalid", v.retry_after)
    end)

    -- RFC 9110 §10.2.3 as core/src/engine/retry_after.c reads it: every value here, against now and a Date or not,
    -- gives the port the engine's answer (rf.parse_retry_after: uncapped, so the port's cap is out of reach here).
    it("reads Retry-After as the engine does: delay-seconds and the three HTTP-date forms, against Date or now", function()
      local values = { "0", "1", "3", "007", "9999", " 1 ", "\t2\t", "", "  ", "1.5", "-1", "+1", "1a", "soon", "1 2",
        "99999999999999999999",
        "Sun, 06 Nov 1994 08:49:38 GMT", "Sun, 06 Nov 1994 08:49:37 GMT", "Sat, 05 Nov 1994 08:49:37 GMT",
        "Mon, 07 Nov 1994 08:49:37 GMT", "  Sun, 06 Nov 1994 08:49:38 GMT\t", "Wed, 29 Feb 1996 00:00:00 GMT",
        "Thu, 29 Feb 1995 00:00:00 GMT", "Sun, 31 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 23:59:60 GMT", "Sun, 06 Nov 1994 23:60:00 GMT", "sun, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun,  06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT ", "Sun, 00 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 0000 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT",
        "Sunday, 06-Nov-94 08:49:39 GMT", "Sunday, 06-Nov-44 08:49:39 GMT", "Sunday, 06-Nov-44 08:49:36 GMT",
        "Wednesday, 01-Jan-45 00:00:00 GMT", "Tuesday, 29-Feb-00 00:00:00 GMT", "Monday, 29-Feb-01 00:00:00 GMT",
        "Funday, 06-Nov-94 08:49:37 GMT", "Sunday, 06-Nov-1994 08:49:37 GMT", "Sun, 06-Nov-94 08:49:37 GMT",
        "Sunday 06-Nov-94 08:49:37 GMT", "Sunday, 06 Nov 94 08:49:37 GMT",
        "Sun Nov  6 08:49:38 1994", "Sun Nov 06 08:49:38 1994", "Sun Nov 6 08:49:38 1994", "Sun Nov  6 08:49:38 94",
        "Sun Nov  x 08:49:38 1994", "Sun Nob  6 08:49:38 1994" }
      local dates = { false, "Sun, 06 Nov 1994 08:49:30 GMT", "Sunday, 06-Nov-94 08:49:30 GMT", "garbage", "" }
      local checked = 0
      for _, reference in ipairs({ now, later }) do
        for _, date in ipairs(dates) do
          for _, value in ipairs(values) do
            local where = string.format("Retry-After %q, Date %s, now_ms %d", value,
              date and string.format("%q", date) or "absent", reference)
            local ms, why = rf.parse_retry_after(value, reference, date or nil)
            local state, wait_ms = port.PARSERS[parse](value, date or nil, reference, 2 ^ 53)
            assert.equal(ms and "ok" or why, state, where)
            assert.equal(ms, wait_ms, where)
            checked = checked + 1
          end
        end
      end
      assert.equal(2 * #dates * #values, checked)
    end)

    -- The overlap: the facts' class in the route's lists, the attempt count (the seed's from 0, maxAttempts - 1), the
    -- idempotency key, an unpinned source, Retry-After and its cap. Outside it, the one rule of the engine the port
    -- leaves out that the mix reaches: the total deadline (totalBudgetMs, minAttemptMs). A fact the port retries with
    -- a wait that leaves less than minAttemptMs of the time left is one the engine stops on the deadline.
    it("decides the bench's 32-fact mix as policy:decide wherever their rules overlap", function()
      local policy = assert(rf.load(h.desk_lock))
      local route = policy:routes()[1]
      local decide = port.for_route(route, 1, parse)
      local mix = dofile("bench/lua/seed001_mix.lua")
      assert.equal(32, #mix)
      local with_retry_after, honored, overlap, deadline = 0, 0, 0, 0
      for i, facts in ipairs(mix) do
        local v, s = policy:decide(facts, rf.rng(i)), decide(facts)
        local where = string.format("fact %d (%s)", i, tostring(facts.retry_after or facts.status or facts.transport))
        if facts.retry_after ~= nil then with_retry_after = with_retry_after + 1 end
        local left = route.total_budget_ms - facts.elapsed_ms
        if s.retry and s.delay_ms + route.min_attempt_ms > left then
          deadline = deadline + 1
          assert.is_false(v.retry, where)
          assert.is_true(v.reason == "deadline" or v.reason == "retry-after-exceeds-budget", where .. ": " .. v.reason)
        else
          overlap = overlap + 1
          assert.equal(s.retry, v.retry, where)
          assert.equal(port.ENGINE_REASON[s.reason], v.reason, where)
          assert.equal(s.class, v.class, where)
          if s.retry_after ~= nil then
            assert.equal(s.retry_after, v.retry_after, where)
            if s.retry_after == "honored" then
              honored = honored + 1
              assert.equal(s.delay_ms, v.delay_ms, where)
            end
          end
        end
      end
      assert.equal(30, overlap)
      assert.equal(2, deadline)
      assert.equal(15, with_retry_after)
      assert.equal(10, honored)
    end)
  end)
end
