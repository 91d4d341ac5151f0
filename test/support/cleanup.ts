/** Per-file cleanup helpers: register once at module level, then push what a test opened. */
import fs from 'node:fs';
import { afterAll, afterEach } from 'vitest';
import { tempDir } from './server.ts';

/** A list the test pushes closers onto; after each test they run newest first. */
export function cleanupsAfterEach(): (() => unknown)[] {
  const cleanups: (() => unknown)[] = [];
  afterEach(async () => {
    while (cleanups.length) await cleanups.pop()!();
  });
  return cleanups;
}

/** Makes temp dirs named `prefix…`; all are removed after the file's tests. */
export function scratchDirs(prefix: string): () => string {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });
  return () => {
    const d = tempDir(prefix);
    dirs.push(d);
    return d;
  };
}
