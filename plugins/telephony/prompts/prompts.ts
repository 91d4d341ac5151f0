/**
 * Prompts kept per tenant (README "Prompts"): the spec's `systemPrompt` is "plain text or a known
 * prompt slug". A value that looks like a slug (the rule below) is looked up among the tenant's
 * prompts and replaced by the prompt's text; an unknown one is refused naming it, never handed to
 * the AI as if it were the instruction.
 */
import { AppError, type DB, InputError, NotFoundError, type Tenant } from '../../../server/sdk.ts';
import { checkTenantLimit } from '../schemas.ts';

/**
 * A slug: 1 to 64 characters of lowercase letters, digits, `-` and `_`, starting and ending with a
 * letter or digit. A prompt written out (words, a space, a capital, a full stop) never matches, so
 * a one-word lowercase systemPrompt is taken for a slug: write "Hello." to send the word itself.
 */
export const PROMPT_SLUG = /^[a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?$/;
/** The longest prompt text: the v1 systemPrompt's limit. */
export const PROMPT_MAX_CHARS = 20_000;

export function looksLikeSlug(value: string): boolean {
  return PROMPT_SLUG.test(value);
}

interface PromptRow {
  tenant_id: string;
  slug: string;
  text: string;
  created_by: string;
  created_at: string;
  updated_at: string;
}

export interface PromptView {
  slug: string;
  text: string;
  createdBy: string;
  createdAtUtc: string;
  updatedAtUtc: string;
}

const view = (r: PromptRow): PromptView => ({ slug: r.slug, text: r.text, createdBy: r.created_by, createdAtUtc: r.created_at, updatedAtUtc: r.updated_at });

export class Prompts {
  constructor(
    private readonly db: DB,
    private readonly now: () => string,
    /** The plugin's `limits.prompts`. */
    private readonly maxPrompts: number,
  ) {}

  private row(t: Tenant, slug: string): PromptRow | undefined {
    return this.db.prepare('SELECT * FROM tel_prompts WHERE tenant_id = ? AND slug = ?').get(t.id, slug) as PromptRow | undefined;
  }

  list(t: Tenant): PromptView[] {
    return (this.db.prepare('SELECT * FROM tel_prompts WHERE tenant_id = ? ORDER BY slug').all(t.id) as PromptRow[]).map(view);
  }

  get(t: Tenant, slug: string): PromptView {
    const r = this.row(t, slug);
    if (!r) throw new NotFoundError(`no prompt ${slug}`);
    return view(r);
  }

  /** Adds a prompt (409 `conflict` when the slug exists, unless `replace`); returns it and whether it is new. */
  save(t: Tenant, slug: string, text: string, by: string, replace: boolean): { prompt: PromptView; created: boolean } {
    if (!looksLikeSlug(slug)) {
      throw new InputError(`invalid field slug: 1-64 of a-z, 0-9, - and _, starting and ending with a letter or digit`, 'invalid_request', { field: 'slug' });
    }
    return this.db
      .transaction(() => {
        const old = this.row(t, slug);
        const now = this.now();
        if (old) {
          if (!replace) throw new AppError(409, 'conflict', `a prompt ${slug} exists`, { reason: 'prompt_exists', params: { name: slug } });
          this.db.prepare('UPDATE tel_prompts SET text = ?, updated_at = ? WHERE tenant_id = ? AND slug = ?').run(text, now, t.id, slug);
        } else {
          const n = (this.db.prepare('SELECT COUNT(*) AS n FROM tel_prompts WHERE tenant_id = ?').get(t.id) as { n: number }).n;
          checkTenantLimit('prompts', this.maxPrompts, n);
          this.db
            .prepare('INSERT INTO tel_prompts (tenant_id, slug, text, created_by, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)')
            .run(t.id, slug, text, by, now, now);
        }
        return { prompt: view(this.row(t, slug)!), created: !old };
      })
      .immediate();
  }

  remove(t: Tenant, slug: string): PromptView {
    const r = this.row(t, slug);
    if (!r) throw new NotFoundError(`no prompt ${slug}`);
    this.db.prepare('DELETE FROM tel_prompts WHERE tenant_id = ? AND slug = ?').run(t.id, slug);
    return view(r);
  }

  /**
   * A call's systemPrompt as the AI gets it: the text of the tenant's prompt it names, or the
   * value itself when it is prompt text. An unknown slug is 400 naming `field` and the slug.
   */
  resolve(t: Tenant, value: string, field = 'systemPrompt'): string {
    if (!looksLikeSlug(value)) return value;
    const r = this.row(t, value);
    if (!r) {
      throw new InputError(
        `invalid field ${field}: no prompt with the slug ${value} (add it with sovcomms prompt add, or write the prompt out)`,
        'invalid_request',
        {
          field,
        },
      );
    }
    return r.text;
  }
}
