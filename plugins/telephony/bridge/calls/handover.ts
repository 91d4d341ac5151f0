import type { ToolCall, VoiceEngine } from '../engine/types.ts';

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

/**
 * A transfer to a person (vnum-to-officetab, vnum-to-pstn), the part an inbound SIP call and a
 * browser room share once the ringing or dialling is over: an answer that came after the call
 * ended (or after another AI took over) is hung up; no answer is told to the AI, which carries on;
 * an answer is told yes and returned, for the caller to connect its media to.
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
