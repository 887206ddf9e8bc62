#!/usr/bin/env bash
# Transport faults as a client sees them: reset (curl 56), empty (52), cut (18), timeout (28), and a stalled
# connection not blocking the others.
. "$(dirname "$0")/lib.sh"
start_server transport --stall-ms 5000

expect_eq "$(rc c -o /dev/null -H 'X-Fault-Script: reset' "$URL/r" 2>/dev/null)" 56 "curl exit on reset"
expect_eq "$(rc c -o /dev/null -X POST -d 'a=1' -H 'X-Fault-Script: reset' "$URL/r" 2>/dev/null)" 56 "curl exit on reset (POST)"
c -o /dev/null -H 'X-Fault-Script: reset' "$URL/r2" 2>"$TMP/err" || true
grep -qi 'reset' "$TMP/err" || fail "curl did not report a reset: $(cat "$TMP/err")"
pass "reset: connection reset by peer (curl 56)"

expect_eq "$(rc c -o /dev/null -H 'X-Fault-Script: empty' "$URL/e" 2>/dev/null)" 52 "curl exit on empty"
expect_eq "$(rc c -o /dev/null -X PUT -d 'a=1' -H 'X-Fault-Script: empty' "$URL/e" 2>/dev/null)" 52 "curl exit on empty (PUT)"
pass "empty: empty reply from server (curl 52)"

expect_eq "$(rc c -o /dev/null -H 'X-Fault-Script: cut' "$URL/c" 2>/dev/null)" 18 "curl exit on cut"
expect_eq "$(c -s -H 'X-Fault-Script: cut' "$URL/c2" 2>/dev/null | wc -c | tr -d ' ')" 100 "bytes before the cut"
pass "cut: a 200 whose body stops after 100 of 1000 bytes (curl 18)"

t0=$(date +%s%N)
expect_eq "$(rc c -o /dev/null --max-time 1 -H 'X-Fault-Script: timeout' "$URL/t" 2>/dev/null)" 28 "curl exit on timeout"
expect_between $((($(date +%s%N) - t0) / 1000000)) 900 3000 "ms until curl gave up"
pass "timeout: curl --max-time 1 gives up (28)"

# The step after a fault: same sequence, next step.
K='Idempotency-Key: t-1'
S='X-Fault-Script: reset,empty,timeout;delay=10,201'
expect_eq "$(rc c -o /dev/null -H "$K" -H "$S" "$URL/s" 2>/dev/null)" 56 "step 1"
expect_eq "$(rc c -o /dev/null -H "$K" -H "$S" "$URL/s" 2>/dev/null)" 52 "step 2"
expect_eq "$(rc c -o /dev/null --max-time 1 -H "$K" -H "$S" "$URL/s" 2>/dev/null)" 28 "step 3"
expect_eq "$(c -o "$TMP/body" -w '%{http_code}' -H "$K" -H "$S" "$URL/s")" 201 "step 4"
expect_eq "$(cat "$TMP/body")" '{"ok":true,"n":4}' "step 4 body"
pass "a sequence moves on after transport faults"

# One stalled connection does not hold up another (a thread per connection).
c -o /dev/null --max-time 4 -H 'X-Fault-Script: timeout' "$URL/stall" 2>/dev/null &
bg=$!
sleep 0.2
t=$(c -o /dev/null -w '%{http_code} %{time_total}' "$URL/fast")
expect_eq "${t%% *}" 200 "fast request during a stall"
expect_between "$(awk -v t="${t#* }" 'BEGIN { printf "%d", t * 1000 }')" 0 1000 "ms for the fast request"
wait "$bg" || true
pass "a stall blocks only its own connection"

# Even when the stall is on a kept-alive connection shared with earlier requests.
expect_eq "$(c -o /dev/null -o /dev/null -w '%{http_code}\n' "$URL/k1" -H 'X-Fault-Script: ok' "$URL/k2" | tr '\n' ' ')" "200 200 " "keep-alive"
pass "keep-alive connections"

expect_eq "$(stat_of by_status.reset)" 4 "stats reset"
expect_eq "$(stat_of by_status.empty)" 3 "stats empty"
expect_eq "$(stat_of by_status.timeout)" 3 "stats timeout"
pass "transport faults counted"

stop_server
