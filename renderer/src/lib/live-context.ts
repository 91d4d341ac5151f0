import { createContext, useContext } from 'react';
import type { PluginStatus } from '../live.ts';

export interface Live {
  online: boolean;
  status: Record<string, PluginStatus>;
  lastEvent: number;
  /** Where the master key is kept: os-keystore, file, env or provided. */
  masterKey?: string;
}

export const LiveContext = createContext<Live>({ online: true, status: {}, lastEvent: 0 });
export const useLive = (): Live => useContext(LiveContext);
