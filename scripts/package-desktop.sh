#!/usr/bin/env bash
# Desktop installers with electron-builder (README "Desktop installers"). Needs internet: the
# Electron binary (for packaging) and Electron's Node headers (for the native modules) are
# downloaded. Not run by the tests or CI (these machines have no internet).
#
#   scripts/package-desktop.sh                 # installers for this OS (Linux: AppImage + deb)
#   scripts/package-desktop.sh --win --x64     # any electron-builder arguments
set -euo pipefail
cd "$(dirname "$0")/.."

# 1. dist/: server, plugins, bridge, main/ and (when present) the console.
npm run build

# 2. Native modules rebuilt for Electron's Node ABI (Electron 45 runs Node 22), in place; the
#    trap puts them back for this machine's Node, so tests and `npm start` keep working.
ELECTRON_VERSION="$(node -p "require('electron/package.json').version")"
restore() { npm rebuild better-sqlite3 pkcs11js cbor-extract >/dev/null 2>&1 || echo "warning: npm rebuild failed; run it by hand" >&2; }
trap restore EXIT
npx electron-rebuild --version "$ELECTRON_VERSION" --force --only better-sqlite3,pkcs11js,cbor-extract

# 3. The installers (electron-builder.yml); npmRebuild is off there: step 2 did it.
npx electron-builder --publish never "$@"
