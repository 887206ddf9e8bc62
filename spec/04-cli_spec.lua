local h = require "spec.helper"

describe("retryfreeze check", function()
  it("validates a lock, prints the digest and the effective policy, exits 0", function()
    local out, _, code = h.run_cli("check", h.desk_lock)
    assert.equal(0, code)
    assert.matches("^ok: examples/retry%-budget%.lock%.json\ndigest: sha256:%x+\n", out)
    assert.matches('"minAttemptMs":%s*200', out)
    assert.matches('"idempotencyRequired":%s*%["DELETE", "PATCH", "POST"%]', out)
  end)

  it("prints the error and exits 2 on an invalid lock", function()
    local path = h.temp_file('{"endpoint":"GET /a","maxAttempts":0}')
    local out, err, code = h.run_cli("check", path)
    os.remove(path)
    assert.equal(2, code)
    assert.equal("", out)
    assert.equal("retryfreeze check: invalid lock: " .. path .. ": $.maxAttempts: must be an integer from 1 to 10, got 0\n", err)
  end)

  it("exits 2 on bad usage and 0 on --help", function()
    local _, _, code = h.run_cli("check")
    assert.equal(2, code)
    local out
    out, _, code = h.run_cli("check", "--help")
    assert.equal(0, code)
    assert.matches("^usage: retryfreeze check LOCK", out)
    _, _, code = h.run_cli("frobnicate")
    assert.equal(2, code)
    out, _, code = h.run_cli("--help")
    assert.equal(0, code)
    assert.matches("check", out)
    assert.matches("decide", out)
  end)

  it("prints the version", function()
    local out, _, code = h.run_cli("--version")
    assert.equal(0, code)
    assert.equal("retryfreeze " .. require("retryfreeze").VERSION .. "\n", out)
  end)
end)

describe("retryfreeze decide", function()
  it("prints the verdict as one JSON line", function()
    local out, _, code = h.run_cli("decide", h.desk_lock, "--method", "POST", "--path", "/v1/jobs",
      "--status", "429", "--retry-after", "1", "--idempotency-key", "k", "--elapsed-ms", "100")
    assert.equal(0, code)
    assert.equal('{"retry":true,"reason":"pinned-status","class":"HTTP_429","delay_ms":1000,"timeout_ms":1400,'
      .. '"retry_after":"honored","route":"POST /v1/jobs"}\n', out)
  end)

  it("is deterministic with --seed", function()
    local args = { "decide", h.desk_lock, "--method", "POST", "--path", "/v1/jobs", "--status", "504",
      "--idempotency-key", "k", "--seed", "5" }
    local a = h.run_cli(table.unpack(args))
    local b = h.run_cli(table.unpack(args))
    assert.equal(a, b)
    assert.matches('"retry":true', a)
  end)

  it("exits 2 on a bad fact or a missing option", function()
    local _, err, code = h.run_cli("decide", h.desk_lock, "--method", "POST", "--path", "/v1/jobs",
      "--transport", "boom")
    assert.equal(2, code)
    assert.matches("^retryfreeze decide: %-%-transport must be one of ok, timeout", err)
    _, err, code = h.run_cli("decide", h.desk_lock, "--method", "POST")
    assert.equal(2, code)
    assert.matches("expected LOCK, %-%-method and %-%-path", err)
    -- valid options but two positional arguments: a usage error, not a crash
    _, err, code = h.run_cli("decide", h.desk_lock, "extra", "--method", "POST", "--path", "/x")
    assert.equal(2, code)
    assert.matches("^retryfreeze decide: expected LOCK, %-%-method and %-%-path\nusage:", err)
    _, err, code = h.run_cli("decide", h.desk_lock, "--method", "POST", "--path", "/x", "--status", "abc")
    assert.equal(2, code)
    assert.matches("needs an integer", err)
  end)
end)
