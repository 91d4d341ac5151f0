import type { PageLang } from '../oidc/api.ts';

/**
 * The words of the verifier's pages (the login page's wallet block and its script's status lines,
 * the QR page, the wallet sign-in's answer page) in the languages of the provider's pages; which one
 * a request gets is the provider's choice (`OidcService.pageLang`), so a German sign-in page carries
 * a German wallet block.
 */
const EN = {
  blockTitle: 'Sign in with your EU wallet',
  scan: 'Scan this code with your EU Digital Identity Wallet, or open the wallet on this device.',
  qrAlt: 'QR code of the wallet request',
  openHere: 'Open the wallet on this device',
  presentedBefore: 'Your wallet presented the PID of',
  presentedAccount: 'account',
  presentedAfter: '. Sign in only if this is you.',
  continue: 'Continue',
  notMe: 'This is not me',
  js_failed: 'Wallet sign-in failed:',
  js_preparing: 'Preparing the wallet request…',
  js_waiting: 'Waiting for your wallet…',
  js_continueAs: 'Continue as',
  js_isThisYou: 'Is this you?',
  js_signingIn: 'Signing you in…',
  js_cancelled: 'Not signed in. Start again to present your own wallet.',
  js_signedInElsewhere: 'Signed in, in the window your wallet opened.',
  js_nameFailed: 'the name could not be shown',
  js_notAccepted: 'the presentation was not accepted',
  js_expired: 'the request expired, start again',
  js_refused: 'A response was refused. Waiting for your wallet…',
  qrTitle: 'Present your EU wallet',
  qrScan: 'Scan this code with your EU Digital Identity Wallet.',
  answerTitle: 'Wallet sign-in',
  answerFailed: 'This sign-in did not go through. Start signing in again.',
  answerUnknown: 'This sign-in is not known here (or it ended long ago). Start signing in again.',
  answerLinkInvalid: 'This sign-in link is not valid or was already used. Start signing in again.',
  answerNoAccount: 'No account here may sign in with the PID your wallet presented. Ask your administrator.',
  answerFinished: 'This sign-in was already completed.',
  answerExpired: 'This sign-in took too long and has expired. Start signing in again.',
  answerInactive: 'The account of this sign-in is no longer active. Ask your administrator.',
  answerLinkIncomplete: 'This sign-in link is incomplete or damaged. Start signing in again.',
  answerTooMany: 'Too many sign-in attempts from this address. Wait a minute, then start signing in again.',
  answerDetail: 'Technical detail: {code}',
  answerElsewhere: 'Your wallet has presented your PID. Go back to the page where you started signing in and confirm your name there.',
} as const;

export type WalletTextKey = keyof typeof EN;

const DE: Record<WalletTextKey, string> = {
  blockTitle: 'Mit Ihrer EU-Wallet anmelden',
  scan: 'Scannen Sie diesen Code mit Ihrer EU Digital Identity Wallet, oder öffnen Sie die Wallet auf diesem Gerät.',
  qrAlt: 'QR-Code der Wallet-Anfrage',
  openHere: 'Wallet auf diesem Gerät öffnen',
  presentedBefore: 'Ihre Wallet hat die PID von',
  presentedAccount: 'Konto',
  presentedAfter: ' vorgelegt. Melden Sie sich nur an, wenn das Sie sind.',
  continue: 'Weiter',
  notMe: 'Das bin ich nicht',
  js_failed: 'Anmeldung mit der Wallet fehlgeschlagen:',
  js_preparing: 'Wallet-Anfrage wird vorbereitet…',
  js_waiting: 'Warte auf Ihre Wallet…',
  js_continueAs: 'Weiter als',
  js_isThisYou: 'Sind Sie das?',
  js_signingIn: 'Sie werden angemeldet…',
  js_cancelled: 'Nicht angemeldet. Starten Sie erneut, um Ihre eigene Wallet vorzulegen.',
  js_signedInElsewhere: 'Angemeldet, im Fenster, das Ihre Wallet geöffnet hat.',
  js_nameFailed: 'der Name konnte nicht angezeigt werden',
  js_notAccepted: 'die Vorlage wurde nicht angenommen',
  js_expired: 'die Anfrage ist abgelaufen, bitte erneut starten',
  js_refused: 'Eine Antwort wurde abgelehnt. Warte auf Ihre Wallet…',
  qrTitle: 'EU-Wallet vorlegen',
  qrScan: 'Scannen Sie diesen Code mit Ihrer EU Digital Identity Wallet.',
  answerTitle: 'Anmeldung mit der Wallet',
  answerFailed: 'Diese Anmeldung ist nicht zustande gekommen. Bitte starten Sie die Anmeldung erneut.',
  answerUnknown: 'Diese Anmeldung ist hier nicht bekannt (oder schon lange beendet). Bitte starten Sie die Anmeldung erneut.',
  answerLinkInvalid: 'Dieser Anmeldelink ist ungültig oder wurde schon verwendet. Bitte starten Sie die Anmeldung erneut.',
  answerNoAccount: 'Mit der PID, die Ihre Wallet vorgelegt hat, darf sich hier kein Konto anmelden. Wenden Sie sich an Ihre Administration.',
  answerFinished: 'Diese Anmeldung wurde bereits abgeschlossen.',
  answerExpired: 'Diese Anmeldung hat zu lange gedauert und ist abgelaufen. Bitte starten Sie die Anmeldung erneut.',
  answerInactive: 'Das Konto dieser Anmeldung ist nicht mehr aktiv. Wenden Sie sich an Ihre Administration.',
  answerLinkIncomplete: 'Dieser Anmeldelink ist unvollständig oder beschädigt. Bitte starten Sie die Anmeldung erneut.',
  answerTooMany: 'Zu viele Anmeldeversuche von dieser Adresse. Bitte warten Sie eine Minute und starten Sie die Anmeldung dann erneut.',
  answerDetail: 'Technische Angabe: {code}',
  answerElsewhere:
    'Ihre Wallet hat Ihre PID vorgelegt. Kehren Sie zur Seite zurück, auf der Sie die Anmeldung begonnen haben, und bestätigen Sie dort Ihren Namen.',
};

const TEXTS: Record<PageLang, Record<WalletTextKey, string>> = { en: EN, de: DE };

/** One text in a language, with `{name}` filled in (plain text: the page escapes it). */
export function walletText(lang: PageLang, key: WalletTextKey, vars: Record<string, string> = {}): string {
  return TEXTS[lang][key].replace(/\{(\w+)\}/g, (_, k: string) => vars[k] ?? '');
}

/** The status lines of wallet-login.js, as the block's `data-t-<key>` attributes (the script has no words of its own). */
export function walletScriptTexts(lang: PageLang): [string, string][] {
  return Object.entries(TEXTS[lang])
    .filter(([k]) => k.startsWith('js_'))
    .map(([k, v]) => [`data-t-${k.slice(3)}`, v]);
}

/** The words of each language, for the test that keeps them complete. */
export const WALLET_TEXTS: Readonly<Record<PageLang, Readonly<Record<WalletTextKey, string>>>> = TEXTS;

/**
 * The answer page's sentence for a refused wallet sign-in: by the error's code and reason (the
 * person reads what happened and what to do; the code is only the page's technical detail).
 */
export function answerTextKey(code: string, reason: string | undefined): WalletTextKey {
  if (code === 'access_denied') return reason === 'no_account' ? 'answerNoAccount' : 'answerLinkInvalid';
  if (code === 'not_found') return reason === 'account_inactive' ? 'answerInactive' : 'answerUnknown';
  if (code === 'session_finished') return 'answerFinished';
  if (code === 'session_expired') return 'answerExpired';
  // The wallet's redirect came back without its session or code, or with them mangled.
  if (code === 'invalid_request') return 'answerLinkIncomplete';
  if (code === 'rate_limited') return 'answerTooMany';
  return 'answerFailed';
}
