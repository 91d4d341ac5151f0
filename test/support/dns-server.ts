/**
 * A tiny authoritative DNS server on loopback UDP for tests (RFC 1035 wire format): A and SRV
 * records from a table the test fills. Unknown names get NXDOMAIN, known names without the asked
 * type an empty answer (NODATA), as real servers do.
 */
import dgram from 'node:dgram';

export type DnsRecord = { type: 'A'; address: string } | { type: 'SRV'; priority: number; weight: number; port: number; target: string };

const TYPE = { A: 1, SRV: 33 } as const;

function encodeName(name: string): Buffer {
  const parts = name.replace(/\.$/, '').split('.').filter(Boolean);
  return Buffer.concat([...parts.map((p) => Buffer.concat([Buffer.from([p.length]), Buffer.from(p, 'ascii')])), Buffer.from([0])]);
}

export class DnsServer {
  readonly records = new Map<string, DnsRecord[]>();
  readonly queries: { name: string; type: number }[] = [];
  private readonly sock = dgram.createSocket('udp4');
  port = 0;

  async start(): Promise<void> {
    this.sock.on('message', (q, rinfo) => {
      const res = this.answer(q);
      if (res) this.sock.send(res, rinfo.port, rinfo.address);
    });
    await new Promise<void>((r) => this.sock.bind(0, '127.0.0.1', r));
    this.port = this.sock.address().port;
  }

  private answer(q: Buffer): Buffer | null {
    if (q.length < 17) return null;
    let at = 12;
    const labels: string[] = [];
    while (at < q.length && q[at] !== 0) {
      const len = q[at]!;
      labels.push(q.toString('ascii', at + 1, at + 1 + len));
      at += 1 + len;
    }
    const qtype = q.readUInt16BE(at + 1);
    const question = q.subarray(12, at + 5);
    const name = labels.join('.').toLowerCase();
    this.queries.push({ name, type: qtype });
    const known = this.records.get(name);
    const answers = (known ?? [])
      .filter((r) => TYPE[r.type] === qtype)
      .map((r) => {
        const rdata =
          r.type === 'A'
            ? Buffer.from(r.address.split('.').map(Number))
            : Buffer.concat([Buffer.from([r.priority >> 8, r.priority & 255, r.weight >> 8, r.weight & 255, r.port >> 8, r.port & 255]), encodeName(r.target)]);
        const head = Buffer.alloc(12);
        head.writeUInt16BE(0xc00c, 0); // pointer to the question's name
        head.writeUInt16BE(qtype, 2);
        head.writeUInt16BE(1, 4); // IN
        head.writeUInt32BE(60, 6);
        head.writeUInt16BE(rdata.length, 10);
        return Buffer.concat([head, rdata]);
      });
    const h = Buffer.alloc(12);
    h.writeUInt16BE(q.readUInt16BE(0), 0);
    h.writeUInt16BE(0x8400 | (q.readUInt16BE(2) & 0x0100) | (known ? 0 : 3), 2); // QR, AA, RD copied, NXDOMAIN when unknown
    h.writeUInt16BE(1, 4);
    h.writeUInt16BE(answers.length, 6);
    return Buffer.concat([h, question, ...answers]);
  }

  stop(): Promise<void> {
    return new Promise((r) => this.sock.close(() => r()));
  }
}
