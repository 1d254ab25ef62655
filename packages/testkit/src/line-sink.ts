import { Writable } from 'node:stream';

/** A stream that keeps every chunk written to it (a logger's lines), for a test to read back. */
export function lineSink(): { lines: string[]; destination: Writable } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { lines, destination };
}
