import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Delivery, SandboxOrder, Simulator } from '../simulator.ts';

/**
 * The control API: what a tester does in the platform's back office and the customer does at the checkout.
 * Unprotected on purpose (it is a simulator); the listener binds to 127.0.0.1 by default.
 */

const decimal = z.string().regex(/^\d+(\.\d+)?$/, 'expected a decimal string such as "1000.10"');
/** A merchant account's ref; the first account when omitted. */
const merchant = z.string().min(1).max(64).optional();
const orderFaults = z
  .object({
    duplicate: z.number().int().min(1).max(10),
    minBlocks: z.number().int().min(1).max(16),
    stale: z.boolean(),
  })
  .partial()
  .strict();
const createBase = z
  .object({
    merchant,
    merchantOrderNo: z.string().min(1).max(64).optional(),
    currency: z.string().min(1).max(8),
    amount: decimal,
    callbackUrl: z.string().min(1).max(2048).optional(),
    faults: orderFaults.optional(),
  })
  .strict();
const createPayin = createBase.extend({ quantity: decimal.optional() }).strict();
const createPayout = createBase.extend({ createdVia: z.enum(['api', 'console']).optional() }).strict();
const finalizeBody = z.object({ state: z.number().int() }).strict();
const globalFaults = z
  .object({
    duplicate: z.number().int().min(1).max(10),
    minBlocks: z.number().int().min(1).max(16),
    outOfOrder: z.boolean(),
    apiDown: z.enum(['off', 'error', 'hang']),
    apiDelayMs: z.number().int().min(0).max(600_000),
    amountAsNumber: z.boolean(),
  })
  .partial()
  .strict();
const forgeBody = z
  .object({
    what: z.enum(['amount', 'state', 'unknown-order']),
    ref: z.string().min(1).optional(),
    merchant,
    type: z.enum(['payin', 'payout']).optional(),
    callbackUrl: z.string().min(1).max(2048).optional(),
  })
  .strict();
const settingsBody = z
  .object({
    merchant: z.string().min(1).max(64),
    payinCallbackUrl: z.string().min(1).nullable(),
    payoutCallbackUrl: z.string().min(1).nullable(),
  })
  .partial()
  .strict();
const listQuery = z.object({ type: z.enum(['payin', 'payout']).optional(), merchant });
/** `?merchant=` of the routes of one order or of the settings. */
const merchantQuery = z.object({ merchant });

function parse<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  const r = schema.safeParse(value ?? {});
  if (r.success) return r.data;
  const issues = r.error.issues.map((i) => ({ field: i.path.join('.') || '(body)', message: i.message }));
  throw new AppError(
    ErrorCodes.REQUEST_INVALID,
    `invalid request: ${issues.map((i) => `${i.field}: ${i.message}`).join('; ')}`,
    {
      details: { issues },
    },
  );
}

/** An order with its deliveries, as the control API shows it. */
export interface OrderView {
  order: SandboxOrder;
  deliveries: Delivery[];
}

export function registerControlRoutes(app: FastifyInstance, sim: Simulator): void {
  const view = (order: SandboxOrder): OrderView => ({ order, deliveries: sim.deliveriesOf(order.orderNo) });

  app.post('/control/payins', async (req, reply) => {
    const order = sim.createPayin(parse(createPayin, req.body));
    return reply.code(201).send(view(order));
  });
  app.post('/control/payouts', async (req, reply) => {
    const order = sim.createPayout(parse(createPayout, req.body));
    return reply.code(201).send(view(order));
  });
  app.get('/control/orders', async (req) => ({ orders: sim.list(parse(listQuery, req.query)) }));
  app.get<{ Params: { ref: string } }>('/control/orders/:ref', async (req) =>
    view(sim.get(req.params.ref, parse(merchantQuery, req.query).merchant)),
  );
  app.post<{ Params: { ref: string } }>('/control/orders/:ref/finalize', async (req) => {
    const { state } = parse(finalizeBody, req.body);
    return sim.finalize(req.params.ref, state, parse(merchantQuery, req.query).merchant);
  });
  app.post<{ Params: { ref: string } }>('/control/orders/:ref/faults', async (req) =>
    view(sim.setOrderFaults(req.params.ref, parse(orderFaults, req.body), parse(merchantQuery, req.query).merchant)),
  );
  app.get('/control/deliveries', async () => ({ deliveries: sim.allDeliveries() }));
  app.get('/control/faults', async () => sim.faults());
  app.put('/control/faults', async (req) => sim.setFaults(parse(globalFaults, req.body)));
  app.post('/control/release', async () => ({ deliveries: await sim.release() }));
  app.post('/control/forge', async (req, reply) =>
    reply.code(201).send({ delivery: sim.forge(parse(forgeBody, req.body)) }),
  );
  app.get('/control/merchants', async () => ({ merchants: sim.merchants() }));
  /** One merchant account's console settings (the first account's unless `?merchant=` names one). */
  const settingsOf = (ref: string | undefined) => {
    const account = sim.merchants().find((m) => ref === undefined || m.ref === ref);
    return { merchant: account?.ref, merchantNo: account?.merchantNo, ...sim.settings(ref) };
  };
  app.get('/control/settings', async (req) => settingsOf(parse(merchantQuery, req.query).merchant));
  app.put('/control/settings', async (req) => {
    const patch = parse(settingsBody, req.body);
    sim.setCallbackUrls(patch);
    return settingsOf(patch.merchant);
  });
  app.post('/control/reset', async () => {
    sim.reset();
    return { reset: true };
  });
}
