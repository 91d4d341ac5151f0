import type { paths } from '../api/schema.js';

/** A call's state exactly as the API declares it: the union in the generated OpenAPI types. */
export type CallStatus = paths['/api.ashx/v1/calls/{id}']['get']['responses'][200]['content']['application/json']['status'];

interface StateInfo {
  /** The call is over (an outcome the dashboard's chart counts). */
  final: boolean;
  /** The operator may still stop it (cancel a scheduled call, hang up a live one). */
  stoppable: boolean;
  /** Mantine colour of its badge and chart bar. */
  color: 'gray' | 'blue' | 'teal' | 'yellow' | 'red';
}

/**
 * Every state once. `satisfies Record<CallStatus, ...>` makes the compiler refuse this table when
 * the API's union gains, loses or renames a state, so the lists below cannot drift from it.
 */
const STATES = {
  scheduled: { final: false, stoppable: true, color: 'gray' },
  dispatching: { final: false, stoppable: true, color: 'blue' },
  'in-flight': { final: false, stoppable: true, color: 'blue' },
  'ended-success': { final: true, stoppable: false, color: 'teal' },
  'ended-failed-retry-pending': { final: true, stoppable: true, color: 'yellow' },
  'ended-failed-final': { final: true, stoppable: false, color: 'red' },
  cancelled: { final: true, stoppable: false, color: 'gray' },
} as const satisfies Record<CallStatus, StateInfo>;

export const CALL_STATES = Object.keys(STATES) as CallStatus[];
/** The outcomes: what a call can end as. */
export const FINAL_STATES = CALL_STATES.filter((s) => STATES[s].final);

export function callState(status: string): StateInfo | undefined {
  return (STATES as Record<string, StateInfo>)[status];
}
