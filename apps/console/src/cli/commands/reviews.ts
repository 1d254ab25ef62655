import { parseArgs } from 'node:util';
import type { ReviewList, ReviewView } from '../../reviews/queries.ts';
import { answer, at, cliApi } from './_api.ts';
import { reverifiedLine } from '../../reviews/words.ts';
import { indentedValue, terminalText } from './_terminal.ts';

export const summary =
  'reviews list [--all | --status S] [--order MO] | reverify <id> --reason "..." | ' +
  'dismiss <id> --reason "..." [--note "..."]';

const USAGE = `usage: pnpm cli reviews list [--all | --status open|resolved|dismissed] [--order <merchantOrderNo>] \
[--merchant REF] [--limit N] [--before ID] [--json]
         (open reviews by default, as the Reviews page; --all: every status)
       pnpm cli reviews reverify <id> --reason "why now" [--json]
       pnpm cli reviews dismiss <id> --reason "why (kept as the note)" [--note "note, when it differs"] [--json]
  Every action needs a reason; it is recorded in the audit trail with your name (CONSOLE_OPERATOR_TOKEN).`;

const OPTIONS = {
  status: { type: 'string' },
  all: { type: 'boolean' },
  order: { type: 'string' },
  merchant: { type: 'string' },
  limit: { type: 'string' },
  before: { type: 'string' },
  reason: { type: 'string' },
  note: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean' },
} as const;

export function renderReview(r: ReviewView): string {
  const details = Object.entries(r.details ?? {})
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
  // Every stored value escaped (a note or reason may hold anything someone typed); one that spans lines is printed
  // as indented continuation lines, so it cannot draw a line of its own.
  return [
    terminalText(
      `review ${r.id}  ${r.status.toUpperCase()}  ${r.reasonCode}  ` +
        `order ${r.merchant ? `${r.merchant}/` : ''}${r.merchantOrderNo} (platform ${r.orderNo}, ${r.kind} state ${r.state})  ` +
        `opened ${at(r.createdAt)}${r.occurrences > 1 ? `  x${r.occurrences}` : ''}`,
    ),
    indentedValue('  ', r.reason, '    '),
    indentedValue('  what happened: ', r.story.happened, '    '),
    indentedValue('  next step: ', r.story.nextStep, '    '),
    ...(details ? [`  compared: ${terminalText(details)}`] : []),
    ...(r.status === 'dismissed'
      ? [terminalText(`  dismissed by ${r.closedBy ?? 'unknown'}${r.closedAt ? `, ${at(r.closedAt)}` : ''}`)]
      : []),
    ...(r.note ? [indentedValue('  note: ', r.note, '    ')] : []),
  ].join('\n');
}

export async function run(args: string[], env: Record<string, string | undefined> = {}): Promise<number> {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>;
  try {
    parsed = parseArgs({ args, options: OPTIONS, allowPositionals: true });
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  const { values: v, positionals } = parsed;
  const [sub, id, ...rest] = positionals;
  if (v.help) {
    console.log(USAGE);
    return 0;
  }
  if (sub === 'list' && id === undefined) {
    const q = new URLSearchParams();
    if (v.all && v.status) {
      console.error(`--all and --status exclude each other\n${USAGE}`);
      return 2;
    }
    // Open ones by default, as the Reviews page: what waits for a decision (the API lists every status).
    if (!v.all) q.set('status', v.status ?? 'open');
    if (v.order) q.set('merchantOrderNo', v.order);
    if (v.merchant) q.set('merchant', v.merchant);
    if (v.limit) q.set('limit', v.limit);
    if (v.before) q.set('before', v.before);
    const res = await cliApi(env).call<ReviewList>('GET', `/api/reviews${q.size ? `?${q}` : ''}`);
    return answer(res, v.json, (list) =>
      [
        ...(list.reviews.length === 0
          ? [v.all ? 'no reviews' : `no ${v.status ?? 'open'} reviews`]
          : list.reviews.map(renderReview)),
        ...(list.nextBefore !== null ? [`(more: --before ${list.nextBefore})`] : []),
      ].join('\n'),
    );
  }
  if ((sub === 'reverify' || sub === 'dismiss') && id && /^\d+$/.test(id) && rest.length === 0) {
    // The reason is sent as given (even absent): the console refuses an action without one, in one place.
    const body = sub === 'reverify' ? { reason: v.reason } : { reason: v.reason, ...(v.note ? { note: v.note } : {}) };
    const res = await cliApi(env).call<{ outcome?: string; review: ReviewView }>(
      'POST',
      `/api/reviews/${id}/${sub}`,
      body,
    );
    return answer(
      res,
      v.json,
      (b) =>
        `${sub === 'reverify' ? `re-verified: ${reverifiedLine(b.outcome, b.review.status)}` : 'dismissed: nothing credited'}` +
        `\n${renderReview(b.review)}`,
    );
  }
  console.error(USAGE);
  return 2;
}
