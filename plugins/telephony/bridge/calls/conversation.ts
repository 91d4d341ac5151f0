/**
 * One AI conversation, whatever the leg (an outbound or inbound SIP call, a browser room): the
 * voice engine in charge wired to the call's media, the transcript and token usage across every
 * engine the call had (a vnum-to-vnum handover swaps the engine, the conversation goes on), the
 * wait for the AI's goodbye to play out, and the end-of-call report of the `ended` event
 * (CONTROL-API.md). What the call does with a tool call or a closed session is its own: the
 * conversation hands those to the call, and only for the engine in charge.
 */
import type { PlayRate } from '../media/leg.ts';
import type { ToolCall, VoiceEngine } from '../engine/types.ts';
import type { BridgeEventFields, Outcome } from '../../control.ts';

export interface Turn {
  speaker: 'AI' | 'Caller';
  text: string;
  ts: string;
}

/** The model, voice and language the report names (the engine part of PlaceCall / OpenRoom / a vnum target). */
export interface EngineNames {
  model: string;
  voice: string;
  language: string;
}

/** What the conversation needs of its call. */
export interface ConversationHost {
  /** True while the AI's voice reaches the other party (answered, not handed to a person). */
  audible(): boolean;
  /**
   * The AI's speech as the engine sends it (`rate`: the engine's output rate, 24 kHz for Gemini
   * Live) into the call's playback. The leg brings it to its own rate in one step: 8 kHz for
   * G.711, 16 kHz for G.722 (never through 8 kHz), 24 kHz for Opus.
   */
  play(pcm: Int16Array, rate: PlayRate): void;
  /** Barge-in: drop what is queued. */
  flush(): void;
  /** Milliseconds of the AI's speech still queued towards the other party. */
  queuedMs(): number;
  toolCall(engine: VoiceEngine, c: ToolCall): void | Promise<void>;
  /** The engine in charge ended its session for good (`error` null on a normal close). */
  engineClosed(error: string | null): void;
}

/** How long without new AI audio, its queue empty, counts as "the goodbye has played". */
const SPOKEN_GAP_MS = 400;

export class Conversation {
  /** The engine in charge (null before the first and for a call no AI takes). */
  engine: VoiceEngine | null = null;
  private names: EngineNames | null;
  private readonly turns: Turn[] = [];
  /** False after turnComplete: the next transcript fragment starts a new turn. */
  private turnOpen = false;
  private tokensTotal = 0;
  private tokensPrompt = 0;
  private lastAudioAt = 0;
  /** AI audio chunks played so far, in the engine's order (see `audioMark`). */
  private audioChunks = 0;
  /** When the first AI audio was played (the outbound call's first-packet figure). */
  firstAudioHr: bigint | null = null;
  private drainTimer: NodeJS.Timeout | null = null;
  private over = false;

  constructor(
    private readonly host: ConversationHost,
    names: EngineNames | null = null,
  ) {
    this.names = names;
  }

  /**
   * Puts `engine` in charge: the first AI, or the next number's after a handover (its `names`
   * then, when given, are what the report says). A replaced engine's events are heard no more.
   */
  use(engine: VoiceEngine, names?: EngineNames): void {
    this.engine = engine;
    if (names) this.names = names;
    this.turnOpen = false;
    engine.on('audio', (pcm24) => {
      if (this.engine !== engine || !this.host.audible()) return;
      if (this.firstAudioHr === null) this.firstAudioHr = process.hrtime.bigint();
      this.lastAudioAt = Date.now();
      this.audioChunks++;
      this.host.play(pcm24, engine.outputRate as PlayRate);
    });
    engine.on('interrupted', () => {
      if (this.engine === engine && this.host.audible()) this.host.flush();
    });
    engine.on('inputTranscript', (t) => this.engine === engine && this.addTranscript('Caller', t));
    engine.on('outputTranscript', (t) => this.engine === engine && this.addTranscript('AI', t));
    engine.on('turnComplete', () => {
      this.turnOpen = false;
    });
    engine.on('usage', (u) => {
      this.tokensTotal += u.totalTokens;
      this.tokensPrompt += u.promptTokens;
    });
    engine.on('toolCall', (calls) => {
      for (const c of calls) if (this.engine === engine) void this.host.toolCall(engine, c);
    });
    engine.on('closed', (error) => {
      if (this.engine === engine && !this.over) this.host.engineClosed(error);
    });
  }

  private addTranscript(speaker: Turn['speaker'], text: string): void {
    const last = this.turns[this.turns.length - 1];
    if (last && last.speaker === speaker && this.turnOpen) {
      last.text += text;
      return;
    }
    this.turns.push({ speaker, text, ts: new Date().toISOString() });
    this.turnOpen = true;
  }

  /** A telephone key (RFC 4733) as text for the model. */
  pressed(digit: string): void {
    this.engine?.sendText(`The caller pressed the telephone key ${digit}.`);
  }

  /**
   * Where the AI's audio stands now, for `afterSpeech`: a count of chunks, not a time, because the
   * audio before a tool call and the call itself often arrive in one read of the socket, within
   * the same millisecond, and a timestamp cannot tell the speech before the call from the speech
   * after it.
   */
  get audioMark(): number {
    return this.audioChunks;
  }

  /** The AI's speech has played: nothing queued, none arriving for a moment. */
  idle(): boolean {
    return this.host.queuedMs() === 0 && Date.now() - this.lastAudioAt > SPOKEN_GAP_MS;
  }

  /**
   * Calls `then` once the AI's goodbye has played (idle), at the latest after `capMs`; never after
   * end(). With `spokenAfter` (an `audioMark`), only once the AI has spoken after that mark (a
   * message it is about to say, such as a voicemail message handed to it in a tool's answer).
   */
  afterSpeech(capMs: number, then: () => void, spokenAfter?: number): void {
    const deadline = Date.now() + capMs;
    const check = () => {
      this.drainTimer = null;
      if (this.over) return;
      if ((this.idle() && (spokenAfter === undefined || this.audioChunks > spokenAfter)) || Date.now() > deadline) then();
      else this.drainTimer = setTimeout(check, 50);
    };
    check();
  }

  /**
   * vnum-to-vnum, as an inbound SIP call and a browser room do it: the AI `from` is told yes, it
   * finishes its sentence (its queued audio plays, at most 5 s), then the next number's AI is made
   * and connected while the first is still in charge. Null when it could not connect (the first
   * AI is told, to tell the person and carry on) or when the call ended meanwhile; otherwise the
   * call puts it in charge (`use`) on its own media leg.
   */
  async handOver(
    from: VoiceEngine,
    toolCall: ToolCall,
    make: () => VoiceEngine,
    ended: () => boolean,
    person: 'caller' | 'visitor',
  ): Promise<VoiceEngine | null> {
    from.sendToolResponse(toolCall, { ok: true });
    const deadline = Date.now() + 5000;
    while (!ended() && !this.idle() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    if (ended()) return null;
    const next = make();
    try {
      await next.connect();
    } catch (err) {
      next.close();
      from.sendText(`The transfer failed (${(err as Error).message}). Tell the ${person} and carry on.`);
      return null;
    }
    if (ended()) {
      next.close();
      return null;
    }
    return next;
  }

  /** The call is over: the engine closes, a goodbye still awaited is not. */
  end(): void {
    this.over = true;
    if (this.drainTimer) clearTimeout(this.drainTimer);
    this.drainTimer = null;
    this.engine?.close();
  }

  /** The `ended` event's fields: the call's own figures and the conversation's transcript and usage. */
  report(o: {
    outcome: Outcome;
    answeredAt: Date | null;
    endedAt: Date;
    trunkId: string | null;
    errorDetail: string;
    sipStatus: number | null;
  }): BridgeEventFields<'ended'> {
    const e = this.names;
    return {
      outcome: o.outcome,
      answered: o.answeredAt !== null,
      answeredAt: o.answeredAt ? o.answeredAt.toISOString() : null,
      endedAt: o.endedAt.toISOString(),
      talkSec: o.answeredAt ? Math.max(0, Math.round((o.endedAt.getTime() - o.answeredAt.getTime()) / 1000)) : 0,
      trunkId: o.trunkId,
      // A failure always says what failed.
      errorDetail: o.outcome === 'failed' ? o.errorDetail || 'call failed' : o.errorDetail,
      sipStatus: o.sipStatus,
      transcript: {
        turns: this.turns.map((t) => ({ ...t, text: t.text.trim() })),
        tokensTotal: this.tokensTotal,
        tokensPrompt: this.tokensPrompt,
        inputTurns: this.turns.filter((t) => t.speaker === 'Caller').length,
        outputTurns: this.turns.filter((t) => t.speaker === 'AI').length,
        model: e?.model ?? '',
        voice: e?.voice ?? '',
        language: e?.language ?? '',
      },
    };
  }
}

/**
 * A transfer to a person (vnum-to-officetab, vnum-to-pstn) once the ringing or dialling is over,
 * as an inbound SIP call and a browser room settle it: an answer that came after the call ended
 * (or after another AI took over) is hung up; no answer is told to the AI, which carries on; an
 * answer is told yes and returned, for the call to connect its media to.
 */
export function settleReach<P extends { hangup(): void }>(who: P | string, stillOurs: boolean, current: VoiceEngine, toolCall: ToolCall): P | null {
  if (!stillOurs) {
    if (typeof who !== 'string') who.hangup();
    return null;
  }
  if (typeof who === 'string') {
    current.sendToolResponse(toolCall, { ok: false, error: who });
    return null;
  }
  current.sendToolResponse(toolCall, { ok: true });
  return who;
}
