import type * as Jose from 'jose';

/**
 * jose, loaded at its first use: 24-40 ms of CPU that every start of the appliance paid (compiled,
 * bench/core.bench.ts "time to ready") for JWT checks that only requests need. One promise per
 * process; after it settled, an await of it costs a microtask, nothing next to a signature check.
 */
let loading: Promise<typeof Jose> | undefined;

export function loadJose(): Promise<typeof Jose> {
  return (loading ??= import('jose'));
}
