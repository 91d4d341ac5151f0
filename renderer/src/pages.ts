import { lazy, type ComponentType } from 'react';
import { Dashboard } from './pages/Dashboard.tsx';
import UserHome from './pages/UserHome.tsx';

/** Who a page is offered to: the signed-in account's role (the API still decides what it may do). */
export type Role = 'admin' | 'user';

export interface ConsolePage {
  /** Its address under /console (wouter pattern). */
  path: string;
  /** `nav.<key>` in the locales is its menu label. */
  key: string;
  page: ComponentType;
  /** The roles that see it; the API answers the others 403, so they are not offered it. */
  roles: readonly Role[];
  /** A page reached from another (a call's detail), not from the menu. */
  menu?: false;
}

// Pages past the first screen load when first opened: the first screen's JavaScript stays small.
const Calls = lazy(() => import('./pages/Calls.tsx'));
const CallDetail = lazy(() => import('./pages/CallDetail.tsx'));
const Transcripts = lazy(() => import('./pages/Transcripts.tsx'));
const Telephony = lazy(() => import('./pages/Telephony.tsx'));
const Users = lazy(() => import('./pages/Users.tsx'));
const Webhooks = lazy(() => import('./pages/Webhooks.tsx'));
const Audit = lazy(() => import('./pages/Audit.tsx'));
const Trust = lazy(() => import('./pages/Trust.tsx'));
const Certificates = lazy(() => import('./pages/Certificates.tsx'));
const Tenants = lazy(() => import('./pages/Tenants.tsx'));
const Chat = lazy(() => import('./pages/Chat.tsx'));
const Backups = lazy(() => import('./pages/Backups.tsx'));

/** Every page of the console, in menu order. The shell builds the menu and the routes from this. */
export const PAGES: readonly ConsolePage[] = [
  { path: '/', key: 'dashboard', page: Dashboard, roles: ['admin'] },
  { path: '/', key: 'home', page: UserHome, roles: ['user'], menu: false },
  { path: '/calls', key: 'calls', page: Calls, roles: ['admin'] },
  { path: '/calls/:id', key: 'call', page: CallDetail, roles: ['admin'], menu: false },
  { path: '/chat', key: 'chat', page: Chat, roles: ['admin', 'user'] },
  { path: '/transcripts', key: 'transcripts', page: Transcripts, roles: ['admin'] },
  { path: '/telephony', key: 'telephony', page: Telephony, roles: ['admin'] },
  { path: '/users', key: 'users', page: Users, roles: ['admin'] },
  { path: '/webhooks', key: 'webhooks', page: Webhooks, roles: ['admin'] },
  { path: '/audit', key: 'audit', page: Audit, roles: ['admin'] },
  { path: '/trust', key: 'trust', page: Trust, roles: ['admin'] },
  { path: '/certificates', key: 'certificates', page: Certificates, roles: ['admin'] },
  { path: '/tenants', key: 'tenants', page: Tenants, roles: ['admin'] },
  { path: '/backups', key: 'backups', page: Backups, roles: ['admin'] },
];

/** The role the console offers pages by: anything but an admin sees what a user sees. */
export function roleOf(role: string): Role {
  return role === 'admin' ? 'admin' : 'user';
}

/** The pages this role is offered. */
export function pagesFor(role: Role): ConsolePage[] {
  return PAGES.filter((p) => p.roles.includes(role));
}
