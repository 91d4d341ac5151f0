import i18n from 'i18next';
import { initReactI18next } from 'react-i18next';
import de from './locales/de.json';
import en from './locales/en.json';
import { LANG_KEY, rememberLanguage } from './lib/lang-key.ts';

export const LANGUAGES = { en: 'English', de: 'Deutsch' } as const;
export type Language = keyof typeof LANGUAGES;

function initial(): Language {
  const saved = localStorage.getItem(LANG_KEY);
  if (saved === 'en' || saved === 'de') {
    rememberLanguage(saved);
    return saved;
  }
  return navigator.language.toLowerCase().startsWith('de') ? 'de' : 'en';
}

void i18n.use(initReactI18next).init({
  resources: { en: { translation: en }, de: { translation: de } },
  lng: initial(),
  fallbackLng: 'en',
  interpolation: { escapeValue: false },
  returnNull: false,
});
// Screen readers pronounce the page in the language it is written in (WCAG 3.1.1).
document.documentElement.lang = i18n.language;

export function setLanguage(l: Language): void {
  rememberLanguage(l);
  void i18n.changeLanguage(l);
  document.documentElement.lang = l;
}

/** Dates in the operator's locale and time zone; the API stores and sends UTC. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString(i18n.language, { dateStyle: 'medium', timeStyle: 'medium' });
}

export default i18n;

/**
 * The bounds of the days an operator picks in a date input (YYYY-MM-DD), in their own time zone:
 * from the start of the first day to the start of the day after the last (the API's `until` is
 * exclusive), so the "To" day is included whole. `new Date('2026-11-27')` would read UTC midnight.
 */
export function dayStart(day: string): string {
  const [y, m, d] = day.split('-').map(Number);
  return new Date(y!, m! - 1, d!).toISOString();
}

export function dayAfter(day: string): string {
  const [y, m, d] = day.split('-').map(Number);
  return new Date(y!, m! - 1, d! + 1).toISOString();
}
