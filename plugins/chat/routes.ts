import { z } from 'zod';
import { AppError, policy, type AuthPolicy, type RouteRegistrar, type RouteRequest } from '../../server/sdk.ts';
import type { ChatServices } from './index.ts';
import {
  deleteBody,
  downloadQuery,
  editBody,
  exportItem,
  groupCreateBody,
  groupQuery,
  groupRenameBody,
  historyItem,
  historyQuery,
  meItem,
  membersBody,
  messageItem,
  readBody,
  sendBody,
  settingsBody,
  settingsItem,
  targetQuery,
  threadItem,
  threadQuery,
  ticketItem,
} from './schemas.ts';

/** Spec "Chat": auth B for every operation: a person's OIDC access token, or their ak_ key. */
export const CHAT_AUTH: AuthPolicy = { kind: 'credentials', accept: ['bearer', 'apiKey'] };

const AREA = 'chat';
const groupInfo = threadItem.pick({ id: true, kind: true, name: true, members: true, createdAt: true });
const nf = { description: 'not_found: no such thread or user, or the caller is not a member' };

export function chatRoutes(r: RouteRegistrar, s: ChatServices): void {
  const { chat, files, hub, config } = s;
  const user = (req: RouteRequest) => chat.userOf(req.tenant, req.principal);
  const meta = (req: RouteRequest) => ({ user: req.principal?.userName ?? req.principal?.subject ?? 'unknown', ip: req.ip, ua: req.ua });

  // ---- the spec's five ----

  r.add({
    method: 'GET',
    path: '/chat.ashx?op=me',
    summary: 'The calling chat user (id, login, role, tenant) and the event head to open a socket from',
    area: AREA,
    auth: CHAT_AUTH,
    responses: { 200: { description: 'identity', schema: meItem } },
    handler: (req) => chat.me(req.tenant, user(req)),
  });

  r.add({
    method: 'GET',
    path: '/chat.ashx?op=list-threads',
    summary: 'Direct threads and groups of the caller, newest activity first, with last message and unread count',
    area: AREA,
    auth: CHAT_AUTH,
    responses: { 200: { description: 'threads', schema: z.object({ threads: z.array(threadItem) }) } },
    handler: (req) => ({ threads: chat.listThreads(req.tenant, user(req)) }),
  });

  r.add({
    method: 'POST',
    path: '/chat.ashx?op=send',
    summary: 'Send a text message: `with` = peer login (direct thread, made on first use), or `groupId`, or `threadId`',
    description: `The text is stored and returned as plain text, never HTML (clients render it as text). At most ${config.maxTextLength} characters (setting maxTextLength).`,
    area: AREA,
    auth: CHAT_AUTH,
    query: targetQuery,
    body: sendBody,
    bodyLimit: config.maxTextLength * 4 + 1024,
    responses: { 200: { description: 'the stored message', schema: messageItem }, 404: nf },
    handler: (req) => chat.send(req.tenant, user(req), req.query, req.body.text),
  });

  r.add({
    method: 'POST',
    path: '/chat.ashx?op=upload',
    summary: 'Share a file (multipart/form-data, one file part) in a thread: `with`, `groupId` or `threadId`',
    description:
      `Streamed to disk, at most maxUploadBytes (${config.maxUploadBytes}; 413 beyond, nothing kept), stored by SHA-256 under the tenant's folder. ` +
      'The type is sniffed from the bytes (the declared type is ignored); the file name is only displayed. Answers the message with its file (sha = download key).',
    area: AREA,
    auth: CHAT_AUTH,
    query: targetQuery,
    bodyType: 'stream',
    contentTypes: ['multipart/form-data'],
    responses: { 200: { description: 'the message carrying the file', schema: messageItem }, 404: nf, 413: { description: 'payload_too_large' } },
    handler: async (req) => {
      const u = user(req);
      // Membership (or the peer) first: a non-member's upload is refused before a byte is stored.
      if (req.query.with === undefined) chat.thread(req.tenant, u, req.query);
      else chat.peerExists(req.tenant, req.query.with);
      const f = await files.receive(req.raw, req.tenant, config.maxUploadBytes);
      try {
        return chat.shareFile(req.tenant, u, req.query, f);
      } catch (e) {
        files.discard(req.tenant, f.tmpName);
        throw e;
      }
    },
  });

  r.add({
    method: 'GET',
    path: '/chat.ashx?op=download',
    summary: 'Download a shared file by its SHA-256: only members of a thread where it was shared',
    description:
      'Always `Content-Disposition: attachment` with the sender’s file name (RFC 6266), `X-Content-Type-Options: nosniff`, a sandboxing CSP; HTML, SVG, XML and scripts as application/octet-stream. One byte range (Range: bytes=…) answers 206, outside the file 416.',
    area: AREA,
    auth: CHAT_AUTH,
    query: downloadQuery,
    responses: {
      200: { description: 'the file', contentType: 'application/octet-stream' },
      206: { description: 'the requested range', contentType: 'application/octet-stream' },
      404: { description: 'not_found: no such file, or not shared in a thread of the caller' },
      416: { description: 'range_not_satisfiable' },
    },
    handler: async (req, res) => {
      const f = chat.fileFor(req.tenant, user(req), req.query.sha);
      await files.serve(req.raw, res, req.tenant, f);
    },
  });

  // ---- beyond the spec: history, groups, read markers, edits, typing, sockets ----

  r.add({
    method: 'GET',
    path: '/chat.ashx?op=history',
    summary: 'Messages of a thread, oldest first in the page; page back with before=nextBefore, or forward with after=<id>',
    area: AREA,
    auth: CHAT_AUTH,
    query: historyQuery,
    responses: { 200: { description: 'a page of messages', schema: historyItem }, 404: nf },
    handler: (req) => chat.history(req.tenant, user(req), req.query),
  });

  r.add({
    method: 'POST',
    path: '/chat.ashx?op=group-create',
    summary: 'Create a group; the caller is its owner, `members` (logins of this tenant) join it',
    area: AREA,
    auth: CHAT_AUTH,
    body: groupCreateBody,
    responses: { 200: { description: 'the group', schema: groupInfo }, 404: { description: 'not_found: a login is not a user of this tenant' } },
    handler: (req) => chat.groupCreate(req.tenant, user(req), req.body.name, req.body.members, meta(req)),
  });

  r.add({
    method: 'POST',
    path: '/chat.ashx?op=group-rename',
    summary: 'Rename a group (its owner or a tenant admin who is a member)',
    area: AREA,
    auth: CHAT_AUTH,
    query: groupQuery,
    body: groupRenameBody,
    responses: { 200: { description: 'the group', schema: groupInfo }, 404: nf },
    handler: (req) => chat.groupRename(req.tenant, user(req), req.query.groupId, req.body.name, meta(req)),
  });

  r.add({
    method: 'POST',
    path: '/chat.ashx?op=group-add',
    summary: 'Add members to a group (any member may); audited',
    area: AREA,
    auth: CHAT_AUTH,
    query: groupQuery,
    body: membersBody,
    responses: { 200: { description: 'the group', schema: groupInfo }, 404: nf },
    handler: (req) => chat.groupAdd(req.tenant, user(req), req.query.groupId, req.body.members, meta(req)),
  });

  const removed = z.object({ groupId: z.string(), removed: z.array(z.object({ id: z.string(), login: z.string() })) });
  r.add({
    method: 'POST',
    path: '/chat.ashx?op=group-remove',
    summary: 'Remove members from a group (its owner or a tenant admin who is a member); audited',
    area: AREA,
    auth: CHAT_AUTH,
    query: groupQuery,
    body: membersBody,
    responses: { 200: { description: 'who was removed', schema: removed }, 404: nf },
    handler: (req) => chat.groupRemove(req.tenant, user(req), req.query.groupId, req.body.members, meta(req)),
  });

  r.add({
    method: 'POST',
    path: '/chat.ashx?op=leave',
    summary: 'Leave a group; ownership passes to the longest-standing member when the owner leaves; audited',
    area: AREA,
    auth: CHAT_AUTH,
    query: groupQuery,
    responses: { 200: { description: 'who left', schema: removed }, 404: nf },
    handler: (req) => chat.groupLeave(req.tenant, user(req), req.query.groupId, meta(req)),
  });

  r.add({
    method: 'POST',
    path: '/chat.ashx?op=read',
    summary: 'Move the caller’s read marker in a thread forward (never back); unread counts follow it',
    area: AREA,
    auth: CHAT_AUTH,
    query: threadQuery,
    body: readBody,
    responses: { 200: { description: 'the marker now', schema: z.object({ threadId: z.string(), readUpTo: z.number().int() }) }, 404: nf },
    handler: (req) => chat.read(req.tenant, user(req), req.query.threadId, req.body.upTo),
  });

  r.add({
    method: 'POST',
    path: '/chat.ashx?op=edit',
    summary: 'Edit one of the caller’s own text messages',
    area: AREA,
    auth: CHAT_AUTH,
    body: editBody,
    bodyLimit: config.maxTextLength * 4 + 1024,
    responses: {
      200: { description: 'the message', schema: messageItem },
      403: { description: 'not the sender' },
      404: { description: 'not_found' },
      409: { description: 'conflict: deleted' },
    },
    handler: (req) => chat.edit(req.tenant, user(req), req.body.id, req.body.text),
  });

  r.add({
    method: 'POST',
    path: '/chat.ashx?op=delete',
    summary: 'Delete one of the caller’s own messages (its text or file is gone; the id stays as a tombstone)',
    area: AREA,
    auth: CHAT_AUTH,
    body: deleteBody,
    responses: { 200: { description: 'the tombstone', schema: messageItem }, 403: { description: 'not the sender' }, 404: { description: 'not_found' } },
    handler: (req) => chat.delete(req.tenant, user(req), req.body.id),
  });

  r.add({
    method: 'POST',
    path: '/chat.ashx?op=typing',
    summary: 'Tell the other members’ sockets the caller is typing (ephemeral; send again every few seconds while typing)',
    area: AREA,
    auth: CHAT_AUTH,
    query: threadQuery,
    responses: { 204: { description: 'sent' }, 404: nf },
    handler: (req) => {
      chat.typing(req.tenant, user(req), req.query.threadId);
    },
  });

  r.add({
    method: 'POST',
    path: '/chat.ashx?op=socket-ticket',
    summary: 'A one-time ticket to open the socket where no Authorization header can be set (browsers)',
    description: 'Open /chat.ashx?op=socket&ticket=<ticket> within expiresIn seconds; a ticket opens one socket, for this tenant and user only.',
    area: AREA,
    auth: CHAT_AUTH,
    // Per address: a whole office behind one NAT opens its tabs' sockets through this.
    rateLimit: { name: 'chat-socket-ticket', perMinute: 300 },
    responses: { 200: { description: 'the ticket', schema: ticketItem } },
    handler: (req) => hub.issueTicket(req.tenant, user(req)),
  });

  r.add({
    method: 'GET',
    path: '/chat.ashx?op=socket',
    summary: 'WebSocket of live chat events (upgrade); since=<last seq or message id> resumes without loss or duplicates',
    description:
      'Authenticate with `Authorization: Bearer` (token or ak_ key) or `ticket=` (op=socket-ticket). Frames are JSON; see plugins/chat/README.md "Socket protocol". A request without Upgrade answers 426.',
    area: AREA,
    auth: CHAT_AUTH,
    query: z.object({
      since: z.string().regex(/^\d+$/).optional().describe('resume after this event seq (= message id for messages)'),
      ticket: z.string().optional().describe('one-time ticket from op=socket-ticket'),
    }),
    responses: { 101: { description: 'switching to the WebSocket protocol' }, 426: { description: 'upgrade_required: use a WebSocket client' } },
    handler: () => {
      throw new AppError(426, 'upgrade_required', 'this address takes WebSocket connections only', {
        headers: { Upgrade: 'websocket', Connection: 'Upgrade' },
      });
    },
  });
  r.upgrade('/chat.ashx?op=socket', hub.handleUpgrade);

  // ---- tenant admin ----

  r.add({
    method: 'GET',
    path: '/chat.ashx?op=export',
    summary: 'Export one thread of the tenant as JSON (tenant admin; audited)',
    area: AREA,
    auth: policy.v1Admin,
    query: threadQuery,
    responses: { 200: { description: 'the export', schema: exportItem }, 404: { description: 'not_found' } },
    handler: (req, res) => {
      const out = chat.exportThread(req.tenant, req.query.threadId, meta(req));
      res.setHeader('Content-Disposition', `attachment; filename="chat-${req.query.threadId}.json"`);
      return out;
    },
  });

  r.add({
    method: 'GET',
    path: '/chat.ashx?op=settings',
    summary: 'The tenant’s chat retention (tenant admin)',
    area: AREA,
    auth: policy.v1Admin,
    responses: { 200: { description: 'settings', schema: settingsItem } },
    handler: (req) => chat.retention(req.tenant),
  });

  r.add({
    method: 'POST',
    path: '/chat.ashx?op=settings',
    summary: 'Set the tenant’s chat retention in days, or null for forever (tenant admin; audited)',
    area: AREA,
    auth: policy.v1Admin,
    body: settingsBody,
    responses: { 200: { description: 'settings', schema: settingsItem } },
    handler: (req) => chat.setRetention(req.tenant, req.body.retentionDays, meta(req)),
  });
}
