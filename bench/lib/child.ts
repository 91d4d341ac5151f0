/**
 * Runs one benchmark file in this (child) process and reports over IPC, so each benchmark has a
 * fresh heap and its memory does not skew the next one. Started by bench/run.ts.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { validateResults, type BenchFn } from './contract.ts';

type Msg = { type: 'result'; results: unknown } | { type: 'error'; message: string; stack?: string };

function send(m: Msg): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) {
      console.log(JSON.stringify(m, null, 2));
      resolve();
      return;
    }
    process.send(m, undefined, undefined, () => resolve());
  });
}

const file = process.argv[2];
try {
  if (!file) throw new Error('usage: child.ts BENCH_FILE');
  const mod = (await import(pathToFileURL(path.resolve(file)).href)) as { default?: unknown };
  if (typeof mod.default !== 'function') throw new Error(`${file} has no default-exported run() function`);
  const results = validateResults(await (mod.default as BenchFn)());
  await send({ type: 'result', results });
} catch (e) {
  const err = e instanceof Error ? e : new Error(String(e));
  await send({ type: 'error', message: err.message, stack: err.stack });
}
// A benchmark that leaves a timer or socket behind must not hold the runner up.
process.exit(0);
