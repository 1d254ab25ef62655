import type { NodeProcess } from './node-process.ts';

/** One line a process wrote, with the stream it came on. */
export interface OutputLine {
  stream: 'stdout' | 'stderr';
  text: string;
}

/**
 * Everything a process writes to stdout and stderr, split into lines (call right after starting it: output written
 * before is not seen). `lines()` includes a last line without its newline.
 */
export function captureLines(proc: NodeProcess): { lines(): OutputLine[] } {
  const buffers = { stdout: '', stderr: '' };
  proc.child.stdout?.on('data', (c: Buffer) => (buffers.stdout += c.toString('utf8')));
  proc.child.stderr?.on('data', (c: Buffer) => (buffers.stderr += c.toString('utf8')));
  return {
    lines: () =>
      (['stdout', 'stderr'] as const).flatMap((stream) =>
        buffers[stream]
          .split('\n')
          .filter((text) => text.trim() !== '')
          .map((text) => ({ stream, text })),
      ),
  };
}

/** A parsed JSON log line, or the reason it is not one. */
export function parseLine(
  line: OutputLine,
): { ok: true; value: Record<string, unknown> } | { ok: false; line: string } {
  try {
    const value: unknown = JSON.parse(line.text);
    if (value && typeof value === 'object' && !Array.isArray(value))
      return { ok: true, value: value as Record<string, unknown> };
  } catch {
    // reported below
  }
  return { ok: false, line: `${line.stream}: ${line.text.slice(0, 200)}` };
}
