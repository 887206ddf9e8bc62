#!/usr/bin/env bash
# retryfreeze-serve command line: --help, bad arguments (exit 2, the argument named), loopback
# binding, the start line, and stopping on SIGTERM, SIGINT and --max-seconds.
. "$(dirname "$0")/lib.sh"

# expect_bad NEEDLE ARGS...: exit 2 and a stderr message containing NEEDLE, nothing on stdout.
expect_bad() {
  local needle=$1 r=0
  shift
  timeout 5 "$RF_SERVE" "$@" >"$TMP/bad.out" 2>"$TMP/bad.err" || r=$?
  expect_eq "$r" 2 "exit status of: $*"
  grep -qF -- "$needle" "$TMP/bad.err" || fail "stderr of '$*' lacks '$needle': $(cat "$TMP/bad.err")"
  [ ! -s "$TMP/bad.out" ] || fail "stdout of '$*' not empty"
}

out=$("$RF_SERVE" --help)
for word in --port --faults --seed --stall-ms --max-seconds X-Fault-Script /__stats /__reset; do
  grep -qF -- "$word" <<<"$out" || fail "--help does not mention $word" # not printf | grep -q: under pipefail, grep's early exit SIGPIPEs printf
done
expect_match "$("$RF_SERVE" --version)" '^retryfreeze-serve [0-9]+\.[0-9]+\.[0-9]+$' "--version"
pass "--help and --version"

expect_bad "'--bogus'" --bogus
expect_bad "--port" --port 70000
expect_bad "--port" --port=abc
expect_bad "--port needs a value" --port
expect_bad "--seed" --seed -1
expect_bad "--stall-ms" --stall-ms 1.5
expect_bad "--max-seconds" --max-seconds ""
expect_bad "--max-keys" --max-keys 0
pass "bad arguments exit 2 naming the argument"

expect_bad "'foo=0.1'" --faults "503=0.2,foo=0.1"
expect_bad "'503=1.5'" --faults "503=1.5"
expect_bad "'503=abc'" --faults "503=abc"
expect_bad "'503=-0.1'" --faults "503=-0.1"
expect_bad "'503=1e-1'" --faults "503=1e-1"
expect_bad "'500=0.6'" --faults "503=0.5,500=0.6"
expect_bad "'503=0.1'" --faults "503=0.1,503=0.1"
expect_bad "'ra=x'" --faults "503=0.1,ra=x"
expect_bad "'100=0.1'" --faults "100=0.1"
expect_bad "'timeout'" --faults "timeout"
expect_bad "empty token" --faults "503=0.1,,reset=0.1"
pass "bad --faults exit 2 naming the token"

# Bound to loopback only: /proc/net/tcp lists 127.0.0.1 (0100007F) and no wildcard for the port.
start_server loop --port=0 --faults "503=0.1, 429=0.05 ,ra=2"
hex=$(printf '%04X' "$PORT")
grep -q " 0100007F:$hex 00000000:0000 0A " /proc/net/tcp || fail "no LISTEN on 127.0.0.1:$PORT"
! grep -q " 00000000:$hex " /proc/net/tcp || fail "port $PORT bound on 0.0.0.0"
! grep -Eq " [0-9A-F]{32}:$hex [0-9A-F]{32}:0000 0A " /proc/net/tcp6 2>/dev/null ||
  fail "port $PORT bound on IPv6"
expect_eq "$(wc -l <"$TMP/loop.out")" 1 "lines on stdout"
pass "listens on 127.0.0.1 only, one start line"

# The port is taken: exit 1 with a reason.
r=0
timeout 5 "$RF_SERVE" --port "$PORT" 2>"$TMP/busy.err" >/dev/null || r=$?
expect_eq "$r" 1 "exit status when the port is taken"
grep -q "cannot listen on 127.0.0.1:$PORT" "$TMP/busy.err" || fail "no reason: $(cat "$TMP/busy.err")"
pass "a taken port exits 1"

# SIGTERM stops at once even while a connection stalls.
start_server term --stall-ms 30000
c -o /dev/null --max-time 20 -H 'X-Fault-Script: timeout' "$URL/stall" 2>/dev/null &
stalled=$!
sleep 0.3
t0=$(date +%s%N)
stop_server
expect_between $((($(date +%s%N) - t0) / 1000000)) 0 2000 "ms to stop with a stalled connection"
wait "$stalled" || true
pass "SIGTERM exits 0 promptly during a stall"

start_server int
kill -INT "$SERVER_PID"
wait_exit "$SERVER_PID" 5
expect_eq "$EXIT_RC" 0 "exit status after SIGINT"
pass "SIGINT exits 0"

"$RF_SERVE" --max-seconds 1 >"$TMP/max.out" 2>/dev/null &
pid=$!
SERVER_PIDS+=("$pid")
t0=$(date +%s%N)
wait_exit "$pid" 5
expect_eq "$EXIT_RC" 0 "exit status after --max-seconds"
expect_between $((($(date +%s%N) - t0) / 1000000)) 700 3000 "ms before --max-seconds 1 exits"
pass "--max-seconds exits by itself"
