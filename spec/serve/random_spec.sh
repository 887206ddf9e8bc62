#!/usr/bin/env bash
# --faults: a fixed seed replays the same faults in the same order on a fresh server (and after
# POST /__reset), the rates match the spec, and ra=N adds Retry-After to 503 and 429.
. "$(dirname "$0")/lib.sh"

SPEC='503=0.2,429=0.05,500=0.02,timeout=0.02,reset=0.01,empty=0.01,ra=1'

# run N OUT: N sequential unscripted requests from one curl process, one "status exitcode" line
# each in OUT and all response headers in OUT.headers. Connection: close, so curl never silently
# re-sends a request on a kept-alive connection the server reset.
run() {
  local n=$1 out=$2 i
  : >"$TMP/urls"
  for i in $(seq 1 "$n"); do
    printf 'url = "%s/r/%d"\noutput = "/dev/null"\n' "$URL" "$i" >>"$TMP/urls"
  done
  "$RF_CURL" -s --max-time 1 -H 'Connection: close' -D "$out.headers" \
    -w '%{http_code} %{exitcode}\n' -K "$TMP/urls" >"$out" || true
  expect_eq "$(wc -l <"$out")" "$n" "lines from $n requests"
}

start_server seed42a --faults "$SPEC" --seed 42 --stall-ms 3000
run 200 "$TMP/a"
stop_server
start_server seed42b --faults "$SPEC" --seed 42 --stall-ms 3000
run 200 "$TMP/b"
cmp -s "$TMP/a" "$TMP/b" || fail "seed 42 gave two different sequences: $(diff "$TMP/a" "$TMP/b" | head)"
for kind in '503 0' '429 0' '200 0' '000 28'; do
  grep -qx "$kind" "$TMP/a" || fail "no '$kind' among 200 seeded attempts"
done
pass "seed 42: the same 200 outcomes in the same order on two servers"

c -X POST -o /dev/null "$URL/__reset"
run 200 "$TMP/c"
cmp -s "$TMP/a" "$TMP/c" || fail "POST /__reset did not replay the sequence"
pass "POST /__reset reseeds"
stop_server

start_server seed43 --faults "$SPEC" --seed 43 --stall-ms 3000
run 200 "$TMP/d"
! cmp -s "$TMP/a" "$TMP/d" || fail "seeds 42 and 43 gave the same sequence"
stop_server
pass "another seed, another sequence"

# Rates over 4000 attempts (timeouts stall only 20 ms here, so curl sees them as 200). The seed is
# fixed, so these counts never change; the bounds are five standard deviations wide.
start_server rates --faults "$SPEC" --seed 7 --stall-ms 20
run 4000 "$TMP/r"
count() { grep -cx "$1" "$TMP/r" || true; }
n503=$(stat_of by_status.503) n429=$(stat_of by_status.429) n500=$(stat_of by_status.500)
nto=$(stat_of by_status.timeout) nrst=$(stat_of by_status.reset) nemp=$(stat_of by_status.empty)
n200=$(stat_of by_status.200)
expect_eq "$(stat_of requests)" 4000 "requests"
expect_between "$n503" 675 925 "503 count (p=0.2)"
expect_between "$n429" 131 269 "429 count (p=0.05)"
expect_between "$n500" 36 124 "500 count (p=0.02)"
expect_between "$nto" 36 124 "timeout count (p=0.02)"
expect_between "$nrst" 9 72 "reset count (p=0.01)"
expect_between "$nemp" 9 72 "empty count (p=0.01)"
expect_eq $((n503 + n429 + n500 + nto + nrst + nemp + n200)) 4000 "by_status adds up"
expect_eq "$(count '503 0')" "$n503" "client 503s"
expect_eq "$(count '429 0')" "$n429" "client 429s"
expect_eq "$(count '200 0')" $((n200 + nto)) "client 200s (timeouts included)"
expect_eq "$(count '000 56')" "$nrst" "client resets"
expect_eq "$(count '000 52')" "$nemp" "client empties"
expect_eq "$(tr -d '\r' <"$TMP/r.headers" | grep -c '^Retry-After: 1$')" $((n503 + n429)) "Retry-After: 1 on 503 and 429"
stop_server
pass "rates near the spec: 503 $n503, 429 $n429, 500 $n500, timeout $nto, reset $nrst, empty $nemp of 4000"

# Scripted attempts never draw: they do not shift the random sequence.
start_server mixed --faults "$SPEC" --seed 42 --stall-ms 3000
c -o /dev/null -H 'X-Fault-Script: 500' "$URL/scripted"
run 200 "$TMP/m"
cmp -s "$TMP/a" "$TMP/m" || fail "a scripted attempt shifted the random sequence"
stop_server
pass "scripted attempts do not draw"
