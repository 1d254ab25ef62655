// redis-parser (the RESP parser ioredis itself was built on) ships no types; this is the part resp-proxy.ts uses.
declare module 'redis-parser' {
  interface RedisParserOptions {
    returnReply: (reply: never) => void;
    returnError: (err: Error) => void;
    returnFatalError?: (err: Error) => void;
    returnBuffers?: boolean;
    stringNumbers?: boolean;
  }
  export default class RedisParser {
    constructor(options: RedisParserOptions);
    execute(buffer: Buffer): void;
    reset(): void;
  }
}
