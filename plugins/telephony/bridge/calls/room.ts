/**
 * One browser visitor in a virtual number's room: the WebRTC leg (leg.ts) bridged to the number's
 * voice AI, with the lifecycle of CONTROL-API.md "Rooms": `answered` once media flows, `ended`
 * with exactly one outcome and the transcript.
 *
 * Outcomes: `empty-room` when the visitor never connects (connectTimeoutSec) or connects but never
 * speaks (silenceTimeoutSec, or leaves first); `far-hangup` when a visitor who spoke leaves;
 * `finished` when the AI calls end_call; `max-duration` at maxSeconds; `failed` on an engine error.
 */
import type { ToolCall, VoiceEngine } from '../engine/types.ts';
import type { EmitFn } from '../events.ts';
import { isOutcome, type BridgeCallState, type OpenRoom, type Outcome } from '../../control.ts';
import type { RoomLeg, WebRtcHandlers, WebRtcMetrics } from '../webrtc/leg.ts';
import type { TransferDecision, TransferQuery } from '../inbound/control.ts';
import type { AnsweredEndpoint, RingRequest } from '../inbound/endpoints.ts';
import { RoomAsCaller } from '../webrtc/room-caller.ts';
import { dialPstn, TrunkSlots, type PstnDeps } from '../inbound/legs.ts';
import { Conversation, settleReach } from './conversation.ts';

export interface RoomDeps {
  engineFactory: (cfg: OpenRoom['engine']) => VoiceEngine;
  emit: EmitFn;
  onDone: (room: RoomCall) => void;
  /** The room's WebRTC leg (on the WebRTC thread, or inline). */
  openLeg: (h: WebRtcHandlers, mediaTimeoutMs?: number) => RoomLeg;
  /** No RTP from a connected visitor this long → they left. */
  mediaTimeoutMs?: number;
  /** Where the AI may hand the visitor (the core decides, as for an inbound SIP call). */
  askTransfer?: (q: TransferQuery) => Promise<TransferDecision>;
  /** Rings an office user's endpoints (browser tabs, desk phones): the first to answer, or why none did. */
  ringUser?: (r: RingRequest, abort: AbortSignal) => Promise<AnsweredEndpoint | string>;
  /** The SIP side for a transfer to a PSTN number (the bridge's user agent, media and trunks). */
  pstn?: () => PstnDeps;
}

export interface RoomMetrics extends Omit<WebRtcMetrics, 'firstAudioSentAt'> {
  callId: string;
  kind: 'room';
}

export class RoomCall {
  state: BridgeCallState = 'ringing';
  readonly startedAt = new Date();
  private readonly startedHr = process.hrtime.bigint();
  private readonly leg: RoomLeg;
  private engineReady: Promise<void> | null = null;
  private ended = false;
  private connectedAt: Date | null = null;
  private spoke = false;
  private connectTimer: NodeJS.Timeout | null = null;
  private silenceTimer: NodeJS.Timeout | null = null;
  private maxTimer: NodeJS.Timeout | null = null;
  private pendingOutcome: Outcome | null = null;
  /** The AI handed the visitor on (another number's AI, or a person): the call ends transferred-to-vnum. */
  private transferred = false;
  /** The office user the visitor talks to after a transfer (the AI is gone then). */
  private person: { endpoint: AnsweredEndpoint; media: RoomAsCaller } | null = null;
  /** Aborts a ring in progress when the room ends. */
  private readonly abort = new AbortController();
  /** The trunk slots a PSTN leg of this room holds (made on the first). */
  private slots: TrunkSlots | null = null;
  /** The room's number's AI; a vnum-to-vnum handover swaps the engine, the report keeps the room's number's names. */
  private readonly ai: Conversation;
  outcome: Outcome | null = null;
  errorDetail = '';
  metrics: RoomMetrics | null = null;

  constructor(
    readonly req: OpenRoom,
    private readonly deps: RoomDeps,
  ) {
    this.ai = new Conversation(
      {
        audible: () => !this.ended && this.connectedAt !== null,
        play: (pcm, rate) => this.leg.play(pcm, rate),
        flush: () => this.leg.flush(),
        queuedMs: () => this.leg.queuedMs,
        toolCall: (engine, c) => this.onTool(engine, c),
        engineClosed: (error) => {
          if (this.ended || this.pendingOutcome || this.person) return;
          this.hangup('failed', error ?? 'AI engine ended the session');
        },
      },
      req.engine,
    );
    this.leg = deps.openLeg(
      {
        onAudio16k: (pcm) => (this.person ? this.person.media.visitorAudio(pcm) : this.ai.engine?.sendAudio(pcm)),
        onConnected: () => this.onConnected(),
        onGone: (why) => this.onVisitorGone(why),
        onVoice: () => this.onSpoke(),
      },
      deps.mediaTimeoutMs,
    );
  }

  get callId(): string {
    return this.req.callId;
  }

  /** Starts the engine and answers the offer; the visitor has connectTimeoutSec to connect. */
  async open(): Promise<{ answerSdp: string; codec: string }> {
    const engine = this.deps.engineFactory(this.req.engine);
    this.ai.use(engine);
    this.engineReady = engine.connect().then(
      () => undefined,
      // eslint-disable-next-line @typescript-eslint/use-unknown-in-catch-callback-variable -- the engine's, the transport's and our own rejections are Errors
      (err: Error) => this.hangup('failed', err.message),
    );
    let answerSdp: string;
    try {
      answerSdp = await this.leg.answer(this.req.offerSdp);
    } catch (err) {
      this.ended = true;
      engine.close();
      void this.leg.stop();
      throw err;
    }
    this.connectTimer = setTimeout(() => this.hangup('empty-room', ''), this.req.connectTimeoutSec * 1000);
    return { answerSdp, codec: this.leg.codec ?? '' };
  }

  private onConnected(): void {
    if (this.ended) return;
    if (this.connectTimer) clearTimeout(this.connectTimer);
    this.connectedAt = new Date();
    this.state = 'answered';
    this.deps.emit('answered', this.callId, {
      trunkId: '',
      answeredAt: this.connectedAt.toISOString(),
      answerMs: Math.round(Number(process.hrtime.bigint() - this.startedHr) / 1e6),
    });
    this.maxTimer = setTimeout(() => this.hangup('max-duration', ''), this.req.maxSeconds * 1000);
    if (!this.spoke) this.silenceTimer = setTimeout(() => this.hangup('empty-room', ''), this.req.silenceTimeoutSec * 1000);
    // The number's AI answers: it speaks first, as on a phone line.
    void this.engineReady!.then(() => {
      if (!this.ended) this.ai.engine?.begin();
    });
  }

  private onSpoke(): void {
    this.spoke = true;
    if (this.silenceTimer) clearTimeout(this.silenceTimer);
    this.silenceTimer = null;
  }

  private onVisitorGone(why: string): void {
    if (this.ended) return;
    if (this.pendingOutcome) return this.end(this.pendingOutcome, '');
    if (this.person) return this.end('transferred-to-vnum', '');
    this.end(this.spoke ? 'far-hangup' : 'empty-room', this.spoke ? '' : why);
  }

  private async onTool(engine: VoiceEngine, c: ToolCall): Promise<void> {
    if (c.name === 'end_call') {
      engine.sendToolResponse(c, { ok: true });
      this.hangupWhenDrained(this.transferred ? 'transferred-to-vnum' : 'finished');
      return;
    }
    if (c.name === 'transfer_to_user' && this.deps.askTransfer) return this.transfer(engine, c);
    engine.sendToolResponse(c, { ok: false, error: `${c.name} is not available in a browser room` });
  }

  /**
   * The AI hands the visitor on; the core names the target (the same decision as for an inbound
   * SIP call). Another virtual number: the first AI finishes its sentence, the second takes over
   * the same WebRTC leg. An office user: their browser tabs and desk phones ring while the AI
   * stays with the visitor; the first to answer is connected to the visitor's leg and the AI
   * leaves (if none answers, the AI is told why). A whitelisted phone number: dialled on the
   * trunks of the outbound routes, the same way, its RTP leg bridged to the visitor's.
   */
  private async transfer(engine: VoiceEngine, c: ToolCall): Promise<void> {
    const user = typeof c.args.user === 'string' ? c.args.user : '';
    const phone = typeof c.args.phone === 'string' ? c.args.phone : '';
    let d: TransferDecision;
    try {
      d = await this.deps.askTransfer!({ callId: this.callId, user, phone });
    } catch (err) {
      d = { ok: false, error: `transfer lookup failed: ${(err as Error).message}` };
    }
    if (this.ended || this.ai.engine !== engine) return;
    if (!d.ok) {
      engine.sendToolResponse(c, { ok: false, error: d.error });
      return;
    }
    const t = d.target;
    if (t.kind === 'user' && this.deps.ringUser) {
      const req = {
        tenantId: this.req.tenantId,
        user: t.user,
        callId: this.callId,
        callerNumber: '',
        callerName: `${this.req.room} (browser)`,
        ringTimeoutSec: t.ringTimeoutSec,
      };
      return this.transferToPerson(engine, c, this.deps.ringUser(req, this.abort.signal), { toUser: t.user, toPhone: '' }, d.transferType);
    }
    if (t.kind === 'pstn' && this.deps.pstn) {
      const pstn = this.deps.pstn();
      this.slots ??= new TrunkSlots(pstn.trunkLoad);
      const dialing = dialPstn(pstn, t, this.req.room, this.abort.signal, this.slots);
      return this.transferToPerson(engine, c, dialing, { toUser: '', toPhone: t.phone }, d.transferType);
    }
    if (t.kind !== 'vnum') {
      engine.sendToolResponse(c, { ok: false, error: `a transfer to ${t.kind === 'user' ? 'a person' : 'a phone number'} is not available here` });
      return;
    }
    const next = await this.ai.handOver(
      engine,
      c,
      () => this.deps.engineFactory(t.engine),
      () => this.ended,
      'visitor',
    );
    if (!next) return;
    this.transferred = true;
    this.deps.emit('transferred', this.callId, { toUser: '', toPhone: t.number, transferType: d.transferType, trunkId: null });
    this.ai.use(next);
    engine.close();
    next.begin();
  }

  /** Connects the visitor to whoever answers `reaching` (an office user's endpoint, a PSTN leg); the AI leaves. */
  private async transferToPerson(
    engine: VoiceEngine,
    c: ToolCall,
    reaching: Promise<AnsweredEndpoint | string>,
    to: { toUser: string; toPhone: string },
    transferType: string,
  ): Promise<void> {
    const who = settleReach(await reaching, !this.ended && this.ai.engine === engine, engine, c);
    if (!who) return;
    this.transferred = true;
    this.deps.emit('transferred', this.callId, { ...to, transferType, trunkId: null });
    // The AI's voice stops here: what it queued is dropped, the person speaks from now on.
    this.leg.flush();
    const media = new RoomAsCaller(this.leg, who);
    this.person = { endpoint: who, media };
    who.connect(media);
    who.onEnded(() => {
      if (this.ended) return;
      this.person = null; // gone: nothing to hang up on its side
      this.hangup('transferred-to-vnum', '');
    });
    engine.close();
  }

  private hangupWhenDrained(outcome: Outcome, capMs = 10_000): void {
    if (this.pendingOutcome || this.ended) return;
    this.pendingOutcome = outcome;
    this.ai.afterSpeech(capMs, () => this.hangup(outcome, ''));
  }

  /**
   * Ends from our side (timers, the engine, the core). The core's `left` (the visitor pressed
   * leave) ends like a visitor who went away; another outcome value is taken as it is.
   */
  hangup(outcome: Outcome, errorDetail: string): void {
    this.end(outcome, errorDetail);
  }

  /** The outcome of a core hangup `reason`. */
  outcomeFor(reason: string | undefined): Outcome {
    if (reason === 'left') return this.pendingOutcome ?? (this.person ? 'transferred-to-vnum' : this.spoke ? 'far-hangup' : 'empty-room');
    return reason && isOutcome(reason) ? reason : 'cancelled';
  }

  private end(outcome: Outcome, errorDetail: string): void {
    if (this.ended) return;
    this.ended = true;
    this.outcome = outcome;
    this.errorDetail = outcome === 'failed' ? errorDetail || 'call failed' : errorDetail;
    this.state = 'ending';
    for (const t of [this.connectTimer, this.silenceTimer, this.maxTimer]) if (t) clearTimeout(t);
    this.abort.abort();
    const person = this.person;
    this.person = null;
    person?.endpoint.hangup();
    this.slots?.releaseAll();
    this.ai.end();
    const endedAt = new Date();
    void this.leg.stop().then((m) => this.finish(outcome, endedAt, m));
  }

  private finish(outcome: Outcome, endedAt: Date, m: WebRtcMetrics): void {
    const { firstAudioSentAt: _first, ...rest } = m;
    this.metrics = { callId: this.callId, kind: 'room', ...rest };
    this.deps.emit(
      'ended',
      this.callId,
      this.ai.report({ outcome, answeredAt: this.connectedAt, endedAt, trunkId: null, errorDetail: this.errorDetail, sipStatus: null }),
    );
    this.deps.onDone(this);
  }
}
