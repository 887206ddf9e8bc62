#!/usr/bin/env bash
# Installs the build into a temporary prefix and uses it as a new user would: (a) builds examples/embed_host.c
# with pkg-config, (b) requires each installed module from a stock interpreter of its ABI with only the prefix on
# LUA_PATH/LUA_CPATH, (c) runs `retryfreeze check` from the prefix. Usage: install_spec.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
prefix=$(mktemp -d /tmp/rf-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
fail() { echo "FAIL: $*"; exit 1; }

test -f "$prefix/lib/libretryfreeze.a" || fail "no static library"
readelf -d "$prefix/lib/libretryfreeze.so" | grep -q 'SONAME.*libretryfreeze.so.0' || fail "no versioned SONAME"
test -f "$prefix/include/retryfreeze/decide.h" || fail "no headers"
test -f "$prefix/lib/cmake/retryfreeze/retryfreezeConfig.cmake" || fail "no CMake package config"

# Every installed program and module that needs a libretryfreeze*.so finds it inside the prefix through its
# RUNPATH ($ORIGIN-relative), with no LD_LIBRARY_PATH and no ldconfig.
n=0
while IFS= read -r f; do
  readelf -d "$f" 2>/dev/null | grep -q 'NEEDED.*libretryfreeze' || continue
  readelf -d "$f" | grep -Eq '(RUNPATH|RPATH).*\$ORIGIN' || fail "$f has no \$ORIGIN RUNPATH"
  libs=$(env -u LD_LIBRARY_PATH ldd "$f" | grep 'libretryfreeze')
  [[ $libs != *"not found"* ]] || fail "$f: $libs"
  while IFS= read -r l; do
    [[ $l == *"=> $prefix/"* ]] || fail "$f resolves a library outside the prefix: $l"
  done <<<"$libs"
  n=$((n + 1))
done < <(find "$prefix" -type f \( -path '*/bin/*' -o -name '*.so*' \))
# The module links the static libraries when RF_MODULE_STATIC (the default with RF_LTO): then it needs none.
if grep -q '^RF_MODULE_STATIC:BOOL=ON' "$build/CMakeCache.txt"; then
  want=4 what="the CLI, the attempt, Redis budget and client libraries"
  while IFS= read -r m; do
    ! readelf -d "$m" | grep -q 'NEEDED.*libretryfreeze' || fail "$m links libretryfreeze*.so with RF_MODULE_STATIC"
  done < <(find "$prefix" -type f -name core.so)
else
  want=5 what="the CLI, the attempt, Redis budget and client libraries, the module"
fi
[[ $n -ge $want ]] || fail "only $n installed files link libretryfreeze (want $what)"
# Every installed module exports its entry point and nothing else (cmake/lua_module.map): the engine's rf_*
# functions inside it neither interpose on nor are interposed by a libretryfreeze.so of another version in the
# same process, and its own calls to them are direct.
modules=0
while IFS= read -r m; do
  exports=$(nm -D --defined-only "$m" | awk '{print $3}')
  [[ $exports == luaopen_retryfreeze_core ]] || fail "$m exports more than luaopen_retryfreeze_core: $(echo $exports | head -c 200)"
  modules=$((modules + 1))
done < <(find "$prefix" -type f -name core.so)
[[ $modules -ge 1 ]] || fail "no core.so installed"
echo "ok: $modules installed modules export only luaopen_retryfreeze_core"
# The nginx module, when the build made it (cmake/nginx_module.cmake): installed, self-contained (the engine linked
# in, its symbols hidden), exporting only what nginx's loader reads.
if [[ -f $build/lib/nginx/ngx_http_retryfreeze_module.so ]]; then
  m="$prefix/lib/retryfreeze/nginx/ngx_http_retryfreeze_module.so"
  [[ -f $m ]] || fail "no nginx module installed at $m"
  ! readelf -d "$m" | grep -q 'NEEDED.*libretryfreeze' || fail "$m links libretryfreeze*.so"
  exports=$(nm -D --defined-only "$m" | awk '{print $3}' | sort | tr '\n' ' ')
  [[ $exports == "ngx_http_retryfreeze_module ngx_module_names ngx_module_order ngx_modules " ]] ||
    fail "$m exports more than nginx's module symbols: $(echo "$exports" | head -c 200)"
  echo "ok: the nginx module is installed and exports only nginx's module symbols"
fi
echo "ok: $n installed files find libretryfreeze*.so in the prefix through their RUNPATH"

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc -std=c11 "$prefix/share/retryfreeze/examples/embed_host.c" $(pkg-config --cflags --libs retryfreeze lua5.4) \
  -Wl,-rpath,"$prefix/lib" -o "$prefix/embed_host"
out=$("$prefix/embed_host" "$prefix/share/lua/5.4" "$prefix/share/retryfreeze/examples/retry-budget.lock.json")
[[ $out =~ ^sha256:[0-9a-f]+\ true\ pinned-status\ delay_ms=1000\ timeout_ms=1400$ ]] || fail "embed_host printed: $out"
echo "ok: embed_host built with pkg-config: $out"

# docs/c-api.md's examples, as written there: decide_host.c (the engine alone) with pkg-config, and with the
# page's find_package CMakeLists.txt against the shared target and against the static one.
want_decide='first attempt timeout_ms=2000; after HTTP_429: retry pinned-status delay_ms=1000 timeout_ms=1400'
lock="$prefix/share/retryfreeze/examples/retry-budget.lock.json"
cc -std=c11 "$prefix/share/retryfreeze/examples/decide_host.c" $(pkg-config --cflags --libs retryfreeze) \
  -Wl,-rpath,"$prefix/lib" -o "$prefix/decide_host"
out=$("$prefix/decide_host" "$lock")
[[ $out == "$want_decide" ]] || fail "decide_host (pkg-config) printed: $out"
# A missing lock: one sentence naming the path once (err.path is the file; docs/c-api.md, "Conventions").
out=$("$prefix/decide_host" /nonexistent.lock.json 2>&1) && fail "decide_host accepted a missing lock"
[[ $out == "cannot open lock /nonexistent.lock.json: No such file or directory" ]] ||
  fail "decide_host on a missing lock printed: $out"
for target in retryfreeze retryfreeze_static; do
  consumer="$prefix/consumer-$target"
  mkdir -p "$consumer"
  cp "$prefix/share/retryfreeze/examples/decide_host.c" "$consumer/"
  sed -n '/^```cmake$/,/^```$/p' "$src/docs/c-api.md" | sed '1d;$d' |
    sed "s/PRIVATE retryfreeze::retryfreeze)/PRIVATE retryfreeze::$target)/" >"$consumer/CMakeLists.txt"
  grep -q "retryfreeze::$target)" "$consumer/CMakeLists.txt" || fail "docs/c-api.md has no find_package example"
  cmake -S "$consumer" -B "$consumer/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null ||
    fail "find_package(retryfreeze) failed for retryfreeze::$target"
  cmake --build "$consumer/build" >/dev/null || fail "decide_host did not build against retryfreeze::$target"
  out=$("$consumer/build/decide_host" "$lock")
  [[ $out == "$want_decide" ]] || fail "decide_host (retryfreeze::$target) printed: $out"
done
readelf -d "$prefix/consumer-retryfreeze_static/build/decide_host" | grep -q 'NEEDED.*libretryfreeze' &&
  fail "decide_host linked against retryfreeze::retryfreeze_static needs a shared libretryfreeze"
echo "ok: decide_host built with pkg-config and with find_package (shared and static targets): $out"

# Each installed module from a stock interpreter of its ABI, with only the prefix on its paths: lua5.4 for
# lib/lua/5.4; luajit (or lua5.1) for lib/lua/5.1, which LuaJIT and 5.1 share. A LuaJIT-only build has no 5.4 module.
want=$(sed -n 's/^project(retryfreeze VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
required=0
for abi in 5.4 5.3 5.2 5.1; do
  [[ -f $prefix/lib/lua/$abi/retryfreeze/core.so ]] || continue
  lua=lua$abi
  [[ $abi == 5.1 ]] && command -v luajit >/dev/null && lua=luajit
  out=$(cd / && LUA_PATH="$prefix/share/lua/$abi/?.lua;$prefix/share/lua/$abi/?/init.lua" \
    LUA_CPATH="$prefix/lib/lua/$abi/?.so" $lua -e 'local rf = require "retryfreeze"; print(rf.VERSION)')
  [[ $out == "$want" ]] || fail "$lua require gave '$out', want '$want'"
  echo "ok: require \"retryfreeze\" from the prefix under $lua: $out"
  required=$((required + 1))
done
[[ $required -ge 1 ]] || fail "no module was required from the prefix"

out=$(cd / && "$prefix/bin/retryfreeze" check "$prefix/share/retryfreeze/examples/retry-budget.lock.json")
[[ $out == ok:* ]] || fail "retryfreeze check printed: $out"
[[ $("$prefix/bin/retryfreeze" --version | head -n 1) == "retryfreeze $want" ]] || fail "--version disagrees with CMakeLists.txt"
echo "ok: retryfreeze check and --version from the prefix"

out=$(cd "$prefix" && "$prefix/bin/retryfreeze" demo --requests 30 --ledger "$prefix/demo.jsonl") || fail "demo from the prefix: $out"
[[ $out == *"duplicate executions            0"* ]] || fail "demo from the prefix printed: $out"
echo "ok: retryfreeze demo from the prefix (examples from share/retryfreeze/examples)"

out=$(cd "$prefix" && "$prefix/bin/retryfreeze" report "$prefix/demo.jsonl" -o "$prefix/report.html") ||
  fail "report from the prefix: $out"
grep -q 'vega-lite' "$prefix/report.html" && test -f "$prefix/share/lua/5.4/retryfreeze/vendor/vega/LICENSE.vega" ||
  fail "the report from the prefix lacks the inlined chart library or its licence"
echo "ok: retryfreeze report from the prefix (the chart library installed beside the modules)"
cmake --build "$build" --target uninstall >/dev/null || fail "the uninstall target failed"
while IFS= read -r f; do
  [[ -e $f || -L $f ]] && fail "uninstall left $f"
done <"$build/install_manifest.txt"
echo "ok: the uninstall target removed every installed file"
echo "1 passed, 0 failed"
