export {
  createPlatformHttp,
  PlatformCodeError,
  type AuthenticateRequest,
  type PlatformHttp,
  type PlatformHttpOptions,
} from './http.ts';
