import { signIn } from './auth.ts';

/**
 * The first script of every load, kept tiny: tokens live in memory only, so a fresh load first
 * goes to the provider (one redirect, no typing while its session lasts) and only the return to
 * /console/callback loads the app itself. The app's JavaScript is thus fetched and parsed once
 * per sign-in, not twice.
 */
if (location.pathname === '/console/callback') void import('./root.tsx');
else void signIn();
