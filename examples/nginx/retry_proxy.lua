--- An nginx (lua-nginx-module, LuaJIT) handler that proxies to an upstream through rf.flow: each attempt is
--- one HTTP/1.1 exchange on a cosocket (ngx.socket.tcp) from the worker's keep-alive pool, bounded by the attempt's
--- per-try timeout; waits are ngx.sleep, times are rf.monotonic_ms, and every request is one ledger line.
--- The master loads and validates the lock and opens the ledger when nginx loads its configuration
--- (init_by_lua*): a bad lock fails the start with the lock's error, and the workers inherit the policy and the
--- ledger's descriptor, so they append to it after dropping root's privileges.
--- Per-worker state: each nginx worker has its own jitter RNG and retry budget (init_worker_by_lua*); a retry
--- budget throttles the retries of one worker only. For one bucket across workers and hosts, give the lock
--- retryBudget.shared and use rf.retry_budget(policy, {redis = URL}) here (docs/fleet.md). Each worker also holds
--- its ledger lines and writes them in batches (ledger:hold), within ledger_flush_ms and whenever it exits.
local rf = require "retryfreeze"

local M = {}

local ngx = ngx
local tcp, sleep, log, ERR, now_ms = ngx.socket.tcp, ngx.sleep, ngx.log, ngx.ERR, rf.monotonic_ms
local find, sub, lower, match, byte = string.find, string.sub, string.lower, string.match, string.byte
local pairs, tonumber, tostring, type, concat = pairs, tonumber, tostring, type, table.concat
local var, exiting, flow = ngx.var, ngx.worker.exiting, rf.flow
local get_method, read_body, get_body_data, get_body_file, get_headers =
  ngx.req.get_method, ngx.req.read_body, ngx.req.get_body_data, ngx.req.get_body_file, ngx.req.get_headers

-- The options of M.init besides lock, ledger, upstream_host and upstream_port: {name, default, min, max}.
local OPTIONS = {
  -- How long an idle upstream connection stays in the worker's pool: keep it below the upstream's own keep-alive
  -- timeout, so that the upstream never closes a connection the worker is about to send on.
  { "keepalive_timeout_ms", 10000, 1, 3600000 },
  -- Most idle upstream connections each worker keeps.
  { "keepalive_pool", 64, 1, 10000 },
  -- Ledger lines a worker holds, in bytes, before it writes them in one write(2); 0 writes each line at once.
  { "ledger_hold_bytes", 65536, 0, rf.ledger.BATCH_BYTES },
  -- Longest a held ledger line waits before the worker writes it (a timer); the worker also writes its held
  -- lines as it exits (nginx -s quit, -s reload, SIGTERM: exit_worker_by_lua_block calls M.exit_worker).
  { "ledger_flush_ms", 200, 1, 60000 },
}

-- Most bytes of a response head (the status line and the header fields) read before the attempt fails as "other".
local HEAD_MAX = 65536
-- Bytes asked of the socket per read: the head and a small body come in one read.
local READ_BYTES = 16384

local shared -- {policy=, ledger=, host=, port=, options…}: made by the master (M.init), inherited by every worker
local worker -- {io=}: this worker's own (M.init_worker): rf.flow's io with its RNG and retry budget

-- The response header fields the proxy reads: the framing ones, and those rf.flow decides on (Date, the wait headers
-- the engine knows, rf.wait_headers, and each route's propagation.overloadedHeader: M.init). No other field becomes a
-- string: the answer carries the upstream's body alone.
local READ_FIELDS, READ_LENGTHS = {}, {} -- READ_LENGTHS: a field of another length is skipped without a string made
local function read_field(name)
  READ_FIELDS[name], READ_LENGTHS[#name] = true, true
end
for _, name in ipairs({ "content-length", "transfer-encoding", "connection", "date" }) do read_field(name) end
for _, name in ipairs(rf.wait_headers) do read_field(name) end

--- Called from init_by_lua_block, in the master, as nginx loads its configuration: loads and validates the lock and
--- opens the ledger, raising the lock's or the ledger's error (or a bad option's), which fails the start with that
--- message.
-- @param opts {lock=path, ledger=path, upstream_host=, upstream_port=, keepalive_timeout_ms=, keepalive_pool=,
--   ledger_hold_bytes=, ledger_flush_ms=} (the last four: integers, see OPTIONS for their ranges and defaults)
function M.init(opts)
  local policy, why = rf.load(opts.lock)
  if not policy then error(why, 0) end -- "PATH: $.json.path: message"
  local ledger, lerr = rf.ledger.open(opts.ledger)
  if not ledger then error(lerr, 0) end
  -- The header each route with propagation tells its caller with, when it stops after retrying (docs/lock.md);
  -- the response's copy of it is one rf.flow decides on, so the head parser reads it too.
  local tells, propagates = {}, false
  for _, route in ipairs(policy:routes()) do
    if route.propagation then
      tells[route.endpoint], propagates = route.propagation.overloaded_header, true
      read_field(route.propagation.overloaded_header)
    end
  end
  shared = { policy = policy, ledger = ledger, host = opts.upstream_host, port = opts.upstream_port, tells = tells,
             propagates = propagates }
  for _, o in ipairs(OPTIONS) do
    local name, value = o[1], opts[o[1]]
    if value == nil then value = o[2] end
    if type(value) ~= "number" or value % 1 ~= 0 or value < o[3] or value > o[4] then
      error(("retry_proxy.init: %s must be an integer from %d to %d, got %s"):format(name, o[3], o[4],
        tostring(value)), 0)
    end
    shared[name] = value
  end
  -- The pool's name given, so that connect does not build it from host and port for every attempt.
  shared.pool = { pool = "retry_proxy:" .. shared.host .. ":" .. tostring(shared.port), pool_size = shared.keepalive_pool }
  shared.host_line = "\r\nHost: " .. shared.host .. "\r\n"
end

-- Writes the ledger lines this worker holds; logs what was lost when the write failed.
local function flush_ledger()
  local ok, err = shared.ledger:flush()
  if not ok then log(ERR, "retry_proxy: ledger: ", err) end
end

-- Transport outcomes (rf.transports) of cosocket errors.
local function transport_of(err)
  if err == "timeout" then return "timeout" end
  if find(err, "refused", 1, true) then return "connect-refused" end
  if find(err, "reset", 1, true) or err == "closed" then return "connect-reset" end
  return "other"
end

-- A failed attempt: the socket is closed (never pooled: its state is unknown).
local function failed(sock, transport, err, extra)
  sock:close()
  local res = extra or {}
  res.transport, res.error = transport, err
  return res
end

-- Reads more of the response into buf within the attempt's deadline: buf .. more, or nil, err.
local function read_more(sock, buf, deadline)
  local left = deadline - now_ms()
  sock:settimeout(left < 1 and 1 or left)
  local more, err = sock:receiveany(READ_BYTES)
  if not more then return nil, err end
  return buf .. more
end

-- A chunked body (RFC 9112 §7.1) that starts at buf[pos]: the body, and whether bytes followed it; or nil, err.
-- Trailer fields are read and dropped.
local function read_chunked(sock, buf, pos, deadline)
  local parts, n = {}, 0
  while true do
    local e = find(buf, "\r\n", pos, true)
    while not e do -- the chunk-size line
      if #buf - pos > 1024 then return nil, "malformed chunk size line" end
      local err
      buf, err = read_more(sock, sub(buf, pos), deadline)
      if not buf then return nil, err end
      pos = 1
      e = find(buf, "\r\n", pos, true)
    end
    local size = tonumber(match(buf, "^%x+", pos) or "", 16)
    if not size then return nil, "malformed chunk size line" end
    pos = e + 2
    if size == 0 then -- the last chunk, then trailer fields up to an empty line
      while true do
        e = find(buf, "\r\n", pos, true)
        if e then
          if e == pos then return concat(parts), e + 2 <= #buf end
          pos = e + 2
        else
          if #buf - pos > HEAD_MAX then return nil, "trailer section over " .. HEAD_MAX .. " bytes" end
          local err
          buf, err = read_more(sock, sub(buf, pos), deadline)
          if not buf then return nil, err end
          pos = 1
        end
      end
    end
    local have = #buf - pos + 1
    if have < size + 2 then -- the rest of the chunk and its CRLF, read exactly
      local left = deadline - now_ms()
      sock:settimeout(left < 1 and 1 or left)
      local rest, err = sock:receive(size + 2 - have)
      if not rest then return nil, err end
      buf, pos = sub(buf, pos) .. rest, 1
    end
    if sub(buf, pos + size, pos + size + 1) ~= "\r\n" then return nil, "malformed chunk" end
    n = n + 1
    parts[n] = sub(buf, pos, pos + size - 1)
    pos = pos + size + 2
  end
end

-- The response's status line and header fields from buf, whose head ends at head_end (where "\r\n\r\n" starts):
-- status, headers {lowercase name = first value, trimmed} of the READ_FIELDS, and how the body is framed
-- (Content-Length, chunked, close: RFC 9112 §6.3); or nil for a malformed head. Plain searches and byte reads only.
local function parse_head(buf, head_end)
  if sub(buf, 1, 7) ~= "HTTP/1." or byte(buf, 9) ~= 32 then return nil end -- "HTTP/1.x NNN"
  local minor, _, d1, d2, d3, after = byte(buf, 8, 13) -- a head holds "\r\n\r\n" past the status code's digits
  if not (d1 >= 49 and d1 <= 53 and d2 >= 48 and d2 <= 57 and d3 >= 48 and d3 <= 57) or (after ~= 32 and after ~= 13)
  then
    return nil -- three digits, 100..599
  end
  local code = (d1 - 48) * 100 + (d2 - 48) * 10 + d3 - 48
  local headers, length, chunked, close = {}, nil, false, minor == 48 -- HTTP/1.0 closes unless it says keep-alive
  local pos = find(buf, "\r\n", 1, true) + 2
  while pos <= head_end do
    local eol = find(buf, "\r\n", pos, true)
    local colon = find(buf, ":", pos, true)
    local name = colon and colon < eol and colon > pos and READ_LENGTHS[colon - pos] and lower(sub(buf, pos, colon - 1))
    if name and READ_FIELDS[name] then -- else another field, or none (obs-fold): skipped
      local from, to = colon + 1, eol - 1
      local c = byte(buf, from)
      while from <= to and (c == 32 or c == 9) do
        from = from + 1
        c = byte(buf, from)
      end
      c = byte(buf, to)
      while to >= from and (c == 32 or c == 9) do
        to = to - 1
        c = byte(buf, to)
      end
      local value = sub(buf, from, to)
      if headers[name] == nil then headers[name] = value end
      if name == "content-length" then -- digits only; a second one that differs fails the head
        local n = not find(value, "[^0-9]") and tonumber(value)
        if not n or (length and n ~= length) then return nil end
        length = n
      elseif name == "transfer-encoding" then
        chunked = find(lower(value), "chunked", 1, true) ~= nil
      elseif name == "connection" then
        local v = lower(value)
        if find(v, "close", 1, true) then close = true elseif find(v, "keep-alive", 1, true) then close = false end
      end
    end
    pos = eol + 2
  end
  return code, headers, length, chunked, close
end

-- The request's bytes, as a table sock:send joins in C: the request line, Host, the attempt's header fields,
-- Content-Length and the body.
local function request_parts(attempt)
  local body = attempt.body or ""
  local parts = { attempt.method, " ", attempt.path, "", "", " HTTP/1.1", shared.host_line }
  if attempt.query then parts[4], parts[5] = "?", attempt.query end
  local n = 7
  for name, value in pairs(attempt.headers) do
    parts[n + 1], parts[n + 2], parts[n + 3], parts[n + 4] = name, ": ", value, "\r\n"
    n = n + 4
  end
  if body ~= "" or attempt.method == "POST" or attempt.method == "PUT" then
    parts[n + 1], parts[n + 2], n = "Content-Length: ", tostring(#body), n + 2
    parts[n + 1] = "\r\n\r\n"
  else
    parts[n + 1] = "\r\n"
  end
  parts[n + 2] = body
  return parts
end

-- One attempt on a pooled connection (a new one when the pool has none): the request, then the response's status,
-- headers and body (Content-Length, chunked, or up to the close). The connection goes back to the pool when the
-- response was read whole and both sides keep it open; every read is bounded by the attempt's per-try deadline. A
-- failure on a pooled connection is the attempt's, as on a new one: the request may have reached the upstream, so
-- it is never sent again behind the flow's back (the flow decides, and the ledger counts what the upstream saw).
local function send(attempt)
  local timeout = attempt.timeout_ms
  local deadline = now_ms() + timeout
  local sock = tcp()
  sock:settimeouts(timeout, timeout, timeout)
  local ok, err = sock:connect(shared.host, shared.port, shared.pool)
  if not ok then return { transport = transport_of(err), error = err, not_sent = true } end
  local _, serr = sock:send(request_parts(attempt))
  if serr then return failed(sock, transport_of(serr), serr) end
  local buf, rerr = sock:receiveany(READ_BYTES)
  if not buf then return failed(sock, rerr == "closed" and "got-nothing" or transport_of(rerr), rerr) end
  local status, headers, length, chunked, close
  while true do
    local head_end = find(buf, "\r\n\r\n", 1, true)
    while not head_end do
      if #buf > HEAD_MAX then return failed(sock, "other", "response head over " .. HEAD_MAX .. " bytes") end
      local more
      more, rerr = read_more(sock, buf, deadline)
      if not more then return failed(sock, transport_of(rerr), rerr) end
      head_end = find(more, "\r\n\r\n", #buf > 3 and #buf - 2 or 1, true) -- it may straddle the two reads
      buf = more
    end
    status, headers, length, chunked, close = parse_head(buf, head_end)
    if not status then return failed(sock, "other", "malformed response head") end
    buf = sub(buf, head_end + 4)
    if status >= 200 or status == 101 then break end
    if buf == "" then -- an interim 1xx response (RFC 9110 §15.2): the final one follows
      buf, rerr = read_more(sock, buf, deadline)
      if not buf then return failed(sock, transport_of(rerr), rerr) end
    end
  end
  local body, berr, partial
  local extra = false
  if attempt.method == "HEAD" or status == 204 or status == 304 then
    body, extra = "", buf ~= ""
  elseif chunked then
    local more_bytes
    body, more_bytes = read_chunked(sock, buf, 1, deadline)
    if body then extra = more_bytes else berr = more_bytes end
  elseif length then
    if #buf >= length then
      body, extra = sub(buf, 1, length), #buf > length
    else
      local left = deadline - now_ms()
      sock:settimeout(left < 1 and 1 or left)
      local rest
      rest, berr, partial = sock:receive(length - #buf)
      body, partial = rest and buf .. rest, buf .. (partial or "")
    end
  else -- delimited by the close (RFC 9112 §6.3)
    close = true
    local left = deadline - now_ms()
    sock:settimeout(left < 1 and 1 or left)
    local rest
    rest, berr, partial = sock:receive("*a")
    body, partial = rest and buf .. rest, buf .. (partial or "")
  end
  if not body then return failed(sock, transport_of(berr), berr, { status = 0, body = partial }) end
  if close or extra or not sock:setkeepalive(shared.keepalive_timeout_ms, shared.keepalive_pool) then sock:close() end
  return { status = status, transport = "ok", headers = headers, body = body }
end

--- Called from init_worker_by_lua_block: this worker's RNG, retry budget and rf.flow io; the worker holds its ledger
--- lines (ledger_hold_bytes > 0) and writes them every ledger_flush_ms.
function M.init_worker()
  if not shared then error("retry_proxy.init_worker: call retry_proxy.init{…} from init_by_lua_block first", 0) end
  -- A retry budget only when the lock has one (rf.retry_budget refuses a lock without retryBudget).
  local budget = shared.policy.retry_budget and rf.retry_budget(shared.policy) or nil
  worker = {
    io = { send = send, sleep = function(ms) sleep(ms / 1000) end, now_ms = now_ms, ledger = shared.ledger,
           rng = rf.rng(ngx.worker.pid()), retry_budget = budget },
  }
  if shared.ledger_hold_bytes > 0 then
    -- The worker's own copy of the ledger (forked from the master's) holds the lines this worker appends.
    assert(shared.ledger:hold(shared.ledger_hold_bytes))
    -- premature: the worker is exiting (its last flush is M.exit_worker's); either way the lines go out now.
    local ok, err = ngx.timer.every(shared.ledger_flush_ms / 1000, flush_ledger)
    if not ok then error("retry_proxy.init_worker: cannot start the ledger's flush timer: " .. tostring(err), 0) end
  end
end

--- Called from exit_worker_by_lua_block, as the worker exits (nginx -s quit, -s reload, SIGTERM): writes the ledger
--- lines it still holds.
function M.exit_worker()
  if shared then flush_ledger() end
end

--- content_by_lua_block: proxies this request to the upstream through rf.flow and answers with the last
--- attempt's status and body, plus X-Retryfreeze-Outcome, -Reason and -Attempts, and, when the route has
--- propagation and the flow stopped after retrying, its overloaded header (x-envoy-overloaded: true). A request body
--- nginx spooled to a file (over client_body_buffer_size) is refused with 413 and an error-log line naming the
--- setting: the proxy sends bodies from memory, and never sends a request without the body its client sent.
function M.handle()
  if not worker then
    error("retry_proxy: this worker has no RNG and retry budget: init_worker_by_lua_block did not run, or failed "
      .. "(see the error log)", 0)
  end
  -- The inbound fields are read one by one (ngx.var.http_*: the first of repeated fields), not as a table of all;
  -- only a lock with propagation takes the caller's headers as a table (inbound_headers: their deadline and attempt
  -- number narrow this layer's, never widen them, and what goes upstream is this layer's own: docs/embedding.md).
  local body
  if var.http_content_length or var.http_transfer_encoding then
    read_body()
    body = get_body_data()
    if not body and get_body_file() then
      log(ERR, "retry_proxy: the request body is over client_body_buffer_size; raise it to client_max_body_size")
      return ngx.exit(413)
    end
  end
  local script = var.http_x_fault_script -- the test upstream's fault script, passed through
  local r = flow(shared.policy, { method = get_method(), path = var.uri, query = var.args, body = body,
                                  idempotency_key = var.http_idempotency_key,
                                  headers = script and { ["X-Fault-Script"] = script } or nil,
                                  inbound_headers = shared.propagates and get_headers() or nil }, worker.io)
  if r.ledger_error then log(ERR, "retry_proxy: ledger: ", r.ledger_error) end
  if exiting() then flush_ledger() end -- past the timer's last run: this line goes out now
  ngx.status = r.status > 0 and r.status or 502
  local header = ngx.header
  header["X-Retryfreeze-Outcome"] = r.outcome
  header["X-Retryfreeze-Reason"] = r.reason
  header["X-Retryfreeze-Attempts"] = r.attempts
  header["Content-Length"] = #r.body
  -- retried here already (or shed below): the caller, told so, does not retry it again
  if r.overloaded and r.route and shared.tells[r.route] then header[shared.tells[r.route]] = "true" end
  ngx.print(r.body)
end

return M
