#!/usr/bin/env bash
# `retryfreeze soak --concurrency 64` against the loopback upstream vs a plain libcurl multi loop sending the
# same requests (bench_multi), in the same run: requests per second and CPU per request of each, and the ratio.
# Usage: bench/bench_soak.sh BUILD_DIR [REQUESTS] [CONCURRENCY]
set -euo pipefail
build=$1
n=${2:-20000}
conc=${3:-64}
lock=$(mktemp /tmp/rf-bench-soak.XXXXXX.lock.json)
ledger=$(mktemp /tmp/rf-bench-soak.XXXXXX.jsonl)
printf '%s' '{"endpoint":"GET /v1/jobs/{id}","maxAttempts":3,"perAttemptTimeoutMs":5000,"totalBudgetMs":10000,"retryable":["HTTP_503"]}' >"$lock"
coproc SERVE { exec "$build/bin/retryfreeze-serve" --port 0 --max-seconds 300 2>/dev/null; }
read -r line <&"${SERVE[0]}"
url="http://127.0.0.1:${line##*:}"
trap 'kill $SERVE_PID 2>/dev/null; rm -f "$lock" "$ledger"' EXIT
"$build/bench_multi" "$url" "$n" "$conc" | tee /tmp/rf-bench-multi.txt
TIMEFORMAT='%R %U %S'
t=$( { time "$build/bin/retryfreeze" soak "$lock" --url "$url" --requests "$n" --concurrency "$conc" \
  --ledger "$ledger" >/dev/null; } 2>&1 )
read -r real user sys <<<"$t"
soak_rps=$(awk -v n="$n" -v r="$real" 'BEGIN{printf "%.0f", n / r}')
soak_cpu=$(awk -v n="$n" -v u="$user" -v s="$sys" 'BEGIN{printf "%.1f", 1e6 * (u + s) / n}')
base_cpu=$(sed -n 's/.*, \([0-9.]*\) us CPU\/request/\1/p' /tmp/rf-bench-multi.txt)
echo "retryfreeze soak:    $n requests, concurrency $conc: $soak_rps req/s (whole command), $soak_cpu us CPU/request (engine, Lua coroutines, ledger, stats)"
awk -v a="$soak_cpu" -v b="$base_cpu" 'BEGIN{printf "soak CPU per request / plain multi: %.2fx\n", a / b}'
