import fs from 'node:fs';
import path from 'node:path';
import { type CliCommand, UsageError } from '../../server/sdk.ts';
import type { LotlServices } from './schemas.ts';
import type { DiskCandidate } from './service.ts';

/** Files named on the command line; a folder contributes its *.xml files (not recursive). */
function collect(paths: string[]): string[] {
  const out: string[] = [];
  for (const p of paths) {
    let st: fs.Stats;
    try {
      st = fs.statSync(p);
    } catch {
      throw new UsageError(`no such file or folder: ${p}`);
    }
    if (st.isDirectory()) {
      out.push(
        ...fs
          .readdirSync(p)
          .filter((f) => /\.xml$/i.test(f))
          .sort()
          .map((f) => path.join(p, f)),
      );
    } else out.push(p);
  }
  return out;
}

export const lotlCommand: CliCommand<LotlServices> = {
  summary: 'EU trusted lists: air-gapped import and status',
  usage: ['lotl import PATH... (folders or files: the LOTL and national lists, checked as an online refresh)', 'lotl status [--json]'],
  changes: ['import'],
  async run(args, ctx, s) {
    const [sub, ...rest] = args;
    if (sub === 'import') {
      const paths = rest.filter((a) => !a.startsWith('--'));
      if (rest.some((a) => a.startsWith('--'))) throw new UsageError(`unknown option ${rest.find((a) => a.startsWith('--'))}`);
      if (!paths.length) throw new UsageError('lotl import needs at least one file or folder');
      const files = collect(paths);
      if (!files.length) throw new UsageError('no .xml files found');
      const svc = s.service;
      ctx.out(`importing ${files.length} file(s)`);
      // Read one at a time by the service as each list's turn comes, not all up front.
      const candidates: DiskCandidate[] = files.map((f) => ({ name: path.basename(f), source: `import:${path.basename(f)}`, path: f }));
      const report = await svc.import(candidates, (done, total, o) => {
        const what =
          o.outcome === 'accepted' || o.outcome === 'unchanged'
            ? `${o.outcome} (sequence ${o.sequence}${o.services !== undefined ? `, ${o.services} services` : ''}${o.stale ? ', STALE: anchors kept out' : ''})`
            : `${o.outcome}: ${o.reason}${o.detail ? ` (${o.detail})` : ''}`;
        ctx.out(`[${done}/${total}] ${o.name} ${o.territory ?? '??'}: ${what}`);
      });
      ctx.out(
        `done in ${report.duration_ms} ms: ${report.accepted} accepted, ${report.rejected} rejected, ${report.anchor_count} anchors from ${report.countries_covered.length} countries`,
      );
      return report.rejected ? 1 : 0;
    }
    if (sub === 'status') {
      const json = rest.includes('--json');
      if (rest.some((a) => a !== '--json')) throw new UsageError('lotl status takes only --json');
      const m = s.service.manifest(s.schedule.nextRefreshAt(), s.schedule.failures());
      if (json) {
        ctx.out(JSON.stringify(m, null, 2));
        return 0;
      }
      ctx.out(
        `state ${m.state}  as_of ${m.as_of ?? '-'}  next_refresh_at ${m.next_refresh_at ?? (m.auto_refresh ? '-' : 'off')}  anchors ${m.anchor_count}  LOTL sequence ${m.lotl_sequence ?? '-'}`,
      );
      if (m.state === 'never-loaded') ctx.out('no trusted list was ever loaded: run `sovcomms lotl import PATH...` or wait for the scheduled refresh');
      if (m.refresh_failures) ctx.out(`the last ${m.refresh_failures} scheduled refresh(es) could not fetch the LOTL; retrying sooner`);
      ctx.out(`countries covered (${m.countries_covered.length}): ${m.countries_covered.join(' ') || '-'}`);
      if (m.countries_missing.length) ctx.out(`countries pointed to but not in service: ${m.countries_missing.join(' ')}`);
      for (const l of m.lists) {
        const state = l.in_service ? 'in service' : l.closed ? 'closed' : l.stale ? 'STALE' : l.stored ? 'stored' : 'rejected';
        const last =
          l.last_attempt && l.last_attempt.outcome !== 'accepted' && l.last_attempt.outcome !== 'unchanged'
            ? `  last: ${l.last_attempt.outcome} ${l.last_attempt.reason ?? ''}`
            : '';
        ctx.out(
          `${l.territory.padEnd(3)}${l.kind.padEnd(5)}seq ${String(l.sequence ?? '-').padEnd(5)} issued ${l.issued ?? '-'}  next ${l.next_update ?? 'closed'}  sig ${l.signature}  ${state}${last}`,
        );
      }
      return 0;
    }
    throw new UsageError('usage: sovcomms lotl import PATH... | sovcomms lotl status [--json]');
  },
};
