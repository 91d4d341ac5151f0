/** Control API bodies (CONTROL-API.md): the one contract in ../control.ts, validated at the bridge's edge. */
import type { Trunk } from '../control.ts';

export { HangupSchema, PlaceCallSchema, TrunkSchema, TrunksBodySchema, type PlaceCall, type Trunk } from '../control.ts';

/** A trunk as the bridge holds it: with the addresses DNS SRV gave (`addrs` in try order). */
export type LocatedTrunk = Trunk & { addr?: { host: string; port: number }; addrs?: { host: string; port: number }[] };
