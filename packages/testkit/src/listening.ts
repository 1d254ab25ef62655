import { readFileSync } from 'node:fs';

/**
 * The local addresses a TCP port listens on, read from /proc/net/tcp and tcp6 (Linux): e.g. ['127.0.0.1'] or
 * ['0.0.0.0'] or ['::']. Empty when nothing listens on it.
 */
export function listeningAddresses(port: number): string[] {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const out: string[] = [];
  for (const [file, v6] of [
    ['/proc/net/tcp', false],
    ['/proc/net/tcp6', true],
  ] as const) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      if (!local || state !== '0A') continue; // 0A = LISTEN
      const [addr, p] = local.split(':');
      if (p !== hexPort || !addr) continue;
      out.push(v6 ? ipv6(addr) : ipv4(addr));
    }
  }
  return out;
}

function ipv4(hex: string): string {
  // Little-endian on x86: 0100007F is 127.0.0.1.
  return [3, 2, 1, 0].map((i) => parseInt(hex.slice(i * 2, i * 2 + 2), 16)).join('.');
}

function ipv6(hex: string): string {
  if (/^0+$/.test(hex)) return '::';
  if (hex === '00000000000000000000000001000000') return '::1';
  if (hex.startsWith('0000000000000000FFFF0000')) return `::ffff:${ipv4(hex.slice(24))}`;
  return hex;
}
