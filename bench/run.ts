/**
 * `npm run bench [-- NAME...] [--timeout SECONDS] [--no-write] [--dir DIR] [--results DIR]`
 *
 * Discovers bench/*.bench.ts (or the NAMEs given: `core` means bench/core.bench.ts), runs each in
 * a child process of its own (one benchmark's heap and servers never skew the next one's),
 * prints one table and writes bench/results/<YYYY-MM-DD>-<hostname>.md and .json. A benchmark
 * that throws, times out or crashes is reported as failed and the others still run. The exit code
 * is 0 unless the runner itself failed (bad arguments: 2; no benchmark matched: 1).
 */
import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { fmt, targetMet, type BenchResult } from './lib/contract.ts';
import { machineInfo, type MachineInfo } from './lib/machine.ts';

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
// --dir and --results move discovery and output elsewhere (the runner's own tests use them).
let BENCH_DIR = path.join(ROOT, 'bench');
let RESULTS_DIR = path.join(BENCH_DIR, 'results');
const RUN_TS = path.join(ROOT, 'bin', 'run-ts.mjs');
const CHILD = path.join(ROOT, 'bench', 'lib', 'child.ts');

export interface BenchOutcome {
  bench: string;
  file: string;
  status: 'ok' | 'failed';
  error?: string;
  startedAt: string;
  durationS: number;
  results: BenchResult[];
}

export interface ResultsFile {
  date: string;
  machine: MachineInfo;
  /** Commit the tree was at (uncommitted changes are not recorded). */
  commit?: string;
  /** By benchmark name; a later run of the same benchmark on the same day replaces its entry. */
  benches: Record<string, BenchOutcome>;
}

function discover(names: string[]): { name: string; file: string }[] {
  const all = fs
    .readdirSync(BENCH_DIR)
    .filter((f) => f.endsWith('.bench.ts'))
    .sort()
    .map((f) => ({ name: f.slice(0, -'.bench.ts'.length), file: path.join(BENCH_DIR, f) }));
  if (!names.length) return all;
  const wanted = names.map((n) => path.basename(n).replace(/\.bench\.ts$/, ''));
  const unknown = wanted.filter((n) => !all.some((b) => b.name === n));
  if (unknown.length) {
    throw new RunnerError(`no benchmark named ${unknown.join(', ')} (have: ${all.map((b) => b.name).join(', ') || 'none'})`, 1);
  }
  return all.filter((b) => wanted.includes(b.name));
}

class RunnerError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

const live = new Set<ChildProcess>();

/** Kills a benchmark's whole process group: the servers it forked go with it. */
function killGroup(child: ChildProcess): void {
  // Also after the benchmark exited: a server it left behind is still in the group.
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // ESRCH: the group is already gone.
  }
}

function runOne(b: { name: string; file: string }, timeoutS: number): Promise<BenchOutcome> {
  const startedAt = new Date();
  const t0 = performance.now();
  return new Promise((resolve) => {
    let settled = false;
    let results: BenchResult[] | undefined;
    let error: string | undefined;
    // detached: its own process group, so a timeout can end the servers it started as well.
    const child = fork(RUN_TS, [CHILD, b.file], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], detached: true });
    live.add(child);
    const finish = (status: 'ok' | 'failed', err?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      live.delete(child);
      killGroup(child);
      resolve({
        bench: b.name,
        file: path.relative(ROOT, b.file),
        status,
        ...(err ? { error: err } : {}),
        startedAt: startedAt.toISOString(),
        durationS: Math.round((performance.now() - t0) / 100) / 10,
        results: results ?? [],
      });
    };
    const timer = setTimeout(() => finish('failed', `timed out after ${timeoutS} s`), timeoutS * 1000);
    child.on('message', (m: { type?: string; results?: BenchResult[]; message?: string; stack?: string }) => {
      if (m.type === 'result') results = m.results;
      else if (m.type === 'error') {
        error = m.message;
        if (m.stack) console.error(`[${b.name}] ${m.stack}`);
      }
    });
    child.on('error', (e) => finish('failed', `could not start: ${e.message}`));
    // 'close', not 'exit': it comes after the IPC channel has delivered the last message.
    child.on('close', (code, signal) => {
      if (results) finish('ok');
      else finish('failed', error ?? `exited (${signal ?? `code ${code}`}) without results`);
    });
  });
}

function pad(cells: string[][]): string[] {
  const w = cells[0]!.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)));
  return cells.map((r) =>
    r
      .map((c, i) => (i >= 2 && i !== 3 && i !== 4 && i !== 7 ? c.padStart(w[i]!) : c.padEnd(w[i]!)))
      .join('  ')
      .trimEnd(),
  );
}

const HEAD = ['benchmark', 'result', 'value', 'unit', 'peer', 'peer value', 'ratio', 'target', 'met?'];

function metText(r: BenchResult): string {
  const m = targetMet(r);
  return m === undefined ? (r.target ? '?' : '') : m ? 'yes' : 'NO';
}

function rowsOf(o: BenchOutcome): string[][] {
  if (o.status === 'failed') return [[o.bench, `FAILED: ${o.error ?? 'unknown error'}`, '', '', '', '', '', '', '']];
  return o.results.map((r) => [
    o.bench,
    r.name,
    fmt(r.value),
    r.unit,
    r.peer ?? '',
    fmt(r.peerValue),
    r.ratio === undefined ? '' : r.ratio.toFixed(2),
    r.target ?? '',
    metText(r),
  ]);
}

function printTable(outcomes: BenchOutcome[]): void {
  const rows = outcomes.flatMap(rowsOf);
  console.log('');
  for (const line of pad([HEAD, ...rows])) console.log(line);
  const notes = outcomes.flatMap((o) => o.results.filter((r) => r.note).map((r) => `  ${o.bench} / ${r.name}: ${r.note}`));
  if (notes.length) console.log(['', 'Notes:', ...notes].join('\n'));
}

function mdCell(s: string): string {
  return s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** Everything from this line on in a results .md is written by hand and kept across runs. */
export const NOTES_MARKER = '<!-- Notes below this line are written by hand; bench/run.ts keeps them. -->';

export function renderMarkdown(f: ResultsFile): string {
  const m = f.machine;
  const lines = [
    `# Benchmark results ${f.date} on ${m.hostname}`,
    '',
    `- Machine: ${m.cpuModel}, ${m.cores} cores, ${m.ramGiB} GiB RAM, ${m.arch}`,
    `- OS: ${m.os}`,
    `- Node: ${m.node}`,
    `- Load average at start of the last run (1/5/15 min): ${m.loadavg.join(' / ')}`,
    ...(f.commit ? [`- Commit: ${f.commit}`] : []),
    '',
    `| ${HEAD.join(' | ')} |`,
    `|${HEAD.map((_, i) => (i >= 2 && i !== 3 && i !== 4 && i !== 7 ? '---:' : '---')).join('|')}|`,
  ];
  const outcomes = Object.values(f.benches).sort((a, b) => a.bench.localeCompare(b.bench));
  for (const row of outcomes.flatMap(rowsOf)) lines.push(`| ${row.map(mdCell).join(' | ')} |`);
  lines.push('');
  for (const o of outcomes) {
    lines.push(`## ${o.bench}`, '', `\`${o.file}\`, started ${o.startedAt}, took ${o.durationS} s: ${o.status}${o.error ? ` (${mdCell(o.error)})` : ''}.`, '');
    for (const r of o.results.filter((x) => x.note)) lines.push(`- **${mdCell(r.name)}**: ${mdCell(r.note!)}`);
    lines.push('');
  }
  return (
    lines
      .join('\n')
      .replace(/\n{3,}/g, '\n\n')
      .trimEnd() + '\n'
  );
}

function gitCommit(): string | undefined {
  try {
    const head = fs.readFileSync(path.join(ROOT, '.git', 'HEAD'), 'utf8').trim();
    if (!head.startsWith('ref: ')) return head;
    const ref = head.slice(5);
    const loose = path.join(ROOT, '.git', ref);
    if (fs.existsSync(loose)) return fs.readFileSync(loose, 'utf8').trim();
    const packed = fs.readFileSync(path.join(ROOT, '.git', 'packed-refs'), 'utf8');
    return new RegExp(`^([0-9a-f]{40}) ${ref.replace(/[/.]/g, '\\$&')}$`, 'm').exec(packed)?.[1];
  } catch {
    return undefined;
  }
}

function writeResults(outcomes: BenchOutcome[], machine: MachineInfo): string {
  const date = new Date().toISOString().slice(0, 10);
  const base = path.join(RESULTS_DIR, `${date}-${machine.hostname.replace(/[^A-Za-z0-9._-]/g, '_')}`);
  let prev: ResultsFile | undefined;
  try {
    prev = JSON.parse(fs.readFileSync(`${base}.json`, 'utf8')) as ResultsFile;
  } catch {
    prev = undefined;
  }
  const file: ResultsFile = {
    date,
    machine,
    commit: gitCommit(),
    benches: { ...(prev?.benches ?? {}), ...Object.fromEntries(outcomes.map((o) => [o.bench, o])) },
  };
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  // What people wrote under the marker (paired runs, A/B tables) stays: only the part above it
  // is made from the .json.
  let kept = '';
  try {
    const md = fs.readFileSync(`${base}.md`, 'utf8');
    const at = md.indexOf(NOTES_MARKER);
    if (at !== -1) kept = md.slice(at);
  } catch {
    kept = '';
  }
  fs.writeFileSync(`${base}.json`, JSON.stringify(file, null, 2) + '\n');
  fs.writeFileSync(`${base}.md`, renderMarkdown(file) + (kept ? `\n${kept}` : ''));
  return base;
}

async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        timeout: { type: 'string' },
        'no-write': { type: 'boolean' },
        dir: { type: 'string' },
        results: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    console.error(`bench: ${(e as Error).message}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log('usage: npm run bench [-- NAME...] [--timeout SECONDS] [--no-write] [--dir DIR] [--results DIR]');
    return 0;
  }
  if (values.dir) {
    BENCH_DIR = path.resolve(values.dir);
    RESULTS_DIR = path.join(BENCH_DIR, 'results');
  }
  if (values.results) RESULTS_DIR = path.resolve(values.results);
  const timeoutS = values.timeout === undefined ? 600 : Number(values.timeout);
  if (!Number.isFinite(timeoutS) || timeoutS <= 0) {
    console.error(`bench: --timeout: not a positive number of seconds: ${values.timeout}`);
    return 2;
  }
  const benches = discover(positionals);
  if (!benches.length) throw new RunnerError('no bench/*.bench.ts found', 1);
  const machine = machineInfo();
  console.log(
    `${benches.length} benchmark(s) on ${machine.cpuModel} x${machine.cores}, ${machine.ramGiB} GiB, node ${machine.node}, load ${machine.loadavg.join('/')}`,
  );
  const outcomes: BenchOutcome[] = [];
  for (const b of benches) {
    console.log(`\n=== ${b.name} (${path.relative(ROOT, b.file)})`);
    const o = await runOne(b, timeoutS);
    console.log(`=== ${b.name}: ${o.status}${o.error ? `: ${o.error}` : ''} in ${o.durationS} s`);
    outcomes.push(o);
  }
  printTable(outcomes);
  if (!values['no-write']) {
    const base = writeResults(outcomes, machine);
    console.log(`\nwritten: ${path.relative(ROOT, base)}.md and .json`);
  }
  return 0;
}

for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    for (const c of live) killGroup(c);
    process.exit(130);
  });
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    for (const c of live) killGroup(c);
    console.error(`bench: ${e instanceof Error ? e.message : String(e)}`);
    process.exitCode = e instanceof RunnerError ? e.exitCode : 1;
  },
);
