#!/usr/bin/env bash
# `retryfreeze soak --concurrency C` against the loopback upstream vs a plain libcurl multi loop sending the
# same requests (bench_multi: the same headers, keep-alive, concurrency and timeout), in the same run: CPU per
# request of each and the ratio. Both are timed as whole processes (user + sys CPU of the command, from bash's
# `time`), so soak's Lua start-up, ledger and closing stats count, and so does bench_multi's libcurl start-up.
# The two alternate for RF_SOAK_ROUNDS rounds (default 3) against one upstream; the ratio is the median of the
# rounds' ratios (other processes on a shared machine steal CPU unevenly; the median of pairs resists that).
# Usage: bench/client/bench_soak.sh BUILD_DIR [REQUESTS] [CONCURRENCY]
set -euo pipefail
build=$1
n=${2:-20000}
conc=${3:-64}
rounds=${RF_SOAK_ROUNDS:-3}
target=1.3
lock=$(mktemp /tmp/rf-bench-soak.XXXXXX.lock.json)
ledger=$(mktemp /tmp/rf-bench-soak.XXXXXX.jsonl)
printf '%s' '{"endpoint":"GET /v1/jobs/{id}","maxAttempts":3,"perAttemptTimeoutMs":5000,"totalBudgetMs":10000,"retryable":["HTTP_503"]}' >"$lock"
coproc SERVE { exec "$build/bin/retryfreeze-serve" --port 0 --max-seconds 600 2>/dev/null; }
read -r line <&"${SERVE[0]}"
url="http://127.0.0.1:${line##*:}"
trap 'kill $SERVE_PID 2>/dev/null; rm -f "$lock" "$ledger"' EXIT
# The User-Agent soak's client sends (retryfreeze/<version> libcurl/<version>).
versions=$("$build/bin/retryfreeze" --version)
ua="retryfreeze/$(sed -n '1s/^retryfreeze //p' <<<"$versions") libcurl/$(sed -n '2s/^libcurl \([^ ]*\).*/\1/p' <<<"$versions")"
TIMEFORMAT='%R %U %S'
ratios=()
for round in $(seq "$rounds"); do
  # soak's keys against a --url are "soak-<seed>-<uuid>-<i>": the baseline's have the same shape and length.
  key="soak-1-$(cat /proc/sys/kernel/random/uuid)"
  t=$( { time "$build/bench_multi" "$url" "$n" "$conc" "$key" "$ua" >/dev/null; } 2>&1 )
  read -r base_real base_user base_sys <<<"$t"
  : >"$ledger"
  t=$( { time "$build/bin/retryfreeze" soak "$lock" --url "$url" --requests "$n" --concurrency "$conc" \
    --ledger "$ledger" >/dev/null; } 2>&1 )
  read -r real user sys <<<"$t"
  base_cpu=$(awk -v n="$n" -v u="$base_user" -v s="$base_sys" 'BEGIN{printf "%.1f", 1e6 * (u + s) / n}')
  soak_cpu=$(awk -v n="$n" -v u="$user" -v s="$sys" 'BEGIN{printf "%.1f", 1e6 * (u + s) / n}')
  ratio=$(awk -v a="$soak_cpu" -v b="$base_cpu" 'BEGIN{printf "%.2f", a / b}')
  ratios+=("$ratio")
  echo "round $round: plain libcurl multi $base_cpu us CPU/request ($(awk -v n="$n" -v r="$base_real" 'BEGIN{printf "%.0f", n / r}') req/s);" \
    "retryfreeze soak $soak_cpu us CPU/request ($(awk -v n="$n" -v r="$real" 'BEGIN{printf "%.0f", n / r}') req/s); ratio ${ratio}x"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{v[NR] = $1} END{print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
verdict=$(awk -v r="$median" -v t="$target" 'BEGIN{print (r <= t) ? "met" : "NOT MET"}')
echo "soak: $n requests, concurrency $conc, $rounds rounds (whole commands: user + sys CPU)"
printf 'ratio: soak CPU per request vs plain curl-multi: %.2fx (target <= %sx) %s\n' "$median" "$target" "$verdict"
