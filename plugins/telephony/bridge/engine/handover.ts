import type { VoiceEngine } from './types.ts';

/**
 * The second AI of a vnum-to-vnum transfer (an inbound SIP call's or a browser room's), made and
 * connected while the first is still in charge. Null when it could not connect (the first AI is
 * told, to tell the person and carry on) or when the call ended meanwhile; the caller then swaps
 * engines on its own media leg.
 */
export async function connectSuccessor(
  current: VoiceEngine,
  make: () => VoiceEngine,
  ended: () => boolean,
  person: 'caller' | 'visitor',
): Promise<VoiceEngine | null> {
  const next = make();
  try {
    await next.connect();
  } catch (err) {
    next.close();
    current.sendText(`The transfer failed (${(err as Error).message}). Tell the ${person} and carry on.`);
    return null;
  }
  if (ended()) {
    next.close();
    return null;
  }
  return next;
}
