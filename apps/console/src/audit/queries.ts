import { AUTH_METHODS, operatorActions, type Database } from '@mcb/core/db';
import { and, desc, eq, gte, inArray, isNull, lt, ne, or } from 'drizzle-orm';
import { merchantRefSchema } from '../orders/schemas.ts';
import type { ListScope } from '../operators/scope.ts';
import { z } from 'zod';
import { asInstant } from '../callbacks/form.ts';
import { assertCan } from './perform.ts';
import type { Operator } from '../operators/operator.ts';
import { ROLES } from '../operators/roles.ts';

/** One audit row as the API and the audit page show it. */
export const auditEntrySchema = z.object({
  id: z.number().int(),
  at: z.string().describe('ISO-8601 instant'),
  operator: z.string(),
  role: z.enum(ROLES),
  action: z.string().describe('e.g. reviews.reverify, queue.retry, replays.start'),
  target: z.string().describe('e.g. review:42, order:MO-1, job:callbacks/payin-P1-6'),
  reason: z.string(),
  outcome: z.string().describe('applied, dismissed, created, done, denied, failed:<CODE>, ...'),
  requestId: z.string().nullable(),
  via: z
    .enum(AUTH_METHODS)
    .nullable()
    .describe('How the actor came in: bearer (a token), session (/login), proxy (the SSO header); null on older rows'),
  details: z.record(z.string(), z.unknown()).nullable(),
  merchant: z
    .string()
    .nullable()
    .optional()
    .describe('The ref of the merchant the action was about (null: none); only when the console serves two or more'),
});
export type AuditEntry = z.output<typeof auditEntrySchema>;

const instant = z.iso
  .datetime({ offset: true })
  .describe('ISO-8601 instant (e.g. 2026-11-24T03:00:00Z), or a UTC time without a zone: 2026-11-24 03:00[:00]');

/** Filters of `GET /api/audit` and the audit page. Blank values (an empty form field) count as unset. */
export const auditFilterSchema = z.strictObject({
  operator: z.string().max(128).optional().describe('Only this operator (others than yourself: admin only)'),
  action: z.string().max(64).optional(),
  target: z.string().max(300).optional(),
  from: instant.optional().describe('At or after'),
  to: instant.optional().describe('Before'),
  merchant: merchantRefSchema
    .optional()
    .describe('Only actions about this merchant (a ref); unknown or outside your merchants: 400'),
  services: z
    .enum(['hide', 'show', 'only'])
    .default('hide')
    .describe(
      "Rows of `service` clients (the shop registering orders): hidden by default so that people's actions " +
        "stand out; `show` adds them, `only` lists them alone. Ignored with `operator` (that name's rows are " +
        'listed whatever its role)',
    ),
  before: z.coerce
    .number()
    .int()
    .positive()
    .optional()
    .describe('Cursor: only rows with a smaller id (`nextBefore` of the previous page)'),
  limit: z.coerce.number().int().min(1).max(500).default(50),
});
export type AuditFilter = z.output<typeof auditFilterSchema>;

export const auditPageSchema = z.object({
  entries: z.array(auditEntrySchema),
  nextBefore: z.number().int().nullable().describe('Pass as `before` for the next page; null on the last'),
  scope: z.enum(['own', 'all']).describe('own: a viewer or operator sees their own actions only'),
});
export type AuditPage = z.output<typeof auditPageSchema>;

/**
 * Drop blank fields, as an HTML form sends them; `from` and `to` typed as the Callbacks page takes them
 * (`2026-11-24 08:00`, `2026-11-24T08:00:15`: UTC) become the instants they mean.
 */
export function withoutBlanks(query: unknown): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries((query ?? {}) as Record<string, unknown>)
      .filter(([, v]) => v !== '' && v !== undefined)
      .map(([k, v]) => [k, (k === 'from' || k === 'to') && typeof v === 'string' ? asInstant(v) : v]),
  );
}

/**
 * The audit trail, newest first, one page. An admin reads everyone's; anyone else their own (asking for another
 * operator's is 403 naming the admin role).
 */
export async function listAudit(
  db: Database,
  reader: Operator,
  f: AuditFilter,
  scope: ListScope = { merchantNos: undefined },
): Promise<AuditPage> {
  const nos = scope.merchantNos;
  const readsOthers = f.operator === undefined ? reader.role === 'admin' : f.operator !== reader.name;
  if (readsOthers) assertCan(reader, 'audit.readOthers');
  const operator = f.operator ?? (reader.role === 'admin' ? undefined : reader.name);
  const rows = await db
    .select()
    .from(operatorActions)
    .where(
      and(
        operator !== undefined ? eq(operatorActions.operator, operator) : undefined,
        operator === undefined && f.services === 'hide' ? ne(operatorActions.role, 'service') : undefined,
        operator === undefined && f.services === 'only' ? eq(operatorActions.role, 'service') : undefined,
        // A scoped reader sees the actions about its merchants, and its own about none (a ?merchant=: that one's).
        nos && f.merchant !== undefined ? inArray(operatorActions.merchantNo, [...nos]) : undefined,
        nos && f.merchant === undefined
          ? or(
              inArray(operatorActions.merchantNo, [...nos]),
              and(isNull(operatorActions.merchantNo), eq(operatorActions.operator, reader.name)),
            )
          : undefined,
        f.action ? eq(operatorActions.action, f.action) : undefined,
        f.target ? eq(operatorActions.target, f.target) : undefined,
        f.from ? gte(operatorActions.at, new Date(f.from)) : undefined,
        f.to ? lt(operatorActions.at, new Date(f.to)) : undefined,
        f.before ? lt(operatorActions.id, f.before) : undefined,
      ),
    )
    .orderBy(desc(operatorActions.id))
    .limit(f.limit + 1);
  const page = rows.slice(0, f.limit);
  return {
    entries: page.map((r) => ({
      id: r.id,
      at: r.at.toISOString(),
      operator: r.operator,
      role: r.role,
      action: r.action,
      target: r.target,
      reason: r.reason,
      outcome: r.outcome,
      requestId: r.requestId,
      via: r.via ?? null,
      details: r.details ?? null,
      ...(scope.refOf ? { merchant: r.merchantNo === null ? null : (scope.refOf(r.merchantNo) ?? r.merchantNo) } : {}),
    })),
    nextBefore: rows.length > f.limit ? page[page.length - 1]!.id : null,
    scope: operator === reader.name ? 'own' : 'all',
  };
}
