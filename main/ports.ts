/** The listening port: the configured one when it is free, else one the OS picks (shown to the user). */
import net from 'node:net';

export function isPortFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen({ host, port, exclusive: true }, () => s.close(() => resolve(true)));
  });
}

export function osPickedPort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen({ host, port: 0, exclusive: true }, () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}

/** `preferred` when free, else another; `moved` says the user should be told. */
export async function choosePort(host: string, preferred: number): Promise<{ port: number; moved: boolean }> {
  if (await isPortFree(host, preferred)) return { port: preferred, moved: false };
  return { port: await osPickedPort(host), moved: true };
}
