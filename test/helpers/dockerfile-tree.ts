/**
 * The file tree a Dockerfile builds, made without a Docker engine: each stage is a folder, each COPY copies from the
 * build context (filtered by .dockerignore, as `docker build` sends it) or from an earlier stage, each RUN runs in the
 * stage's WORKDIR with the stage's ENV. An instruction this cannot follow throws, so a Dockerfile change that
 * outgrows it fails the test rather than being skipped. Only `npm install -g pnpm@X` is not run: the pnpm on PATH
 * must be that version (checked).
 */
import { execFileSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { dirname, join, posix, relative } from 'node:path';

/** One stage as built: its root folder (absolute image paths live under it), WORKDIR, ENV, USER and CMD. */
export interface BuiltStage {
  name: string;
  root: string;
  workdir: string;
  env: Record<string, string>;
  user: string | undefined;
  cmd: string[] | undefined;
  /** Host path of the stage's WORKDIR. */
  hostWorkdir: string;
}

/** Instructions with their arguments, continuation lines joined and comments dropped. */
export function parseDockerfile(text: string): { op: string; args: string }[] {
  const out: { op: string; args: string }[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    if (/^\s*#/.test(raw)) continue;
    const line = pending + raw;
    if (/\\\s*$/.test(line)) {
      pending = line.replace(/\\\s*$/, ' ');
      continue;
    }
    pending = '';
    const m = /^\s*(\w+)\s+(.*)$/.exec(line);
    if (m) out.push({ op: m[1]!.toUpperCase(), args: m[2]!.trim() });
  }
  return out;
}

/** A .dockerignore pattern as a regular expression over slash-separated paths (Go's filepath.Match plus `**`). */
function patternToRegExp(pattern: string): RegExp {
  let re = '';
  const p = posix.normalize(pattern.replace(/^\/+/, ''));
  for (let i = 0; i < p.length; i++) {
    const c = p[i]!;
    if (c === '*' && p[i + 1] === '*') {
      re += '.*';
      i++;
      if (p[i + 1] === '/') i++;
    } else if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/** Whether `.dockerignore` keeps `path` (relative, slash-separated) out of the build context. */
export function dockerIgnores(rules: string, path: string): boolean {
  const patterns = rules
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) =>
      l.startsWith('!') ? { keep: true, re: patternToRegExp(l.slice(1)) } : { keep: false, re: patternToRegExp(l) },
    );
  // A path is out when it, or a folder above it, matches; the last matching pattern decides (Docker's rule).
  const parts = path.split('/');
  let ignored = false;
  for (let n = 1; n <= parts.length; n++) {
    const prefix = parts.slice(0, n).join('/');
    for (const { keep, re } of patterns) if (re.test(prefix)) ignored = !keep;
    if (ignored) return true;
  }
  return ignored;
}

/** The build context `docker build <dir>` would send: every file of `dir` that .dockerignore does not exclude. */
export function buildContext(dir: string, into: string): string[] {
  const rules = existsSync(join(dir, '.dockerignore')) ? readFileSync(join(dir, '.dockerignore'), 'utf8') : '';
  const sent: string[] = [];
  const walk = (sub: string) => {
    for (const entry of readdirSync(join(dir, sub), { withFileTypes: true })) {
      const rel = sub ? `${sub}/${entry.name}` : entry.name;
      if (dockerIgnores(rules, rel)) continue;
      if (entry.isDirectory()) walk(rel);
      else {
        mkdirSync(join(into, sub), { recursive: true });
        cpSync(join(dir, rel), join(into, rel), { verbatimSymlinks: true });
        sent.push(rel);
      }
    }
  };
  walk('');
  return sent;
}

/**
 * `COPY --from=<stage>` of a folder, as hard links: the same bytes at a fraction of the time (a stage's node_modules is
 * some 200 MB); no later step writes to the stage copied from. Symbolic links (pnpm's node_modules) are recreated.
 */
function linkTree(source: string, target: string): void {
  mkdirSync(target, { recursive: true });
  for (const entry of readdirSync(source, { withFileTypes: true })) {
    const from = join(source, entry.name);
    const to = join(target, entry.name);
    if (entry.isDirectory()) {
      linkTree(from, to);
      continue;
    }
    // COPY replaces what the target holds.
    rmSync(to, { force: true });
    if (entry.isSymbolicLink()) symlinkSync(readlinkSync(from), to);
    else linkSync(from, to);
  }
}

/** JSON-array (exec) form or shell form of CMD/RUN. */
function commandOf(args: string): string[] {
  return args.startsWith('[') ? (JSON.parse(args) as string[]) : ['sh', '-c', args];
}

/** Options of {@link buildDockerfileTree}. */
export interface BuildTreeOptions {
  /** The build context (a clean clone). */
  context: string;
  /** Where the stages are built. */
  workspace: string;
  /** Added to every RUN's environment (e.g. `npm_config_prefer_offline`), after PATH and the stage's ENV. */
  runEnv?: Record<string, string>;
  /** Each RUN as it runs, for the test's log. */
  onStep?: (line: string) => void;
}

/** Follow the Dockerfile of `context` and return its last stage. */
export function buildDockerfileTree(options: BuildTreeOptions): BuiltStage {
  const contextDir = join(options.workspace, 'context');
  buildContext(options.context, contextDir);
  const stages = new Map<string, BuiltStage>();
  let stage: BuiltStage | undefined;
  const host = (s: BuiltStage, imagePath: string) => join(s.root, posix.resolve(s.workdir, imagePath));
  const current = () => {
    if (!stage) throw new Error('Dockerfile: an instruction before FROM');
    return stage;
  };
  for (const { op, args } of parseDockerfile(readFileSync(join(options.context, 'Dockerfile'), 'utf8'))) {
    switch (op) {
      case 'FROM': {
        const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
        if (!m) throw new Error(`Dockerfile: FROM ${args}`);
        const name = m[2] ?? `stage${stages.size}`;
        const root = join(options.workspace, 'stages', name);
        mkdirSync(root, { recursive: true });
        const base = stages.get(m[1]!);
        if (base) cpSync(base.root, root, { recursive: true, verbatimSymlinks: true });
        stage = {
          name,
          root,
          workdir: base?.workdir ?? '/',
          env: { ...base?.env },
          user: base?.user,
          cmd: base?.cmd,
          hostWorkdir: root,
        };
        stages.set(name, stage);
        break;
      }
      case 'WORKDIR': {
        const s = current();
        s.workdir = posix.resolve(s.workdir, args);
        s.hostWorkdir = host(s, '.');
        mkdirSync(s.hostWorkdir, { recursive: true });
        break;
      }
      case 'ENV': {
        const m = /^(\w+)[= ](.*)$/.exec(args);
        if (!m) throw new Error(`Dockerfile: ENV ${args} (one NAME=value per ENV line)`);
        current().env[m[1]!] = m[2]!.replace(/^"(.*)"$/, '$1');
        break;
      }
      case 'USER':
        current().user = args;
        break;
      case 'CMD':
        current().cmd = commandOf(args);
        break;
      case 'COPY': {
        const s = current();
        const words = args.split(/\s+/);
        let from: BuiltStage | undefined;
        while (words[0]?.startsWith('--')) {
          const flag = words.shift()!;
          const m = /^--from=(\S+)$/.exec(flag);
          if (m) {
            from = stages.get(m[1]!);
            if (!from) throw new Error(`Dockerfile: COPY ${flag}: no such stage`);
          } else if (!flag.startsWith('--chown=') && !flag.startsWith('--chmod='))
            throw new Error(`Dockerfile: COPY ${flag} not supported here`);
        }
        const dest = words.pop()!;
        for (const src of words) {
          if (/[*?[]/.test(src)) throw new Error(`Dockerfile: COPY ${src}: wildcards not supported here`);
          const source = from ? join(from.root, posix.resolve('/', src)) : join(contextDir, posix.normalize(src));
          if (!existsSync(source))
            throw new Error(`Dockerfile: COPY ${src}: not in the ${from ? `stage ${from.name}` : 'build context'}`);
          const target = host(s, dest);
          if (statSync(source).isDirectory()) {
            if (from) linkTree(source, target);
            else cpSync(source, target, { recursive: true, verbatimSymlinks: true });
          } else {
            const into = dest.endsWith('/') || words.length > 1 ? join(target, posix.basename(src)) : target;
            mkdirSync(dirname(into), { recursive: true });
            cpSync(source, into);
          }
        }
        break;
      }
      case 'RUN': {
        const s = current();
        const pnpmPin = /^npm install -g pnpm@(\S+)$/.exec(args);
        if (pnpmPin) {
          const have = execFileSync('pnpm', ['--version'], { encoding: 'utf8' }).trim();
          if (have !== pnpmPin[1]) throw new Error(`Dockerfile installs pnpm ${pnpmPin[1]}, this machine runs ${have}`);
          options.onStep?.(`RUN ${args} (pnpm ${have} on PATH)`);
          break;
        }
        options.onStep?.(`RUN ${args}`);
        const [cmd, ...argv] = commandOf(args);
        execFileSync(cmd!, argv, {
          cwd: s.hostWorkdir,
          env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...s.env, ...options.runEnv },
          stdio: ['ignore', 'pipe', 'pipe'],
          timeout: 120_000,
        });
        break;
      }
      case 'ARG':
      case 'LABEL':
      case 'EXPOSE':
        break;
      default:
        throw new Error(
          `Dockerfile: ${op} is not followed by this test's builder; teach test/helpers/dockerfile-tree.ts`,
        );
    }
  }
  return current();
}

/** Paths under `dir`, relative, for assertions on what reached the image. */
export function relativeFiles(dir: string, sub = ''): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(dir, sub), { withFileTypes: true })) {
    const rel = sub ? `${sub}/${entry.name}` : entry.name;
    if (entry.isDirectory() && entry.name !== 'node_modules') out.push(...relativeFiles(dir, rel));
    else if (!entry.isDirectory()) out.push(relative(dir, join(dir, rel)));
  }
  return out;
}
