/** Time as the appliance sees it; tests swap in a controllable clock. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that only moves when told to (retry timing tests). */
export class ManualClock implements Clock {
  constructor(private t = Date.parse('2026-01-01T00:00:00Z')) {}
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
  set(ms: number): void {
    this.t = ms;
  }
}

export function isoUtc(ms: number): string {
  return new Date(ms).toISOString();
}
