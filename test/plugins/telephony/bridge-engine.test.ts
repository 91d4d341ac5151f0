import { describe, expect, it } from 'vitest';
import dgram from 'node:dgram';
import WebSocket from 'ws';
import { GeminiLiveEngine } from '../../../plugins/telephony/bridge/engine/gemini-live.ts';
import { MediaSession } from '../../../plugins/telephony/bridge/media/session.ts';
import { parseRtp } from '../../../plugins/telephony/bridge/media/rtp.ts';
import { GeminiLiveFake, type ScriptStep } from '../../support/gemini-live-fake.ts';
import { cleanupsAfterEach } from '../../support/cleanup.ts';

const cleanups = cleanupsAfterEach();

const cfg = { apiKey: 'k1', model: 'gemini-live-2.5-flash-preview', voice: 'Kore', language: 'en-US', systemPrompt: 'Be brief.' };

async function fake(script: ScriptStep[], apiKey = 'k1'): Promise<GeminiLiveFake> {
  const f = new GeminiLiveFake({ script, apiKey });
  await f.start();
  cleanups.push(() => f.stop());
  return f;
}

describe('Gemini Live client against the protocol fake', () => {
  it('sets up, streams 16 kHz input, receives 24 kHz audio, transcripts, interrupted, usage', async () => {
    const f = await fake([{ say: 'Hello there.', audioMs: 500 }, { hear: 'Stop!', ms: 200 }, { interrupted: true }, { tool: 'end_call' }]);
    const e = new GeminiLiveEngine({ ...cfg, url: f.url }, undefined);
    cleanups.push(() => e.close());
    const seen: string[] = [];
    let samples = 0;
    e.on('audio', (pcm) => (samples += pcm.length));
    e.on('outputTranscript', (t) => seen.push(`AI:${t}`));
    e.on('inputTranscript', (t) => seen.push(`Caller:${t}`));
    e.on('interrupted', () => seen.push('interrupted'));
    e.on('turnComplete', () => seen.push('turnComplete'));
    e.on('usage', (u) => seen.push(`usage:${u.totalTokens}`));
    const tool = new Promise<string>((resolve) =>
      e.on('toolCall', (calls) => {
        e.sendToolResponse(calls[0], { ok: true });
        resolve(calls[0].name);
      }),
    );
    await e.connect();
    e.begin();
    const feeder = setInterval(() => e.sendAudio(new Int16Array(320)), 20);
    cleanups.push(() => clearInterval(feeder));
    expect(await tool).toBe('end_call');
    expect(samples).toBe(12000); // 500 ms at 24 kHz
    expect(seen).toEqual(['AI:Hello there.', 'turnComplete', 'usage:150', 'Caller:Stop!', 'interrupted']);
    expect(f.sessions[0].audioBytesIn).toBeGreaterThanOrEqual(200 * 32);
    await new Promise((r) => setTimeout(r, 50));
    expect(f.sessions[0].toolResponses).toHaveLength(1);
  });

  it('a bad key or a bad setup is a 1007 close whose reason reaches the caller', async () => {
    const f = await fake([]);
    await expect(new GeminiLiveEngine({ ...cfg, apiKey: 'nope', url: f.url }).connect()).rejects.toThrow(/1007: API key not valid/);
    const raw = new WebSocket(f.url + '?key=k1');
    await new Promise((r) => raw.once('open', r));
    raw.send(JSON.stringify({ setup: { generationConfig: {} } }));
    const [code, reason] = await new Promise<[number, string]>((r) => raw.once('close', (c, why) => r([c, why.toString()])));
    expect(code).toBe(1007);
    expect(reason).toMatch(/model/);
    // The env override is used when the call has no URL of its own.
    const e = new GeminiLiveEngine({ ...cfg, apiKey: 'k1' }, f.url);
    await e.connect();
    e.close();
    expect(f.sessions.at(-1)!.key).toBe('k1');
  });

  it('a mid-session close 1011 is reported as closed with the reason', async () => {
    const f = await fake([
      { say: 'Hi', audioMs: 100 },
      { close: 1011, reason: 'Internal error encountered.' },
    ]);
    const e = new GeminiLiveEngine({ ...cfg, url: f.url });
    const closed = new Promise<string | null>((r) => e.on('closed', r));
    await e.connect();
    e.begin();
    expect(await closed).toBe('AI engine closed 1011: Internal error encountered.');
  });
});

describe('barge-in', () => {
  it('flush() drops queued AI audio: the packets after it are silence', async () => {
    const rx = dgram.createSocket('udp4');
    await new Promise<void>((r) => rx.bind(0, '127.0.0.1', r));
    const tx = dgram.createSocket('udp4');
    await new Promise<void>((r) => tx.bind(0, '127.0.0.1', r));
    const payloads: number[] = [];
    let sentAtFlush = -1;
    rx.on('message', (b) => payloads.push(parseRtp(b)!.payload[0]));
    const m = new MediaSession({ socket: tx, codec: 'PCMU', payloadType: 0, dtmfPayloadType: null, remoteHost: '127.0.0.1', remotePort: rx.address().port });
    cleanups.push(() => rx.close());
    m.start();
    m.play(new Int16Array(8000).fill(8000)); // 1 s of loud audio
    await new Promise((r) => setTimeout(r, 200));
    m.flush();
    sentAtFlush = m.packetsSent;
    expect(m.queuedMs).toBe(0);
    await new Promise((r) => setTimeout(r, 200));
    m.stop();
    const silence = 0xff; // μ-law encoding of 0
    expect(payloads.slice(0, sentAtFlush).filter((p) => p !== silence).length).toBeGreaterThan(0);
    // Nothing of the 800 ms still queued at the flush was sent afterwards.
    expect(payloads.slice(sentAtFlush).every((p) => p === silence)).toBe(true);
    expect(payloads.length).toBeGreaterThan(sentAtFlush);
    expect(m.firstAudioSentAt).not.toBeNull();
  });
});
