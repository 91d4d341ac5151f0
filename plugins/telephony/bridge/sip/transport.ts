/**
 * SIP transports (RFC 3261 §18): one UDP socket and one TCP listener on the same port, plus
 * outgoing TCP connections reused per peer. Delivers parsed messages with their source.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import { EventEmitter } from 'node:events';
import { parseDatagram, serialize, SipParseError, StreamFramer, type SipMessage } from './message.ts';

export type TransportName = 'udp' | 'tcp';
export interface Peer {
  host: string;
  port: number;
  transport: TransportName;
}

export interface TransportEvents {
  message: [msg: SipMessage, from: Peer];
  error: [err: Error];
  /** A datagram or stream that could not be parsed (counted; never crashes the bridge). */
  malformed: [err: Error, from: Peer];
}

/**
 * The SIP port could not be bound (another PBX or appliance holds it, a port below 1024 without
 * the privilege, an address that is not this machine's). Carries what an operator needs to fix it.
 */
export class SipBindError extends Error {
  constructor(
    readonly address: string,
    readonly port: number,
    readonly transport: TransportName,
    /** The system's error code (EADDRINUSE, EACCES, EADDRNOTAVAIL...). */
    readonly errno: string,
  ) {
    super(`SIP ${transport.toUpperCase()} ${address}:${port}: ${errno}`);
    this.name = 'SipBindError';
  }
}

function bindError(err: unknown, host: string, port: number, transport: TransportName): Error {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return typeof code === 'string' ? new SipBindError(host, port, transport, code) : (err as Error);
}

export class SipTransport extends EventEmitter<TransportEvents> {
  private udp: dgram.Socket | null = null;
  private tcpServer: net.Server | null = null;
  private readonly tcpConns = new Map<string, net.Socket>();
  private readonly pending = new Map<string, Promise<net.Socket>>();
  host = '127.0.0.1';
  port = 0;

  async listen(host: string, port: number): Promise<void> {
    this.host = host;
    // Bind UDP first (port 0 picks one), then TCP on the same number; retry if TCP's is taken.
    for (let attempt = 0; attempt < 10; attempt++) {
      const udp = dgram.createSocket({ type: host.includes(':') ? 'udp6' : 'udp4' });
      await new Promise<void>((res, rej) => {
        udp.once('error', (e) => {
          udp.close();
          rej(bindError(e, host, port, 'udp'));
        });
        udp.bind(port, host, () => {
          udp.removeAllListeners('error');
          res();
        });
      });
      const bound = udp.address().port;
      const server = net.createServer((s) => this.adoptSocket(s));
      try {
        await new Promise<void>((res, rej) => {
          server.once('error', rej);
          server.listen(bound, host, () => {
            server.off('error', rej);
            res();
          });
        });
      } catch (err) {
        udp.close();
        if (port !== 0) throw bindError(err, host, bound, 'tcp');
        continue;
      }
      this.udp = udp;
      this.tcpServer = server;
      this.port = bound;
      udp.on('message', (buf, rinfo) => this.onDatagram(buf, { host: rinfo.address, port: rinfo.port, transport: 'udp' }));
      udp.on('error', (e) => this.emit('error', e));
      return;
    }
    throw new Error('could not bind SIP UDP and TCP on the same port');
  }

  private onDatagram(buf: Buffer, from: Peer): void {
    // RFC 5626 keepalives (CRLF) and stray bytes are ignored.
    if (buf.length < 16) return;
    let msg: SipMessage;
    try {
      msg = parseDatagram(buf);
    } catch (err) {
      this.refuse(err as Error, from);
      return;
    }
    this.emit('message', msg, from);
  }

  /** Counts a refused message and answers it where the parser built a reply (400 to a request). */
  private refuse(err: Error, from: Peer): void {
    this.emit('malformed', err, from);
    if (err instanceof SipParseError && err.reply) this.send(err.reply, from).catch(() => undefined);
  }

  private adoptSocket(s: net.Socket): void {
    const key = `${s.remoteAddress}:${s.remotePort}`;
    const from: Peer = { host: s.remoteAddress ?? '', port: s.remotePort ?? 0, transport: 'tcp' };
    this.tcpConns.set(key, s);
    s.setNoDelay(true);
    const framer = new StreamFramer();
    s.on('data', (chunk) => {
      let msgs: SipMessage[];
      try {
        msgs = framer.push(chunk, (e) => this.refuse(e, from));
      } catch (err) {
        // §18.3: a framing error on a stream cannot be resynchronised; drop the connection.
        this.emit('malformed', err as Error, from);
        s.destroy();
        return;
      }
      for (const m of msgs) this.emit('message', m, from);
    });
    const forget = () => {
      if (this.tcpConns.get(key) === s) this.tcpConns.delete(key);
    };
    s.on('close', forget);
    s.on('error', forget);
  }

  private async tcpTo(host: string, port: number): Promise<net.Socket> {
    const key = `${host}:${port}`;
    const existing = this.tcpConns.get(key);
    if (existing && !existing.destroyed) return existing;
    const inflight = this.pending.get(key);
    if (inflight) return inflight;
    const p = new Promise<net.Socket>((res, rej) => {
      const s = net.connect({ host, port });
      s.once('connect', () => {
        s.off('error', rej);
        this.adoptSocket(s);
        this.tcpConns.set(key, s);
        res(s);
      });
      s.once('error', rej);
    }).finally(() => this.pending.delete(key));
    this.pending.set(key, p);
    return p;
  }

  async send(msg: SipMessage, to: Peer): Promise<void> {
    const buf = serialize(msg);
    if (to.transport === 'udp') {
      const udp = this.udp;
      if (!udp) throw new Error('transport closed');
      await new Promise<void>((res, rej) => udp.send(buf, to.port, to.host, (err) => (err ? rej(err) : res())));
      return;
    }
    const s = await this.tcpTo(to.host, to.port);
    await new Promise<void>((res, rej) => s.write(buf, (err) => (err ? rej(err) : res())));
  }

  async close(): Promise<void> {
    for (const s of this.tcpConns.values()) s.destroy();
    this.tcpConns.clear();
    await Promise.all([
      new Promise<void>((res) => (this.udp ? this.udp.close(() => res()) : res())),
      new Promise<void>((res) => (this.tcpServer ? this.tcpServer.close(() => res()) : res())),
    ]);
    this.udp = null;
    this.tcpServer = null;
  }
}
