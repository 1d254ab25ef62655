import { formatDecimal } from '@mcb/core/money';
import { FORGERY_CODES } from './forgery-codes.ts';

/**
 * What a re-verify came to, in one sentence for the operator (the page's flash line and `pnpm cli reviews reverify`).
 * `duplicate` alone does not say whether the review closed: it closes only when Get order confirms every event of it,
 * so a forgery of an applied pair comes back `duplicate` and stays open; the review's status after the action says.
 */
export function reverifiedLine(outcome: string | undefined, reviewStatus: string): string {
  if (outcome === 'applied') return 'Get order confirmed it: credited (or finalised) once, review resolved.';
  if (outcome === 'duplicate') {
    return reviewStatus === 'open'
      ? 'It had been applied already (nothing credited again), but this review holds an event Get order does not ' +
          'confirm: it stays open.'
      : 'It had been applied already: nothing credited again, review resolved.';
  }
  if (outcome === 'review') return 'Get order still does not confirm it: the review stays open with the new reason.';
  return `${outcome ?? 'no outcome'} (review ${reviewStatus}).`;
}

/** What a review means for a person: what happened, in words, and what to do next (the page, the API, the CLI). */
export interface ReviewStory {
  /** A callback of this review claimed what Get order or what was applied contradicts (a FORGERY_CODES code). */
  suspectedForgery: boolean;
  happened: string;
  nextStep: string;
  /** The command the next step starts with, when it has one (the key rotation's). */
  command: string | null;
}

/** What {@link reviewStory} reads of a review: its view's fields. */
export interface ReviewFacts {
  kind: 'payin' | 'payout';
  state: number;
  reasonCode: string;
  reason: string;
  details: Record<string, unknown> | null;
  status: 'open' | 'resolved' | 'dismissed';
  createdAt: string;
  attempts: readonly { outcome: string }[];
  /** Each distinct event of the review, with its own finding (a forged one may land in a review opened otherwise). */
  events: readonly { reasonCode: string; reason: string }[];
}

const FIELD_WORDS: Record<string, string> = {
  merchantNo: 'merchant',
  merchantOrderNo: 'merchant order number',
  kind: 'kind',
  fiatAmount: 'amount',
};

// A stored value came from a callback anyone may send: no control or bidi character reaches a page or a terminal.
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
const plain = (v: unknown): string => String(v ?? 'none').replace(UNSAFE, '?');

/** An amount as people read it ("12,500.00"), or the value as stored when it is not a decimal. */
function amount(v: unknown): string {
  try {
    return formatDecimal(String(v));
  } catch {
    return plain(v);
  }
}

/** The key rotation of docs/runbook.md, "Key rotation": its first command, named after the review's month. */
function rotation(createdAt: string): Pick<ReviewStory, 'nextStep' | 'command'> {
  const name = `merchant-${createdAt.slice(0, 7) || 'new'}`;
  const command = `pnpm cli keys generate --out keys --name ${name}`;
  return {
    command,
    nextStep:
      `Rotate our callback key pair (docs/runbook.md, "Key rotation"): run ${command}; set ` +
      `MERCHANT_PRIVATE_KEY_FILE=keys/${name}-private.pem,<the current key file> (new first, old kept) and restart ` +
      `ingest; upload keys/${name}-public.b64.txt to the platform's merchant console; drop the old key once ` +
      `ingest_decrypt_key_total{key_index="1"} has not grown for about two hours. Then dismiss this review with a ` +
      `note saying so.`,
  };
}

/** "The customer was credited 1,250.00 (receipt 12); another callback claimed 12,500.00 and was not paid". */
function differsStory(r: ReviewFacts): string {
  const d = r.details ?? {};
  const differences = (Array.isArray(d.differences) ? d.differences : []) as {
    field?: unknown;
    callback?: unknown;
    applied?: unknown;
  }[];
  const fiat = differences.find((x) => x.field === 'fiatAmount');
  const done =
    r.kind === 'payout'
      ? 'The payout was already finalised'
      : fiat
        ? `The customer was credited ${amount(fiat.applied)}`
        : 'The customer was already credited';
  const where =
    d.against === 'order' ? ' (the order is final from its other state)' : ` (receipt ${plain(d.receiptId)})`;
  const claims = differences.map((x) =>
    x.field === 'fiatAmount'
      ? amount(x.callback)
      : `${FIELD_WORDS[String(x.field)] ?? plain(x.field)} ${plain(x.callback)} instead of ${plain(x.applied)}`,
  );
  return `${done}${where}; another callback claimed ${claims.join(' and ') || 'other content'} and was not paid`;
}

/** What a forged callback claimed, in words: the amount against Get order's, else the finding as recorded. */
function forgeryStory(r: ReviewFacts): string {
  const d = r.details ?? {};
  if (r.reasonCode === 'VERIFY_DIFFERS_FROM_APPLIED') return differsStory(r);
  const since = r.attempts.some((a) => a.outcome === 'kept-open')
    ? '; the payment itself was since applied from the callback Get order confirmed'
    : '';
  if (r.reasonCode === 'VERIFY_AMOUNT_MISMATCH') {
    return (
      `A callback claimed ${amount(d.callbackAmount)}; Get order says the payment is ${amount(d.confirmedAmount)}, ` +
      `so nothing was paid on it${since}`
    );
  }
  return `A callback claimed what Get order contradicts (${plain(r.reason)}), so nothing was paid on it${since}`;
}

/**
 * A review in words: for a suspected forgery (a {@link FORGERY_CODES} code), what the customer got, what the other
 * callback claimed and who could have sent it, and the next step, the key rotation, with its command; for any other
 * review, its finding and how it is settled.
 */
export function reviewStory(r: ReviewFacts): ReviewStory {
  const isForgery = (code: string) => (FORGERY_CODES as readonly string[]).includes(code);
  // A review opened for another reason (not final yet) that a forged event landed in later: that event's finding.
  const forged = isForgery(r.reasonCode) ? undefined : r.events.find((e) => isForgery(e.reasonCode));
  const suspectedForgery = isForgery(r.reasonCode) || forged !== undefined;
  const closed = r.status !== 'open';
  if (suspectedForgery) {
    const story = forged
      ? forgeryStory({ ...r, ...forged, reasonCode: 'FORGED_EVENT', details: null })
      : forgeryStory(r);
    const happened = `${story}. Callbacks are not signed: whoever sent it holds our public key.`;
    if (closed) return { suspectedForgery, happened, nextStep: `None here: the review is ${r.status}.`, command: null };
    return { suspectedForgery, happened, ...rotation(r.createdAt) };
  }
  const happened = `Nothing was ${r.kind === 'payin' ? 'credited' : 'finalised'} from it: ${plain(r.reason)}.`;
  const nextStep = closed
    ? `None here: the review is ${r.status}.`
    : 'Re-verify once the platform confirms it (Get order final, the order registered): it credits at most once. ' +
      'Dismiss it with a note if it never will.';
  return { suspectedForgery, happened, nextStep, command: null };
}
