--- `retryfreeze import FILE --from TARGET [-o FILE]`: the effective retry policy of an nginx configuration (or
--- another target of retryfreeze.import) written as a lock, so that `diff SIGNED IMPORTED` judges it.
local cli_args = require "retryfreeze.cli.args"
local import = require "retryfreeze.import"
local json = require "retryfreeze.json"
local output = require "retryfreeze.output"
local rf = require "retryfreeze"

-- A directory: it opens, and reading it fails as a directory does (EISDIR), which a file's read never does.
local function is_directory(path)
  local f = io.open(path, "rb")
  if not f then return "no such directory: " .. path end
  local ok, _, errno = f:read(1)
  f:close()
  if ok == nil and errno == 21 then return nil end
  return "not a directory: " .. path
end

--- Runs the subcommand (see retryfreeze.cli for ctx).
local function run(ctx, opts, pos)
  local outputs_ok, outputs_err = output.check({ { opts.output, "replace", "import output" } })
  if not outputs_ok then ctx.fail(outputs_err) end
  local lock, notes, code = import.read(opts.from, pos[1], { prefix = opts.prefix })
  if not lock then ctx.fail(notes, code) end
  local order = require(import.importers[opts.from]).ORDER
  local text = json.encode(lock, order) .. "\n"
  -- The import must be a lock the loader takes: a refusal here is the importer's fault, said as such.
  local policy, why = rf.load_string(text, "imported.lock.json")
  if not policy then ctx.fail("internal error: the imported lock does not load: " .. tostring(why)) end
  for _, n in ipairs(notes) do ctx.note("note: " .. n) end
  if opts.output and opts.output ~= "-" then
    local written, werr = output.write(opts.output, text, "import output")
    if not written then ctx.fail(werr) end
  else
    ctx.out:json_text(text)
  end
  return 0
end

return cli_args.command {
  name = "import",
  summary = "write the effective retry policy of an nginx configuration or a gRPC service config as a lock",
  args = "FILE",
  description = "  Reads FILE and writes the retry policy it really applies as a lock, so that\n"
    .. "  `retryfreeze diff SIGNED.lock IMPORTED.lock` judges it against the signed one.\n"
    .. "  --from nginx: nginx.conf and the files it includes; a route per method of each proxied location,\n"
    .. "  maxAttempts from the upstream's servers and proxy_next_upstream_tries, the classes\n"
    .. "  proxy_next_upstream retries, the budget from the proxy timeouts.\n"
    .. "  --from grpc: a service config (JSON); a route per methodConfig name, its retryPolicy or\n"
    .. "  hedgingPolicy, timeout and retryThrottling; an unknown key is refused (gRPC drops it silently).\n"
    .. "  Where the lock cannot say a rule exactly the import is wider, never narrower, and a note on stderr\n"
    .. "  says so. Exit 0 with the lock; 1 when the configuration holds what no lock can say (the message\n"
    .. "  names the directive and its file:line, or the JSON path); 2 on bad usage, an unreadable FILE or a\n"
    .. "  syntax error.",
  options = {
    { "--from", "string TARGET", "the configuration's kind", required = true, choices = import.targets },
    { "--output", "string FILE", "write the lock to this file (replaced whole, atomically) instead of standard output",
      short = "-o" },
    { "--prefix", "string DIR", "the directory relative includes start from (default: FILE's directory, as nginx -c)",
      check = is_directory },
  },
  run = run,
}
