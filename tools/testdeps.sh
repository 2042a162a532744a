#!/usr/bin/env bash
# The programs Corral's tests run: redis-server and redis-cli for the Redis
# tests (internal/redistest), Debian's chromium for the console's browser
# tests (cmd/gateway). `make test` and .ci/run run this first. Present: it
# does nothing. Missing, as root with apt-get: it installs them. Missing
# otherwise: it stops, printing the one command that installs them, so no
# test is built or run without them.
set -euo pipefail

missing=() # programs not on PATH
pkgs=()    # the Debian packages that provide them
command -v redis-server >/dev/null 2>&1 || { missing+=(redis-server); pkgs+=(redis-server); }
command -v redis-cli >/dev/null 2>&1 || {
  missing+=(redis-cli)
  # redis-server's package depends on redis-tools, which has redis-cli.
  [ ${#pkgs[@]} -gt 0 ] || pkgs+=(redis-tools)
}
command -v chromium >/dev/null 2>&1 || { missing+=(chromium); pkgs+=(chromium); }
[ ${#missing[@]} -gt 0 ] || exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  {
    echo "testdeps: the tests need ${missing[*]}, which are not on PATH. Install them with:"
    echo
    echo "    sudo apt-get install -y ${pkgs[*]}"
    echo
    echo "(any system: install the same programs with its package manager). A bare"
    echo "'go test ./...' skips the tests that need them; 'make test' does not."
  } >&2
  exit 1
fi

echo "testdeps: installing ${pkgs[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${pkgs[@]}" >/dev/null
for p in "${missing[@]}"; do
  command -v "$p" >/dev/null 2>&1 || { echo "testdeps: $p still not on PATH after apt-get install" >&2; exit 1; }
done
