/**
 * Vitest setup file (vitest.config.ts `setupFiles`, first): the apps' module hooks in each test worker too, before a
 * test file's imports load drizzle-orm (@mcb/core/module-hooks says why: about 1.5 s of CPU per process that loads
 * it, which each file of the `solo` and `paired` projects, in a worker of its own, would pay again).
 */
import '@mcb/core/module-hooks';
