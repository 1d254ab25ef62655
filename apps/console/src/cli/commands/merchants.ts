import { PAUSE_USAGE, runMerchantPause } from './_merchant-pause.ts';

export const summary = 'merchants pause <ref> --reason "..." | resume <ref> --reason "..."';

export async function run(args: string[], env: Record<string, string | undefined> = {}): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === 'pause' || sub === 'resume') return runMerchantPause(sub, rest, env);
  if (sub === '--help' || sub === '-h') {
    console.log(PAUSE_USAGE);
    return 0;
  }
  console.error(PAUSE_USAGE);
  return 2;
}
