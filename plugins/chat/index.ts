import { z } from 'zod';
import { definePlugin, sqlMigrations } from '../../server/sdk.ts';
import { FileStore } from './files.ts';
import { ChatHub } from './hub.ts';
import { ChatRepo } from './repo.ts';
import { CHAT_AUTH, chatRoutes } from './routes.ts';
import { chatConfig, type ChatConfig } from './schemas.ts';
import { ChatService } from './service.ts';

export const RETENTION_QUEUE = 'chat-retention';

/** What setup builds; routes, the socket hub and the retention job share it. */
export interface ChatServices {
  chat: ChatService;
  files: FileStore;
  hub: ChatHub;
  config: ChatConfig;
  timer?: NodeJS.Timeout;
}

/**
 * Office chat and file transfer (spec "Chat", /chat.ashx): direct threads and groups, files
 * stored by SHA-256 under the tenant's folder, live delivery over WebSocket with resume, read
 * markers, retention per tenant, exports for the tenant admin.
 */
export default definePlugin({
  name: 'chat',
  description: 'Office chat and file transfer: threads, groups, files, WebSocket delivery with resume, retention',
  dependsOn: ['core'],
  migrations: sqlMigrations(import.meta.url),
  config: chatConfig,
  setup(ctx): ChatServices {
    const repo = new ChatRepo(ctx.db);
    const files = new FileStore(ctx.paths, repo, ctx.log, ctx.clock);
    const chat = new ChatService(repo, {
      users: ctx.users,
      tenants: ctx.tenants,
      clock: ctx.clock,
      config: ctx.config,
      audit: ctx.audit,
      log: ctx.log,
      files,
    });
    const hub = new ChatHub(chat, {
      auth: ctx.auth,
      policy: CHAT_AUTH,
      config: ctx.config,
      log: ctx.log,
      limiter: ctx.rateLimit,
      clock: ctx.clock,
    });
    chat.sink = hub;
    return { chat, files, hub, config: ctx.config };
  },
  routes(r, s) {
    chatRoutes(r, s);
  },
  start(s, ctx) {
    s.files.recover(ctx.tenants.list());
    s.hub.start();
    // Retention is a job on the core queue (durable, one runner across restarts): each run
    // schedules the next, keyed by its slot so a restart does not double it.
    const every = ctx.config.retentionEveryMs;
    const schedule = (after: number) => {
      const slot = Math.floor(after / every) + 1;
      ctx.jobs.enqueue(RETENTION_QUEUE, { slot }, { dedupeKey: `${RETENTION_QUEUE}:${slot}`, runAt: slot * every });
    };
    ctx.jobs.define({
      name: RETENTION_QUEUE,
      schema: z.object({ slot: z.number().int() }),
      concurrency: 1,
      run: async () => {
        s.chat.sweep();
        schedule(ctx.clock.now());
      },
    });
    schedule(ctx.clock.now());
  },
  stop(s) {
    s.hub.stop();
  },
  health(s) {
    return { status: 'ok', detail: { sockets: s.hub.sockets } };
  },
});
