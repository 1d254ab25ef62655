import type { Merchant } from '@mcb/core/config';
import type { FastifyRequest } from 'fastify';
import type { MerchantFiguresDeps } from './queries.ts';

/** What the merchants area (its API, pages and the landing page's lines) needs. */
export interface MerchantsDeps extends MerchantFiguresDeps {
  /** Every merchant this console serves, in config order. */
  merchants: readonly Merchant[];
  /**
   * The merchants a request may see (operators scoped to merchants narrow it). @defaultValue every merchant
   */
  visible?: (req: FastifyRequest) => readonly Merchant[];
}

/** The merchants `req` may see: every figure and list of this area is built from these only. */
export const visibleMerchants = (deps: MerchantsDeps, req: FastifyRequest): readonly Merchant[] =>
  deps.visible ? deps.visible(req) : deps.merchants;
