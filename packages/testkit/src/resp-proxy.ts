/**
 * A Redis protocol proxy a test puts between a client and a real redis-server, to see and steer the commands that
 * cross it: hold one until the test has done something else (drive a race deterministically), answer one itself
 * (a WAITAOF that a Redis 7.0 lacks), rewrite a reply, or cut the connection at an exact command. Replies keep
 * their commands' order, whoever answers them. RESP2 only (what ioredis speaks by default).
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import RedisParser from 'redis-parser';

/** A reply value as redis-parser returns it with buffers on: nested arrays of these, or null. */
export type RespValue = Buffer | number | null | Error | RespValue[];

/** What to do with one command. */
export type CommandAction =
  | { forward: true; mapReply?: (reply: RespValue) => RespValue }
  | { reply: RespValue }
  /** Close the client's connection before this command reaches Redis (as a network cut would). */
  | { cut: true };

/**
 * Decides each command, in the order the client sent them. `args[0]` is the command name, upper-cased. A returned
 * promise holds that command, and every one after it on the connection, until it settles.
 */
export type CommandHook = (args: string[]) => CommandAction | Promise<CommandAction>;

export interface RespProxy {
  url: string;
  port: number;
  /** Commands seen, per name (upper-case), across connections. */
  counts: Map<string, number>;
  close(): Promise<void>;
}

const FORWARD: CommandAction = { forward: true };

/** RESP2 encoding of a reply. */
export function encodeResp(value: RespValue): Buffer {
  if (value === null) return Buffer.from('$-1\r\n');
  if (typeof value === 'number') return Buffer.from(`:${value}\r\n`);
  if (value instanceof Error) return Buffer.from(`-${value.message.replace(/\r?\n/g, ' ')}\r\n`);
  if (Array.isArray(value)) return Buffer.concat([Buffer.from(`*${value.length}\r\n`), ...value.map(encodeResp)]);
  return Buffer.concat([Buffer.from(`$${value.length}\r\n`), value, Buffer.from('\r\n')]);
}

interface Pending {
  /** Known at once (answered by the proxy) or once Redis replies. */
  reply?: RespValue;
  mapReply?: (reply: RespValue) => RespValue;
}

function bridge(
  client: Socket,
  target: { host: string; port: number },
  hook: CommandHook,
  counts: Map<string, number>,
): void {
  const upstream = connect(target);
  const pending: Pending[] = [];
  let chain = Promise.resolve();
  const closeBoth = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', closeBoth);
  upstream.on('error', closeBoth);
  client.on('close', () => upstream.destroy());
  upstream.on('close', () => client.destroy());

  // Replies go back strictly in command order: a proxy answer waits behind Redis's answers to earlier commands.
  const flush = () => {
    while (pending.length > 0 && pending[0]!.reply !== undefined) {
      const p = pending.shift()!;
      client.write(encodeResp(p.mapReply ? p.mapReply(p.reply!) : p.reply!));
    }
  };
  const fromRedis = new RedisParser({
    returnBuffers: true,
    returnReply: (reply: RespValue) => {
      const waiting = pending.find((p) => p.reply === undefined);
      if (waiting) waiting.reply = reply;
      flush();
    },
    returnError: (err: Error) => {
      const waiting = pending.find((p) => p.reply === undefined);
      if (waiting) waiting.reply = err;
      flush();
    },
    returnFatalError: closeBoth,
  });
  upstream.on('data', (chunk) => fromRedis.execute(chunk));

  const handle = async (raw: RespValue[]) => {
    const args = raw.map((a) => (Buffer.isBuffer(a) ? a.toString('utf8') : String(a)));
    args[0] = (args[0] ?? '').toUpperCase();
    counts.set(args[0], (counts.get(args[0]) ?? 0) + 1);
    const action = await hook(args);
    if ('cut' in action) return closeBoth();
    if ('reply' in action) {
      pending.push({ reply: action.reply });
      return flush();
    }
    pending.push({ mapReply: action.mapReply });
    upstream.write(encodeResp(raw));
  };
  const fromClient = new RedisParser({
    returnBuffers: true,
    // Commands are handled one after another, so a held command holds the ones behind it.
    returnReply: (command: RespValue) => {
      chain = chain.then(() => handle(command as RespValue[])).catch(closeBoth);
    },
    returnError: closeBoth,
    returnFatalError: closeBoth,
  });
  client.on('data', (chunk) => fromClient.execute(chunk));
}

/**
 * Start a proxy on a free loopback port in front of `targetUrl` (a test's own redis-server). Without a hook it only
 * forwards and counts.
 */
export async function startRespProxy(targetUrl: string, hook: CommandHook = () => FORWARD): Promise<RespProxy> {
  const target = new URL(targetUrl);
  const counts = new Map<string, number>();
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    bridge(client, { host: target.hostname, port: Number(target.port || 6379) }, hook, counts);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    counts,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
