import i18n from '../i18n.ts';
import { ApiError, type Issue } from '../api/client.ts';

/**
 * One mapping from what the API refuses to the operator's language: the error code (`trunk_in_use`,
 * `unknown_event`, ...) and, for a refused field, the zod issue beside it (`too_small` with its
 * minimum, `invalid_format` with its format, `invalid_value` with the allowed values). The API's
 * English `error_description` is shown only when neither has words here.
 */
export function errorText(error: unknown): string {
  if (!(error instanceof ApiError)) {
    return error instanceof Error ? error.message : String(error);
  }
  const issue = error.issue ? issueText(error.issue) : undefined;
  if (issue) return issue;
  const precise = preciseText(error);
  if (precise) return precise;
  const key = `errors.code.${error.code}`;
  if (i18n.exists(key)) return i18n.t(key);
  if (error.status === 0 || error.status >= 500) return i18n.t('errors.server', { status: error.status });
  return error.message;
}

/**
 * The sentence for a code whose one generic text would hide what the API named: the field it
 * refused (`errors.field.<code>.<field>`, a list index as `_n`: `jwks.keys[2]` is `jwks_keys_n`,
 * said as "key 3") or the bounds in the error body (tenant_limit's `cap` and `limit`).
 */
function preciseText(error: ApiError): string | undefined {
  const reason = reasonText(error);
  if (reason) return reason;
  if (error.field) {
    const index = /\[(\d+)\]|\.(\d+)(?=\.|$)/.exec(error.field);
    const name = error.field.replace(/\[\d+\]|\.\d+(?=\.|$)/g, '_n').replace(/\./g, '_');
    const key = `errors.field.${error.code}.${name}`;
    if (i18n.exists(key)) return i18n.t(key, { n: index ? Number(index[1] ?? index[2]) + 1 : 1 });
  }
  const { cap, limit } = error.extra;
  if (error.code === 'tenant_limit' && typeof cap === 'string' && typeof limit === 'number') {
    const key = `errors.limit.${cap}`;
    if (i18n.exists(key, { count: limit })) return i18n.t(key, { count: limit });
  }
  return undefined;
}

/**
 * The cause the API named beside a generic code (`reason`, ERROR_REASONS in server/errors.ts):
 * `errors.reason.<code>.<reason>`, with the body's plain parameters (`name`, `limit`,
 * `operation`...) put into the sentence.
 */
const I18N_OPTIONS = new Set(['lng', 'lngs', 'ns', 'count', 'context', 'defaultValue', 'replace', 'ordinal', 'returnObjects', 'keySeparator', 'nsSeparator']);

function reasonText(error: ApiError): string | undefined {
  const { reason } = error.extra;
  if (typeof reason !== 'string' || !/^[a-z0-9_]+$/.test(reason)) return undefined;
  const key = `errors.reason.${error.code}.${reason}`;
  if (!i18n.exists(key)) return undefined;
  const params: Record<string, string | number> = {};
  // i18next reads some option names itself (lng, ns, count, context...): only plain parameters pass.
  for (const [k, v] of Object.entries(error.extra)) {
    if ((typeof v === 'string' || typeof v === 'number') && !I18N_OPTIONS.has(k)) params[k] = v;
  }
  return i18n.t(key, params);
}

/** A zod issue in words, or undefined for one the console has none for (a custom refinement's own message). */
export function issueText(issue: Issue): string | undefined {
  const t = (k: string, o: Record<string, unknown> = {}) => i18n.t(`errors.issue.${k}`, o);
  const n = (x: number | undefined) => (x === undefined ? '' : x.toLocaleString(i18n.language));
  switch (issue.code) {
    case 'too_small':
      if (issue.origin === 'string') return issue.minimum === 1 ? t('required') : t('tooShort', { count: issue.minimum });
      if (issue.origin === 'array' || issue.origin === 'set') return t('tooFew', { count: issue.minimum });
      return t('tooSmall', { min: n(issue.minimum) });
    case 'too_big':
      if (issue.origin === 'string') return t('tooLong', { count: issue.maximum });
      if (issue.origin === 'array' || issue.origin === 'set') return t('tooMany', { count: issue.maximum });
      return t('tooBig', { max: n(issue.maximum) });
    case 'invalid_format': {
      const key = `errors.format.${issue.format ?? ''}`;
      return i18n.exists(key) ? i18n.t(key) : t('invalidFormat');
    }
    case 'invalid_value':
      return issue.values?.length ? t('oneOf', { values: issue.values.join(', ') }) : t('invalidValue');
    case 'invalid_type':
      return issue.expected === 'number' ? t('notANumber') : t('invalidValue');
    case 'not_multiple_of':
      return t('notWhole');
    case 'unrecognized_keys':
      return t('unknownField');
    default:
      return undefined;
  }
}

/** An API path (`redirect_uris.0`) and a form's name for it (`redirect_uris[0]`) compared as one. */
const samePath = (a: string, b: string) => a.replace(/\[(\d+)\]/g, '.$1') === b.replace(/\[(\d+)\]/g, '.$1');

/** The value each refused field had when its error arrived, per error: an edit of the field clears the error. */
const seen = new WeakMap<ApiError, Map<string, string>>();

/**
 * The message for a form input's `error` prop: the error names this field (or the field is the only
 * one the code concerns, `codeFields`), in the operator's language. Given the field's current value,
 * the message goes as soon as the operator changes the field (the error belongs to the value sent).
 */
export function fieldError(error: unknown, field: string, value?: unknown, codes: readonly string[] = []): string | undefined {
  if (!(error instanceof ApiError)) return undefined;
  if (!(error.field !== undefined && samePath(error.field, field)) && !codes.includes(error.code)) return undefined;
  if (value !== undefined) {
    let m = seen.get(error);
    if (!m) seen.set(error, (m = new Map<string, string>()));
    const now = JSON.stringify(value) ?? '';
    const then = m.get(field);
    if (then === undefined) m.set(field, now);
    else if (then !== now) return undefined;
  }
  return errorText(error);
}

/** Whether an error is shown at one of these fields, or has one of the codes shown at a field (so the form's general note leaves it out). */
export function atField(error: unknown, fields: readonly string[], codes: readonly string[] = []): boolean {
  return error instanceof ApiError && ((error.field !== undefined && fields.some((f) => samePath(error.field!, f))) || codes.includes(error.code));
}
