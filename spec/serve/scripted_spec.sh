#!/usr/bin/env bash
# X-Fault-Script: steps per sequence, Retry-After forms, delays, bodies, bad scripts.
. "$(dirname "$0")/lib.sh"
start_server scripted --stall-ms 5000

# get HEADERS_FILE CURL_ARGS...: prints the status; headers land in HEADERS_FILE, body in $TMP/body.
get() {
  local h=$1
  shift
  c -o "$TMP/body" -D "$h" -w '%{http_code}' "$@"
}

S='X-Fault-Script: 503;retry-after=1,503,200'
K='Idempotency-Key: order-1'
expect_eq "$(get "$TMP/h1" -H "$S" -H "$K" "$URL/v1/jobs")" 503 "attempt 1"
expect_eq "$(header Retry-After "$TMP/h1")" 1 "attempt 1 Retry-After"
expect_eq "$(get "$TMP/h2" -H "$S" -H "$K" "$URL/v1/jobs")" 503 "attempt 2"
expect_eq "$(header Retry-After "$TMP/h2")" "" "attempt 2 Retry-After"
expect_eq "$(get "$TMP/h3" -H "$S" -H "$K" "$URL/v1/jobs")" 200 "attempt 3"
expect_eq "$(cat "$TMP/body")" '{"ok":true,"n":3}' "attempt 3 body"
expect_eq "$(header Content-Type "$TMP/h3")" application/json "attempt 3 Content-Type"
expect_eq "$(get "$TMP/h4" -H "$S" -H "$K" "$URL/v1/jobs")" 200 "attempt 4, script used up"
expect_eq "$(cat "$TMP/body")" '{"ok":true,"n":4}' "attempt 4 body"
pass "503;retry-after=1,503,200 plays 503 (Retry-After: 1), 503, 200, then 200"

for f in "$TMP"/h1 "$TMP"/h3; do
  expect_match "$(header Date "$f")" "$IMF_FIXDATE" "Date header"
done
pass "responses carry an IMF-fixdate Date"

# The key is the sequence, whatever the path; another key starts afresh.
expect_eq "$(get "$TMP/h" -H "$S" -H "$K" -X POST "$URL/elsewhere")" 200 "same key, other path"
expect_eq "$(get "$TMP/h" -H "$S" -H 'Idempotency-Key: order-2' "$URL/v1/jobs")" 503 "new key"
# Without a key: method + path + script.
S2='X-Fault-Script: 500,502'
expect_eq "$(get "$TMP/h" -H "$S2" "$URL/a")" 500 "unkeyed GET /a 1"
expect_eq "$(get "$TMP/h" -H "$S2" -X POST "$URL/a")" 500 "unkeyed POST /a 1"
expect_eq "$(get "$TMP/h" -H "$S2" "$URL/b")" 500 "unkeyed GET /b 1"
expect_eq "$(get "$TMP/h" -H "$S2" "$URL/a")" 502 "unkeyed GET /a 2"
expect_eq "$(get "$TMP/h" -H 'X-Fault-Script: 429,500' "$URL/a")" 429 "unkeyed GET /a, other script"
expect_eq "$(get "$TMP/h" -H "$S2" "$URL/a")" 200 "unkeyed GET /a 3"
pass "sequences: Idempotency-Key, else method + path + script"

# retry-after-date: an IMF-fixdate N seconds from the response's Date.
for n in 120 -3600; do
  expect_eq "$(get "$TMP/h" -H "X-Fault-Script: 503;retry-after-date=$n" "$URL/d$n")" 503 "date $n"
  ra=$(header Retry-After "$TMP/h")
  expect_match "$ra" "$IMF_FIXDATE" "retry-after-date=$n"
  d=$(($(date -u -d "$ra" +%s) - $(date -u -d "$(header Date "$TMP/h")" +%s)))
  expect_between "$d" $((n - 1)) $((n + 1)) "retry-after-date=$n offset from Date"
done
pass "retry-after-date gives IMF-fixdates, future and past"

# Raw Retry-After values are sent verbatim; quoted ones may hold commas.
expect_eq "$(get "$TMP/h" -H 'X-Fault-Script: 429;retry-after=soon' "$URL/r1")" 429 "raw"
expect_eq "$(header Retry-After "$TMP/h")" soon "raw Retry-After"
get "$TMP/h" -H 'X-Fault-Script: 503;retry-after="Wed, 21 Oct 2015 07:28:00 GMT",ok' "$URL/r2" >/dev/null
expect_eq "$(header Retry-After "$TMP/h")" "Wed, 21 Oct 2015 07:28:00 GMT" "quoted Retry-After"
get "$TMP/h" -H 'X-Fault-Script: 503;retry-after=-5' "$URL/r3" >/dev/null
expect_eq "$(header Retry-After "$TMP/h")" "-5" "negative Retry-After"
get "$TMP/h" -H 'X-Fault-Script: ok;retry-after=3' "$URL/r4" >/dev/null
expect_eq "$(header Retry-After "$TMP/h")" "3" "Retry-After on ok"
pass "retry-after=RAW is sent verbatim"

# header=NAME:VALUE sends any wait signal verbatim (twice: two field lines); header-epoch=NAME:N a Unix time.
get "$TMP/h" -H 'X-Fault-Script: 429;header=retry-after-ms:150;header="ratelimit:\"a\";r=0;t=1";header=ratelimit:b,ok' \
  "$URL/w1" >/dev/null
expect_eq "$(header retry-after-ms "$TMP/h")" 150 "header=retry-after-ms"
expect_eq "$(grep -ci '^ratelimit:' "$TMP/h")" 2 "two ratelimit field lines"
grep -qi '^ratelimit: "a";r=0;t=1' "$TMP/h" || fail "quoted header value: $(cat "$TMP/h")"
get "$TMP/h" -H 'X-Fault-Script: 503;header=grpc-retry-pushback-ms:-1;header-epoch=x-ratelimit-reset:-100' "$URL/w2" \
  >/dev/null
expect_eq "$(header grpc-retry-pushback-ms "$TMP/h")" -1 "header=grpc-retry-pushback-ms"
now=$(date +%s)
expect_between "$(header x-ratelimit-reset "$TMP/h")" $((now - 102)) $((now - 98)) "header-epoch=x-ratelimit-reset:-100"
pass "header= and header-epoch= send wait signals"

# delay=MS holds the answer back.
t=$(c -o /dev/null -w '%{time_total}' -H 'X-Fault-Script: 503;delay=400' "$URL/slow")
expect_between "$(awk -v t="$t" 'BEGIN { printf "%d", t * 1000 }')" 380 4000 "ms for delay=400"
pass "delay=MS"

# Other statuses, ok, and bodiless 204.
expect_eq "$(get "$TMP/h" -H 'X-Fault-Script: ok' "$URL/ok")" 200 "ok"
expect_eq "$(get "$TMP/h" -H 'X-Fault-Script: 418' "$URL/teapot")" 418 "418"
expect_eq "$(cat "$TMP/body")" '{"ok":false,"status":418,"n":1}' "418 body"
expect_eq "$(get "$TMP/h" -H 'X-Fault-Script: 204' "$URL/nc")" 204 "204"
expect_eq "$(wc -c <"$TMP/body")" 0 "204 body length"
pass "statuses, ok and 204"

# Request bodies are read in full: large POST, chunked PUT, PATCH with Expect: 100-continue.
head -c 3000000 /dev/zero | tr '\0' 'x' >"$TMP/big"
expect_eq "$(get "$TMP/h" -X POST --data-binary @"$TMP/big" -H 'X-Fault-Script: 503' "$URL/up")" 503 "big POST"
expect_eq "$(get "$TMP/h" -X POST --data-binary @"$TMP/big" -H 'X-Fault-Script: 503' "$URL/up")" 200 "big POST retry"
expect_eq "$(get "$TMP/h" -X PUT -H 'Transfer-Encoding: chunked' --data-binary @"$TMP/big" "$URL/up")" 200 "chunked PUT"
expect_eq "$(get "$TMP/h" -X PATCH -H 'Expect: 100-continue' --data-binary @"$TMP/big" "$URL/up")" 200 "PATCH"
expect_eq "$(get "$TMP/h" -X DELETE "$URL/up")" 200 "DELETE"
pass "request bodies accepted"

# A script that does not parse: 400 naming the problem.
for bad in '503;bogus=1' '50' '503,' 'reset;retry-after=1' '503;retry-after=' '503;delay=x' \
  '100' '503;retry-after="open' '503;header=date:1' '503;header=retry-after:1' '503;header=a b:1' \
  '503;header=nocolon' 'timeout;header=a:1' '503;header-epoch=x:soon' \
  '503;header=a:1;header=a:1;header=a:1;header=a:1;header=a:1'; do
  expect_eq "$(get "$TMP/h" -H "X-Fault-Script: $bad" "$URL/bad")" 400 "bad script '$bad'"
  grep -q '^bad X-Fault-Script: ' "$TMP/body" || fail "400 body for '$bad': $(cat "$TMP/body")"
done
grep -q 'refused with 400: bad X-Fault-Script' "$TMP/scripted.err" || fail "no log line for a bad script"
pass "bad scripts get 400 and a log line"

stop_server
