/**
 * Where the operator's language choice is kept: in this browser's storage for the console, and as
 * a cookie of the same name for the provider's own pages (sign-in, passkeys), which the server
 * renders in it (plugins/oidc/page-text.ts LANG_COOKIE).
 */
export const LANG_KEY = 'sovcomms.lang';

export function rememberLanguage(lang: string): void {
  localStorage.setItem(LANG_KEY, lang);
  document.cookie = `${LANG_KEY}=${lang}; path=/; max-age=31536000; SameSite=Lax`;
}
