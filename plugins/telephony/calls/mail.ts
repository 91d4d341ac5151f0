import type { Transporter } from 'nodemailer';
import type { TelephonyConfig } from '../schemas.ts';
import type { FullTranscript } from '../schemas.ts';

/** The outcome mail of an outbound AI call, with the transcript as text and as a JSON attachment. */
export class OutcomeMailer {
  #transport: Transporter | undefined;

  constructor(private readonly cfg: TelephonyConfig['mail']) {}

  get configured(): boolean {
    return this.cfg !== undefined;
  }

  /** nodemailer is loaded on first mail: most starts never send one. */
  private async transport(): Promise<Transporter> {
    const c = this.cfg!;
    const nodemailer = (await import('nodemailer')).default;
    this.#transport ??= nodemailer.createTransport({
      host: c.host,
      port: c.port,
      secure: c.secure,
      ...(c.user ? { auth: { user: c.user, pass: c.pass ?? '' } } : {}),
      // STARTTLS is used when the relay offers it, and its certificate is checked unless the
      // operator said the relay is self-signed.
      tls: { rejectUnauthorized: !c.allowUnverifiedTls },
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 30_000,
    });
    return this.#transport;
  }

  async send(
    to: string,
    call: { callId: string; phone: string; displayName: string; outcome: string; status: string; errorDetail: string; durationSec: number },
    t: FullTranscript | null,
  ): Promise<void> {
    const lines = [
      `Call ${call.callId} to ${call.displayName || call.phone} (${call.phone})`,
      `Outcome: ${call.outcome} (status ${call.status})`,
      `Talk time: ${call.durationSec} s`,
      ...(call.errorDetail ? [`Error: ${call.errorDetail}`] : []),
      '',
      ...(t ? ['Transcript:', ...t.turns.map((x) => `[${x.ts}] ${x.speaker}: ${x.text}`)] : ['No transcript (the call was not answered).']),
    ];
    await (
      await this.transport()
    ).sendMail({
      from: this.cfg!.from,
      to,
      subject: `Call ${call.displayName || call.phone}: ${call.outcome}`,
      text: lines.join('\n'),
      ...(t ? { attachments: [{ filename: `${call.callId}.json`, content: JSON.stringify(t, null, 2), contentType: 'application/json' }] } : {}),
    });
  }

  close(): void {
    this.#transport?.close();
  }
}
