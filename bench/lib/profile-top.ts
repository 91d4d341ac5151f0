/**
 * `node bin/run-ts.mjs bench/lib/profile-top.ts FILE.cpuprofile [N]`: the N functions with the
 * most self time in a V8 CPU profile (from `node --cpu-prof`), and the same summed per file, to
 * find a hot path without a GUI.
 */
import fs from 'node:fs';
import path from 'node:path';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const [file, nArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: profile-top.ts FILE.cpuprofile [N]');
  process.exit(2);
}
const prof = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const self = new Map<number, number>();
prof.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (prof.timeDeltas[i] ?? 0)));
const total = [...self.values()].reduce((a, b) => a + b, 0);
const fnTime = new Map<string, number>();
const fileTime = new Map<string, number>();
for (const [id, us] of self) {
  const f = byId.get(id)!.callFrame;
  const where = f.url ? path.relative(process.cwd(), f.url.replace(/^file:\/\//, '')) : '(native)';
  const k = `${f.functionName || '(anonymous)'}  ${where}:${f.lineNumber + 1}`;
  fnTime.set(k, (fnTime.get(k) ?? 0) + us);
  fileTime.set(where, (fileTime.get(where) ?? 0) + us);
}
const top = (m: Map<string, number>, n: number) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, us]) => `${((us / total) * 100).toFixed(1).padStart(5)}%  ${k}`)
    .join('\n');
const n = Number(nArg ?? 30);
console.log(`total ${(total / 1e6).toFixed(2)} s sampled\n\nby function (self time):\n${top(fnTime, n)}\n\nby file:\n${top(fileTime, n)}`);
