import { axeSweep } from './axe-sweep.ts';

/** The accessibility sweep (axe-sweep.ts) in English; console-axe-de.test.ts runs it in German beside this file. */
axeSweep('en-US');
