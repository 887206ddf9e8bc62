--- Runs many flows concurrently on one thread: each flow is a coroutine, and client:request inside it yields
--- while its transfer is in flight; curl multi drives every transfer (no threads, no processes).
local math = require("retryfreeze.compat").math
local M = {}

-- Flows resumed between two passes over the transfers (client:_run(0)).
local PUMP_EVERY = 8

-- Waits up to 100 ms for transfers to finish and calls on_each(ticket) for each finished one, in order.
-- on_each runs Lua (a flow, an on_done callback) while the other transfers wait: every PUMP_EVERY tickets
-- they are driven again (client:_run(0)), and what finished meanwhile joins the list, so that a per-try
-- timeout or a deadline is noticed when it passes, not after a whole batch of flows.
local function drain(client, on_each)
  local done = client:_run(100)
  local k = 1
  while done[k] do
    on_each(done[k])
    if k % PUMP_EVERY == 0 then
      local more = client:_run(0)
      table.move(more, 1, #more, #done + 1, done)
    end
    k = k + 1
  end
end

-- After a raise (an on_done callback's, a client method's, memory), the requests still in flight would be dropped with
-- their boxes and never get a ledger line: each is ended now (client:_cancel: stopped-by-caller, its line written).
-- pending maps a ticket to what box_of finds its box in.
local function cancel_all(client, pending, box_of)
  for _, v in pairs(pending) do client:_cancel(box_of(v)) end
end

--- Runs `count` flows with at most `concurrency` in flight.
-- @param client a retryfreeze client (its on_attempt hooks are not available inside scheduled flows)
-- @param count integer: flows to run, flow(i) for i = 1..count
-- @param concurrency integer >= 1
-- @param flow function(i): makes requests with client:request (each yields until done)
-- @param on_done function(i, ok, err)|nil: called as each flow ends (ok false with the error when it raised)
-- @return integer: flows that raised an error. What on_done raises is raised again, after every request still in
--   flight has ended as stopped-by-caller with its ledger line (client:_cancel)
function M.run(client, count, concurrency, flow, on_done)
  assert(math.type(count) == "integer" and count >= 0, "count must be an integer >= 0")
  assert(math.type(concurrency) == "integer" and concurrency >= 1, "concurrency must be an integer >= 1")
  local waiting = {} -- ticket (light userdata) → {co, i, box}
  local next_i, failed = 1, 0

  local function finish(i, ok, err)
    if not ok then failed = failed + 1 end
    if on_done then on_done(i, ok, err) end
  end

  local function step(co, i, resp)
    local ok, ticket, box = coroutine.resume(co, resp)
    if not ok then
      finish(i, false, ticket)
    elseif coroutine.status(co) == "dead" then
      finish(i, true)
    elseif type(ticket) == "userdata" then
      waiting[ticket] = { co, i, box }
      return
    else
      finish(i, false, "flow " .. i .. " yielded something other than a request")
    end
  end

  local function spawn()
    local i = next_i
    next_i = next_i + 1
    step(coroutine.create(function() flow(i) end), i)
  end

  local function resume(ticket)
    local w = waiting[ticket]
    waiting[ticket] = nil
    step(w[1], w[2], client:_finish(w[3]))
  end

  client:_set_scheduled(true)
  local ok, err = pcall(function()
    while next_i <= count and client:in_flight() < concurrency do spawn() end
    while client:in_flight() > 0 do
      drain(client, resume)
      while next_i <= count and client:in_flight() < concurrency do spawn() end
    end
  end)
  client:_set_scheduled(false)
  if not ok then
    cancel_all(client, waiting, function(w) return w[3] end)
    error(err, 0)
  end
  return failed
end

local function start_one(client, request, i, box) return client:_start(request(i), box) end

--- Runs `count` flows of one request each whose response nobody reads (soak's default flow), without a
--- coroutine per flow: request(i) returns flow i's request table, client:_start sends it, and its response
--- table is never built. The same as run(client, count, concurrency, function(i) client:request(request(i)) end,
--- on_done) for such flows, at a fraction of the Lua work per request.
-- @param client a retryfreeze client (no on_attempt hook: raises as in scheduled flows)
-- @param count integer: flows to run, i = 1..count
-- @param concurrency integer >= 1: requests in flight at most
-- @param request function(i) → request table (as for client:request); it may return the same table each time
--   (the client keeps its own references to the strings it sends)
-- @param on_done function(i, ok, err)|nil: called as each flow ends (ok false with the error when request(i)
--   raised or the request was refused)
-- @return integer: flows that raised an error. What on_done raises is raised again, after every request still in
--   flight has ended as stopped-by-caller with its ledger line (client:_cancel)
function M.run_requests(client, count, concurrency, request, on_done)
  assert(math.type(count) == "integer" and count >= 0, "count must be an integer >= 0")
  assert(math.type(concurrency) == "integer" and concurrency >= 1, "concurrency must be an integer >= 1")
  assert(type(request) == "function", "request must be a function(i) returning a request table")
  local boxes, flow_of = {}, {} -- ticket (light userdata) → its box, → its flow number
  -- Finished boxes, each carrying a later request (client:_start(request, box)): no new box per request.
  local spare, n_spare = {}, 0
  local next_i, failed = 1, 0

  local function finish(i, ok, err)
    if not ok then failed = failed + 1 end
    if on_done then on_done(i, ok, err) end
  end

  local function start()
    local i = next_i
    next_i = next_i + 1
    local reuse = spare[n_spare]
    if reuse then spare[n_spare], n_spare = nil, n_spare - 1 end
    local ok, ticket, box = pcall(start_one, client, request, i, reuse)
    if ok then
      boxes[ticket], flow_of[ticket] = box, i
    else
      finish(i, false, ticket)
    end
  end

  local function finished(ticket)
    local box, i = boxes[ticket], flow_of[ticket]
    boxes[ticket], flow_of[ticket] = nil, nil
    client:_finish(box, false)
    n_spare = n_spare + 1
    spare[n_spare] = box
    finish(i, true)
  end

  local ok, err = pcall(function()
    while next_i <= count and client:in_flight() < concurrency do start() end
    while client:in_flight() > 0 do
      drain(client, finished)
      while next_i <= count and client:in_flight() < concurrency do start() end
    end
  end)
  if not ok then
    cancel_all(client, boxes, function(box) return box end)
    error(err, 0)
  end
  return failed
end

--- Runs soak's default flow from C: `count` flows of one request each, made from a template, whose response
--- nobody reads. Flow i sends routes[(i - 1) % #routes + 1]: its method, the path its pieces make with i between
--- each two (`table.concat(pieces, i)`), and the idempotency key `key_prefix .. i`. The same requests, retries and
--- ledger lines as run_requests with a request function making those tables, without any Lua per request
--- (client:_run_generated); the client is busy meanwhile (its methods raise, also from on_progress).
-- @param client a retryfreeze client (no on_attempt hook, no scheduled requests in flight: raises)
-- @param count integer >= 0: flows to run, i = 1..count
-- @param concurrency integer 1..4096: requests in flight at most
-- @param routes array of {method = string, pieces = {string, ...}} (at least one piece)
-- @param key_prefix string: each request's idempotency key is key_prefix .. i
-- @param on_progress function(done)|nil: called every 64 flows and after the last
-- @return integer, table: flows whose request was refused, and the first three of their messages
--   ("flow i: client:request: ...")
function M.run_generated(client, count, concurrency, routes, key_prefix, on_progress)
  assert(math.type(count) == "integer" and count >= 0, "count must be an integer >= 0")
  assert(math.type(concurrency) == "integer" and concurrency >= 1, "concurrency must be an integer >= 1")
  return client:_run_generated{ routes = routes, key_prefix = key_prefix, count = count,
    concurrency = concurrency, on_progress = on_progress }
end

return M
