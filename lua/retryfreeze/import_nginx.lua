--- The nginx importer of `retryfreeze import --from nginx`: reads an nginx configuration (its tokenizer follows
--- ngx_conf_read_token: words, "double" and 'single' quoted strings, backslash escapes, `#` comments at the start
--- of a word, `;` `{` `}`, and `include` of the files it can read, relative to the main file's directory as nginx's
--- conf prefix) and writes the retry policy nginx's proxy module really applies, as a lock: a route per method of
--- each proxied prefix (`/v1/` → `GET /v1/*`, …) or exact (`= /health` → `GET /health`) location.
--- The rules, from ngx_http_upstream.c and ngx_http_upstream_round_robin.c:
---   * an attempt goes to the next server only for a failure `proxy_next_upstream` lists (default
---     `error timeout`), CLASSES below;
---   * a POST, LOCK or PATCH whose request was already sent is not passed on without `non_idempotent`: only the
---     failures before the request is sent (a refused connection, a TLS handshake, a connect timeout) are;
---   * round robin tries each server of the upstream at most once (the tries are the servers, `backup` ones
---     included, `down` ones never chosen), and `proxy_next_upstream_tries` (0: unlimited) caps them;
---   * `proxy_next_upstream_timeout` (0: unlimited) stops passing on after that time from the first attempt;
---   * nginx waits no backoff between attempts and ignores Retry-After;
---   * each directive is inherited from http to server to location, and one set below replaces the one above.
--- What it cannot evaluate (a regex or named location with proxy_pass, a variable in proxy_pass, a server name
--- whose addresses are resolved at start with unlimited tries, an include it cannot read, a rewrite or internal
--- redirect that moves requests between locations) is refused with the directive and its file:line.
local json = require "retryfreeze.json"

local M = {}

--- nginx's proxy_next_upstream conditions → the lock's failure classes (core/src/engine/vocabulary.c).
--- before_sent: the class can happen before the request is sent, so nginx passes even a POST on.
M.CLASSES = {
  error = { "CONNECT_REFUSED", "CONNECT_RESET", "TLS_FAILURE" }, -- connect, send or read of the header failed
  timeout = { "TIMEOUT" },                                        -- connect, send or read timed out
  invalid_header = { "UNKNOWN" },                                 -- an empty or invalid response header
  http_500 = { "HTTP_500" }, http_502 = { "HTTP_502" }, http_503 = { "HTTP_503" }, http_504 = { "HTTP_504" },
  http_403 = { "HTTP_403" }, http_404 = { "HTTP_404" }, http_429 = { "HTTP_429" },
  non_idempotent = {}, off = {},
}
--- The classes nginx passes on before the request is sent (request_sent is 0): what a POST may still retry.
--- TIMEOUT is here because a connect timeout is one; the lock has one TIMEOUT class, so the import is wider
--- for a read timeout of a POST, and says so.
M.BEFORE_SENT = { CONNECT_REFUSED = true, TLS_FAILURE = true, TIMEOUT = true }

--- The methods each location gets a route for, and those nginx calls non-idempotent (NGX_HTTP_POST|LOCK|PATCH).
M.METHODS = { "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "LOCK" }
M.NON_IDEMPOTENT = { POST = true, LOCK = true, PATCH = true }

--- nginx's defaults of the directives the import reads (ngx_http_proxy_module.c).
M.DEFAULTS = { next_upstream = { "error", "timeout" }, tries = 0, next_timeout_ms = 0,
  connect_ms = 60000, send_ms = 60000, read_ms = 60000 }

-- The lock's ranges the import must stay inside (docs/lock.md).
local MAX_ATTEMPTS, MAX_PER_TRY_MS, MAX_TOTAL_MS = 10, 600000, 3600000

local Refusal = {}
local REDIRECTS, check_redirect
local function refuse(code, fmt, ...) error(setmetatable({ code = code, text = string.format(fmt, ...) }, Refusal), 0) end
local function at(d) return d.file .. ":" .. d.line end

--- Tokenizes nginx configuration text into a tree of directives {name, args, file, line, block = children|nil}.
-- @param text string; file string: the name used in messages
-- @return array of directives; raises a refusal (code 2) naming file:line on a syntax error
function M.parse(text, file)
  local pos, line, n = 1, 1, #text
  local root = {}
  local stack = { root }
  local words, first_line = {}, nil
  local function fail(fmt, ...) refuse(2, "%s:%d: " .. fmt, file, line, ...) end
  local function unescape(w)
    return (w:gsub("\\(.)", function(c)
      if c == '"' or c == "'" or c == "\\" then return c end
      if c == "t" then return "\t" elseif c == "r" then return "\r" elseif c == "n" then return "\n" end
      return "\\" .. c
    end))
  end
  local function finish(block)
    if #words == 0 then fail("unexpected \"%s\"", block and "{" or ";") end
    local d = { name = words[1], args = {}, file = file, line = first_line }
    for i = 2, #words do d.args[i - 1] = words[i] end
    local list = stack[#stack]
    list[#list + 1] = d
    words, first_line = {}, nil
    if block then
      d.block = {}
      stack[#stack + 1] = d.block
    end
  end
  while pos <= n do
    local c = text:sub(pos, pos)
    if c == "\n" then
      line, pos = line + 1, pos + 1
    elseif c == " " or c == "\t" or c == "\r" then
      pos = pos + 1
    elseif c == "#" then
      local e = text:find("\n", pos, true) or n + 1
      pos = e
    elseif c == ";" then
      finish(false)
      pos = pos + 1
    elseif c == "{" then
      finish(true)
      pos = pos + 1
    elseif c == "}" then
      if #words > 0 then fail("unexpected \"}\"") end
      if #stack == 1 then fail("unexpected \"}\"") end
      stack[#stack] = nil
      pos = pos + 1
    else
      first_line = first_line or line
      local word
      if c == '"' or c == "'" then
        local i = pos + 1
        while true do
          local ch = text:sub(i, i)
          if ch == "" then fail("unexpected end of file in a %s-quoted string", c == '"' and "double" or "single") end
          if ch == "\\" then
            i = i + 2
          elseif ch == c then
            break
          else
            i = i + 1
          end
        end
        local raw = text:sub(pos + 1, i - 1)
        for _ in raw:gmatch("\n") do line = line + 1 end
        word, pos = unescape(raw), i + 1
        local after = text:sub(pos, pos)
        if not (after == "" or after:match("[%s;{)]")) then fail("unexpected \"%s\" after a quoted string", after) end
      else
        local i, brace = pos, false
        while i <= n do
          local ch = text:sub(i, i)
          if ch == "\\" then
            i = i + 2
          elseif ch == "{" and text:sub(i - 1, i - 1) == "$" then -- ${name}: a variable, not a block
            brace, i = true, i + 1
          elseif ch == "}" and brace then
            brace, i = false, i + 1
          elseif ch:match("[ \t\r\n;{]") then
            break
          else
            i = i + 1
          end
        end
        word, pos = unescape(text:sub(pos, i - 1)), i
      end
      words[#words + 1] = word
    end
  end
  if #words > 0 or #stack > 1 then
    fail("unexpected end of file, expecting \"%s\"", #words > 0 and ";\" or \"}" or "}")
  end
  return root
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return text
end

-- Replaces every `include` by the directives of the file it names (relative to prefix), recursively; a glob is
-- expanded in name order, as nginx does (ngx_open_glob). A file included twice in one chain is a loop.
local function expand(list, prefix, chain)
  local out = {}
  for _, d in ipairs(list) do
    if d.name == "include" then
      if #d.args ~= 1 then refuse(2, "%s: include takes one file, got %d arguments", at(d), #d.args) end
      local name = d.args[1]
      if name:find("$", 1, true) then refuse(1, "%s: include %s: a variable is not evaluated", at(d), name) end
      local path = name:sub(1, 1) == "/" and name or prefix .. name
      local paths = {}
      if path:find("[*?[]") then
        local ok, lfs = pcall(require, "lfs")
        local dir, pat = path:match("^(.*)/([^/]*)$")
        if not ok or not dir or dir:find("[*?[]") then
          refuse(1, "%s: include %s: cannot expand this glob", at(d), name)
        end
        local lua_pat = "^" .. pat:gsub("[%^%$%(%)%%%.%+%-]", "%%%0"):gsub("%*", ".*"):gsub("%?", ".") .. "$"
        local okd, iter, state = pcall(lfs.dir, dir)
        if not okd then refuse(1, "%s: include %s: cannot read the directory %s", at(d), name, dir) end
        for entry in iter, state do
          if entry:match(lua_pat) and entry:sub(1, 1) ~= "." then paths[#paths + 1] = dir .. "/" .. entry end
        end
        table.sort(paths)
      else
        paths[1] = path
      end
      for _, p in ipairs(paths) do
        if chain[p] then refuse(1, "%s: include %s: includes itself", at(d), name) end
        local text = read_file(p)
        if not text then refuse(1, "%s: include %s: cannot read %s", at(d), name, p) end
        chain[p] = true
        for _, sub in ipairs(expand(M.parse(text, p), prefix, chain)) do out[#out + 1] = sub end
        chain[p] = nil
      end
    else
      if d.block then d.block = expand(d.block, prefix, chain) end
      out[#out + 1] = d
    end
  end
  return out
end

--- nginx's time syntax (ngx_parse_time): numbers with units in decreasing order (y M w d h m s ms; none is
--- seconds), summed: "1h 30s" is one value written as two words only when quoted, "1m30s" is one word.
-- @return milliseconds, or nil when the value is not a time
function M.time_ms(v)
  local units = { { "ms", 1 }, { "y", 31536000000 }, { "M", 2592000000 }, { "w", 604800000 }, { "d", 86400000 },
    { "h", 3600000 }, { "m", 60000 }, { "s", 1000 } }
  local order = { y = 1, M = 2, w = 3, d = 4, h = 5, m = 6, s = 7, ms = 8 }
  local total, last, rest = 0, 0, v:gsub("%s+", "")
  if rest == "" then return nil end
  while rest ~= "" do
    local num, tail = rest:match("^(%d+)(.*)$")
    if not num then return nil end
    local unit, scale
    for _, u in ipairs(units) do
      if tail:sub(1, #u[1]) == u[1] then unit, scale = u[1], u[2] break end
    end
    if not unit then
      if tail ~= "" then return nil end
      unit, scale = "s", 1000
    end
    if order[unit] <= last then return nil end
    last = order[unit]
    total = total + tonumber(num) * scale
    rest = tail:sub(#unit + 1)
  end
  return total
end

-- The directives the import reads, and how each sets the inherited settings.
local SETTINGS = {
  proxy_next_upstream = function(s, d)
    if #d.args == 0 then refuse(2, "%s: proxy_next_upstream takes at least one value", at(d)) end
    for _, v in ipairs(d.args) do
      if not M.CLASSES[v] then refuse(1, "%s: proxy_next_upstream %s: not a condition nginx knows", at(d), v) end
      if v == "off" and #d.args > 1 then refuse(2, "%s: proxy_next_upstream off goes alone", at(d)) end
    end
    s.next_upstream = d.args
  end,
  proxy_next_upstream_tries = function(s, d)
    local v = #d.args == 1 and d.args[1]:match("^%d+$") and tonumber(d.args[1])
    if not v then refuse(1, "%s: proxy_next_upstream_tries %s: not a number", at(d), table.concat(d.args, " ")) end
    s.tries = v
  end,
}
local TIMES = { proxy_next_upstream_timeout = "next_timeout_ms", proxy_connect_timeout = "connect_ms",
  proxy_send_timeout = "send_ms", proxy_read_timeout = "read_ms" }
for name, key in pairs(TIMES) do
  SETTINGS[name] = function(s, d)
    local ms = #d.args == 1 and M.time_ms(d.args[1])
    if not ms then refuse(1, "%s: %s %s: not a time nginx reads", at(d), name, table.concat(d.args, " ")) end
    s[key] = ms
  end
end

-- Directives that decide where a request goes or how it is retried: outside the blocks the import walks (an
-- `if`, a `limit_except`, …) they cannot be evaluated.
local MATTERS = { proxy_pass = true, location = true, grpc_pass = true, fastcgi_pass = true, uwsgi_pass = true,
  scgi_pass = true, memcached_pass = true }
for name in pairs(SETTINGS) do MATTERS[name] = true end

local function copy(s)
  local t = {}
  for k, v in pairs(s) do t[k] = v end
  return t
end

-- Applies the settings directives of a block to a copy of the inherited settings.
local function settings_of(list, inherited)
  local s = copy(inherited)
  for _, d in ipairs(list) do
    local f = SETTINGS[d.name]
    if f then f(s, d) end
  end
  return s
end

-- Refuses a block the import does not walk when it holds a directive that matters.
local function check_opaque(d)
  for _, c in ipairs(d.block or {}) do
    if MATTERS[c.name] then
      refuse(1, "%s: %s inside %s (%s): cannot be evaluated", at(c), c.name, d.name, at(d))
    end
    check_opaque(c)
  end
end

local function is_ip(host)
  if host:match("^%[.*%]$") then return true end
  local a, b, c, d = host:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  return a and tonumber(a) < 256 and tonumber(b) < 256 and tonumber(c) < 256 and tonumber(d) < 256 or false
end

-- The number of peers nginx makes for one `server` address (a name resolves at start to an unknown number).
local function peers_of_address(addr)
  if addr:sub(1, 5) == "unix:" then return 1 end
  local host = addr:match("^(%b[])") or addr:match("^([^:]+)")
  if host and is_ip(host) then return 1 end
  return nil
end

local UPSTREAM_OK = { server = true, keepalive = true, keepalive_requests = true, keepalive_time = true,
  keepalive_timeout = true, zone = true, least_conn = true, ip_hash = true, hash = true, random = true }

-- An upstream block's peers: {count = n | nil (a name), where = the server directive when unknown}.
local function upstream_peers(d)
  local count, unknown = 0, nil
  for _, c in ipairs(d.block) do
    if not UPSTREAM_OK[c.name] then
      refuse(1, "%s: %s in upstream %s: not evaluated (it may change which servers are tried)", at(c), c.name,
        d.args[1])
    end
    if c.name == "server" then
      local down = false
      for i = 2, #c.args do
        local p = c.args[i]
        if p == "down" then down = true end
        if p == "resolve" or p:match("^service=") then
          refuse(1, "%s: server %s %s: re-resolved servers cannot be counted", at(c), c.args[1], p)
        end
      end
      local n = peers_of_address(c.args[1] or "")
      if not down then
        if n then count = count + n else unknown = unknown or c end
      end
    end
  end
  local keepalive
  for _, c in ipairs(d.block) do
    if c.name == "keepalive" then keepalive = c end
  end
  return { count = count, unknown = unknown, keepalive = keepalive }
end

-- A lock endpoint path for a location, or a refusal.
local function endpoint_path(d)
  local mod, path = d.args[1], d.args[2]
  if #d.args == 1 then mod, path = nil, d.args[1] end
  if #d.args > 2 or not path then refuse(2, "%s: location takes [modifier] uri", at(d)) end
  if mod == "~" or mod == "~*" then
    refuse(1, "%s: location %s %s: a regular expression has no lock endpoint", at(d), mod, path)
  end
  if mod and mod ~= "=" and mod ~= "^~" then refuse(2, "%s: location %s: unknown modifier", at(d), mod) end
  if path:sub(1, 1) == "@" then
    refuse(1, "%s: location %s: a named location is reached by internal redirect; no endpoint says which requests",
      at(d), path)
  end
  local exact = mod == "="
  local body = path
  if not exact then
    if path ~= "/" and path:sub(-1) ~= "/" then
      refuse(1, "%s: location %s: a prefix that does not end in / also matches %sX…, which no endpoint can say "
        .. "(write location %s/ and location = %s)", at(d), path, path, path, path)
    end
    body = path:sub(1, -2)
  elseif path ~= "/" and path:sub(-1) == "/" then
    refuse(1, "%s: location = %s: a lock path has no trailing /", at(d), path)
  end
  local segs = body:sub(2)
  if segs ~= "" then
    for seg in (segs .. "/"):gmatch("([^/]*)/") do
      if not seg:match("^[%w%-%._~!%$&'%(%)%+,;=:@%%]+$") then
        refuse(1, "%s: location %s: %q is no literal path segment of a lock", at(d), path, seg)
      end
    end
  end
  if exact then return path end
  return body .. "/*"
end

-- The settings and peers of one proxied location → {path, attempts, retryable lists, per-try, total, notes}.
local function route_policy(s, pass, upstreams, notes)
  local url = pass.args[1] or ""
  if url:find("$", 1, true) then
    refuse(1, "%s: proxy_pass %s: a variable is evaluated per request; the servers cannot be counted", at(pass), url)
  end
  local host = url:match("^https?://([^/]+)")
  if not host then refuse(1, "%s: proxy_pass %s: not an http:// or https:// URL", at(pass), url) end
  local peers, unknown
  local up = upstreams[host:lower()]
  if up then
    peers, unknown = up.peers.count, up.peers.unknown
  elseif host:sub(1, 5) == "unix:" then
    peers = 1
  else
    peers = peers_of_address(host)
    if not peers then unknown = pass end
  end
  local off = s.next_upstream[1] == "off"
  -- ngx_http_upstream_next: a failure on a cached keepalive connection gives the request its try back
  -- (u->peer.tries++), so with `error` the attempts are no longer bounded by the servers.
  local keepalive = up and up.peers.keepalive
  if keepalive then
    for _, v in ipairs(s.next_upstream) do
      if v == "error" then
        refuse(1, "%s: keepalive in upstream %s: with proxy_next_upstream error (%s), nginx retries a request that "
          .. "fails on a cached connection without counting a try, so no maxAttempts bounds it", at(keepalive),
          up.d.args[1], at(pass))
      end
    end
  end
  local attempts
  if off then
    attempts = 1
  elseif unknown then
    if s.tries == 0 then
      refuse(1, "%s: %s: a name resolved at start gives nginx one server per address, and "
        .. "proxy_next_upstream_tries is unlimited (0): no maxAttempts can be said", at(unknown),
        unknown.name .. " " .. (unknown.args[1] or ""))
    end
    attempts = s.tries
    notes[#notes + 1] = string.format("%s: %s is a name: maxAttempts is proxy_next_upstream_tries (%d), the most "
      .. "nginx tries whatever it resolves to", at(unknown), unknown.args[1] or "", s.tries)
  else
    attempts = s.tries == 0 and peers or math.min(s.tries, peers)
  end
  attempts = math.max(attempts, 1)
  if attempts > MAX_ATTEMPTS then
    refuse(1, "%s: %d tries (%s): a lock says maxAttempts 1..%d; set proxy_next_upstream_tries", at(pass), attempts,
      s.tries == 0 and "one per server, proxy_next_upstream_tries 0" or "proxy_next_upstream_tries", MAX_ATTEMPTS)
  end
  local classes, seen = {}, {}
  local non_idempotent = false
  for _, v in ipairs(s.next_upstream) do
    if v == "non_idempotent" then non_idempotent = true end
    for _, c in ipairs(M.CLASSES[v]) do
      if not seen[c] then seen[c], classes[#classes + 1] = true, c end
    end
  end
  local per_try = s.connect_ms + s.send_ms + s.read_ms
  if per_try > MAX_PER_TRY_MS then
    refuse(1, "%s: proxy_connect_timeout + proxy_send_timeout + proxy_read_timeout = %d ms: a lock's "
      .. "perAttemptTimeoutMs is at most %d", at(pass), per_try, MAX_PER_TRY_MS)
  end
  per_try = math.max(per_try, 1)
  local total = attempts * per_try
  if s.next_timeout_ms > 0 then total = math.min(total, s.next_timeout_ms + per_try) end
  if total > MAX_TOTAL_MS then
    refuse(1, "%s: %d attempts of %d ms: a lock's totalBudgetMs is at most %d; set proxy_next_upstream_timeout",
      at(pass), attempts, per_try, MAX_TOTAL_MS)
  end
  local before = {}
  for _, c in ipairs(classes) do
    if M.BEFORE_SENT[c] then before[#before + 1] = c end
  end
  return { attempts = attempts, classes = classes, before = before, non_idempotent = non_idempotent,
    per_try = per_try, total = total }
end

-- The directives that send a request to another location by internal redirect (their last argument: a URI or
-- @name; a status code, =code or an external URL stays out of it).
REDIRECTS = { error_page = true, try_files = true }

-- Refuses an internal redirect whose target a proxied route covers: the request it moves there is passed to the
-- upstream again, after the attempts its own location made, which no lock can say. A target with a variable
-- cannot be evaluated. A named location with proxy_pass is refused where it is defined.
function check_redirect(d, servers)
  local target = d.args[#d.args] or ""
  if target:sub(1, 1) == "@" or target:sub(1, 1) == "=" or target:match("^%a[%w+.-]*://") then return end
  if target:match("^%d+$") and d.name == "error_page" then return end
  if d.name == "try_files" and target:sub(1, 1) ~= "/" then return end
  if target:find("$", 1, true) then
    refuse(1, "%s: %s %s: a redirect to a variable URI cannot be evaluated", at(d), d.name, target)
  end
  local path = target:match("^[^?]*")
  for _, locs in ipairs(servers) do
    -- nginx's choice among exact and prefix locations (a regex one with proxy_pass is refused where it is).
    local best
    for _, l in ipairs(locs) do
      if l.exact and l.uri == path then
        best = l
        break
      end
      if not l.exact and path:sub(1, #l.uri) == l.uri and (not best or #l.uri > #best.uri) then best = l end
    end
    if best and best.proxied then
      refuse(1, "%s: %s %s: an internal redirect into location %s (%s), whose requests are passed to the upstream "
        .. "again", at(d), d.name, target, best.uri, at(best.d))
    end
  end
end

--- Reads an nginx configuration and returns its effective retry policy as a lock (see retryfreeze.import).
-- @param path string; opts {prefix = directory of relative includes (default: the main file's directory)}
-- @return lock table, notes | nil, message, code
function M.read(path, opts)
  local ok, lock, notes = pcall(function()
    local text = read_file(path)
    if not text then refuse(2, "cannot read %s", path) end
    local prefix = opts.prefix or path:match("^(.*/)") or "./"
    if prefix:sub(-1) ~= "/" then prefix = prefix .. "/" end
    local tree = expand(M.parse(text, path), prefix, { [path] = true })
    local notes, redirects, server_locations = {}, {}, {}
    local routes, by_endpoint = {}, {}
    local saw_http = false
    for _, http in ipairs(tree) do
      if http.name == "http" and http.block then
        saw_http = true
        local upstreams = {}
        for _, d in ipairs(http.block) do
          if d.name == "upstream" and d.block then
            local name = (d.args[1] or ""):lower()
            if upstreams[name] then refuse(2, "%s: upstream %s defined twice", at(d), d.args[1]) end
            upstreams[name] = { d = d, peers = upstream_peers(d) }
          end
        end
        local hs = settings_of(http.block, M.DEFAULTS)
        local function add(endpoint, r, where)
          local prev = by_endpoint[endpoint]
          if prev then
            if json.encode(prev.r) ~= json.encode(r) then
              refuse(1, "%s: %s is also %s with another policy: a lock has no server names", where, endpoint,
                prev.where)
            end
            return
          end
          by_endpoint[endpoint] = { r = r, where = where }
          routes[#routes + 1] = r
        end
        local locs
        local function walk_location(d, inherited)
          local s = settings_of(d.block, inherited)
          local entry
          if #d.args == 2 and (d.args[1] == "=" or d.args[1] == "^~") then
            entry = { uri = d.args[2], exact = d.args[1] == "=", d = d }
          elseif #d.args == 1 and d.args[1]:sub(1, 1) ~= "@" then
            entry = { uri = d.args[1], exact = false, d = d }
          end
          if entry then locs[#locs + 1] = entry end
          local pass
          for _, c in ipairs(d.block) do
            if c.name == "proxy_pass" then pass = c end
            if MATTERS[c.name] and not SETTINGS[c.name] and c.name ~= "proxy_pass" and c.name ~= "location" then
              refuse(1, "%s: %s: only proxy_pass is imported", at(c), c.name)
            end
            if c.name == "rewrite" and c.args[3] ~= "redirect" and c.args[3] ~= "permanent" then
              refuse(1, "%s: rewrite: moves requests to another location, which no endpoint can say", at(c))
            end
            if REDIRECTS[c.name] then redirects[#redirects + 1] = c end
            if c.name == "location" and c.block then
              walk_location(c, s)
            elseif c.block then
              check_opaque(c)
            end
          end
          -- A location without proxy_pass is never retried: leaving it out only makes the lock wider where
          -- another route's pattern covers its requests.
          if pass then
            if entry then entry.proxied = true end
            local uri = endpoint_path(d)
            local p = route_policy(s, pass, upstreams, notes)
            for _, m in ipairs(M.METHODS) do
              local retryable = p.classes
              local attempts = p.attempts
              if M.NON_IDEMPOTENT[m] and not p.non_idempotent then retryable = p.before end
              if #retryable == 0 then attempts = 1 end
              add(m .. " " .. uri, { endpoint = m .. " " .. uri, maxAttempts = attempts,
                perAttemptTimeoutMs = p.per_try, totalBudgetMs = p.total, retryable = json.array(retryable) },
                at(d))
            end
          end
        end
        for _, d in ipairs(http.block) do
          if REDIRECTS[d.name] then redirects[#redirects + 1] = d end
        end
        for _, server in ipairs(http.block) do
          if server.name == "server" and server.block then
            local ss = settings_of(server.block, hs)
            locs = {}
            server_locations[#server_locations + 1] = locs
            for _, d in ipairs(server.block) do
              if REDIRECTS[d.name] then redirects[#redirects + 1] = d end
              if d.name == "location" and d.block then
                walk_location(d, ss)
              elseif d.name == "rewrite" and d.args[3] ~= "redirect" and d.args[3] ~= "permanent" then
                refuse(1, "%s: rewrite: moves requests to another location, which no endpoint can say", at(d))
              elseif d.name == "proxy_pass" then
                refuse(2, "%s: proxy_pass outside a location", at(d))
              elseif d.block then
                check_opaque(d)
              end
            end
          end
        end
      end
    end
    for _, d in ipairs(redirects) do check_redirect(d, server_locations) end
    if not saw_http then refuse(1, "%s: no http block: nothing is proxied over HTTP", path) end
    if #routes == 0 then refuse(1, "%s: no location with proxy_pass: nothing to import", path) end
    table.sort(routes, function(a, b) return a.endpoint < b.endpoint end)
    notes[#notes + 1] = "a POST, PATCH or LOCK is passed on after a connect timeout but not a read timeout; the "
      .. "lock's one TIMEOUT class retries both (wider)"
    notes[#notes + 1] = "methods other than " .. table.concat(M.METHODS, ", ") .. " have no route"
    return {
      ["$comment"] = "imported from nginx " .. path .. " by retryfreeze import: " .. table.concat(notes, "; "),
      version = 1,
      defaults = { minAttemptMs = 0, idempotencyRequired = json.array(),
        backoff = { baseMs = 0, maxMs = 0, multiplier = 1, jitter = "none" }, retryAfter = { honor = false } },
      routes = routes,
    }, notes
  end)
  if ok then return lock, notes end
  if getmetatable(lock) == Refusal then return nil, lock.text, lock.code end
  error(lock, 0)
end

--- The key order of an imported lock's JSON.
M.ORDER = { "$comment", "version", "defaults", "routes", "endpoint", "maxAttempts", "perAttemptTimeoutMs",
  "totalBudgetMs", "minAttemptMs", "retryable", "idempotencyRequired", "backoff", "retryAfter", "baseMs",
  "multiplier", "maxMs", "jitter", "honor" }

return M
