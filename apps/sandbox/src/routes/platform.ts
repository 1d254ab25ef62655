import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { CATALOG, findCurrency } from '../catalog.ts';
import { GET_ORDER_PATH, GET_PAYMENT_METHODS_PATH } from '@mcb/core/platform';
import { PLATFORM_CODES } from '@mcb/core/spec';
import type { Simulator } from '../simulator.ts';

/**
 * The platform's own API as the merchant calls it. Error codes the spec lists without meaning are assigned here:
 * 40010 = `merchantNo` missing or not one of the sandbox's merchant accounts; 40017 = `currencyType` is not an enabled currency.
 * Get order (shape assumed in docs/platform-interface.md) answers 40010 for a wrong merchant and 40404 for an unknown order.
 */
export { PLATFORM_CODES };

/**
 * Where Get order and the catalog live: the paths our platform client asks by default (docs/platform-interface.md;
 * Get order's is configurable by PLATFORM_GET_ORDER_PATH), defined once in @mcb/core/platform.
 */
export { GET_ORDER_PATH, GET_PAYMENT_METHODS_PATH };

function field(body: unknown, name: string): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const v = (body as Record<string, unknown>)[name];
  return typeof v === 'string' ? v : undefined;
}

function envelope(code: number, message: string, data: unknown = null) {
  return { code, message, data };
}

export function registerPlatformRoutes(app: FastifyInstance, sim: Simulator, closing: AbortSignal): void {
  // Requests held by the `hang` switch wait here until the app closes.
  const hung = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const release of hung) release();
  });

  /** The api-down and slow-reply switches, applied before every platform answer. */
  async function applyApiFaults(_req: FastifyRequest, reply: FastifyReply): Promise<boolean> {
    const f = sim.faults();
    if (f.apiDelayMs > 0) await delay(f.apiDelayMs, undefined, { signal: closing }).catch(() => {});
    if (f.apiDown === 'error') {
      await reply.code(500).send(envelope(500, 'sandbox: platform API down (fault switch)'));
      return false;
    }
    if (f.apiDown === 'hang') {
      await new Promise<void>((resolve) => {
        if (closing.aborted) return resolve();
        hung.add(resolve);
      });
      await reply.code(503).send(envelope(503, 'sandbox: closing'));
      return false;
    }
    return true;
  }

  app.post(GET_PAYMENT_METHODS_PATH, async (req, reply) => {
    if (!(await applyApiFaults(req, reply))) return reply;
    const merchantNo = field(req.body, 'merchantNo');
    if (!merchantNo || !sim.merchantByNo(merchantNo)) {
      return envelope(
        PLATFORM_CODES.merchantUnknown,
        merchantNo ? 'merchant does not exist' : 'merchantNo is required',
      );
    }
    const currencyType = field(req.body, 'currencyType');
    if (currencyType !== undefined && currencyType !== '') {
      const entry = findCurrency(currencyType);
      if (!entry)
        return envelope(PLATFORM_CODES.currencyNotEnabled, `currency ${currencyType.slice(0, 16)} is not enabled`);
      return envelope(PLATFORM_CODES.ok, 'success', { currencies: [entry] });
    }
    return envelope(PLATFORM_CODES.ok, 'success', { currencies: CATALOG });
  });

  app.post(GET_ORDER_PATH, async (req, reply) => {
    if (!(await applyApiFaults(req, reply))) return reply;
    const merchantNo = field(req.body, 'merchantNo');
    const merchant = merchantNo ? sim.merchantByNo(merchantNo) : undefined;
    if (!merchant) {
      return envelope(
        PLATFORM_CODES.merchantUnknown,
        merchantNo ? 'merchant does not exist' : 'merchantNo is required',
      );
    }
    const merchantOrderNo = field(req.body, 'merchantOrderNo');
    // Each merchant sees its own orders only: another account's order of the same number is not found.
    const order = merchantOrderNo ? sim.find(merchantOrderNo, merchant.ref) : undefined;
    // find() also matches platform numbers; Get order is keyed by the merchant's number only.
    if (!order || order.merchantOrderNo !== merchantOrderNo) {
      return envelope(PLATFORM_CODES.orderNotFound, 'order not found');
    }
    const data = {
      orderNo: order.orderNo,
      merchantNo: order.merchantNo,
      merchantOrderNo: order.merchantOrderNo,
      type: order.type,
      state: order.state,
      amount: order.amount,
      currency: order.currency,
    };
    if (!sim.faults().amountAsNumber) return envelope(PLATFORM_CODES.ok, 'success', data);
    // A JSON number with the exact decimal text, as a platform serialising BigDecimal would write it.
    const text = JSON.stringify(envelope(PLATFORM_CODES.ok, 'success', { ...data, amount: '\u0000AMOUNT\u0000' }));
    return reply.type('application/json; charset=utf-8').send(text.replace('"\\u0000AMOUNT\\u0000"', order.amount));
  });
}
