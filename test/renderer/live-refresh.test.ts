import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CALL_STATES, FINAL_STATES } from '../../renderer/src/lib/calls.ts';
import { refreshesFor } from '../../renderer/src/lib/live-refresh.ts';

describe('console live refreshes', () => {
  it('an event refreshes the queries of its own row', () => {
    expect(refreshesFor('call.ended')).toEqual([['calls'], ['transcripts']]);
    expect(refreshesFor('transcript.share.revoked')).toEqual([['transcripts', 'shares']]);
    expect(refreshesFor('webhook.test')).toEqual([['webhooks']]);
  });

  it("a live notice of a call's state or of an admin change over the API refreshes the views that show it", () => {
    expect(refreshesFor('call.state')).toEqual([['calls']]);
    expect(refreshesFor('calls.changed')).toEqual([['calls']]);
    expect(refreshesFor('trunks.changed')).toEqual([['status', 'trunks']]);
    expect(refreshesFor('outbound-routes.changed')).toEqual([['routes', 'out']]);
    expect(refreshesFor('users.changed')).toEqual([['users'], ['apikeys']]);
    expect(refreshesFor('apikey-create.changed')).toEqual([['apikeys']]);
    expect(refreshesFor('webhooks.changed')).toEqual([['webhooks']]);
  });

  it('a name without a row falls back to its family row, and an unknown family refreshes nothing', () => {
    expect(refreshesFor('call.scheduled')).toEqual([['calls']]);
    expect(refreshesFor('transcript.deleted')).toEqual([['transcripts']]);
    // A prefix is not a family: `webhooks.x` and `callx` are not `webhook.*` and `call.*`.
    expect(refreshesFor('webhooks.x')).toEqual([]);
    expect(refreshesFor('callx')).toEqual([]);
    expect(refreshesFor('presentation.verified')).toEqual([]);
  });
});

describe('console call states', () => {
  it("are the generated API union's states, each once, and the outcomes are the ended ones", () => {
    const schema = fs.readFileSync(path.resolve(import.meta.dirname, '../../renderer/src/api/schema.d.ts'), 'utf8');
    const op = schema.slice(schema.indexOf('    get_api_ashx_v1_calls_id_: {'));
    const union = /status: ((?:"[a-z-]+"(?: \| )?)+);/.exec(op)![1]!;
    expect(CALL_STATES).toEqual([...union.matchAll(/"([a-z-]+)"/g)].map((m) => m[1]));
    expect(FINAL_STATES).toEqual(CALL_STATES.filter((s) => s.startsWith('ended-') || s === 'cancelled'));
  });
});
