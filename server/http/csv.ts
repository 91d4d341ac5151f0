/**
 * CSV (RFC 4180) for the list exports: every field quoted when it holds a comma, a quote, a CR or
 * an LF (quotes doubled), CRLF line ends, a UTF-8 byte order mark so spreadsheet programs read
 * umlauts right. A cell that starts with = + - @ (or a tab or CR) would be run as a formula by
 * Excel, LibreOffice and Google Sheets (OWASP "CSV Injection"): it gets a leading apostrophe, which
 * they show as text. Numbers are written as numbers, so a negative count stays a number.
 */
export type CsvCell = string | number | boolean | null | undefined;

const FORMULA = /^[=+\-@\t\r]/;

export function csvCell(v: CsvCell): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  const text = FORMULA.test(v) ? `'${v}` : v;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function toCsv(header: readonly string[], rows: readonly (readonly CsvCell[])[]): string {
  return '\uFEFF' + [header, ...rows].map((r) => r.map(csvCell).join(',')).join('\r\n') + '\r\n';
}

/** Headers of a CSV download named `name` (never cached: exports hold personal data). */
export function csvHeaders(name: string): Record<string, string> {
  return { 'Content-Disposition': `attachment; filename="${name}"`, 'Cache-Control': 'no-store' };
}

/** Rows an export holds at most: one request must not read a whole table into memory. */
export const CSV_MAX_ROWS = 50_000;
