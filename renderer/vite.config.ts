import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// The console is served by the appliance at /console/ (plugins/console): hashed file names under
// assets/ are cached for a year there, so every build must name changed content anew (Vite does).
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/console/',
  plugins: [react()],
  build: {
    outDir: fileURLToPath(new URL('../dist/console', import.meta.url)),
    emptyOutDir: true,
    // Maps for a developer's tools, not referenced from the served files (the appliance does not serve them).
    sourcemap: 'hidden',
    // .vite/manifest.json: the benchmark sums the JavaScript the first screen needs from it (not served: dot folders are skipped).
    manifest: true,
    // No inline scripts or module preload polyfill: the CSP allows scripts from 'self' only.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 800,
  },
});
