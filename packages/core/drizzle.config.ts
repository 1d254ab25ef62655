import { defineConfig } from 'drizzle-kit';

// Used only by `pnpm db:generate` (drizzle-kit) to write SQL migrations from the schema.
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/db/schema.ts',
  out: './drizzle',
});
