/**
 * One inbound SIP call: the caller's INVITE (uas.ts) is connected to the targets the core chose
 * (a virtual number's AI, an office user's endpoints, a PSTN number) in order until one takes it;
 * the AI may transfer it on (vnum-to-vnum, vnum-to-officetab, vnum-to-pstn). It reports the same
 * `answered` / `transferred` / `ended` events as an outbound call (CONTROL-API.md), with one outcome.
 */
import { buildOffer, parseOffer, parseReoffer, SdpError, type NegotiatedMedia, type ReadOffer, legStart } from '../media/sdp.ts';
import type { LegMetrics, MediaHost, MediaLeg } from '../media/leg.ts';
import type { ToolCall, VoiceEngine } from '../engine/types.ts';
import type { SipUserAgent } from '../sip/ua.ts';
import type { EmitFn } from '../events.ts';
import type { LocatedTrunk, PlaceCall } from '../schemas.ts';
import type { BridgeCallState, Outcome } from '../../control.ts';
import type { Target, TransferDecision, TransferQuery } from '../inbound/control.ts';
import type { AnsweredEndpoint, UserEndpoints } from '../inbound/endpoints.ts';
import { dialPstn, TrunkSlots } from '../inbound/legs.ts';
import type { IncomingInvite } from '../sip/uas.ts';
import { Conversation, settleReach } from './conversation.ts';

export interface InboundCallDeps {
  ua: SipUserAgent;
  media: MediaHost;
  sipHost: string;
  mediaTimeoutMs: number;
  engineFactory: (cfg: PlaceCall['engine']) => VoiceEngine;
  emit: EmitFn;
  endpoints: UserEndpoints;
  trunks: Map<string, LocatedTrunk>;
  trunkLoad: Map<string, number>;
  askTransfer: (q: TransferQuery) => Promise<TransferDecision>;
  onDone: (c: InboundCall) => void;
}

type VnumTarget = Extract<Target, { kind: 'vnum' }>;

export class InboundCall {
  state: BridgeCallState = 'ringing';
  readonly startedAt = new Date();
  private offer: NegotiatedMedia | null = null;
  /** Our answer's transport and crypto line (media/sdp.ts parseOffer). */
  private answerSrtp: ReadOffer['answer'] | null = null;
  private media: MediaLeg | null = null;
  private mediaStarted = false;
  /** The person the caller talks to (an office user's endpoint or a PSTN leg), once connected. */
  private person: AnsweredEndpoint | null = null;
  private transferred = false;
  private ended = false;
  private answeredAt: Date | null = null;
  private maxTimer: NodeJS.Timeout | null = null;
  private pendingOutcome: Outcome | null = null;
  private readonly abort = new AbortController();
  private readonly ai = new Conversation({
    audible: () => !this.person && this.media !== null && this.mediaStarted,
    play: (pcm, rate) => this.media!.play(pcm, rate),
    flush: () => this.media?.flush(),
    queuedMs: () => this.media?.queuedMs ?? 0,
    toolCall: (engine, c) => this.onTool(engine, c),
    engineClosed: (error) => {
      if (this.ended || this.pendingOutcome || this.person) return;
      this.hangup('failed', error ?? 'AI engine ended the session');
    },
  });
  /** The trunk slots its PSTN legs hold (made on the first). */
  private slots: TrunkSlots | null = null;
  outcome: Outcome | null = null;
  metrics: LegMetrics | null = null;

  constructor(
    readonly callId: string,
    readonly tenantId: string,
    readonly trunkId: string,
    readonly dialog: IncomingInvite,
    private readonly targets: Target[],
    private readonly caller: { number: string; name: string },
    private readonly deps: InboundCallDeps,
  ) {
    dialog.on('ended', (why) => this.onCallerGone(why));
    dialog.dialog.on('reoffer', (sdp) => this.onReoffer(sdp));
  }

  async start(): Promise<void> {
    try {
      // G.711 always (as before); G.722 when the trunk lists it; SRTP as the trunk says.
      const trunk = this.deps.trunks.get(this.trunkId);
      const read = parseOffer(
        this.dialog.invite.body.toString('utf8'),
        trunk?.codecs.includes('G722') ? ['G722', 'PCMU', 'PCMA'] : ['PCMU', 'PCMA'],
        trunk?.srtp,
      );
      this.offer = read.media;
      this.answerSrtp = read.answer;
    } catch (err) {
      this.dialog.reject(488, 'Not Acceptable Here');
      this.end('failed', `caller's SDP offer: ${err instanceof SdpError ? err.message : 'unreadable'}`);
      return;
    }
    try {
      this.media = await this.deps.media.open();
    } catch (err) {
      this.dialog.reject(503, 'Service Unavailable');
      this.end('failed', (err as Error).message);
      return;
    }
    const reasons: string[] = [];
    for (const t of this.targets) {
      if (this.ended) return;
      if (t.kind === 'vnum') {
        const err = await this.connectAi(t);
        if (err === null) return;
        reasons.push(`${t.number}: ${err}`);
        continue;
      }
      this.dialog.ringing();
      const who = t.kind === 'user' ? await this.ringUser(t.user, t.ringTimeoutSec) : await this.dialPstn(t);
      if (this.ended) {
        if (typeof who !== 'string') who.hangup();
        return;
      }
      if (typeof who === 'string') {
        reasons.push(who);
        continue;
      }
      this.answerCaller();
      this.connectPerson(who);
      return;
    }
    // Nobody took the call (spec: the route's fallback, and after the last one the voicemail outcome).
    this.dialog.reject(480, 'Temporarily Unavailable');
    this.end('voicemail', reasons.join('; '));
  }

  // ---- the caller's side ------------------------------------------------------------------------

  private answerCaller(): void {
    const o = this.offer!;
    const media = this.media!;
    this.dialog.answer(buildOffer({ host: this.deps.sipHost, port: media.port, codecs: [o.codec], sessionId: Date.now(), srtp: this.answerSrtp ?? undefined }));
    media.start(legStart(o, this.deps.mediaTimeoutMs), {
      onAudio16k: (pcm) => (this.person?.hear ? this.person.hear(pcm) : this.ai.engine?.sendAudio(pcm)),
      onDtmf: (d) => this.ai.pressed(d),
      onMediaTimeout: () => this.hangup('failed', `no media from the caller for ${Math.round(this.deps.mediaTimeoutMs / 1000)} s`),
    });
    this.mediaStarted = true;
    this.state = 'answered';
    this.answeredAt = new Date();
    this.deps.emit('answered', this.callId, {
      trunkId: this.trunkId,
      answeredAt: this.answeredAt.toISOString(),
      answerMs: Math.round(Number(process.hrtime.bigint() - this.dialog.receivedAt) / 1e6),
    });
  }

  private onReoffer(sdp: string): void {
    if (!this.media || !this.mediaStarted) return;
    try {
      const o = parseReoffer(sdp);
      if (o.host !== null) this.media.retarget({ remoteHost: o.host, remotePort: o.port, remoteRtcpPort: o.rtcpPort, expectMedia: o.sends });
    } catch {
      // our answer stands; nothing to follow
    }
  }

  private onCallerGone(why: 'bye' | 'cancel' | 'no-ack'): void {
    if (this.ended) return;
    this.abort.abort();
    if (why === 'no-ack') return this.end('failed', 'the caller never acknowledged the answer (no ACK)');
    const outcome = this.transferred ? 'transferred-to-vnum' : this.person ? 'finished' : (this.pendingOutcome ?? 'far-hangup');
    this.end(outcome, '');
  }

  // ---- the AI -----------------------------------------------------------------------------------

  /** Connects the number's AI (first target, fallback or transfer). null when it took the call. */
  private async connectAi(t: VnumTarget): Promise<string | null> {
    const engine = this.deps.engineFactory(t.engine);
    try {
      await engine.connect();
    } catch (err) {
      engine.close();
      return (err as Error).message;
    }
    if (this.ended) {
      engine.close();
      return null;
    }
    this.useEngine(engine, t);
    if (!this.mediaStarted) this.answerCaller();
    engine.begin();
    return null;
  }

  private useEngine(engine: VoiceEngine, t: VnumTarget): void {
    this.ai.use(engine, t.engine);
    if (this.maxTimer) clearTimeout(this.maxTimer);
    this.maxTimer = setTimeout(() => this.hangup('max-duration', ''), t.maxSeconds * 1000);
  }

  private async onTool(engine: VoiceEngine, c: ToolCall): Promise<void> {
    switch (c.name) {
      case 'end_call':
      case 'callback_later':
      case 'report_voicemail':
        engine.sendToolResponse(c, { ok: true });
        this.hangupWhenDrained(this.transferred ? 'transferred-to-vnum' : 'finished');
        return;
      case 'transfer_to_user':
        await this.transfer(engine, c);
        return;
      default:
        engine.sendToolResponse(c, { ok: false, error: `unknown tool ${c.name}` });
    }
  }

  /** The AI hands the caller on: the core says where (another number's AI, a user, a PSTN number). */
  private async transfer(engine: VoiceEngine, c: ToolCall): Promise<void> {
    const user = typeof c.args.user === 'string' ? c.args.user : '';
    const phone = typeof c.args.phone === 'string' ? c.args.phone : '';
    let d: TransferDecision;
    try {
      d = await this.deps.askTransfer({ callId: this.callId, user, phone });
    } catch (err) {
      d = { ok: false, error: `transfer lookup failed: ${(err as Error).message}` };
    }
    if (this.ended) return;
    if (!d.ok) {
      engine.sendToolResponse(c, { ok: false, error: d.error });
      return;
    }
    const t = d.target;
    const emitTransferred = () =>
      this.deps.emit('transferred', this.callId, {
        toUser: t.kind === 'user' ? t.user : '',
        toPhone: t.kind === 'vnum' ? t.number : t.kind === 'pstn' ? t.phone : '',
        transferType: d.transferType,
        trunkId: this.trunkId,
      });
    if (t.kind === 'vnum') {
      const next = await this.ai.handOver(
        engine,
        c,
        () => this.deps.engineFactory(t.engine),
        () => this.ended,
        'caller',
      );
      if (!next) return;
      this.transferred = true;
      emitTransferred();
      engine.close();
      this.useEngine(next, t);
      next.begin();
      return;
    }
    const reached = t.kind === 'user' ? await this.ringUser(t.user, t.ringTimeoutSec) : await this.dialPstn(t);
    const who = settleReach(reached, !this.ended, engine, c);
    if (!who) return;
    this.transferred = true;
    emitTransferred();
    this.connectPerson(who);
    engine.close();
  }

  // ---- people -----------------------------------------------------------------------------------

  private ringUser(user: string, ringTimeoutSec: number): Promise<AnsweredEndpoint | string> {
    return this.deps.endpoints.ring(
      { tenantId: this.tenantId, user, callId: this.callId, callerNumber: this.caller.number, callerName: this.caller.name, ringTimeoutSec },
      this.abort.signal,
    );
  }

  /** A PSTN number on the trunks the core picked (outbound routes), first that answers. */
  private dialPstn(t: Extract<Target, { kind: 'pstn' }>): Promise<AnsweredEndpoint | string> {
    this.slots ??= new TrunkSlots(this.deps.trunkLoad);
    return dialPstn(this.deps, t, this.caller.name || this.caller.number || 'Anonymous', this.abort.signal, this.slots);
  }

  private connectPerson(p: AnsweredEndpoint): void {
    this.person = p;
    p.connect(this.media!);
    p.onEnded(() => {
      if (this.ended) return;
      this.person = null; // gone: no BYE back to it
      this.hangup(this.transferred ? 'transferred-to-vnum' : 'finished', '');
    });
  }

  // ---- ending -----------------------------------------------------------------------------------

  private hangupWhenDrained(outcome: Outcome): void {
    if (this.pendingOutcome || this.ended) return;
    this.pendingOutcome = outcome;
    this.ai.afterSpeech(10_000, () => this.hangup(outcome, ''));
  }

  /** Ends from our side: BYE when answered, a final refusal before that. */
  hangup(outcome: Outcome, errorDetail: string): void {
    if (this.ended) return;
    this.abort.abort();
    void this.dialog.bye();
    this.end(outcome, errorDetail);
  }

  private end(outcome: Outcome, errorDetail: string): void {
    if (this.ended) return;
    this.ended = true;
    this.outcome = outcome;
    this.state = 'ending';
    if (this.maxTimer) clearTimeout(this.maxTimer);
    this.ai.end();
    const person = this.person;
    this.person = null;
    person?.hangup();
    this.slots?.releaseAll();
    const endedAt = new Date();
    const media = this.media;
    this.media = null;
    void (media ? media.stop() : Promise.resolve(null)).then((m) => {
      this.metrics = m;
      const report = this.ai.report({ outcome, answeredAt: this.answeredAt, endedAt, trunkId: this.trunkId, errorDetail, sipStatus: null });
      this.deps.emit('ended', this.callId, report);
      this.deps.onDone(this);
    });
  }
}
