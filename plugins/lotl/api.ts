import { defineService } from '../../server/sdk.ts';
import type { LotlService } from './service.ts';

/** The trusted-list cache for verifiers (`ctx.use(LOTL)`): anchors by fingerprint, country, type. */
export const LOTL = defineService<LotlService>('lotl');
