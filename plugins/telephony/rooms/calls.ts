import crypto from 'node:crypto';
import {
  AppError,
  BadGatewayError,
  type Clock,
  type DB,
  InputError,
  type KeyService,
  type Logger,
  NotFoundError,
  ServiceUnavailableError,
  type Tenant,
} from '../../../server/sdk.ts';
import type { TelephonyAdmin } from '../trunks/admin.ts';
import { bridgeError, type BridgeLink } from '../bridge-link/link.ts';
import type { BridgeEvent } from '../control.ts';
import type { NumberRow, TelephonyRepo } from '../repo.ts';
import type { TelephonyConfig } from '../schemas.ts';
import type { CallEnd, CallKind, CallStarted, CallTransferred, Ending } from '../calls/end.ts';

/**
 * Virtual-number rooms in the browser: a visitor's join becomes a `vnum` call carried by the
 * bridge (WebRTC terminated there, CONTROL-API.md "Rooms"); the bridge's `answered` and `ended`
 * events for it become call.started, call.ended and transcript.saved with source `vnum`.
 */

export interface RoomCallRow {
  call_id: string;
  tenant_id: string;
  number: string;
  room: string;
  visitor: string;
  visitor_ip: string;
  leave_hash: string;
  voice: string;
  language: string;
  model: string;
  save_transcripts: number;
  started_at: string;
  connected_at: string | null;
  ended_at: string | null;
  outcome: string | null;
  duration_sec: number;
  error_detail: string;
  transcript_file: string;
}

export function newRoomCallId(): string {
  return 'vnum' + crypto.randomBytes(6).toString('hex');
}

const sha256 = (s: string) => crypto.createHash('sha256').update(s).digest('hex');

/** The room a number's page opens: its number (one room per virtual number). */
export function roomOf(number: string): string {
  return number;
}

interface Deps {
  db: DB;
  repo: TelephonyRepo;
  admin: TelephonyAdmin;
  bridge: BridgeLink;
  keys: KeyService;
  clock: Clock;
  log: Logger;
  config: TelephonyConfig;
}

export interface JoinAnswer {
  callId: string;
  sdp: string;
  codec: string;
  leaveToken: string;
  maxDurationSec: number;
}

export class RoomService implements CallKind<RoomCallRow> {
  constructor(private readonly d: Deps) {}

  private now(): string {
    return new Date(this.d.clock.now()).toISOString();
  }

  /** The number a room page opens, or null (unknown numbers and other modes look the same). */
  number(t: Tenant, number: string): NumberRow | null {
    const n = this.d.repo.number(t, number);
    return n && n.mode === 'live-voice-ai' ? n : null;
  }

  row(callId: string): RoomCallRow | undefined {
    return this.d.db.prepare('SELECT * FROM tel_room_calls WHERE call_id = ?').get(callId) as RoomCallRow | undefined;
  }

  /** A visitor joins: the bridge answers their offer and the number's AI session starts. */
  async join(t: Tenant, n: NumberRow, visitor: string, ip: string, offerSdp: string): Promise<JoinAnswer> {
    const { admin, keys, bridge, config } = this.d;
    if (!bridge.configured) throw new ServiceUnavailableError('bridge_not_configured', 'no telephony bridge is configured');
    const apiKey = n.engine_api_key_sealed ? keys.openString(n.engine_api_key_sealed, `telephony-number:${t.id}:${n.number}`) : admin.tenantEngineKey(t);
    if (!apiKey) throw new ServiceUnavailableError('room_unavailable', 'this room has no AI engine configured');
    const model = admin.settings(t).model || config.engine.model;
    const callId = newRoomCallId();
    const leaveToken = crypto.randomBytes(24).toString('base64url');
    const room = roomOf(n.number);
    this.d.db
      .prepare(
        `INSERT INTO tel_room_calls (call_id, tenant_id, number, room, visitor, visitor_ip, leave_hash, voice, language, model, save_transcripts, started_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(callId, t.id, n.number, room, visitor, ip, sha256(leaveToken), n.voice, n.language, model, n.save_transcripts, this.now());
    const fail = (outcome: string, detail: string) =>
      this.d.db
        .prepare('UPDATE tel_room_calls SET ended_at = ?, outcome = ?, error_detail = ? WHERE call_id = ? AND ended_at IS NULL')
        .run(this.now(), outcome, detail, callId);
    let a;
    try {
      a = await bridge.openRoom({
        callId,
        tenantId: t.id,
        number: n.number,
        room,
        offerSdp,
        maxSeconds: n.max_duration_sec,
        connectTimeoutSec: config.rooms.connectTimeoutSec,
        silenceTimeoutSec: config.rooms.silenceTimeoutSec,
        engine: {
          ...(config.engine.url ? { url: config.engine.url } : {}),
          apiKey,
          model,
          voice: n.voice,
          language: n.language,
          systemPrompt: n.system_prompt,
        },
      });
    } catch (err) {
      fail('failed', (err as Error).message);
      throw err;
    }
    if (!a.ok) {
      fail('failed', `bridge ${a.status} ${a.error.error}`);
      if (a.status === 400) throw new InputError(`invalid field sdp: ${a.error.error_description ?? 'refused'}`, 'invalid_request', { field: 'sdp' });
      if (a.status === 503) throw new ServiceUnavailableError('no_capacity', 'the appliance carries its maximum number of calls; try again later');
      throw bridgeError('POST /rooms', a);
    }
    return { callId, sdp: a.body.answerSdp, codec: a.body.codec ?? '', leaveToken, maxDurationSec: n.max_duration_sec };
  }

  /** The visitor leaves (their page's hang-up button); idempotent. */
  async leave(t: Tenant, callId: string, leaveToken: string): Promise<{ ok: true; callId: string; ended: boolean }> {
    const r = this.row(callId);
    const given = Buffer.from(sha256(leaveToken), 'hex');
    // One answer for an unknown call, another tenant's and a wrong token: no oracle.
    if (!r || r.tenant_id !== t.id || !crypto.timingSafeEqual(given, Buffer.from(r.leave_hash, 'hex'))) {
      throw new NotFoundError('no such room call');
    }
    if (r.ended_at) return { ok: true, callId, ended: true };
    try {
      const a = await this.d.bridge.hangup(callId, 'left');
      if (!a.ok && a.status !== 404) throw bridgeError('POST /calls/:id/hangup', a);
    } catch (err) {
      if (err instanceof AppError) throw err;
      throw new BadGatewayError('bridge_unreachable', (err as Error).message);
    }
    return { ok: true, callId, ended: false };
  }

  // ---- the room kind of call (calls/kinds.ts) ---------------------------------------------------

  readonly kind = 'room';

  /** Every open room call: the visitor's WebRTC leg is at the bridge from the join on. */
  atBridge(): RoomCallRow[] {
    return this.d.db.prepare('SELECT * FROM tel_room_calls WHERE ended_at IS NULL').all() as RoomCallRow[];
  }

  onDialing(): boolean {
    return true;
  }

  /** Connected (ICE and DTLS up). Spec "Event kinds": no call answered for the browser path; call.started with the room. */
  onAnswered(r: RoomCallRow, ev: Extract<BridgeEvent, { type: 'answered' }>): { started: CallStarted } | null {
    const cur = this.row(r.call_id)!;
    if (cur.connected_at || cur.ended_at) return null;
    this.d.db.prepare('UPDATE tel_room_calls SET connected_at = ? WHERE call_id = ?').run(ev.answeredAt || this.now(), r.call_id);
    return {
      started: { callId: r.call_id, number: r.number, did: '', phone: '', displayName: '', room: r.room, direction: 'inbound', source: 'vnum' },
    };
  }

  onTransferred(r: RoomCallRow, ev: Extract<BridgeEvent, { type: 'transferred' }>): CallTransferred {
    return {
      callId: r.call_id,
      fromVnum: r.number,
      fromOutbound: '',
      fromPhone: '',
      toUser: ev.toUser,
      toPhone: ev.toPhone,
      transferType: ev.transferType,
      trunkId: '',
      room: r.room,
      source: 'vnum',
    };
  }

  /** The visitor is `requestedBy` of the transcript, saved when the number saves them and the visitor connected. */
  ending(r: RoomCallRow, end: CallEnd & { endedAt: string }): Ending | null {
    const cur = this.row(r.call_id);
    if (!cur || cur.ended_at) return null;
    const connectedAt = end.answeredAt || cur.connected_at || '';
    const durationSec = Math.max(0, Math.round(end.talkSec ?? 0));
    return {
      outcome: end.outcome,
      durationSec,
      transcript:
        cur.save_transcripts === 1 && (connectedAt || end.transcript?.turns.length)
          ? {
              callerSource: 'vnum',
              requestedBy: r.visitor,
              phone: '',
              displayName: '',
              email: '',
              voice: r.voice,
              language: r.language,
              model: r.model,
              trunkId: '',
              startedUtc: r.started_at,
              answeredUtc: connectedAt,
              answered: connectedAt !== '',
            }
          : null,
      rule: `vnum ${r.number}`,
      number: r.number,
      ended: { number: r.number, room: r.room, source: 'vnum' },
      saved: { phone: '', displayName: '', number: r.number, source: 'vnum' },
      store: (file) => {
        const now = this.row(r.call_id);
        if (!now || now.ended_at) return false;
        this.d.db
          .prepare(
            'UPDATE tel_room_calls SET ended_at = ?, outcome = ?, duration_sec = ?, error_detail = ?, transcript_file = ?, connected_at = COALESCE(connected_at, ?) WHERE call_id = ?',
          )
          .run(end.endedAt, end.outcome, durationSec, end.errorDetail ?? '', file, connectedAt || null, r.call_id);
        return true;
      },
    };
  }
}
