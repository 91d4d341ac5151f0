import { z } from 'zod';

/** Settings under `plugins.chat` (README "Settings"). */
export const chatConfig = z
  .object({
    /** Longest message text, in characters (UTF-16 code units, as JavaScript counts). */
    maxTextLength: z.number().int().min(1).max(100_000).default(4000),
    /** Largest upload in bytes; beyond it the upload is refused with 413 and nothing is kept. */
    maxUploadBytes: z
      .number()
      .int()
      .min(1)
      .max(4 * 1024 ** 3)
      .default(25 * 1024 * 1024),
    /** Retention for tenants that set none: days, or null to keep forever. */
    defaultRetentionDays: z.number().int().min(1).max(36_500).nullable().default(null),
    /** How often the retention job runs. */
    retentionEveryMs: z.number().int().min(1000).default(3_600_000),
    /** Lifetime of a one-time socket ticket (op=socket-ticket). */
    ticketTtlMs: z.number().int().min(1000).max(300_000).default(30_000),
    /** Sockets one user may hold open at once (tabs, devices); the oldest is closed beyond it. */
    maxSocketsPerUser: z.number().int().min(1).max(1000).default(20),
    /** Bytes queued on a slow socket before it is closed (1013); the client resumes without loss. */
    maxSocketBufferBytes: z
      .number()
      .int()
      .min(65_536)
      .default(8 * 1024 * 1024),
    /** Events replayed to a resuming socket at most; beyond, it is told to resync from history. */
    maxReplay: z.number().int().min(100).max(1_000_000).default(50_000),
    /** Socket ping and credential re-check interval: a dead or de-authorised socket goes within about this long. */
    heartbeatMs: z.number().int().min(100).max(300_000).default(30_000),
    /** Frames one user may send over their sockets per minute (send, typing, read, ping). */
    socketFramesPerMinute: z.number().int().min(1).default(600),
    /** Members a group may hold. */
    maxGroupMembers: z.number().int().min(2).max(100_000).default(1000),
  })
  .strict();
export type ChatConfig = z.infer<typeof chatConfig>;

const login = z.string().min(1).max(128);
const threadId = z.string().regex(/^[dg]_[0-9a-f]{16}$/, 'a thread id (d_… or g_…)');
const groupId = z.string().regex(/^g_[0-9a-f]{16}$/, 'a group id (g_…)');
const messageId = z.coerce.number().int().min(1).max(Number.MAX_SAFE_INTEGER);

/** Where a message goes or what is read: `with` (peer login, a direct thread), `groupId`, or `threadId`. */
export const targetQuery = z
  .object({
    with: login.optional().describe('peer login: the direct thread with this user (made on first use)'),
    groupId: groupId.optional().describe('a group (thread id g_…)'),
    threadId: threadId.optional().describe('any thread by id (d_… or g_…)'),
  })
  .refine((q) => [q.with, q.groupId, q.threadId].filter((v) => v !== undefined).length === 1, 'exactly one of with, groupId, threadId');
export type TargetQuery = z.infer<typeof targetQuery>;

export const groupQuery = z.object({ groupId });
export const threadQuery = z.object({ threadId });

export const sendBody = z.object({ text: z.string().min(1, 'text must not be empty') }).strict();

export const historyQuery = z
  .object({
    with: login.optional(),
    groupId: groupId.optional(),
    threadId: threadId.optional(),
    before: messageId.optional().describe('page backwards: messages with an id below this (the previous page’s nextBefore)'),
    after: messageId.optional().describe('page forwards: messages with an id above this'),
    limit: z.coerce.number().int().min(1).max(200).default(50),
  })
  .refine((q) => [q.with, q.groupId, q.threadId].filter((v) => v !== undefined).length === 1, 'exactly one of with, groupId, threadId')
  .refine((q) => !(q.before && q.after), 'before and after exclude each other');

export const downloadQuery = z.object({
  sha: z
    .string()
    .regex(/^[0-9a-fA-F]{64}$/, 'hex SHA-256')
    .transform((s) => s.toLowerCase()),
});

export const groupCreateBody = z
  .object({
    name: z.string().trim().min(1).max(100),
    members: z.array(login).max(1000).default([]).describe('logins to add besides the creator'),
  })
  .strict();
export const groupRenameBody = z.object({ name: z.string().trim().min(1).max(100) }).strict();
export const membersBody = z.object({ members: z.array(login).min(1).max(1000) }).strict();
export const readBody = z.object({ upTo: messageId.describe('the highest message id the user has seen') }).strict();
export const editBody = z.object({ id: messageId, text: z.string().min(1) }).strict();
export const deleteBody = z.object({ id: messageId }).strict();
export const settingsBody = z
  .object({ retentionDays: z.number().int().min(1).max(36_500).nullable().describe('days to keep messages and files; null keeps them forever') })
  .strict();

// ---- answers ---------------------------------------------------------------------------------

export const userRef = z.object({ id: z.string(), login: z.string() });
export type UserRef = z.infer<typeof userRef>;

export const fileRef = z.object({
  sha: z.string().describe('hex SHA-256: the download key'),
  name: z.string().describe('display name as sent (sanitised); never a path on the server'),
  size: z.number().int(),
  type: z.string().describe('media type sniffed from the bytes; application/octet-stream when unknown'),
});

export const messageItem = z.object({
  id: z.number().int().describe('increasing across the tenant; also the resume cursor'),
  threadId: z.string(),
  sender: userRef,
  text: z.string().nullable().describe('plain text (never HTML); null when deleted'),
  file: fileRef.nullable(),
  createdAt: z.string(),
  editedAt: z.string().nullable(),
  deleted: z.boolean(),
});
export type MessageItem = z.infer<typeof messageItem>;

export const threadItem = z.object({
  id: z.string(),
  kind: z.enum(['direct', 'group']),
  name: z.string().nullable().describe('group name; null for direct threads'),
  peer: userRef.nullable().describe('the other user of a direct thread'),
  members: z.array(userRef.extend({ role: z.enum(['owner', 'member']) })),
  lastMessage: messageItem.nullable(),
  unread: z.number().int().describe('messages from others after the read marker'),
  readUpTo: z.number().int(),
  createdAt: z.string(),
});
export type ThreadItem = z.infer<typeof threadItem>;

export const meItem = z.object({
  id: z.string(),
  login: z.string(),
  email: z.string().nullable(),
  role: z.enum(['admin', 'user']),
  tenant: z.string().describe('the tenant host'),
  head: z.number().int().describe('the newest event seq the user can see: a socket opened with since=head misses nothing'),
});

export const historyItem = z.object({
  threadId: z.string(),
  messages: z.array(messageItem).describe('oldest first'),
  nextBefore: z.number().int().nullable().describe('pass as before= for older messages; null at the start'),
  hasMore: z.boolean(),
});

export const ticketItem = z.object({
  ticket: z.string().describe('one-time; open /chat.ashx?op=socket&ticket=… within expiresIn seconds'),
  expiresIn: z.number().int(),
});

export const settingsItem = z.object({ retentionDays: z.number().int().nullable(), inherited: z.boolean() });

export const exportItem = z.object({
  format: z.literal('sovcomms-chat-export/1'),
  exportedAt: z.string(),
  tenant: z.string(),
  thread: threadItem.omit({ lastMessage: true, unread: true, readUpTo: true, peer: true }),
  messages: z.array(messageItem),
});
