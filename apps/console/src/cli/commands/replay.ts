import { parseArgs } from 'node:util';
import { setTimeout as delay } from 'node:timers/promises';
import { amounts, money, OUTCOME_WORDS, planSentence, type ReplayOutcome } from '../../replays/words.ts';
import { at, cliApi, describeRefusal, type CliApi } from './_api.ts';
import { FILTER_OPTIONS, FILTER_USAGE, filterOf } from './_filter.ts';
import { table } from './_terminal.ts';

export const summary =
  'replay failed jobs by filter: replay list|plan|start|status|cancel ' +
  '(replays and their outcomes, dry run, start with --reason, progress, cancel)';

const USAGE = `usage:
  pnpm cli replay list   [--merchant REF] [--json]                               replays, newest first, with what became of their jobs
  pnpm cli replay plan   [filter] [--json]                         what replaying would do (changes nothing)
  pnpm cli replay start  [filter] --reason TEXT [--rate N] [--wait] [--json]
  pnpm cli replay status ID [--wait] [--json]                      progress (--wait: until it ends)
  pnpm cli replay cancel ID --reason TEXT [--json]
A replay re-runs the jobs that failed for good among the callbacks the filter matches.
${FILTER_USAGE}
  --rate N       jobs sent back per second (default CONSOLE_REPLAY_RATE; at most CONSOLE_REPLAY_MAX_RATE)
needs CONSOLE_OPERATOR_TOKEN (or CONSOLE_TOKEN) and CONSOLE_URL (or CONSOLE_HOST/CONSOLE_PORT), from the environment or .env
exit status: 0 done, 1 refused or failed (or, with --wait, a replay that did not finish), 2 usage`;

interface Sample {
  jobId: string;
  merchantOrderNo: string;
  amount: string | null;
  code: string | null;
  detail: string;
}
interface Plan {
  matched: number;
  classified: number;
  counts: Record<string, number>;
  samples: Record<string, Sample[]>;
  totals: {
    cls: string;
    kind: string;
    target: string | null;
    currency: string | null;
    orders: number;
    amount: string;
  }[];
}
interface Outcome {
  outcome: string;
  jobs: number;
  currency: string | null;
  amount: string;
}
interface Replay {
  id: number;
  filter?: { merchant?: string };
  operator: string;
  status: string;
  ratePerSecond: number;
  total: number;
  replayed: number;
  skipped: number;
  remaining: number;
  error: string | null;
  reason: string;
  endedBy: string | null;
  endReason: string | null;
  createdAt: string;
  finishedAt: string | null;
  outcomes: Outcome[];
}

const CLASSES: [string, string][] = [
  ['willApply', 'will apply (credit or finalise)'],
  ['alreadyApplied', 'already applied (no-op)'],
  ['willReview', 'will go to review'],
  ['stillPending', 'back to retrying with a fresh budget (Get order does not confirm yet)'],
  ['willFailAgain', 'will fail again at once (Get order does not answer, and no attempt follows)'],
  ['notReplayable', 'not replayable (gone, no longer failed)'],
];

function printPlan(plan: Plan): void {
  console.log(
    `${plan.matched} failed job(s) match${plan.classified < plan.matched ? `; the first ${plan.classified} classified` : ''}`,
  );
  console.log(planSentence(plan as Parameters<typeof planSentence>[0]));
  console.log(
    table(
      CLASSES.map(([k, label]) => [
        `  ${label}`,
        String(plan.counts[k] ?? 0),
        amounts(plan.totals.filter((t) => t.cls === k)),
      ]),
    ).join('\n'),
  );
  for (const [k, label] of CLASSES) {
    const samples = plan.samples[k] ?? [];
    if (samples.length === 0) continue;
    console.log(`\n${label}, e.g.:`);
    console.log(
      table(samples.map((s) => [`  ${s.merchantOrderNo}`, s.amount ?? '-', s.code ?? '', s.detail, s.jobId])).join(
        '\n',
      ),
    );
  }
}

/** What became of a replay's jobs, in the pages' words: "38 credited, 36,790.00 INR; 3 failed again". */
const outcomesLine = (r: Replay) =>
  r.outcomes.length === 0
    ? 'none sent back yet'
    : r.outcomes
        .map(
          (o) =>
            `${o.jobs} ${OUTCOME_WORDS[o.outcome as ReplayOutcome] ?? o.outcome}${o.currency && o.amount !== '0' ? `, ${money(o)}` : ''}`,
        )
        .join('; ');

/** "cancelled by ana: wrong window" for a cancelled replay, else empty. */
const endedLine = (r: Replay) =>
  r.status === 'cancelled' ? `cancelled by ${r.endedBy ?? 'unknown'}: ${r.endReason ?? '-'}` : '';

const progressLine = (r: Replay) =>
  `replay ${r.id} ${r.status}: ${r.replayed} of ${r.total} sent back, ${r.skipped} skipped, ` +
  `${r.remaining} to go at ${r.ratePerSecond}/s (by ${r.operator})${r.error ? `; last error: ${r.error}` : ''}\n` +
  `  what became of them: ${outcomesLine(r)}` +
  (endedLine(r) ? `\n  ${endedLine(r)}` : '');

/** `replay list`: the replays page as a table. */
async function list(api: CliApi, json: boolean, merchant?: string): Promise<number> {
  const q = merchant ? `?merchant=${encodeURIComponent(merchant)}` : '';
  const res = await api.call<{ replays: Replay[] }>('GET', `/api/replays${q}`);
  if (res.status !== 200) return refused(res);
  if (json) {
    console.log(JSON.stringify(res.body.replays));
    return 0;
  }
  if (res.body.replays.length === 0) {
    console.log('no replay yet');
    return 0;
  }
  // The merchant column once replays name one (two merchants or more: a replay by filter is per merchant).
  const named = res.body.replays.some((r) => r.filter?.merchant !== undefined);
  console.log(
    table([
      [
        'replay',
        ...(named ? ['merchant'] : []),
        'status',
        'sent back / total',
        'what became of them',
        'by',
        'reason',
        'started (UTC)',
        'ended',
      ],
      ...res.body.replays.map((r) => [
        String(r.id),
        ...(named ? [r.filter?.merchant ?? '-'] : []),
        r.status,
        `${r.replayed} / ${r.total}`,
        outcomesLine(r),
        r.operator,
        r.reason.slice(0, 60),
        at(r.createdAt),
        endedLine(r).slice(0, 80),
      ]),
    ]).join('\n'),
  );
  return 0;
}

async function follow(api: CliApi, id: number, json: boolean): Promise<number> {
  for (;;) {
    const res = await api.call<{ replay: Replay }>('GET', `/api/replays/${id}`);
    if (res.status !== 200) return refused(res);
    const r = res.body.replay;
    if (!json) console.error(progressLine(r));
    if (r.status !== 'running') {
      if (json) console.log(JSON.stringify(r));
      return r.status === 'finished' ? 0 : 1;
    }
    await delay(1000);
  }
}

/** A refusal of the console in one line on stderr (exit status 1). */
function refused(res: { status: number; body: unknown }): number {
  console.error(describeRefusal(res.status, res.body));
  return 1;
}

export async function run(args: string[], env: Record<string, string | undefined> = {}): Promise<number> {
  const [sub, ...rest] = args;
  if (!sub || !['list', 'plan', 'start', 'status', 'cancel'].includes(sub)) {
    console.error(
      sub === undefined || sub === '--help' || sub === '-h' ? USAGE : `unknown subcommand "${sub}"\n${USAGE}`,
    );
    return sub === '--help' || sub === '-h' ? 0 : 2;
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: rest,
      allowPositionals: true,
      options: {
        ...FILTER_OPTIONS,
        reason: { type: 'string' },
        rate: { type: 'string' },
        wait: { type: 'boolean' },
        json: { type: 'boolean' },
      },
    });
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const json = values.json ?? false;
  const filter = filterOf(values);
  if (sub === 'list') {
    const { merchant, ...rest } = filter;
    if (positionals.length > 0 || Object.keys(rest).length > 0) {
      console.error(`replay list takes no filter but --merchant\n${USAGE}`);
      return 2;
    }
    return list(cliApi(env), json, typeof merchant === 'string' ? merchant : undefined);
  }

  if (sub === 'plan' || sub === 'start') {
    if (positionals.length > 0) {
      console.error(`unexpected ${positionals.join(' ')}\n${USAGE}`);
      return 2;
    }
    if (sub === 'start' && !values.reason?.trim()) {
      console.error('--reason is required: say why (it goes to the audit trail)');
      return 2;
    }
    if (values.rate !== undefined && !/^\d{1,5}$/.test(values.rate)) {
      console.error(`--rate expects a whole number of jobs per second, got ${JSON.stringify(values.rate)}`);
      return 2;
    }
    const api = cliApi(env);
    const body =
      sub === 'plan'
        ? { filter, dryRun: true }
        : { filter, reason: values.reason, ...(values.rate ? { ratePerSecond: Number(values.rate) } : {}) };
    const res = await api.call<{ plan?: Plan; replay?: Replay }>('POST', '/api/replays', body);
    if (res.status !== 200 && res.status !== 202) return refused(res);
    if (res.body.plan) {
      if (json) console.log(JSON.stringify(res.body.plan));
      else printPlan(res.body.plan);
      return 0;
    }
    const replay = res.body.replay!;
    if (json && !values.wait) console.log(JSON.stringify(replay));
    else if (!json)
      console.log(
        `started ${progressLine(replay)}\nfollow: pnpm cli replay status ${replay.id} --wait   ` +
          `stop: pnpm cli replay cancel ${replay.id} --reason "..."`,
      );
    return values.wait ? follow(api, replay.id, json) : 0;
  }

  const id = positionals[0];
  if (positionals.length !== 1 || !/^\d{1,15}$/.test(id!)) {
    console.error(`${sub} needs one replay id\n${USAGE}`);
    return 2;
  }
  const api = cliApi(env);
  if (sub === 'status') {
    if (values.wait) return follow(api, Number(id), json);
    const res = await api.call<{ replay: Replay }>('GET', `/api/replays/${id}`);
    if (res.status !== 200) return refused(res);
    console.log(json ? JSON.stringify(res.body.replay) : progressLine(res.body.replay));
    return 0;
  }
  if (!values.reason?.trim()) {
    console.error('--reason is required: say why (it goes to the audit trail)');
    return 2;
  }
  const res = await api.call<{ replay: Replay }>('POST', `/api/replays/${id}/cancel`, { reason: values.reason });
  if (res.status !== 200) return refused(res);
  console.log(json ? JSON.stringify(res.body.replay) : progressLine(res.body.replay));
  return 0;
}
