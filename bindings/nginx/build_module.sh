#!/usr/bin/env bash
# Builds ngx_http_retryfreeze_module.so against the installed nginx, as Debian builds its own dynamic modules: from
# nginx-dev's copy of nginx's sources (its configure, auto/ and headers) with the installed nginx's configure flags
# (conf_flags), so that nginx loads it (the same --with-compat signature). Run by cmake/nginx_module.cmake.
# Usage: build_module.sh NGINX_SRC WORK_DIR MODULE_DIR INCS LIBS OUT
#   NGINX_SRC  nginx-dev's sources (/usr/share/nginx/src), copied to WORK_DIR once (configure writes there)
#   MODULE_DIR bindings/nginx (its config script reads RF_NGX_INCS and RF_NGX_LIBS)
#   INCS, LIBS the engine's include directory and the link line of its static libraries
#   OUT        where the module goes
set -euo pipefail
src=$1 work=$2 module=$3 incs=$4 libs=$5 out=$6
if [[ ! -f $work/objs/Makefile || $module/config -nt $work/objs/Makefile ]]; then
  rm -rf "$work"
  mkdir -p "$work"
  cp -r "$src"/. "$work"/
  # shellcheck disable=SC1091 # nginx-dev's own file: NGX_CONF_FLAGS, the installed nginx's configure flags
  source "$work/conf_flags"
  (cd "$work" && RF_NGX_INCS=$incs RF_NGX_LIBS=$libs ./configure "${NGX_CONF_FLAGS[@]}" \
    --add-dynamic-module="$module" >configure.log 2>&1) || { cat "$work/configure.log" >&2; exit 1; }
fi
# MAKEFLAGS of the make above this one (CMake's) name a jobserver this make cannot reach: one job, no warning
env -u MAKEFLAGS -u MFLAGS make -s -C "$work" -f objs/Makefile modules >/dev/null
mkdir -p "$(dirname "$out")"
cp "$work/objs/ngx_http_retryfreeze_module.so" "$out"
