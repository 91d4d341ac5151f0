import { describe, expect, it } from 'vitest';
import { RoomAsCaller } from '../../../plugins/telephony/bridge/webrtc/room-caller.ts';
import type { RoomLeg } from '../../../plugins/telephony/bridge/webrtc/leg.ts';
import type { AnsweredEndpoint } from '../../../plugins/telephony/bridge/inbound/endpoints.ts';
import type { MediaLeg } from '../../../plugins/telephony/bridge/media/leg.ts';
import { upsample8to16 } from '../../../plugins/telephony/bridge/media/audio.ts';

/** A room's WebRTC leg that records what is played to the visitor. */
function roomLeg(): RoomLeg & { played: Int16Array[]; flushed: number } {
  const l = {
    played: [] as Int16Array[],
    flushed: 0,
    codec: 'PCMU' as const,
    queuedMs: 0,
    answer: async () => '',
    play: (pcm: Int16Array) => void l.played.push(pcm),
    // eslint-disable-next-line @typescript-eslint/no-meaningless-void-operator -- counts calls in a handler that must return nothing
    flush: () => void l.flushed++,
    stop: async () => {
      throw new Error('the room owns its leg');
    },
  };
  return l;
}

const endpoint = (o: Partial<AnsweredEndpoint>): AnsweredEndpoint => ({
  kind: 'test',
  id: '1',
  connect: () => undefined,
  hangup: () => undefined,
  onEnded: () => undefined,
  ...o,
});

describe('a browser room as the caller of a person (webrtc/room-caller.ts)', () => {
  const pcm8k = Int16Array.from({ length: 160 }, (_v, i) => Math.round(8000 * Math.sin(i / 3)));

  it('a browser tab (hear) gets the visitor’s 16 kHz audio as it is and speaks through play()', () => {
    const leg = roomLeg();
    const heard: Int16Array[] = [];
    const c = new RoomAsCaller(leg, endpoint({ hear: (p) => void heard.push(p) }));
    const pcm16k = upsample8to16(pcm8k);
    c.visitorAudio(pcm16k);
    expect(heard).toEqual([pcm16k]);
    c.play(pcm8k);
    expect(leg.played).toEqual([pcm8k]);
  });

  it('an RTP endpoint that bridges to it gets the visitor’s 16 kHz audio as it is, to bring to its own rate', () => {
    const leg = roomLeg();
    const c = new RoomAsCaller(leg, endpoint({}));
    const got: [Int16Array, number][] = [];
    c.visitorAudio(upsample8to16(pcm8k)); // before the bridge: nowhere to go
    c.bridgeTo({ play: (p: Int16Array, rate: number) => void got.push([p, rate]) } as unknown as MediaLeg);
    const wide = upsample8to16(pcm8k);
    c.visitorAudio(wide);
    expect(got).toEqual([[wide, 16000]]);
  });

  it('never stops the room’s leg, and flush drops what is queued for the visitor', async () => {
    const leg = roomLeg();
    const c = new RoomAsCaller(leg, endpoint({}));
    await expect(c.stop()).resolves.toBeTruthy();
    c.flush();
    expect(leg.flushed).toBe(1);
  });
});
