#!/usr/bin/env bash
# Installs what the tests need (only what is missing) and runs the whole suite:
# type check, lint, unit and integration tests. `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v sipp >/dev/null 2>&1 || need+=(sip-tester)
command -v softhsm2-util >/dev/null 2>&1 || need+=(softhsm2)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v pkcs11-tool >/dev/null 2>&1 || need+=(opensc)
# A real desk phone (SIP over TLS, SRTP, G.722; its libspandsp is the G.722 reference) and the
# Python that loads that reference in the G.722 test.
command -v baresip >/dev/null 2>&1 || need+=(baresip-core)
command -v python3 >/dev/null 2>&1 || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Native modules (better-sqlite3, pkcs11js) build from source here: no binary is downloaded.
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi

[ -f dist/console/index.html ] || npm run build:console
# The type check and the lint side by side (two cores; each is one single-threaded process), each
# printed whole when done, the first failure failing the run. `npm run lint` is ESLint then
# Prettier; ESLint (type-aware, ~100 s here) is the long one, so Prettier runs after the type check
# (~30 s) on the other core instead of after ESLint: the same checks, ~15 s sooner.
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
( npx tsc --noEmit -p tsconfig.json && npx tsc --noEmit -p renderer/tsconfig.json ) >"$out/types" 2>&1 &
types=$!
npx eslint . >"$out/eslint" 2>&1 &
eslint=$!
status=0
wait $types || status=1
echo "== type check"; cat "$out/types"
npx prettier --check . >"$out/prettier" 2>&1 || status=1
wait $eslint || status=1
echo "== lint (ESLint + Prettier)"; cat "$out/eslint" "$out/prettier"
[ $status -eq 0 ] || { echo "type check or lint failed"; exit 1; }
echo "== tests"
npx vitest run "$@"
