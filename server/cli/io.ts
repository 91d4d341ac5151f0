import tty from 'node:tty';

/** One question on the terminal, one answer line (the interface closes, so the process can end). */
async function askOnTerminal(question: string): Promise<string> {
  // Loaded by the few commands that ask (setup, restore onto a used data dir), not by every one.
  const readline = await import('node:readline/promises');
  const rl = readline.createInterface({ input: process.stdin, output: process.stdout });
  try {
    return await rl.question(question);
  } finally {
    rl.close();
  }
}

/** Where a CLI command writes and reads: the process's streams, or a test's arrays. */
export interface CliIo {
  out: (line: string) => void;
  err: (line: string) => void;
  stdin: () => Promise<string>;
  /** Asks one question and reads the answer line; absent when not on a terminal (scripted runs use flags). */
  ask?: (question: string) => Promise<string>;
}

/**
 * A reader that stops early (`sovcomms --help | head -1`) closes the pipe: the next write fails
 * with EPIPE. That is the reader's choice, not a failure: stop writing and exit quietly, with the
 * code the command would have had.
 */
let pipeClosed = false;
function quietOnEpipe(stream: NodeJS.WriteStream): void {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EPIPE') throw e;
    pipeClosed = true;
    // Buffered writes are gone anyway; the exit code set by the command (or 0) stands.
    process.exit(process.exitCode ?? 0);
  });
}
let epipeArmed = false;

export const processIo: CliIo = {
  out: (l) => {
    if (!epipeArmed) {
      epipeArmed = true;
      quietOnEpipe(process.stdout);
      quietOnEpipe(process.stderr);
    }
    if (!pipeClosed) process.stdout.write(l + '\n');
  },
  err: (l) => {
    if (!pipeClosed) process.stderr.write(l + '\n');
  },
  // Descriptor 0 asked directly: reading process.stdin.isTTY would build the stdin stream (a
  // socket or a file stream) in every command and at every server start, read or not.
  ask: tty.isatty(0) ? askOnTerminal : undefined,
  stdin: async () => {
    const chunks: Buffer[] = [];
    for await (const c of process.stdin) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  },
};
