import type { ToolCall, VoiceEngine } from './types.ts';

export interface HandOver {
  /** The AI in charge, whose transfer_to_user is being answered. */
  current: VoiceEngine;
  toolCall: ToolCall;
  /** Makes the next number's AI. */
  make: () => VoiceEngine;
  /** The call ended (nothing more to do). */
  ended: () => boolean;
  /** The current AI's audio has played out (nothing queued towards the person, none arriving). */
  idle: () => boolean;
  person: 'caller' | 'visitor';
}

/**
 * vnum-to-vnum, the part an inbound SIP call and a browser room share: the AI is told yes, it
 * finishes its sentence (its queued audio plays, at most 5 s), then the next number's AI is made
 * and connected while the first is still in charge. Null when it could not connect (the first AI
 * is told, to tell the person and carry on) or when the call ended meanwhile; otherwise the caller
 * swaps engines on its own media leg.
 */
export async function handOver(o: HandOver): Promise<VoiceEngine | null> {
  o.current.sendToolResponse(o.toolCall, { ok: true });
  const deadline = Date.now() + 5000;
  while (!o.ended() && !o.idle() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  if (o.ended()) return null;
  const next = o.make();
  try {
    await next.connect();
  } catch (err) {
    next.close();
    o.current.sendText(`The transfer failed (${(err as Error).message}). Tell the ${o.person} and carry on.`);
    return null;
  }
  if (o.ended()) {
    next.close();
    return null;
  }
  return next;
}
