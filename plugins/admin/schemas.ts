import { z } from 'zod';
import { pageQuery } from '../../server/sdk.ts';

/**
 * Requests and responses of the console's admin API (users and ak_ keys over HTTP). The same
 * schemas validate requests and describe the endpoints in /openapi.json.
 */

const ROLES = ['admin', 'user'] as const;
const STATUSES = ['active', 'invited', 'disabled'] as const;

/**
 * `?tenant=HOST`: act on another tenant (super-admin only, spec "What the service does"); `*` on
 * the lists means every tenant. Absent or one of the caller's own hosts: the caller's tenant.
 */
export const tenantParam = z
  .string()
  .min(1)
  .max(253)
  .optional()
  .describe("host of the tenant to act on (super-admin only unless it is the caller's own); `*` = every tenant (lists only)");

export const tenantQuery = z.object({ tenant: tenantParam });

export const userListQuery = pageQuery.extend({
  tenant: tenantParam,
  status: z.enum(STATUSES).optional().describe('only users with this status'),
  role: z.enum(ROLES).optional().describe('only users with this role'),
});

export const idParam = z.object({ id: z.string().min(1).max(64) });

export const userView = z.object({
  id: z.string(),
  name: z.string(),
  email: z.string().nullable(),
  language: z.enum(['en', 'de']).nullable().describe("the language of the user's mails; null follows the request's language"),
  role: z.enum(ROLES),
  status: z.enum(STATUSES),
  hasPassword: z.boolean().describe('false for an invitation not claimed yet'),
  createdAtUtc: z.string(),
  tenant: z.string(),
});
export type UserView = z.infer<typeof userView>;

/** A user view with the password generated for it: in this response only, never stored in clear. */
export const userWithPassword = userView.extend({
  password: z.string().optional().describe('the generated password, shown once (only when one was generated)'),
});

export const userCreate = z
  .object({
    name: z.string().min(1).max(128).describe('login name: letters, digits and . _ @ + -'),
    role: z.enum(ROLES).default('user'),
    email: z.email().max(320).nullable().optional(),
    language: z
      .enum(['en', 'de'])
      .nullable()
      .optional()
      .describe("the language of the user's mails (sign-in links, recovery, invitation); omit or null to follow the request's language"),
    password: z.string().max(1024).optional().describe('initial password (policy-checked); omit for an invitation'),
    generatePassword: z.boolean().default(false).describe('generate a password and return it once'),
  })
  .strict()
  .refine((b) => !(b.password !== undefined && b.generatePassword), {
    message: 'give password or generatePassword, not both',
    path: ['generatePassword'],
  });

export const userPatch = z
  .object({
    role: z.enum(ROLES).optional(),
    language: z.enum(['en', 'de']).nullable().optional().describe("the language of the user's mails; null to follow the request's language"),
  })
  .strict()
  .refine((b) => b.role !== undefined || b.language !== undefined, { message: 'give role or language' });

export const passwordReset = z
  .object({
    password: z.string().max(1024).optional().describe('the new password (policy-checked); omit to generate one, returned once'),
  })
  .strict();

export const keyListQuery = pageQuery.extend({
  tenant: tenantParam,
  user: z.string().max(128).optional().describe('only the keys of this user (name)'),
  status: z.enum(['active', 'revoked']).optional(),
});

export const keyView = z.object({
  id: z.string(),
  userId: z.string(),
  userName: z.string(),
  userStatus: z.enum(STATUSES).describe("a disabled owner's keys are refused while the owner is disabled"),
  name: z.string(),
  prefix: z.string().describe('first characters of the key, to recognise it; the key itself is never shown again'),
  status: z.enum(['active', 'revoked']),
  createdAtUtc: z.string(),
  createdBy: z.string(),
  lastUsedAtUtc: z.string().nullable(),
  revokedAtUtc: z.string().nullable(),
  tenant: z.string(),
});
export type KeyView = z.infer<typeof keyView>;
