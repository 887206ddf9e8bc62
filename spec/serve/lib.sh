# Shared helpers for the retryfreeze-serve specs; sourced, not run. Every server started here is
# killed on exit, and runs with --max-seconds 150 as a safety net should even that fail: past ctest's
# 120 s timeout for these specs (cmake/serve.cmake), so that a spec slowed by a loaded machine never
# loses its server while it still runs.
set -euo pipefail

: "${RF_SERVE:?set RF_SERVE to the retryfreeze-serve binary}"
RF_CURL=${RF_CURL:-curl}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rf-serve-spec.XXXXXX")
SERVER_PIDS=()

cleanup() {
  local pid
  for pid in "${SERVER_PIDS[@]+"${SERVER_PIDS[@]}"}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${SERVER_PIDS[@]+"${SERVER_PIDS[@]}"}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

pass() { echo "ok - $*"; }

# expect_eq ACTUAL EXPECTED WHAT
expect_eq() {
  [ "$1" = "$2" ] || fail "$3: expected '$2', got '$1'"
}

# expect_match TEXT ERE WHAT
expect_match() {
  printf '%s\n' "$1" | grep -Eq -- "$2" || fail "$3: '$1' does not match /$2/"
}

# expect_between N LOW HIGH WHAT
expect_between() {
  [ "$1" -ge "$2" ] && [ "$1" -le "$3" ] || fail "$4: $1 not in [$2, $3]"
}

# start_server NAME [ARGS...]: starts a server on a free port; sets PORT, URL and SERVER_PID.
start_server() {
  local name=$1
  shift
  "$RF_SERVE" --max-seconds 150 "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  SERVER_PID=$!
  SERVER_PIDS+=("$SERVER_PID")
  local i line=""
  for i in $(seq 1 100); do
    # The server writes the line and its newline at once; wait for a whole line.
    if [ "$(wc -l <"$TMP/$name.out")" -ge 1 ]; then
      line=$(head -n 1 "$TMP/$name.out")
      break
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || fail "$name exited early: $(cat "$TMP/$name.err")"
    sleep 0.05
  done
  expect_match "$line" '^listening on 127\.0\.0\.1:[0-9]+$' "$name start line"
  PORT=${line##*:}
  URL="http://127.0.0.1:$PORT"
}

# wait_exit PID SECONDS: waits for PID to exit, at most SECONDS; sets EXIT_RC.
wait_exit() {
  local pid=$1 i
  for i in $(seq 1 $(($2 * 20))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -0 "$pid" 2>/dev/null && fail "process $pid still running after $2 s"
  EXIT_RC=0
  wait "$pid" || EXIT_RC=$?
}

# stop_server: SIGTERM the last started server and expect a clean exit within 5 s.
stop_server() {
  kill -TERM "$SERVER_PID"
  wait_exit "$SERVER_PID" 5
  expect_eq "$EXIT_RC" 0 "exit status after SIGTERM"
}

# rc CMD...: runs CMD and prints its exit status, never failing the script.
rc() {
  local r=0
  "$@" || r=$?
  echo "$r"
}

# c ARGS...: curl quietly, errors still shown, bounded in time.
c() { "$RF_CURL" -sS --max-time 10 "$@"; }

# stat_of NAME: one number from GET /__stats, e.g. requests, by_status.503, executions.
stat_of() {
  local json key=$1
  json=$(c "$URL/__stats")
  case $key in
  by_status.*)
    json=$(printf '%s' "$json" | sed -n 's/.*"by_status":{\([^}]*\)}.*/\1/p')
    key=${key#by_status.}
    ;;
  esac
  local v
  v=$(printf '%s' "$json" | grep -o "\"$key\":[0-9]*" | head -n 1 | cut -d: -f2)
  echo "${v:-0}"
}

# expect_stats WHAT NAME=N...: each NAME's number from GET /__stats is N (stat_of); WHAT names the check.
expect_stats() {
  local what=$1 kv
  shift
  for kv in "$@"; do expect_eq "$(stat_of "${kv%%=*}")" "${kv#*=}" "$what: ${kv%%=*}"; done
}

# header NAME FILE: the value of a response header in a curl -D dump (last response only).
header() {
  tr -d '\r' <"$2" | grep -i "^$1:" | tail -n 1 | sed 's/^[^:]*: //'
}

IMF_FIXDATE='^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$'
