/** Progress lines on stderr while the benchmark runs (the table goes to stdout at the end). */

const started = performance.now();

function stamp(): string {
  return `[${((performance.now() - started) / 1000).toFixed(1).padStart(6)} s]`;
}

export function progress(message: string): void {
  process.stderr.write(`${stamp()} ${message}\n`);
}

/** A section heading in the progress output. */
export function section(title: string): void {
  process.stderr.write(`\n${stamp()} == ${title}\n`);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
