import type { Reporter, TestModule } from 'vitest/node';

/**
 * Prints the plain closing line `tests: N passed, N failed, N skipped` that CI reads, after
 * vitest's own summary, and above it the slowest test files (wall time of each file, set-up
 * included), so a suite that grows slow shows where.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: readonly TestModule[]): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    const durations: { file: string; ms: number }[] = [];
    for (const m of modules) {
      for (const t of m.children.allTests()) {
        const s = t.result().state;
        if (s === 'passed') passed++;
        else if (s === 'failed') failed++;
        else skipped++;
      }
      // A file that failed to load has no tests but must count as a failure.
      if (m.state() === 'failed' && ![...m.children.allTests()].some((t) => t.result().state === 'failed')) failed++;
      const d = m.diagnostic();
      durations.push({ file: m.relativeModuleId, ms: d.duration + d.setupDuration + d.collectDuration + d.prepareDuration });
    }
    const slowest = durations.sort((a, b) => b.ms - a.ms).slice(0, 15);
    if (modules.length > 15) {
      process.stdout.write('\nslowest test files (s):\n');
      for (const s of slowest) process.stdout.write(`  ${(s.ms / 1000).toFixed(1).padStart(6)}  ${s.file}\n`);
    }
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
