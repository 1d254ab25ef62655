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
