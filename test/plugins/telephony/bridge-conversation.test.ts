import { EventEmitter } from 'node:events';
import { describe, expect, it, vi } from 'vitest';
import { Conversation, type ConversationHost } from '../../../plugins/telephony/bridge/calls/conversation.ts';
import type { EngineEvents, ToolCall, VoiceEngine } from '../../../plugins/telephony/bridge/engine/types.ts';

class FakeEngine extends EventEmitter<EngineEvents> implements VoiceEngine {
  readonly inputRate = 16000;
  readonly outputRate = 24000;
  readonly texts: string[] = [];
  closed = false;
  connect(): Promise<void> {
    return Promise.resolve();
  }
  begin(): void {}
  sendAudio(): void {}
  sendToolResponse(): void {}
  sendText(t: string): void {
    this.texts.push(t);
  }
  close(): void {
    this.closed = true;
  }
}

function host(over: Partial<ConversationHost> = {}) {
  const played: string[] = [];
  const seen: string[] = [];
  const h: ConversationHost = {
    audible: () => true,
    play: (pcm, rate) => played.push(`${pcm.length}@${rate}`),
    flush: () => seen.push('flush'),
    queuedMs: () => 0,
    toolCall: (_e: VoiceEngine, c: ToolCall) => {
      seen.push(`tool ${c.name}`);
    },
    engineClosed: (error) => seen.push(`closed ${error}`),
    ...over,
  };
  return { h, played, seen };
}

const NAMES = { model: 'm1', voice: 'Puck', language: 'de-DE' };

describe('one AI conversation for every call kind (bridge/calls/conversation.ts)', () => {
  it('joins transcript fragments into turns, counts tokens over a handover, and hears only the engine in charge', () => {
    const { h, seen } = host();
    const ai = new Conversation(h, NAMES);
    const first = new FakeEngine();
    ai.use(first);
    first.emit('outputTranscript', 'Hello, ');
    first.emit('outputTranscript', 'this is the clinic.');
    first.emit('inputTranscript', 'Hi');
    first.emit('usage', { promptTokens: 10, responseTokens: 5, totalTokens: 15 });
    first.emit('turnComplete');
    const next = new FakeEngine();
    ai.use(next, { model: 'm2', voice: 'Kore', language: 'en-US' });
    // The replaced engine is heard no more: no transcript, tool or close from it.
    first.emit('outputTranscript', 'stray');
    first.emit('toolCall', [{ id: '1', name: 'end_call', args: {} }]);
    first.emit('closed', 'gone');
    next.emit('outputTranscript', 'Sales here.');
    next.emit('usage', { promptTokens: 1, responseTokens: 1, totalTokens: 2 });
    next.emit('toolCall', [{ id: '2', name: 'end_call', args: {} }]);
    next.emit('closed', null);
    expect(seen).toEqual(['tool end_call', 'closed null']);
    const endedAt = new Date('2026-11-28T10:00:10.400Z');
    const r = ai.report({ outcome: 'finished', answeredAt: new Date('2026-11-28T10:00:00Z'), endedAt, trunkId: 't1', errorDetail: '', sipStatus: null });
    expect(r).toMatchObject({ outcome: 'finished', answered: true, talkSec: 10, trunkId: 't1', endedAt: endedAt.toISOString() });
    expect(r.transcript).toMatchObject({ tokensTotal: 17, tokensPrompt: 11, inputTurns: 1, outputTurns: 2, model: 'm2', voice: 'Kore', language: 'en-US' });
    expect(r.transcript?.turns?.map((t) => `${t.speaker}: ${t.text}`)).toEqual(['AI: Hello, this is the clinic.', 'Caller: Hi', 'AI: Sales here.']);
  });

  it('plays the AI at the engine’s rate only while audible, flushes on barge-in, passes keys as text; a call without AI reports empty names', () => {
    let audible = false;
    const { h, played, seen } = host({ audible: () => audible });
    const ai = new Conversation(h);
    const e = new FakeEngine();
    ai.use(e);
    e.emit('audio', new Int16Array(480));
    expect(played).toEqual([]);
    expect(ai.firstAudioHr).toBeNull();
    audible = true;
    e.emit('audio', new Int16Array(480)); // 20 ms at 24 kHz, as the engine sent it: the leg brings it to its rate
    e.emit('interrupted');
    ai.pressed('5');
    expect(played).toEqual(['480@24000']);
    expect(ai.firstAudioHr).not.toBeNull();
    expect(seen).toEqual(['flush']);
    expect(e.texts).toEqual(['The caller pressed the telephone key 5.']);
    const r = ai.report({ outcome: 'voicemail', answeredAt: null, endedAt: new Date(), trunkId: null, errorDetail: 'x', sipStatus: null });
    expect(r).toMatchObject({ answered: false, answeredAt: null, talkSec: 0 });
    expect(r.transcript).toMatchObject({ model: '', voice: '', language: '', turns: [] });
  });

  it("waits for the goodbye to play (queue empty, 400 ms without audio), at most the cap, and never after the call's end", () => {
    vi.useFakeTimers();
    try {
      let queued = 300;
      const { h } = host({ queuedMs: () => queued });
      const ai = new Conversation(h, NAMES);
      const e = new FakeEngine();
      ai.use(e);
      e.emit('audio', new Int16Array(480));
      const done = vi.fn();
      ai.afterSpeech(10_000, done);
      vi.advanceTimersByTime(300);
      queued = 0;
      vi.advanceTimersByTime(50);
      expect(done).not.toHaveBeenCalled(); // empty, but audio came less than 400 ms ago
      vi.advanceTimersByTime(100);
      expect(done).toHaveBeenCalledTimes(1);

      queued = 1000;
      const capped = vi.fn();
      ai.afterSpeech(1000, capped);
      vi.advanceTimersByTime(1100);
      expect(capped).toHaveBeenCalledTimes(1);

      const never = vi.fn();
      ai.afterSpeech(1000, never);
      ai.end();
      vi.advanceTimersByTime(2000);
      expect(never).not.toHaveBeenCalled();
      expect(e.closed).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it('with a mark, waits for speech after it even when the audio before the mark came in the same millisecond', () => {
    vi.useFakeTimers();
    try {
      const { h } = host({ queuedMs: () => 0 });
      const ai = new Conversation(h, NAMES);
      const e = new FakeEngine();
      ai.use(e);
      // "Hallo?" and the tool call in one read of the socket: no clock tick between them.
      e.emit('audio', new Int16Array(480));
      const mark = ai.audioMark;
      const done = vi.fn();
      ai.afterSpeech(20_000, done, mark);
      vi.advanceTimersByTime(1500);
      expect(done).not.toHaveBeenCalled(); // "Hallo?" has played, the message has not come yet
      e.emit('audio', new Int16Array(480));
      vi.advanceTimersByTime(300);
      expect(done).not.toHaveBeenCalled();
      vi.advanceTimersByTime(200);
      expect(done).toHaveBeenCalledTimes(1);
    } finally {
      vi.useRealTimers();
    }
  });
});
