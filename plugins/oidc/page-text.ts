import { cookies } from '../../server/sdk.ts';

/**
 * The words of the provider's own pages (sign-in, consent, account choice, sign-out, passkeys,
 * e-mail links) and of the mails it sends (`mail_*`) in the languages the console speaks. The language is, in this order: the
 * authorization request's `ui_locales` (OIDC Core §3.1.2.1, the first one offered here), the
 * console's language cookie, then the browser's Accept-Language (RFC 9110 §12.5.4, by q-value).
 * A mail is written in the language of the request that sends it (the sign-in page's form, the
 * administrator's invitation): neither accounts nor tenants have a language setting of their own.
 */
export const LANGS = ['en', 'de'] as const;
export type Lang = (typeof LANGS)[number];
/** Set by the console when its operator picks a language (renderer/src/i18n.ts). */
export const LANG_COOKIE = 'sovcomms.lang';

const EN = {
  signInTitle: 'Sign in',
  signInTo: 'Sign in to {tenant}',
  continueTo: 'to continue to {client}',
  userName: 'User name or e-mail',
  password: 'Password',
  signIn: 'Sign in',
  passkeySignIn: 'Sign in with a passkey',
  maglinkLabel: 'Or get a sign-in link by e-mail',
  maglinkSend: 'E-mail me a link',
  forgotPassword: 'Forgot password',
  linkExpiredSignIn: 'That link has expired. Please sign in again.',
  tooManyAttempts: 'Too many attempts. Wait a minute and try again.',
  wrongPassword: 'Wrong user name or password.',
  consentTitle: 'Allow access',
  consentHeading: 'Allow {client} to access your account?',
  consentSignedInAs: 'Signed in as',
  consentAsks: '{client} asks for:',
  allow: 'Allow',
  deny: 'Deny',
  scope_openid: 'Sign you in',
  scope_profile: 'Your name and role',
  scope_email: 'Your e-mail address',
  scope_offline_access: 'Stay connected when you are away (refresh tokens)',
  scope_network_access: 'Network access configuration',
  chooseAccount: 'Choose an account',
  otherAccount: 'Use another account',
  signOutTitle: 'Sign out',
  signOutOf: 'Sign out of {tenant}?',
  signOut: 'Sign out',
  staySignedIn: 'Stay signed in',
  continue: 'Continue',
  passkeysTitle: 'Passkeys',
  passkeysSignedInAs: 'Signed in as',
  passkeysCount: 'Registered passkeys:',
  passkeyRegister: 'Register a passkey on this device',
  backToConsole: 'Back to the console',
  pkWaiting: 'Waiting for your passkey…',
  pkSignInFailed: 'Passkey sign-in failed:',
  pkFollowDevice: 'Follow your device to create the passkey…',
  pkRegistered: 'Passkey registered.',
  pkRegisterFailed: 'Registration failed:',
  finishSignIn: 'Finish signing in',
  newPasswordTitle: 'Choose a new password',
  newPasswordLabel: 'New password (at least 10 characters)',
  saveAndSignIn: 'Save and sign in',
  msg_formExpired: 'Form expired',
  msg_formExpiredReload: 'The form expired. Reload the sign-in page and try again.',
  msg_reloadRetry: 'Reload and try again.',
  msg_openAgain: 'Open the link again.',
  msg_signedIn: 'Signed in',
  msg_signedInAs: 'You are signed in as {user}.',
  msg_unknownAccount: 'Unknown account',
  msg_unknownAccountText: 'That account is not signed in here.',
  msg_signedOut: 'Signed out',
  msg_signedOutText: 'You are signed out.',
  msg_stillSignedIn: 'Still signed in',
  msg_stillSignedInText: 'You are still signed in.',
  msg_tooMany: 'Too many requests',
  msg_tooManyMails: 'Too many e-mails were requested. Wait a few minutes.',
  msg_checkMail: 'Check your mail',
  msg_checkMailText: 'If an account with that address exists, we sent it a link. It is valid for 15 minutes.',
  msg_linkExpired: 'Link expired',
  msg_signInLinkExpired: 'This sign-in link has expired or was used. Request a new one.',
  msg_recoveryLinkExpired: 'This recovery link has expired or was used.',
  msg_passwordRefused: 'Password not accepted',
  msg_weakPassword: 'Use at least 10 characters (at most 1024).',
  msg_signInExpired: 'Sign-in expired',
  msg_signInExpiredText: 'This sign-in request has expired or was started in another browser. Go back to the application and try again.',
  msg_invitationExpired: 'Invitation expired',
  msg_invitationExpiredText: 'This invitation has expired or was used. Ask your administrator for a new one.',
  welcome: 'Welcome, {user}',
  choosePasswordLabel: 'Choose a password (at least 10 characters)',
  setPasswordSignIn: 'Set password and sign in',
  mail_maglinkSubject: 'Sign in to {tenant}',
  mail_maglinkBody: 'Sign in to {tenant} with this link (valid 15 minutes, once):\n\n{link}\n\nIf you did not ask for it, ignore this mail.',
  mail_recoverSubject: 'Reset your password for {tenant}',
  mail_recoverBody: 'Choose a new password for {tenant} with this link (valid 15 minutes, once):\n\n{link}\n\nIf you did not ask for it, ignore this mail.',
  mail_inviteSubject: 'Your account on {tenant}',
  mail_inviteBody: 'Set your password for your account {user} on {tenant} with this link (valid 7 days, once):\n\n{link}\n',
} as const;

export type TextKey = keyof typeof EN;

const DE: Record<TextKey, string> = {
  signInTitle: 'Anmelden',
  signInTo: 'Bei {tenant} anmelden',
  continueTo: 'um mit {client} fortzufahren',
  userName: 'Benutzername oder E-Mail',
  password: 'Passwort',
  signIn: 'Anmelden',
  passkeySignIn: 'Mit einem Passkey anmelden',
  maglinkLabel: 'Oder einen Anmeldelink per E-Mail erhalten',
  maglinkSend: 'Link per E-Mail senden',
  forgotPassword: 'Passwort vergessen',
  linkExpiredSignIn: 'Dieser Link ist abgelaufen. Bitte erneut anmelden.',
  tooManyAttempts: 'Zu viele Versuche. Bitte eine Minute warten und erneut versuchen.',
  wrongPassword: 'Benutzername oder Passwort falsch.',
  consentTitle: 'Zugriff erlauben',
  consentHeading: '{client} Zugriff auf Ihr Konto erlauben?',
  consentSignedInAs: 'Angemeldet als',
  consentAsks: '{client} fragt nach:',
  allow: 'Erlauben',
  deny: 'Ablehnen',
  scope_openid: 'Sie anmelden',
  scope_profile: 'Ihr Name und Ihre Rolle',
  scope_email: 'Ihre E-Mail-Adresse',
  scope_offline_access: 'Verbunden bleiben, während Sie abwesend sind (Refresh-Tokens)',
  scope_network_access: 'Netzwerkzugangs-Konfiguration',
  chooseAccount: 'Konto auswählen',
  otherAccount: 'Anderes Konto verwenden',
  signOutTitle: 'Abmelden',
  signOutOf: 'Von {tenant} abmelden?',
  signOut: 'Abmelden',
  staySignedIn: 'Angemeldet bleiben',
  continue: 'Weiter',
  passkeysTitle: 'Passkeys',
  passkeysSignedInAs: 'Angemeldet als',
  passkeysCount: 'Registrierte Passkeys:',
  passkeyRegister: 'Passkey auf diesem Gerät registrieren',
  backToConsole: 'Zurück zur Konsole',
  pkWaiting: 'Warte auf Ihren Passkey…',
  pkSignInFailed: 'Anmeldung mit Passkey fehlgeschlagen:',
  pkFollowDevice: 'Folgen Sie Ihrem Gerät, um den Passkey anzulegen…',
  pkRegistered: 'Passkey registriert.',
  pkRegisterFailed: 'Registrierung fehlgeschlagen:',
  finishSignIn: 'Anmeldung abschließen',
  newPasswordTitle: 'Neues Passwort wählen',
  newPasswordLabel: 'Neues Passwort (mindestens 10 Zeichen)',
  saveAndSignIn: 'Speichern und anmelden',
  msg_formExpired: 'Formular abgelaufen',
  msg_formExpiredReload: 'Das Formular ist abgelaufen. Anmeldeseite neu laden und erneut versuchen.',
  msg_reloadRetry: 'Bitte neu laden und erneut versuchen.',
  msg_openAgain: 'Bitte den Link erneut öffnen.',
  msg_signedIn: 'Angemeldet',
  msg_signedInAs: 'Sie sind als {user} angemeldet.',
  msg_unknownAccount: 'Unbekanntes Konto',
  msg_unknownAccountText: 'Dieses Konto ist hier nicht angemeldet.',
  msg_signedOut: 'Abgemeldet',
  msg_signedOutText: 'Sie sind abgemeldet.',
  msg_stillSignedIn: 'Weiterhin angemeldet',
  msg_stillSignedInText: 'Sie sind weiterhin angemeldet.',
  msg_tooMany: 'Zu viele Anfragen',
  msg_tooManyMails: 'Es wurden zu viele E-Mails angefordert. Bitte einige Minuten warten.',
  msg_checkMail: 'Bitte E-Mails prüfen',
  msg_checkMailText: 'Wenn es ein Konto mit dieser Adresse gibt, haben wir ihm einen Link geschickt. Er gilt 15 Minuten.',
  msg_linkExpired: 'Link abgelaufen',
  msg_signInLinkExpired: 'Dieser Anmeldelink ist abgelaufen oder wurde schon verwendet. Bitte einen neuen anfordern.',
  msg_recoveryLinkExpired: 'Dieser Wiederherstellungslink ist abgelaufen oder wurde schon verwendet.',
  msg_passwordRefused: 'Passwort nicht angenommen',
  msg_weakPassword: 'Mindestens 10 Zeichen verwenden (höchstens 1024).',
  msg_signInExpired: 'Anmeldung abgelaufen',
  msg_signInExpiredText:
    'Diese Anmeldeanfrage ist abgelaufen oder wurde in einem anderen Browser begonnen. Bitte zur Anwendung zurückkehren und erneut versuchen.',
  msg_invitationExpired: 'Einladung abgelaufen',
  msg_invitationExpiredText: 'Diese Einladung ist abgelaufen oder wurde schon verwendet. Bitte beim Administrator eine neue anfordern.',
  welcome: 'Willkommen, {user}',
  choosePasswordLabel: 'Passwort wählen (mindestens 10 Zeichen)',
  setPasswordSignIn: 'Passwort setzen und anmelden',
  mail_maglinkSubject: 'Bei {tenant} anmelden',
  mail_maglinkBody:
    'Mit diesem Link melden Sie sich bei {tenant} an (15 Minuten gültig, nur einmal):\n\n{link}\n\nWenn Sie ihn nicht angefordert haben, ignorieren Sie diese E-Mail.',
  mail_recoverSubject: 'Passwort für {tenant} zurücksetzen',
  mail_recoverBody:
    'Mit diesem Link wählen Sie ein neues Passwort für {tenant} (15 Minuten gültig, nur einmal):\n\n{link}\n\nWenn Sie ihn nicht angefordert haben, ignorieren Sie diese E-Mail.',
  mail_inviteSubject: 'Ihr Konto bei {tenant}',
  mail_inviteBody: 'Mit diesem Link setzen Sie das Passwort Ihres Kontos {user} bei {tenant} (7 Tage gültig, nur einmal):\n\n{link}\n',
};

const TEXTS: Record<Lang, Record<TextKey, string>> = { en: EN, de: DE };

const isLang = (x: string): x is Lang => (LANGS as readonly string[]).includes(x);
/** `de-AT` reads as `de`; an unsupported tag as nothing. */
const primary = (tag: string): Lang | undefined => {
  const p = tag.trim().toLowerCase().split('-')[0] ?? '';
  return isLang(p) ? p : undefined;
};

/** The page language for a request, from `ui_locales` (space-separated, by preference), the console's cookie, then Accept-Language. */
export function pageLang(req: { headers: { cookie?: string; 'accept-language'?: string } }, uiLocales?: string): Lang {
  for (const tag of (uiLocales ?? '').split(' ')) {
    const l = primary(tag);
    if (l) return l;
  }
  const c = cookies.get(req.headers.cookie, LANG_COOKIE);
  if (c && isLang(c)) return c;
  const offered = (req.headers['accept-language'] ?? '')
    .split(',')
    .map((part, i) => {
      const [tag = '', ...params] = part.split(';');
      const q = params.map((x) => /^\s*q=([0-9.]+)\s*$/.exec(x)?.[1]).find((x) => x !== undefined);
      return { lang: primary(tag), q: q === undefined ? 1 : Number(q), i };
    })
    .filter((x) => x.lang && x.q > 0)
    .sort((a, b) => b.q - a.q || a.i - b.i);
  return offered[0]?.lang ?? 'en';
}

/** One text in a language, with `{name}` filled in (plain text: the page escapes it). */
export function text(lang: Lang, key: TextKey, vars: Record<string, string> = {}): string {
  return TEXTS[lang][key].replace(/\{(\w+)\}/g, (_, k: string) => vars[k] ?? '');
}

/** Every text of a language as template variables `t_<key>` (escaped when the page fills them). */
export function templateTexts(lang: Lang): Record<string, string> {
  return Object.fromEntries(Object.entries(TEXTS[lang]).map(([k, v]) => [`t_${k}`, v]));
}

/** A mail of the provider (sign-in link, recovery, invitation): subject and plain-text body in `lang`. */
export function mailText(
  lang: Lang,
  kind: 'maglink' | 'recover' | 'invite',
  vars: { tenant: string; link: string; user?: string },
): { subject: string; body: string } {
  const v = { user: '', ...vars };
  return { subject: text(lang, `mail_${kind}Subject`, v), body: text(lang, `mail_${kind}Body`, v) };
}

/** The words of each language, for the test that keeps them complete. */
export const PAGE_TEXTS: Readonly<Record<Lang, Readonly<Record<TextKey, string>>>> = TEXTS;
