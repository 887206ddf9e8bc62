#!/usr/bin/env bash
# Re-vendors the charting library that `retryfreeze report` inlines into its HTML: the minified UMD builds of
# Vega and Vega-Lite, byte for byte as the pinned npm packages ship them, with their licences. Run it after
# changing a version below; it checks each tarball against the pinned integrity (sha512, as npm records it).
# Needs npm (the registry) and openssl. Usage: bash lua/retryfreeze/vendor/vega/revendor.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# name version integrity
pins=(
  "vega 6.4.0 sha512-rHXCq2LpEWCLMjXBEj7hocY9G0/i5TGYRayGGSj06VTF4+l2IG2Z7oeZKCjWbUh/7hTE/mVhbaOPB72wCElh6g=="
  "vega-lite 6.5.0 sha512-fMXF6s0MrIg0UTWnLIfeFtgSLzVhyzSKobzGrh5rhS+mL6FOYFG3m7ouJ4U23gj65EK+gl9FIIT5w7wLNaAzkA=="
)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for pin in "${pins[@]}"; do
  read -r name version integrity <<<"$pin"
  (cd "$work" && npm pack --silent "$name@$version" >/dev/null)
  tgz="$work/$name-$version.tgz"
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | openssl base64 -A)"
  if [[ $got != "$integrity" ]]; then
    echo "revendor: $name@$version: integrity $got, expected $integrity" >&2
    exit 1
  fi
  mkdir -p "$work/$name"
  tar xzf "$tgz" -C "$work/$name"
  cp "$work/$name/package/build/$name.min.js" "$here/$name.min.js"
  cp "$work/$name/package/LICENSE" "$here/LICENSE.$name"
  echo "revendor: $name@$version ($integrity)"
done
