--- `retryfreeze export LOCK --to TARGET [-o FILE] [--accept FIELD]...`: the lock as another system's retry
--- configuration (retryfreeze.export: the targets, and what each does with every lock field).
local cli_args = require "retryfreeze.cli.args"
local export = require "retryfreeze.export"
local output = require "retryfreeze.output"

return cli_args.command {
  name = "export",
  summary = "write a lock as another system's retry configuration (a gRPC service config)",
  args = "LOCK",
  description = "  Writes the lock in the target's terms (--to grpc: a gRPC service config, one methodConfig per\n"
    .. "  POST /package.Service/Method route). A narrowing rule the target cannot carry (docs/cli.md lists\n"
    .. "  them per target) is a loss: each is named and nothing is written, unless --accept names its field\n"
    .. "  (or a route's endpoint, for a route the target cannot name); accepted losses and clamped values\n"
    .. "  are said on standard error.\n"
    .. "  Exit 0 written, 1 a loss not accepted, 2 on bad usage, an invalid lock or an unwritable output.",
  options = {
    { "--to", "string TARGET", "the target: " .. table.concat(export.target_names(), ", "), required = true,
      choices = export.target_names() },
    { "--output", "string FILE", "the file to write (replaced whole; default - , standard output)", short = "-o",
      check = function(v) if v == "" then return "-o FILE must not be empty (an empty path names no file)" end end },
    { "--accept", "list FIELD", "accept the loss of a lock field (e.g. perAttemptTimeoutMs) or of a route "
      .. "the target cannot name (its endpoint); repeatable" },
  },

  --- Runs the subcommand (see retryfreeze.cli for ctx).
  run = function(ctx, opts, pos)
    local accept = {}
    for _, a in ipairs(opts.accept or {}) do accept[a] = true end
    local path = opts.output or "-"
    local ok, why = output.check({ { path, "replace", "export" } })
    if not ok then ctx.fail(why) end
    local policy = ctx.load_lock(pos[1])
    for a in pairs(accept) do
      if not export.FIELDS[a] and not a:match("^%u+ /") then
        ctx.usage_error("--accept " .. a .. " is neither a lock field nor a route endpoint")
      end
    end
    local r = export.export(policy, opts.to, accept)
    local refused = 0
    for _, l in ipairs(r.losses) do
      -- a route field's loss names its route; a route the target cannot name is its own field (its endpoint)
      local where = l.route and ("route " .. l.route .. ": ") or (l.field:match("^%u+ /") and "route " or "")
      if l.accepted then
        ctx.note("accepted loss: " .. where .. l.field .. ": " .. l.what)
      else
        refused = refused + 1
        ctx.err:printf("retryfreeze export: loss: %s%s: %s (--accept '%s')\n", where, l.field, l.what, l.field)
      end
    end
    if refused > 0 then
      ctx.fail(string.format("%d rule%s of the lock cannot be carried to %s; nothing written", refused,
        refused == 1 and "" or "s", opts.to), 1)
    end
    for _, n in ipairs(r.notes) do ctx.note("note: " .. n) end
    local wrote, werr = output.write(path, r.text, "export")
    if not wrote then ctx.fail(werr) end
    return 0
  end,
}
