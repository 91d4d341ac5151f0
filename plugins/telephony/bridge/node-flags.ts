/**
 * The Node/V8 flags the bridge process runs with (the supervisor's command line, the benchmarks,
 * and the hand-run command of bridge/README.md).
 *
 * `--single-threaded-gc`: V8 does its collections on the collecting thread alone, without helper
 * tasks on the platform's worker threads. The bridge's media and WebRTC threads run at real-time
 * priority (SCHED_FIFO) and a frame is due on them every 20 ms; with parallel and concurrent GC a
 * young-generation collection on such a thread waits for helper tasks on normal-priority threads,
 * which the other real-time threads and the rest of the machine keep off the two cores: measured
 * on the 2-core VM (50 rooms joining at 20/s), scavenges that copied ~1.5 MB took up to 20-30 ms
 * of pause, and frames were late although the thread itself was idle. Single-threaded, the same
 * collections pause the thread only for their own work (rooms benchmark: send-jitter p99 of the
 * worst room 4.1-8.2 ms in six runs, no frame late, against 7.6-15.6 ms and 1-16 late frames
 * without; outbound SIP benchmark, 200 calls: 2.1-2.2 ms against 3.4-4.0 ms). The main thread's
 * collections (engine WebSockets, control API) get a little longer, which nothing there feels.
 */
export const BRIDGE_NODE_FLAGS: readonly string[] = ['--single-threaded-gc', '--expose-gc'];

/**
 * How this process collects garbage, for /stats and the start-up log: `single-threaded` with
 * every flag above, `parallel` without them (V8's default), `partial` with some.
 */
export function gcMode(execArgv: readonly string[] = process.execArgv): 'single-threaded' | 'parallel' | 'partial' {
  const have = BRIDGE_NODE_FLAGS.filter((f) => execArgv.includes(f)).length;
  return have === BRIDGE_NODE_FLAGS.length ? 'single-threaded' : have === 0 ? 'parallel' : 'partial';
}
