/**
 * Desk phones as user endpoints: every phone registered for the user (registrar.ts) is rung with
 * its own INVITE to the address its REGISTER came from; the one that answers is bridged to the caller.
 */
import { parseUri } from '../sip/message.ts';
import type { AnsweredEndpoint, EndpointProvider, RingingEndpoint, RingRequest } from './endpoints.ts';
import { dialLeg, hangupLeg, type DialDeps } from './legs.ts';
import type { Registrar } from './registrar.ts';

export class DeskPhones implements EndpointProvider {
  readonly kind = 'desk-phone';

  constructor(
    private readonly registrar: Registrar,
    private readonly deps: DialDeps,
  ) {}

  ring(req: RingRequest): RingingEndpoint[] {
    return this.registrar.bindingsOf(req.tenantId, req.user).map((b) => {
      let user = req.user;
      try {
        user = parseUri(b.contact).user || req.user;
      } catch {
        // keep the account's user
      }
      const ended: (() => void)[] = [];
      let over = false;
      const fire = () => {
        if (over) return;
        over = true;
        for (const cb of ended) cb();
      };
      const dialing = dialLeg(
        this.deps,
        {
          id: `desk-phone:${b.contact}`,
          host: b.peer.host,
          port: b.peer.port,
          transport: b.peer.transport,
          fromDomain: this.deps.sipHost,
          callerId: req.callerNumber || 'anonymous',
          // Wideband when the phone has it (media/sdp.ts offers G.722 first); SRTP as its account says.
          codecs: ['G722', 'PCMU', 'PCMA'],
          srtp: b.srtp,
          phone: true,
        },
        user,
        req.callerName || req.callerNumber || 'Anonymous',
        fire,
      );
      const result = dialing.result.then((r): AnsweredEndpoint | string => {
        if (typeof r === 'string') return r;
        return {
          kind: this.kind,
          id: b.contact,
          connect: (caller) => {
            caller.bridgeTo(r.media);
            r.media.bridgeTo(caller);
          },
          hangup: () => {
            over = true;
            hangupLeg(r);
          },
          onEnded: (cb) => {
            ended.push(() => {
              void r.media.stop();
              cb();
            });
          },
        };
      });
      return { kind: this.kind, id: b.contact, result, cancel: () => dialing.cancel() };
    });
  }
}
