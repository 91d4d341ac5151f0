import fs from 'node:fs';
import { z } from 'zod';
import { InputError, resourcePath } from '../../server/sdk.ts';

/** A named DCQL query shipped in resources/dcql/<name>.json (OpenID4VP 1.0 §6). */
export interface Preset {
  name: string;
  description: string;
  dcql: Record<string, unknown>;
  /** vct values an SD-JWT VC answer may carry. */
  vctValues: string[];
  /** doctype an mdoc answer must carry. */
  doctypes: string[];
}

const presetFile = z.object({
  description: z.string(),
  dcql_query: z.object({
    credentials: z
      .array(
        z
          .object({
            id: z.string().regex(/^[A-Za-z0-9_-]+$/),
            format: z.enum(['dc+sd-jwt', 'mso_mdoc']),
            meta: z.object({ vct_values: z.array(z.string()).optional(), doctype_value: z.string().optional() }),
            claims: z.array(z.object({ path: z.array(z.union([z.string(), z.number(), z.null()])) }).loose()).optional(),
          })
          .loose(),
      )
      .min(1),
    credential_sets: z.array(z.unknown()).optional(),
  }),
});

const NAME = /^[a-z0-9][a-z0-9_-]{0,40}$/;

/** Presets by name, read once from resources/dcql (an operator may add or restyle them). */
export class Presets {
  readonly #byName = new Map<string, Preset>();

  constructor(dir = resourcePath('dcql')) {
    for (const f of fs.readdirSync(dir)) {
      const name = f.replace(/\.json$/, '');
      if (!f.endsWith('.json') || !NAME.test(name)) continue;
      const parsed = presetFile.parse(JSON.parse(fs.readFileSync(`${dir}/${f}`, 'utf8')));
      const creds = parsed.dcql_query.credentials;
      this.#byName.set(name, {
        name,
        description: parsed.description,
        dcql: parsed.dcql_query,
        vctValues: creds.flatMap((c) => c.meta.vct_values ?? []),
        doctypes: creds.flatMap((c) => (c.meta.doctype_value ? [c.meta.doctype_value] : [])),
      });
    }
  }

  get(name: string): Preset {
    const p = this.#byName.get(name);
    if (!p) throw new InputError(`unknown preset ${name}; known: ${this.names().join(', ')}`, 'invalid_request');
    return p;
  }

  names(): string[] {
    return [...this.#byName.keys()].sort();
  }
}
