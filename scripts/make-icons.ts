/**
 * Draws the desktop app's icons into build/ (`node bin/run-ts.mjs scripts/make-icons.ts`): a
 * plain PNG encoder (RFC 2083: IHDR, one IDAT, IEND) and an ICO container holding PNG images
 * (Windows Vista and later read PNG entries). No image tool needed; the committed icons are this
 * script's output.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';

const BUILD = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'build');
type RGBA = [number, number, number, number];

function chunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(zlib.crc32(td));
  return Buffer.concat([len, td, crc]);
}

export function png(size: number, pixel: (x: number, y: number) => RGBA): Buffer {
  const raw = Buffer.alloc(size * (size * 4 + 1));
  for (let y = 0; y < size; y++) {
    raw[y * (size * 4 + 1)] = 0; // filter: none
    for (let x = 0; x < size; x++) raw.set(pixel(x, y), y * (size * 4 + 1) + 1 + x * 4);
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(size, 0);
  ihdr.writeUInt32BE(size, 4);
  ihdr.set([8, 6, 0, 0, 0], 8); // 8-bit RGBA
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(raw, { level: 9 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

export function ico(images: { size: number; data: Buffer }[]): Buffer {
  const head = Buffer.alloc(6 + 16 * images.length);
  head.writeUInt16LE(0, 0);
  head.writeUInt16LE(1, 2); // icon
  head.writeUInt16LE(images.length, 4);
  let offset = head.length;
  images.forEach((img, i) => {
    const e = 6 + 16 * i;
    head[e] = img.size >= 256 ? 0 : img.size; // 0 means 256
    head[e + 1] = img.size >= 256 ? 0 : img.size;
    head.writeUInt16LE(1, e + 4); // planes
    head.writeUInt16LE(32, e + 6); // bits per pixel
    head.writeUInt32LE(img.data.length, e + 8);
    head.writeUInt32LE(offset, e + 12);
    offset += img.data.length;
  });
  return Buffer.concat([head, ...images.map((i) => i.data)]);
}

/** Anti-aliased coverage of a disc of radius r at (cx, cy) for the pixel (x, y). */
function disc(x: number, y: number, cx: number, cy: number, r: number): number {
  const d = Math.hypot(x + 0.5 - cx, y + 0.5 - cy);
  return Math.max(0, Math.min(1, r - d + 0.5));
}

function blend(a: RGBA, b: RGBA, t: number): RGBA {
  return [0, 1, 2, 3].map((i) => Math.round(a[i]! + (b[i]! - a[i]!) * t)) as RGBA;
}

/** The app icon: a deep blue disc with three white signal arcs (a voice appliance). */
function appIcon(size: number): Buffer {
  const c = size / 2;
  const blue: RGBA = [21, 67, 130, 255];
  const white: RGBA = [255, 255, 255, 255];
  const none: RGBA = [0, 0, 0, 0];
  return png(size, (x, y) => {
    let p = blend(none, blue, disc(x, y, c, c, size * 0.47));
    const d = Math.hypot(x + 0.5 - c, y + 0.5 - c * 1.25);
    const angle = Math.atan2(y + 0.5 - c * 1.25, x + 0.5 - c);
    const inArc = angle < -Math.PI / 4 && angle > (-3 * Math.PI) / 4;
    for (const r of [0.12, 0.24, 0.36]) {
      const w = size * 0.045;
      const cov = Math.max(0, Math.min(1, w / 2 - Math.abs(d - size * r) + 0.5));
      if (inArc && cov > 0) p = blend(p, white, cov);
    }
    p = blend(p, white, disc(x, y, c, c * 1.25, size * 0.05));
    return p;
  });
}

const TRAY: Record<string, RGBA> = {
  starting: [230, 160, 20, 255],
  ready: [30, 150, 70, 255],
  degraded: [200, 60, 40, 255],
  stopped: [130, 130, 130, 255],
};

function trayIcon(color: RGBA, size = 32): Buffer {
  const c = size / 2;
  return png(size, (x, y) => blend(blend([0, 0, 0, 0], [255, 255, 255, 255], disc(x, y, c, c, size * 0.46)), color, disc(x, y, c, c, size * 0.38)));
}

export function makeIcons(dir = BUILD): string[] {
  const written: string[] = [];
  const write = (rel: string, data: Buffer) => {
    const p = path.join(dir, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, data);
    written.push(rel);
  };
  write('icon.png', appIcon(1024));
  for (const s of [16, 32, 48, 64, 128, 256, 512]) write(`icons/${s}x${s}.png`, appIcon(s));
  write('icon.ico', ico([16, 32, 48, 256].map((s) => ({ size: s, data: appIcon(s) }))));
  for (const [state, color] of Object.entries(TRAY)) write(`tray/tray-${state}.png`, trayIcon(color));
  return written;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) console.log(makeIcons().join('\n'));
