import type { AuditWriter } from '../../server/sdk.ts';
import type { TelephonyAdmin } from './trunks/admin.ts';
import type { BridgeLink } from './bridge-link/link.ts';
import type { CallKinds } from './calls/kinds.ts';
import type { CallService } from './calls/outbound.ts';
import type { InboundCalls } from './inbound/calls.ts';
import type { InboundRoutes } from './inbound/routes.ts';
import type { PhoneAccounts } from './inbound/phones.ts';
import type { Prompts } from './prompts/prompts.ts';
import type { SipListening } from './setup/checklist.ts';
import type { SipTls } from './inbound/sip-tls.ts';
import type { OfficeTabService } from './officetab/service.ts';
import type { RoomService } from './rooms/calls.ts';
import type { RoomSignIn } from './rooms/sign-in.ts';
import type { OutcomeMailer } from './calls/mail.ts';
import type { TelephonyRepo } from './repo.ts';
import type { TranscriptShares } from './transcripts/shares.ts';
import type { BridgeSupervisor } from './bridge-link/supervisor.ts';
import type { TrunkMediaWatch } from './metrics-trunk-media.ts';
import type { TranscriptStore } from './transcripts/store.ts';

/** What setup builds; routes, jobs and the `trunk`/`number` commands share it. */
export interface TelephonyServices {
  repo: TelephonyRepo;
  admin: TelephonyAdmin;
  calls: CallService;
  /** Every kind of call the bridge carries (outbound, inbound, rooms): its events and restarts. */
  callKinds: CallKinds;
  /** Inbound SIP calls (vnum…): routing decisions for the bridge, their events and transcripts. */
  inbound: InboundCalls;
  /** The spec's inbound routes (Did, FromNumber → User). */
  inboundRoutes: InboundRoutes;
  /** Desk-phone logins of the bridge's registrar. */
  phones: PhoneAccounts;
  /** The tenant's prompts, named by a call's systemPrompt slug. */
  prompts: Prompts;
  /** Where SIP listens (an embedded bridge's settings), or null: /readyz and the setup checklist. */
  sip: SipListening | null;
  /** The users' console tabs registered as their phones (officetab.ts). */
  officeTabs: OfficeTabService;
  /** SIP over TLS for desk phones: the certificate pushed to the bridge, what a phone must trust. */
  sipTls: SipTls;
  rooms: RoomService;
  /** Sign-in for signed-in rooms through the tenant's OpenID Provider (room-sign-in.ts). */
  roomSignIn: RoomSignIn;
  transcripts: TranscriptStore;
  shares: TranscriptShares;
  bridge: BridgeLink;
  mailer: OutcomeMailer;
  supervisor: BridgeSupervisor;
  /** The bridge's last per-trunk RTP figures, for /metrics. */
  trunkMedia: TrunkMediaWatch;
  /** ctx.audit: who changed trunks, settings, numbers or the whitelist, and who hung up a call. */
  audit: AuditWriter;
  /** Told the X-Bridge-Instance of every callback (a new one means the bridge restarted). */
  instanceSeen(instance: string): void;
}
