// First, before a command that loads drizzle-orm (the catalog's) is resolved: commands come by import().
import '@mcb/core/module-hooks';
import { readdirSync } from 'node:fs';
import { coerceError } from '@mcb/core/errors';

/**
 * `pnpm cli <command> [args]`. Each command is a module in ./commands exporting
 * `summary` (one line) and `run(args, env): Promise<number>` (the exit status); only this main reads process.env.
 */
interface CommandModule {
  summary: string;
  run(args: string[], env: Record<string, string | undefined>): Promise<number>;
}

const commandsDir = new URL('./commands/', import.meta.url);
const available = readdirSync(commandsDir)
  .filter((f) => f.endsWith('.ts') && !f.startsWith('_'))
  .map((f) => f.slice(0, -3))
  .sort();

async function load(name: string): Promise<CommandModule> {
  return (await import(new URL(`${name}.ts`, commandsDir).href)) as CommandModule;
}

async function usage(): Promise<string> {
  const lines = ['usage: pnpm cli <command> [options]', '', 'commands:'];
  for (const name of available) lines.push(`  ${name.padEnd(10)} ${(await load(name)).summary}`);
  return lines.join('\n');
}

const [name, ...args] = process.argv.slice(2);
try {
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(await usage());
    process.exitCode = name ? 0 : 2;
  } else if (!available.includes(name)) {
    console.error(`unknown command "${name}"\n\n${await usage()}`);
    process.exitCode = 2;
  } else {
    process.exitCode = await (await load(name)).run(args, process.env);
  }
} catch (e) {
  console.error(`cli ${name}: ${coerceError(e).message}`);
  process.exitCode = 1;
}
