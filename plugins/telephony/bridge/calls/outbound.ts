/**
 * One outbound AI call: dial the trunks in order, bridge RTP to the voice engine once answered,
 * keep the transcript, and end with exactly one outcome (CONTROL-API.md `ended`).
 */
import type { SipUserAgent } from '../sip/ua.ts';
import type { OutgoingInvite } from '../sip/uac.ts';
import { buildOffer, parseAnswer, parseReoffer, SdpError, legStart, srtpOffer, type SrtpOffer } from '../media/sdp.ts';
import { dialLeg, TrunkSlots, type Dialing } from '../inbound/legs.ts';
import type { LegMetrics, MediaHost, MediaLeg } from '../media/leg.ts';
import type { SipCodec as Codec } from '../media/audio.ts';
import type { ToolCall, VoiceEngine } from '../engine/types.ts';
import type { LocatedTrunk, PlaceCall, Trunk } from '../schemas.ts';
import type { AnsweredEndpoint, RingRequest } from '../inbound/endpoints.ts';
import type { EmitFn } from '../events.ts';
import { isOutcome, type BridgeCallState, type Outcome } from '../../control.ts';
import { Conversation } from './conversation.ts';

export interface CallDeps {
  ua: SipUserAgent;
  media: MediaHost;
  sipHost: string;
  trunks: Map<string, LocatedTrunk>;
  /** Calls in progress per trunk id (for maxConcurrentCalls). */
  trunkLoad: Map<string, number>;
  engineFactory: (cfg: PlaceCall['engine']) => VoiceEngine;
  emit: EmitFn;
  onDone: (call: OutboundCall) => void;
  /** Hang up when nothing (RTP or RTCP) came from the far end for this long; 0 = never. */
  mediaTimeoutMs?: number;
  /** Rings an office user's endpoints (inbound/endpoints.ts) for a transfer to a user. */
  ringUser?: (req: RingRequest, abort?: AbortSignal) => Promise<AnsweredEndpoint | string>;
}

/** Statuses after which trying the next trunk makes no sense: the callee itself answered. */
const CALLEE_FINAL = new Set([486, 600, 603, 487, 404, 484]);
const BUSY = new Set([486, 600]);

/** A leg's media figures, per call, as /stats reports them. */
export interface CallMetrics extends Omit<LegMetrics, 'firstAudioSentAt'> {
  callId: string;
  /** 200 OK → first AI audio packet sent, minus the engine's own latency. */
  firstAudioAddedMs: number | null;
}

export class OutboundCall {
  state: BridgeCallState = 'dialing';
  readonly startedAt = new Date();
  trunkId: string | null = null;
  private leg: OutgoingInvite | null = null;
  /** RTP leg: its port goes into the offer; it starts sending once the far end answered. */
  private media: MediaLeg | null = null;
  private mediaStarted = false;
  private engineReady: Promise<void> | null = null;
  private engineError: string | null = null;
  private ended = false;
  private answeredAt: Date | null = null;
  private answeredHr: bigint | null = null;
  private engineReadyHr: bigint | null = null;
  private beginSentHr: bigint | null = null;
  private ringTimer: NodeJS.Timeout | null = null;
  private maxTimer: NodeJS.Timeout | null = null;
  private pendingOutcome: Outcome | null = null;
  private pendingDetail = '';
  private sipStatus: number | null = null;
  private loadedTrunk: string | null = null;
  readonly dtmf: string[] = [];
  metrics: CallMetrics | null = null;

  private readonly ai: Conversation;

  constructor(
    readonly req: PlaceCall,
    private readonly deps: CallDeps,
  ) {
    this.ai = new Conversation(
      {
        // The AI speaks once answered, and on through its goodbye; not after it left a bridged transfer.
        audible: () => !this.bridged && (this.state === 'answered' || this.pendingOutcome !== null) && this.media !== null && this.mediaStarted,
        play: (pcm, rate) => this.media!.play(pcm, rate),
        flush: () => this.media?.flush(),
        queuedMs: () => this.media?.queuedMs ?? 0,
        toolCall: (_engine, c) => this.onTool(c),
        engineClosed: (error) => {
          if (this.ended || this.pendingOutcome) return;
          this.engineError = error ?? 'AI engine ended the session';
          this.hangup('failed', this.engineError);
        },
      },
      req.engine,
    );
  }

  get callId(): string {
    return this.req.callId;
  }
  get trunkIds(): readonly string[] {
    return this.req.trunkIds;
  }
  private get mediaTimeoutMs(): number {
    return this.req.mediaTimeoutSec !== undefined ? this.req.mediaTimeoutSec * 1000 : (this.deps.mediaTimeoutMs ?? 0);
  }

  async start(): Promise<void> {
    // Connect the engine while the phone rings, so the greeting is not delayed by the handshake.
    const engine = this.deps.engineFactory(this.req.engine);
    this.ai.use(engine);
    this.engineReady = engine.connect().then(
      () => {
        this.engineReadyHr = process.hrtime.bigint();
      },
      // eslint-disable-next-line @typescript-eslint/use-unknown-in-catch-callback-variable -- the engine's, the transport's and our own rejections are Errors
      (err: Error) => {
        this.engineError = err.message;
        this.hangup('failed', err.message);
      },
    );
    let media: MediaLeg;
    try {
      media = await this.deps.media.open();
    } catch (err) {
      this.end('failed', { errorDetail: (err as Error).message });
      return;
    }
    if (this.ended) {
      void media.stop();
      return;
    }
    this.media = media;
    this.ringTimer = setTimeout(() => this.onRingTimeout(), this.req.ringTimeoutSec * 1000);
    this.tryTrunk(0, 'no trunk could be tried');
  }
  /** `target`: which of the trunk's SRV targets (RFC 3263 §4.3 failover within one trunk). */
  private tryTrunk(index: number, lastError: string, target = 0): void {
    if (this.ended) return;
    const ids = this.req.trunkIds;
    if (index >= ids.length) {
      this.end('failed', { errorDetail: lastError });
      return;
    }
    const id = ids[index];
    const trunk = this.deps.trunks.get(id);
    if (!trunk) return this.tryTrunk(index + 1, `unknown trunk ${id}`);
    const load = this.deps.trunkLoad.get(id) ?? 0;
    if (target === 0 && load >= trunk.maxConcurrentCalls) return this.tryTrunk(index + 1, `trunk ${id} at max concurrent calls`);
    if (target === 0) {
      this.setTrunkLoad(id);
      this.trunkId = id;
      this.deps.emit('dialing', this.callId, { trunkId: id });
    }
    const codecs: Codec[] = trunk.codecs.length ? trunk.codecs : ['PCMU', 'PCMA'];
    const srtp = srtpOffer(trunk.srtp);
    const offer = buildOffer({
      host: this.deps.sipHost,
      port: this.media!.port,
      codecs,
      sessionId: Date.now(),
      srtp: { savp: srtp.policy === 'required', crypto: srtp.crypto },
    });
    const invitedAt = process.hrtime.bigint();
    const leg = this.deps.ua.invite(trunk, this.req.phone, this.req.displayName, offer, trunk.addrs?.[target]);
    this.leg = leg;
    leg.on('provisional', (res) => {
      if (leg !== this.leg) return;
      if (res.status === 180 || res.status === 183) this.state = this.state === 'dialing' ? 'ringing' : this.state;
    });
    leg.on('answered', (res) => {
      if (leg !== this.leg) return;
      this.onAnswered(leg, trunk, codecs, srtp, res.body.toString('utf8'), invitedAt);
    });
    leg.dialog.on('reoffer', (sdp) => {
      if (leg === this.leg) this.onReoffer(sdp);
    });
    leg.on('failed', (status, reason) => {
      if (leg !== this.leg || this.ended) return;
      this.sipStatus = status;
      if (this.pendingOutcome) {
        this.end(this.pendingOutcome, { errorDetail: this.pendingDetail });
        return;
      }
      if (BUSY.has(status)) {
        this.end('busy', { errorDetail: '' });
        return;
      }
      const detail = status === 408 && reason.startsWith('SIP') ? reason : `SIP ${status} ${reason}`;
      if (CALLEE_FINAL.has(status)) {
        this.end('failed', { errorDetail: detail });
        return;
      }
      // The server did not answer, or is unavailable: its SRV peers serve the same trunk (§4.3).
      if ((status === 408 || status === 503) && trunk.addrs && target + 1 < trunk.addrs.length) {
        this.tryTrunk(index, detail, target + 1);
        return;
      }
      this.releaseTrunk();
      this.tryTrunk(index + 1, detail);
    });
    leg.dialog.on('bye', () => this.onFarHangup());
  }

  private setTrunkLoad(id: string): void {
    this.releaseTrunk();
    this.deps.trunkLoad.set(id, (this.deps.trunkLoad.get(id) ?? 0) + 1);
    this.loadedTrunk = id;
  }
  private releaseTrunk(): void {
    if (this.loadedTrunk) {
      this.deps.trunkLoad.set(this.loadedTrunk, Math.max(0, (this.deps.trunkLoad.get(this.loadedTrunk) ?? 1) - 1));
      this.loadedTrunk = null;
    }
  }

  private onRingTimeout(): void {
    if (this.state === 'answered' || this.ended) return;
    if (this.leg && !this.leg.provisionalReceived) {
      this.leg.cancel(); // sent if a 1xx still comes (§9.1)
      this.end('no-answer', {});
      return;
    }
    this.pendingOutcome = 'no-answer';
    this.state = 'ending';
    this.leg?.cancel();
    // The 487 normally ends the call; if a 2xx crossed the CANCEL (the UA then sends BYE) or the
    // trunk ignores the CANCEL, end here anyway: never leave a call in flight.
    setTimeout(() => this.end('no-answer', {}), 5000).unref();
  }

  private onAnswered(leg: OutgoingInvite, trunk: Trunk, codecs: Codec[], srtp: SrtpOffer, sdp: string, invitedAt: bigint): void {
    if (this.ended) {
      void leg.bye();
      return;
    }
    if (this.ringTimer) clearTimeout(this.ringTimer);
    this.answeredHr = process.hrtime.bigint();
    this.answeredAt = new Date();
    this.state = 'answered';
    let neg;
    try {
      neg = parseAnswer(sdp, codecs, srtp);
    } catch (err) {
      const msg = err instanceof SdpError ? err.message : 'bad SDP answer';
      this.sipStatus = 200;
      this.hangup('failed', msg);
      return;
    }
    const engine = this.ai.engine!;
    this.remote = { host: neg.host, port: neg.port, rtcpPort: neg.rtcpPort };
    this.media!.start(legStart(neg, this.mediaTimeoutMs), {
      onAudio16k: (pcm) => (this.person?.hear ? this.person.hear(pcm) : engine.sendAudio(pcm)),
      onDtmf: (d) => {
        this.dtmf.push(d);
        this.ai.pressed(d);
      },
      // The far end vanished without a BYE (lost signalling, a trunk that dropped the call):
      // do not keep paying for the AI and the line until maxSeconds.
      onMediaTimeout: () => this.hangup('failed', `no media from the far end for ${Math.round(this.mediaTimeoutMs / 1000)} s`),
    });
    this.mediaStarted = true;
    this.deps.emit('answered', this.callId, {
      trunkId: trunk.id,
      answeredAt: this.answeredAt.toISOString(),
      answerMs: Math.round(Number(this.answeredHr - invitedAt) / 1e6),
    });
    this.maxTimer = setTimeout(() => this.hangup('max-duration', ''), this.req.maxSeconds * 1000);
    void this.engineReady!.then(() => {
      if (this.ended || this.engineError) return;
      this.beginSentHr = process.hrtime.bigint();
      engine.begin();
    });
  }

  /** Far end's media as last negotiated: a re-offer moves it, or holds the call. */
  private remote: { host: string; port: number; rtcpPort: number } | null = null;

  private onReoffer(sdp: string): void {
    if (!this.media || !this.mediaStarted || !this.remote) return;
    let o;
    try {
      o = parseReoffer(sdp);
    } catch {
      return; // we answer with our media unchanged; nothing to follow
    }
    // A hold address (0.0.0.0) keeps the old target: there is nowhere else to send.
    if (o.host !== null) this.remote = { host: o.host, port: o.port, rtcpPort: o.rtcpPort };
    this.media.retarget({ remoteHost: this.remote.host, remotePort: this.remote.port, remoteRtcpPort: this.remote.rtcpPort, expectMedia: o.sends });
  }

  private async onTool(c: ToolCall): Promise<void> {
    const engine = this.ai.engine!;
    switch (c.name) {
      case 'end_call':
        engine.sendToolResponse(c, { ok: true });
        this.hangupWhenDrained('finished');
        return;
      case 'callback_later':
        engine.sendToolResponse(c, { ok: true });
        this.hangupWhenDrained('not-now');
        return;
      case 'report_voicemail': {
        // The call's voicemail policy: hang up at once, or let the AI leave its message (the one
        // the call gives, in the tool's answer, which the model speaks next) and hang up after it.
        const message = this.req.engine.voicemailMessage;
        engine.sendToolResponse(
          c,
          message ? { ok: true, leaveMessage: message, instruction: 'Say this message now, word for word, then stop.' } : { ok: true },
        );
        if (this.req.engine.leaveVoicemailMessage) this.hangupWhenDrained('voicemail', 20_000, message ? this.ai.audioMark : undefined);
        else this.hangup('voicemail', '');
        return;
      }
      case 'transfer_to_user':
        await this.transfer(c);
        return;
      default:
        engine.sendToolResponse(c, { ok: false, error: `unknown tool ${c.name}` });
    }
  }

  /**
   * RFC 3515 blind transfer of the far end. Many trunks refuse REFER: then, for a phone number,
   * a second leg — we call the number on the same trunk and, once it answers, connect the two
   * parties' media in the media threads and let the AI leave. A failed second leg keeps the call
   * with the AI.
   */
  private async transfer(c: ToolCall): Promise<void> {
    const engine = this.ai.engine!;
    const toPhone = typeof c.args.phone === 'string' ? c.args.phone : '';
    const toUser = typeof c.args.user === 'string' ? c.args.user : '';
    const trunk = this.trunkId ? this.deps.trunks.get(this.trunkId) : undefined;
    if (!this.leg || !trunk || (!toPhone && !toUser)) {
      engine.sendToolResponse(c, { ok: false, error: 'nothing to transfer to' });
      return;
    }
    // outbound-to-user: the user's own endpoints (desk phones, later the office tab) first.
    if (toUser && !toPhone && (await this.transferToEndpoints(c, toUser))) return;
    if (this.ended) return;
    const target = toPhone ? `sip:${toPhone}@${trunk.host}:${trunk.port}` : `sip:${encodeURIComponent(toUser)}@${trunk.fromDomain || trunk.host}`;
    const status = await this.leg.dialog.refer(target);
    if (this.ended) return;
    if (status >= 200 && status < 300) {
      engine.sendToolResponse(c, { ok: true });
      this.deps.emit('transferred', this.callId, { toUser, toPhone, transferType: 'outbound-to-user', trunkId: this.trunkId });
      this.hangup('transferred-to-vnum', '');
      return;
    }
    const second = toPhone && /^\+?[0-9]{2,15}$/.test(toPhone) ? await this.secondLeg(trunk, toPhone) : `no phone number for a second leg`;
    if (this.ended) return;
    if (typeof second === 'string') {
      engine.sendToolResponse(c, { ok: false, error: `transfer refused (SIP ${status}); second leg: ${second}` });
      return;
    }
    engine.sendToolResponse(c, { ok: true });
    this.deps.emit('transferred', this.callId, { toUser, toPhone, transferType: 'outbound-to-user', trunkId: this.trunkId });
    // The two parties now hear each other; the AI leaves. Either side's BYE ends both.
    this.pendingOutcome = 'transferred-to-vnum';
    this.bridged = true;
    this.media!.bridgeTo(second);
    second.bridgeTo(this.media!);
    engine.close();
  }

  /** True when the user's endpoint took the call; false when none answered (then REFER is tried). */
  private async transferToEndpoints(c: ToolCall, toUser: string): Promise<boolean> {
    if (!this.deps.ringUser) return false;
    const who = await this.deps.ringUser(
      {
        tenantId: this.req.tenantId,
        user: toUser,
        callId: this.callId,
        callerNumber: this.req.phone,
        callerName: this.req.displayName,
        ringTimeoutSec: this.req.ringTimeoutSec,
      },
      this.ringing.signal,
    );
    // Over while it rang: nothing left to transfer (no REFER either).
    if (typeof who === 'string') return this.ended;
    if (this.ended || !this.media) {
      who.hangup();
      return true;
    }
    this.ai.engine!.sendToolResponse(c, { ok: true });
    this.deps.emit('transferred', this.callId, { toUser, toPhone: '', transferType: 'outbound-to-user', trunkId: this.trunkId });
    this.pendingOutcome = 'transferred-to-vnum';
    this.bridged = true;
    this.person = who;
    who.connect(this.media);
    who.onEnded(() => {
      this.person = null;
      this.hangup('transferred-to-vnum', '');
    });
    this.ai.engine?.close();
    return true;
  }

  /** Aborted when the call ends: the user's endpoints (desk phones, tabs) stop ringing at once. */
  private readonly ringing = new AbortController();
  /** The office user's endpoint a transfer connected (torn down with the call). */
  private person: AnsweredEndpoint | null = null;
  private bridged = false;
  /** The second leg of a bridged transfer, torn down with the call. */
  private second: Dialing | null = null;
  /** The trunk slot the second leg holds (made with it). */
  private slots: TrunkSlots | null = null;

  /** Calls `phone` on `trunk`; resolves with its started media leg once answered, or why not. */
  private async secondLeg(trunk: Trunk, phone: string): Promise<MediaLeg | string> {
    // The second leg is a call on the trunk like any other: it counts against maxConcurrentCalls.
    if ((this.deps.trunkLoad.get(trunk.id) ?? 0) >= trunk.maxConcurrentCalls) return `trunk ${trunk.id} at max concurrent calls`;
    this.slots ??= new TrunkSlots(this.deps.trunkLoad);
    this.slots.take(trunk.id);
    const dialing = dialLeg({ ...this.deps, mediaTimeoutMs: this.mediaTimeoutMs }, trunk, phone, this.req.displayName, () =>
      this.hangup('transferred-to-vnum', ''),
    );
    this.second = dialing;
    const timer = setTimeout(() => dialing.cancel(), this.req.ringTimeoutSec * 1000);
    const r = await dialing.result;
    clearTimeout(timer);
    if (typeof r !== 'string') return r.media;
    if (this.second === dialing) this.second = null;
    this.slots.release(trunk.id);
    return r;
  }

  /** Lets the AI finish its goodbye (queue empty, no new audio for 400 ms), then BYE. */
  private hangupWhenDrained(outcome: Outcome, capMs = 10_000, spokenAfter?: number): void {
    if (this.pendingOutcome || this.ended) return;
    this.pendingOutcome = outcome;
    this.ai.afterSpeech(capMs, () => this.hangup(outcome, ''), spokenAfter);
  }

  private onFarHangup(): void {
    if (this.ended) return;
    // A BYE while the AI still had more than a moment of its goodbye queued means it was not
    // done: far-hangup. Voicemail / not-now decisions stand whatever the far end does.
    const pending = this.pendingOutcome;
    const stillTalking = (this.media?.queuedMs ?? 0) > 1500;
    this.end(pending && !(pending === 'finished' && stillTalking) ? pending : 'far-hangup', { errorDetail: this.pendingDetail });
  }

  /** Ends from our side: BYE when answered, CANCEL when still ringing. */
  hangup(outcome: Outcome, errorDetail: string): void {
    if (this.ended) return;
    // A bridged transfer's outcome was settled when the AI handed over (a failure still reports).
    if (this.bridged && outcome !== 'failed') outcome = 'transferred-to-vnum';
    if (this.state === 'answered' || this.state === 'ending') {
      this.state = 'ending';
      if (this.leg && this.leg.state === 'confirmed') {
        void this.leg.bye();
        this.end(outcome, { errorDetail });
        return;
      }
    }
    if (this.leg && this.leg.state !== 'terminated' && this.leg.state !== 'confirmed') {
      if (!this.leg.provisionalReceived) {
        // Nothing heard from the trunk yet: the UA still sends CANCEL on a late 1xx (§9.1) and
        // BYE on a late 2xx, but the call's outcome is settled now.
        this.leg.cancel();
        this.end(outcome, { errorDetail });
        return;
      }
      // Ringing: CANCEL, and report when the INVITE transaction finishes (487).
      this.pendingOutcome = outcome;
      this.pendingDetail = errorDetail;
      this.state = 'ending';
      this.leg.cancel();
      setTimeout(() => this.end(outcome, { errorDetail }), 5000).unref();
      return;
    }
    this.end(outcome, { errorDetail });
  }

  /** Outcome requested by the core's hangup (a known outcome value, else `cancelled`). */
  static outcomeFor(reason: string | undefined): Outcome {
    return reason && isOutcome(reason) ? reason : 'cancelled';
  }

  /** Set when the call ended (for the bridge's log line). */
  outcome: Outcome | null = null;
  errorDetail = '';
  get lastSipStatus(): number | null {
    return this.sipStatus;
  }

  private end(outcome: Outcome, o: { errorDetail?: string }): void {
    if (this.ended) return;
    this.ended = true;
    this.outcome = outcome;
    this.errorDetail = outcome === 'failed' ? o.errorDetail || 'call failed' : (o.errorDetail ?? '');
    this.state = 'ending';
    for (const t of [this.ringTimer, this.maxTimer]) if (t) clearTimeout(t);
    this.releaseTrunk();
    this.ai.end();
    this.slots?.releaseAll();
    this.ringing.abort();
    this.person?.hangup();
    this.person = null;
    this.second?.end();
    this.second = null;
    const endedAt = new Date();
    const media = this.media;
    this.media = null;
    // The media leg reports its figures as it stops (a message round trip to the media thread).
    void (media ? media.stop() : Promise.resolve(null)).then((m) => this.finish(outcome, endedAt, m));
  }

  private finish(outcome: Outcome, endedAt: Date, m: LegMetrics | null): void {
    this.metrics = {
      callId: this.callId,
      sendJitterP99Ms: m?.sendJitterP99Ms ?? 0,
      sendJitterMaxMs: m?.sendJitterMaxMs ?? 0,
      intervals: m?.intervals ?? 0,
      lateFrames: m?.lateFrames ?? 0,
      skippedSlots: m?.skippedSlots ?? 0,
      packetsSent: m?.packetsSent ?? 0,
      packetsReceived: m?.packetsReceived ?? 0,
      rxLost: m?.rxLost ?? 0,
      relayedFrames: m?.relayedFrames ?? 0,
      rtcpSent: m?.rtcpSent ?? 0,
      rtcpReceived: m?.rtcpReceived ?? 0,
      rttMs: m?.rttMs ?? null,
      remoteFractionLostMax: m?.remoteFractionLostMax ?? null,
      remoteJitterMs: m?.remoteJitterMs ?? null,
      rxJitterMs: m?.rxJitterMs ?? 0,
      firstAudioAddedMs: this.firstAudioAdded(m?.firstAudioSentAt ?? null),
    };
    const report = this.ai.report({
      outcome,
      answeredAt: this.answeredAt,
      endedAt,
      trunkId: this.trunkId,
      errorDetail: this.errorDetail,
      sipStatus: this.sipStatus,
    });
    this.deps.emit('ended', this.callId, report);
    this.deps.onDone(this);
  }

  private firstAudioAdded(sent: bigint | null): number | null {
    const firstEngineAudio = this.ai.firstAudioHr;
    if (sent === null || this.answeredHr === null || firstEngineAudio === null || this.beginSentHr === null) return null;
    const engineWait = this.engineReadyHr !== null && this.engineReadyHr > this.answeredHr ? this.engineReadyHr - this.answeredHr : 0n;
    const engineLatency = firstEngineAudio - this.beginSentHr;
    return Number(sent - this.answeredHr - engineLatency - engineWait) / 1e6;
  }

  get answeredFlag(): boolean {
    return this.answeredAt !== null;
  }
}
