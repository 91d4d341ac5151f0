/**
 * The load client of bench/telephony-rooms.bench.ts, in a process of its own: N browser-room
 * visitors made of werift (test/support/webrtc-visitor.ts), each joining through the bridge's
 * control API (POST /rooms), sending a 20 ms tone stream (G.711, or Opus with `codec: 'opus'`)
 * and counting what it receives.
 * IPC: {type:'open', …} → {type:'up', connected, ms}; {type:'report'} → {type:'report', visitors}.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { WebRtcVisitor } from '../../test/support/webrtc-visitor.ts';
import { installNativeX25519 } from '../../plugins/telephony/bridge/webrtc/native-x25519.ts';

interface Open {
  type: 'open';
  controlUrl: string;
  token: string;
  engineUrl: string;
  rooms: number;
  codec?: 'PCMU' | 'opus';
}

const visitors: { callId: string; v: WebRtcVisitor }[] = [];
/** Offer gathered → answer received, per visitor. */
const joinMs: number[] = [];

// The load client must not be what fails: werift gives up a UDP connectivity check after ~1.5 s
// (4 retransmissions from 50 ms), and a client descheduled that long on a loaded machine finds the
// answer only after its own timer failed the check. Ask for a higher priority (needs CAP_SYS_NICE;
// without it the client runs at the default priority and the note says so).
const CLIENT_NICE = Number(process.env.ROOMS_BENCH_CLIENT_NICE ?? -5);
let clientPriority = 'default';
// Its 50 DTLS handshakes use OpenSSL's X25519 as the bridge's do (not tweetnacl's 10 ms each).
installNativeX25519();
try {
  os.setPriority(CLIENT_NICE);
  clientPriority = `nice ${CLIENT_NICE}`;
} catch {
  // not permitted
}

async function openOne(o: Open, i: number): Promise<void> {
  const v = new WebRtcVisitor({ toneHz: 300 + (i % 20) * 25, codec: o.codec });
  const t0 = Date.now();
  const callId = `vnum${randomBytes(6).toString('hex')}`;
  const r = await fetch(`${o.controlUrl}/rooms`, {
    method: 'POST',
    headers: { authorization: `Bearer ${o.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      callId,
      tenantId: 'bench',
      number: '+4930100',
      room: '+4930100',
      offerSdp: await v.offer(),
      maxSeconds: 600,
      connectTimeoutSec: 60,
      silenceTimeoutSec: 600,
      engine: { url: o.engineUrl, apiKey: 'bench', model: 'gemini-live-2.5-flash-preview', voice: 'Puck', language: 'de-DE', systemPrompt: 'bench' },
    }),
  });
  const body = (await r.json()) as { answerSdp?: string; error?: string };
  if (!r.ok || !body.answerSdp) throw new Error(`POST /rooms ${r.status} ${body.error ?? ''}`);
  joinMs.push(Date.now() - t0);
  await v.accept(body.answerSdp);
  visitors.push({ callId, v });
}

process.on('message', (m: { type: string } & Partial<Open>) => {
  void (async () => {
    if (m.type === 'open') {
      const o = m as Open;
      const t0 = Date.now();
      // Ramp: 5 joins every 250 ms (~20 rooms/s): each join is an ICE and DTLS handshake on both sides.
      for (let i = 0; i < o.rooms; i += 5) {
        await Promise.all(Array.from({ length: Math.min(5, o.rooms - i) }, (_v, k) => openOne(o, i + k)));
        await new Promise((r) => setTimeout(r, 250));
      }
      await Promise.race([Promise.all(visitors.map((x) => x.v.connected)), new Promise((r) => setTimeout(r, 60_000))]);
      let connected = 0;
      for (const x of visitors) if (x.v.pc.connectionState === 'connected') connected++;
      const states: Record<string, number> = {};
      for (const x of visitors) {
        const k = `${x.v.pc.iceConnectionState}/${x.v.pc.connectionState}`;
        states[k] = (states[k] ?? 0) + 1;
      }
      process.send!({
        type: 'up',
        connected,
        ms: Date.now() - t0,
        callIds: visitors.map((x) => x.callId),
        states,
        clientPriority,
        joinMsMax: Math.max(0, ...joinMs),
        joinMsMedian: [...joinMs].sort((a, b) => a - b)[Math.floor(joinMs.length / 2)] ?? 0,
      });
    } else if (m.type === 'report') {
      process.send!({
        type: 'report',
        visitors: visitors.map((x) => ({ callId: x.callId, received: x.v.packetsReceived, lost: x.v.lost, sent: x.v.packetsSent })),
      });
    } else if (m.type === 'close') {
      await Promise.all(visitors.map((x) => x.v.close()));
      process.exit(0);
    }
    // eslint-disable-next-line @typescript-eslint/use-unknown-in-catch-callback-variable -- our own code rejects with Errors
  })().catch((e: Error) => {
    process.send!({ type: 'error', message: e.message });
  });
});
process.send!({ type: 'ready' });
