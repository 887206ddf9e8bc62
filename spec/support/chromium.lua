-- Headless Chromium (Debian chromium) for the report pages: renders a local file with the network disabled (a proxy
-- on a closed port, every host name unresolvable, no background networking) and a fresh profile. --dump-dom gives
-- the DOM once the page's scripts have run; --enable-logging=stderr prints every console message.
local h = require "spec.helper"

local q = h.shell_quote

local M = {}

--- Runs headless Chromium on a local file.
-- @param tmp string: a scratch folder (the profile and Chromium's log go there, the profile is removed)
-- @param file string: absolute path of the page
-- @param mode string: "--dump-dom" or "--screenshot=PATH"
-- @param tz string|nil: the browser's time zone (TZ), so that a chart formatting in local time shows it
-- @return stdout, stderr (Chromium's log: console messages appear as "INFO:CONSOLE")
function M.run(tmp, file, mode, tz)
  local profile = tmp .. "/profile-" .. math.random(2 ^ 30)
  local err_path = tmp .. "/chromium.err"
  -- env -u: under the sanitized CI run, LD_PRELOAD holds libasan, which is not meant for the browser.
  local cmd = table.concat({ "env -u LD_PRELOAD -u ASAN_OPTIONS", tz and "TZ=" .. q(tz) or "",
    "timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-quic",
    "--no-first-run --disable-background-networking --disable-component-update --disable-sync",
    "--user-data-dir=" .. q(profile), "--proxy-server=http://127.0.0.1:9", q("--host-resolver-rules=MAP * ~NOTFOUND"),
    "--enable-logging=stderr --v=0 --virtual-time-budget=15000 --hide-scrollbars --window-size=1280,2700",
    mode, q("file://" .. file), "2>" .. q(err_path) }, " ")
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  local err = h.read_file(err_path)
  os.execute("rm -rf " .. q(profile))
  return out, err
end

--- The console messages of a Chromium log.
-- @param log string (M.run's stderr)
-- @return array of lines
function M.console_lines(log)
  local lines = {}
  for l in log:gmatch("[^\n]+") do
    if l:find(":CONSOLE", 1, true) then lines[#lines + 1] = l end
  end
  return lines
end

--- The text of HTML-escaped markup (the five entities report.lua escapes).
function M.html_unescape(s)
  return (s:gsub("&quot;", '"'):gsub("&#39;", "'"):gsub("&lt;", "<"):gsub("&gt;", ">"):gsub("&amp;", "&"))
end

--- The page's render status (#rf-render-status) from a dumped DOM: its attributes and its decoded JSON.
-- @param dom string
-- @return attrs string, status table (nil, nil when the DOM has none)
function M.render_status(dom)
  local attrs, body = dom:match('<pre id="rf%-render%-status"([^>]*)>(.-)</pre>')
  if not attrs then return nil end
  return attrs, require("retryfreeze.json").decode(M.html_unescape(body))
end

return M
