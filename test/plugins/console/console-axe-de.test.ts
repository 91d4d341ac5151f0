import { axeSweep } from './axe-sweep.ts';

/** The accessibility sweep (axe-sweep.ts) in German; console-axe.test.ts runs it in English beside this file. */
axeSweep('de-DE');
