export {
  createPlatformHttp,
  PlatformCodeError,
  type AuthenticateRequest,
  type PlatformHttp,
  type PlatformHttpOptions,
} from './http.ts';
export {
  createPlatformClient,
  createPlatformClientFromConfig,
  type PlatformClient,
  type PlatformClientOptions,
} from './client.ts';
export {
  GET_ORDER_PATH,
  getOrder,
  parseJsonExact,
  platformOrderSchema,
  type GetOrderParams,
  type PlatformOrder,
} from './get-order.ts';
export { GET_PAYMENT_METHODS_PATH, getPaymentMethods, type GetPaymentMethodsParams } from './payment-methods.ts';
export { createRateSpacer } from './rate-spacer.ts';
export {
  guardPlatform,
  isPlatformOutage,
  type BreakerState,
  type GuardedPlatformClient,
  type PlatformGuardOptions,
  type PlatformSample,
} from './guard.ts';
export { createFleet, readFleetState, type Fleet, type FleetOptions, type FleetState } from './fleet.ts';
