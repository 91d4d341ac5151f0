/**
 * SIP transports (RFC 3261 §18): one UDP socket and one TCP listener on the same port, a TLS
 * listener (§26, desk phones) on its own, plus outgoing TCP and TLS connections reused per peer.
 * Delivers parsed messages with their source. A stream peer is reached on the connection it
 * opened (RFC 5626 §5.3: a phone has no certificate and often no listener of its own), and
 * RFC 5626 §4.4.1 CRLF keepalives run on the connections a server asked for them.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import tls from 'node:tls';
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { parseDatagram, serialize, SipParseError, StreamFramer, type SipMessage } from './message.ts';
import { connectTls, type TlsClientOptions } from './tls.ts';

export type TransportName = 'udp' | 'tcp' | 'tls';
export interface Peer {
  host: string;
  port: number;
  transport: TransportName;
  /**
   * TLS towards a server (a trunk): the name its certificate must carry and the CA. Absent on a
   * peer that connected to us: it is reached on its own connection only.
   */
  tls?: TlsClientOptions;
}

/** Streams (TCP, TLS) are reliable: no retransmissions, Timer D/K zero (§17.1.1.2, §17.1.2.2). */
export function isStream(t: TransportName): boolean {
  return t !== 'udp';
}

/** RFC 5626 §4.4.1: a flow whose pong does not come within 10 s has failed. */
const PONG_WAIT_MS = 10_000;

interface Flow {
  socket: net.Socket;
  keepalive?: { timer: NodeJS.Timeout; waiting: NodeJS.Timeout | null };
}

export interface TransportEvents {
  message: [msg: SipMessage, from: Peer];
  error: [err: Error];
  /** A datagram or stream that could not be parsed (counted; never crashes the bridge). */
  malformed: [err: Error, from: Peer];
  /** RFC 5626 §4.4.1: a keepalive got no pong; the connection was closed. */
  flowFailed: [peer: Peer];
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
  private tlsServer: tls.Server | null = null;
  /** Open streams by `transport:host:port` of the far end, whichever side opened them. */
  private readonly flows = new Map<string, Flow>();
  private readonly pending = new Map<string, Promise<Flow>>();
  host = '127.0.0.1';
  port = 0;
  /** The TLS listener's port; null while there is none. */
  tlsPort: number | null = null;

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
      const server = net.createServer((s) => this.adoptSocket(s, 'tcp'));
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

  /**
   * SIP over TLS for desk phones (RFC 3261 §26.3.1, port 5061 by default): the appliance's
   * certificate, no client certificate asked (phones have none; they prove themselves by digest).
   * Called again with a renewed certificate, it swaps the context of the running listener.
   */
  async listenTls(port: number, creds: { cert: string; key: string }): Promise<number> {
    const context = { cert: creds.cert, key: creds.key, minVersion: 'TLSv1.2' as const };
    if (this.tlsServer) {
      this.tlsServer.setSecureContext(context);
      return this.tlsPort!;
    }
    // A client that never completes its handshake holds a descriptor: bounded like a silent one.
    const server = tls.createServer({ ...context, handshakeTimeout: 10_000 }, (s) => this.adoptSocket(s, 'tls'));
    server.on('tlsClientError', (err) => this.emit('malformed', new Error(`TLS handshake failed: ${err.message}`), { host: '', port: 0, transport: 'tls' }));
    await new Promise<void>((res, rej) => {
      server.once('error', rej);
      server.listen(port, this.host, () => {
        server.off('error', rej);
        res();
      });
    });
    this.tlsServer = server;
    this.tlsPort = (server.address() as net.AddressInfo).port;
    return this.tlsPort;
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

  /** `alias`: the key it was asked for by (a host name), besides the far end's address. */
  private adoptSocket(s: net.Socket, transport: 'tcp' | 'tls', alias?: string): Flow {
    const from: Peer = { host: s.remoteAddress ?? '', port: s.remotePort ?? 0, transport };
    const keys = [flowKey(from), ...(alias ? [alias] : [])];
    const flow: Flow = { socket: s };
    for (const key of keys) this.flows.set(key, flow);
    s.setNoDelay(true);
    const framer = new StreamFramer((kind) => {
      // §4.4.1: a ping is answered with a pong; a pong ends the wait of our ping.
      if (kind === 'ping') s.write('\r\n');
      else if (flow.keepalive?.waiting) {
        clearTimeout(flow.keepalive.waiting);
        flow.keepalive.waiting = null;
      }
    });
    s.on('data', (chunk: Buffer) => {
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
      if (flow.keepalive) {
        clearInterval(flow.keepalive.timer);
        if (flow.keepalive.waiting) clearTimeout(flow.keepalive.waiting);
        flow.keepalive = undefined;
      }
      for (const key of keys) if (this.flows.get(key) === flow) this.flows.delete(key);
    };
    s.on('close', forget);
    s.on('error', forget);
    return flow;
  }

  /**
   * The open stream to `to`, or a new one when we may open it: TCP to anyone, TLS only towards a
   * server whose name we verify (`to.tls`). A peer that connected to us (a phone) is reached on
   * its own connection; when that is gone, so is the peer (RFC 5626 §5.3).
   */
  private async streamTo(to: Peer): Promise<Flow> {
    // A verified TLS flow is reused only for the same name and CA: a trunk with another CA or
    // name at the same address gets a connection of its own, checked against its own.
    const key = streamKey(to);
    const existing = this.flows.get(key);
    if (existing && !existing.socket.destroyed) return existing;
    if (to.transport === 'tls' && !to.tls)
      throw new Error(`no TLS connection from ${to.host}:${to.port} (a TLS client is reached on the connection it opened)`);
    const inflight = this.pending.get(key);
    if (inflight) return inflight;
    const p = (async () => {
      const s = to.tls ? await connectTls(to.host, to.port, to.tls) : await connectTcp(to.host, to.port);
      return this.adoptSocket(s, to.transport === 'tls' ? 'tls' : 'tcp', key);
    })().finally(() => this.pending.delete(key));
    this.pending.set(key, p);
    return p;
  }

  /**
   * RFC 5626 §4.4.1 keepalive on the stream to `to` (a server that asked for it: Flow-Timer, or
   * `Require: outbound`): a double CRLF every `everyMs`, the flow failed (closed, `flowFailed`)
   * when no single-CRLF pong came back within 10 s. Replaces an earlier keepalive of the flow.
   */
  keepFlowAlive(to: Peer, everyMs: number): boolean {
    const flow = this.flows.get(streamKey(to));
    if (!flow || !isStream(to.transport)) return false;
    if (flow.keepalive) {
      clearInterval(flow.keepalive.timer);
      if (flow.keepalive.waiting) clearTimeout(flow.keepalive.waiting);
    }
    const ka: NonNullable<Flow['keepalive']> = {
      timer: setInterval(() => {
        if (ka.waiting || flow.socket.destroyed) return;
        flow.socket.write('\r\n\r\n');
        ka.waiting = setTimeout(() => {
          ka.waiting = null;
          flow.socket.destroy();
          this.emit('flowFailed', to);
        }, PONG_WAIT_MS);
        ka.waiting.unref();
      }, everyMs),
      waiting: null,
    };
    ka.timer.unref();
    flow.keepalive = ka;
    return true;
  }

  async send(msg: SipMessage, to: Peer): Promise<void> {
    const buf = serialize(msg);
    if (to.transport === 'udp') {
      const udp = this.udp;
      if (!udp) throw new Error('transport closed');
      await new Promise<void>((res, rej) => udp.send(buf, to.port, to.host, (err) => (err ? rej(err) : res())));
      return;
    }
    const { socket } = await this.streamTo(to);
    await new Promise<void>((res, rej) => socket.write(buf, (err) => (err ? rej(err) : res())));
  }

  async close(): Promise<void> {
    for (const f of new Set(this.flows.values())) f.socket.destroy();
    this.flows.clear();
    await Promise.all([
      new Promise<void>((res) => (this.udp ? this.udp.close(() => res()) : res())),
      new Promise<void>((res) => (this.tcpServer ? this.tcpServer.close(() => res()) : res())),
      new Promise<void>((res) => (this.tlsServer ? this.tlsServer.close(() => res()) : res())),
    ]);
    this.udp = null;
    this.tcpServer = null;
    this.tlsServer = null;
    this.tlsPort = null;
  }
}

function flowKey(p: Peer): string {
  return `${p.transport}:${p.host}:${p.port}`;
}

/** The flow `to` is sent on: a verified TLS flow also by what it was verified for. */
function streamKey(to: Peer): string {
  return to.tls ? `${flowKey(to)}#${tlsIdentity(to.tls)}` : flowKey(to);
}

/** What an outgoing TLS connection was verified for: the name and the CA (a digest of it). */
function tlsIdentity(o: TlsClientOptions): string {
  return `${o.servername}#${o.ca ? createHash('sha256').update(o.ca).digest('hex').slice(0, 16) : 'system'}`;
}

function connectTcp(host: string, port: number): Promise<net.Socket> {
  return new Promise<net.Socket>((res, rej) => {
    const s = net.connect({ host, port });
    s.once('connect', () => {
      s.off('error', rej);
      res(s);
    });
    s.once('error', rej);
  });
}
