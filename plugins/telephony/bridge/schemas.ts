/** Control API bodies (CONTROL-API.md): the one contract in ../control.ts, validated at the bridge's edge. */
import type { Trunk } from '../control.ts';

export { HangupSchema, PlaceCallSchema, TrunkSchema, TrunksBodySchema, type PlaceCall, type Trunk } from '../control.ts';

/** A trunk as the bridge holds it: with the addresses DNS SRV gave (`addrs` in try order). */
export type LocatedTrunk = Trunk & { addr?: { host: string; port: number }; addrs?: { host: string; port: number }[] };

/**
 * What the SIP user agent sends to (sip/uac.ts, sip/ua.ts): a trunk, its options as declared in
 * `TrunkSchema` (so a new trunk option is declared there once), or a desk phone's address, which
 * is a target without an account.
 */
export type SipTarget = Pick<LocatedTrunk, 'id' | 'host' | 'port' | 'transport' | 'addr' | 'addrs'> &
  Partial<Pick<Trunk, 'username' | 'password' | 'fromDomain' | 'callerId' | 'dnsSrv' | 'codecs' | 'tlsCaPem'>> &
  Partial<Pick<Trunk, 'srtp'>> & {
    /** A desk phone's address: over TLS it is reached on the connection it registered on. */
    phone?: boolean;
  };
