#!/usr/bin/env bash
# GET /__stats and POST /__reset: requests, by_status, executions, duplicate executions, keys;
# the bound on tracked sequences; counting under concurrent clients.
. "$(dirname "$0")/lib.sh"
start_server stats --stall-ms 2000

expect_eq "$(c "$URL/__stats")" \
  '{"requests":0,"by_status":{"reset":0,"empty":0,"timeout":0},"executions":0,"duplicate_executions":0,"keys":0,"max_in_flight":0}' \
  "fresh stats"
expect_eq "$(stat_of requests)" 0 "/__stats is not counted"
pass "fresh stats, /__stats not counted"

post() { c -o /dev/null -w '%{http_code}' -X POST -d '{"amount":5}' "$@"; }

# A keyed POST that succeeded, sent again: a duplicate execution.
expect_eq "$(post -H 'Idempotency-Key: k1' "$URL/pay")" 200 "k1 first"
expect_eq "$(post -H 'Idempotency-Key: k1' "$URL/pay")" 200 "k1 again"
expect_stats "k1 twice" requests=2 by_status.200=2 executions=2 duplicate_executions=1 keys=1
pass "the same keyed POST twice after success: duplicate_executions 1"

# A retry after a 503 is not a duplicate; unkeyed requests never are.
expect_eq "$(post -H 'Idempotency-Key: k2' -H 'X-Fault-Script: 503' "$URL/pay")" 503 "k2 first"
expect_eq "$(post -H 'Idempotency-Key: k2' -H 'X-Fault-Script: 503' "$URL/pay")" 200 "k2 retry"
post "$URL/pay" >/dev/null
post "$URL/pay" >/dev/null
expect_stats "after the retry of a 503 and unkeyed posts" executions=5 duplicate_executions=1 keys=2
pass "retries after failures and unkeyed requests are not duplicates"

# A timeout stalls before the work starts and a reset drops the request: their retries are no duplicates.
expect_eq "$(rc c -o /dev/null --max-time 0.5 -H 'Idempotency-Key: k3' -H 'X-Fault-Script: timeout' "$URL/pay" 2>/dev/null)" 28 "k3 times out"
expect_eq "$(post -H 'Idempotency-Key: k3' -H 'X-Fault-Script: timeout' "$URL/pay")" 200 "k3 retry"
expect_eq "$(rc c -o /dev/null -H 'Idempotency-Key: k4' -H 'X-Fault-Script: reset' "$URL/pay" 2>/dev/null)" 56 "k4 reset"
expect_eq "$(post -H 'Idempotency-Key: k4' -H 'X-Fault-Script: reset' "$URL/pay")" 200 "k4 retry"
expect_stats "after timeout and reset retries" duplicate_executions=1 by_status.timeout=1 by_status.reset=1 requests=10
pass "neither a timed-out nor a reset attempt executed"

# A bad script is a counted 400.
c -o /dev/null -H 'X-Fault-Script: nope' "$URL/pay"
expect_eq "$(stat_of by_status.400)" 1 "400s"
expect_eq "$(stat_of requests)" 11 "requests"

# Control paths: the right method only, never counted.
expect_eq "$(c -o /dev/null -w '%{http_code}' -X POST "$URL/__stats")" 405 "POST /__stats"
expect_eq "$(c -o /dev/null -w '%{http_code}' "$URL/__reset")" 405 "GET /__reset"
expect_eq "$(stat_of requests)" 11 "control paths not counted"
expect_eq "$(c -X POST "$URL/__reset")" '{"ok":true}' "POST /__reset"
expect_eq "$(stat_of requests)" 0 "requests after reset"
expect_eq "$(stat_of keys)" 0 "keys after reset"
expect_eq "$(c -H 'Idempotency-Key: k1' "$URL/pay")" '{"ok":true,"n":1}' "a sequence after reset"
expect_eq "$(stat_of duplicate_executions)" 0 "duplicates after reset"
pass "control paths and reset"

# Many clients at once: every attempt counted, every key kept apart.
c -X POST -o /dev/null "$URL/__reset"
workers=()
for w in 1 2 3 4 5 6 7 8; do
  (
    for i in $(seq 1 25); do
      c -o /dev/null -H "Idempotency-Key: w$w-$i" -X POST -d x "$URL/c"
      c -o /dev/null -H "Idempotency-Key: w$w-$i" -X POST -d x "$URL/c"
    done
  ) &
  workers+=($!)
done
wait "${workers[@]}" # not a bare wait: the server is a background job too
expect_stats "8 concurrent clients" requests=400 keys=200 executions=400 duplicate_executions=200
pass "8 concurrent clients counted exactly"

# max_in_flight: attempts being answered at once. One at a time stays 1; three held by a delay at once are 3; a
# reset counts from the attempts still in flight. A server of its own: on the one above, k3's timeout stalls for
# 2 s, and on a fast machine it is still in flight here (a reset then starts the count at 1).
stop_server
start_server in_flight
for i in 1 2 3; do c -o /dev/null -H 'X-Fault-Script: 200;delay=50' "$URL/one/$i"; done
expect_eq "$(stat_of max_in_flight)" 1 "sequential attempts"
workers=()
for i in 1 2 3; do
  c -o /dev/null -H 'X-Fault-Script: 200;delay=1500' "$URL/three/$i" &
  workers+=($!)
done
wait "${workers[@]}"
expect_eq "$(stat_of max_in_flight)" 3 "three attempts delayed side by side"
c -X POST -o /dev/null "$URL/__reset"
expect_eq "$(stat_of max_in_flight)" 0 "after reset"
pass "max_in_flight: 1 one at a time, 3 side by side, 0 after reset"
stop_server

# The bound: past --max-keys new sequences get 503 and a log line; known ones go on.
start_server bounded --max-keys 2
expect_eq "$(c -o /dev/null -w '%{http_code}' -H 'Idempotency-Key: a' "$URL/x")" 200 "key a"
expect_eq "$(c -o /dev/null -w '%{http_code}' -H 'Idempotency-Key: b' "$URL/x")" 200 "key b"
expect_eq "$(c -o /dev/null -w '%{http_code}' -H 'Idempotency-Key: c' "$URL/x")" 503 "key c, table full"
expect_eq "$(c -o /dev/null -w '%{http_code}' "$URL/x")" 503 "unkeyed, table full"
expect_eq "$(c -H 'Idempotency-Key: a' "$URL/x")" '{"ok":true,"n":2}' "key a again"
grep -q 'refused with 503: too many sequences' "$TMP/bounded.err" || fail "no log line on overflow"
expect_eq "$(stat_of by_status.503)" 2 "refusals counted"
c -X POST -o /dev/null "$URL/__reset"
expect_eq "$(c -o /dev/null -w '%{http_code}' -H 'Idempotency-Key: c' "$URL/x")" 200 "key c after reset"
stop_server
pass "--max-keys bounds the table: 503 and a log line, until /__reset"
