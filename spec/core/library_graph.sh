#!/usr/bin/env bash
# The library graph of docs/design.md ("Layers and what each may know", "The attempt path"), read from the built
# files (ctest c_library_graph, cmake/client.cmake):
#   libretryfreeze_attempt  needs the engine and nothing of libcurl, hiredis or OpenSSL: not in what its sources
#                           include (every header the compiler reads, system ones too), not in its NEEDED entries or
#                           anything they load (ldd), not in its undefined symbols; it exports exactly the rfi_
#                           functions core/src/attempt/*.h declare RFI_ABI, each under the private version node;
#   libretryfreeze_client   needs the attempt library's private node (every rfi_ it imports carries it), defines no
#                           function of the attempt loop or of the Redis store, and needs neither hiredis nor OpenSSL;
#   libretryfreeze_budget_redis  needs neither the client nor the attempt library;
#   core/include            names no rfi_ symbol.
# Usage: library_graph.sh SOURCE_DIR CC ATTEMPT_SO CLIENT_SO BUDGET_REDIS_SO ABI_NODE
set -euo pipefail
src=$1 cc=$2 attempt=$3 client=$4 budget=$5 node=$6
fail() { echo "FAIL: $*"; exit 1; }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
foreign='libcurl|libhiredis|libssl'

# What the attempt loop's sources read: the compiler's own list of every header each includes, system ones too.
headers=$(cd "$src" && for f in core/src/attempt/*.c; do "$cc" -std=c11 -M -I core/include "$f"; done)
[[ $headers == *retryfreeze/attempt_step.h* ]] || fail "the compiler listed no headers of core/src/attempt"
if grep -Eo '[^ ]*/(curl|hiredis|openssl)/[^ ]*' <<<"$headers" | head -n 3 | grep .; then
  fail "core/src/attempt includes a libcurl, hiredis or OpenSSL header (above)"
fi
echo "ok: core/src/attempt/*.c read no libcurl, hiredis or OpenSSL header ($(wc -w <<<"$headers") paths listed)"

n=$(needed "$attempt")
grep -qx 'libretryfreeze.so.[0-9]*' <<<"$n" || fail "$attempt does not need libretryfreeze: $(tr "\n" " " <<<"$n")"
! grep -Eq "$foreign|libretryfreeze_(client|budget_redis)" <<<"$n" || fail "$attempt needs: $(tr "\n" " " <<<"$n")"
loaded=$(ldd "$attempt")
! grep -Eq "$foreign" <<<"$loaded" || fail "$attempt loads (ldd): $(grep -E "$foreign" <<<"$loaded")"
undefined=$(nm -D --undefined-only "$attempt" | awk '{print $2}')
! grep -Eq '^(curl_|redis|SSL_)' <<<"$undefined" || fail "$attempt imports $(grep -E '^(curl_|redis|SSL_)' <<<"$undefined")"
echo "ok: $(basename "$attempt") needs $(tr "\n" " " <<<"$n"); ldd loads no libcurl, hiredis or libssl"

# Its internal ABI: the RFI_ABI declarations, exported under the private node, and no other rfi_ symbol.
declared=$(cat "$src"/core/src/attempt/*.h | tr '\n' ' ' | grep -Eo 'RFI_ABI [a-z0-9_ *]*rfi_[a-z0-9_]+\(' |
  sed -E 's/.*(rfi_[a-z0-9_]+)\($/\1/' | sort)
[[ -n $declared ]] || fail "core/src/attempt/*.h declare nothing RFI_ABI"
exported=$(nm -D --defined-only "$attempt" | awk '$3 ~ /^rfi_/ {print $3}' | sort)
want=$(sed "s/\$/@@$node/" <<<"$declared")
[[ $exported == "$want" ]] || fail "$attempt exports rfi_ symbols other than RFI_ABI's under $node:
$(diff <(echo "$want") <(echo "$exported") || true)"
echo "ok: $(basename "$attempt") exports its $(wc -l <<<"$declared") RFI_ABI functions under $node, no other rfi_"

n=$(needed "$client")
grep -qx 'libretryfreeze_attempt.so.[0-9]*' <<<"$n" || fail "$client does not need libretryfreeze_attempt: $(tr "\n" " " <<<"$n")"
! grep -Eq 'libhiredis|libssl|libretryfreeze_budget_redis' <<<"$n" || fail "$client needs: $(tr "\n" " " <<<"$n")"
imports=$(nm -D --undefined-only "$client" | awk '$2 ~ /^rfi_/ {print $2}')
[[ -n $imports ]] || fail "$client imports no rfi_ function of the attempt loop"
! grep -v "@$node\$" <<<"$imports" || fail "$client imports the rfi_ functions above without $node"
readelf -V "$client" | grep -q "Name: $node" || fail "$client's version needs do not name $node"
defined=$(nm -D --defined-only "$client" | awk '{print $3}')
! grep -E '^(rfi_|rf_step|rf_response_clear|rf_request_header_check|rf_retry_budget_redis)' <<<"$defined" ||
  fail "$client defines the attempt loop's or the Redis store's functions above"
echo "ok: $(basename "$client") needs $(tr "\n" " " <<<"$n"); imports $(wc -l <<<"$imports") rfi_ functions at $node"

n=$(needed "$budget")
! grep -Eq 'libretryfreeze_(attempt|client)' <<<"$n" || fail "$budget needs: $(tr "\n" " " <<<"$n")"
nm -D --defined-only "$budget" | grep -q ' rf_retry_budget_redis_new$' || fail "$budget lacks rf_retry_budget_redis_new"
echo "ok: $(basename "$budget") needs $(tr "\n" " " <<<"$n")"

if grep -rn 'rfi_' "$src/core/include"; then
  fail "a public header names an rfi_ symbol (above)"
fi
echo "ok: no public header names an rfi_ symbol"
echo "1 passed, 0 failed"
