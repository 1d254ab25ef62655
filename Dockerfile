# One image for every app; the command picks the app (see docker-compose.yml and docs/deployment.md):
#   docker build -t merchant-callbacks .
#   docker run --rm -e DATABASE_URL=... merchant-callbacks node packages/core/src/db/migrate-cli.ts
#   docker run -d ... merchant-callbacks node apps/worker/src/main.ts
# Node runs TypeScript directly (type stripping), so there is no build step beyond installing dependencies.
# test/image-tree-runs-migrate-ingest-worker-and-console.test.ts builds this file's tree step by step and starts every
# app from it: a step it cannot follow fails that test.
FROM node:24-bookworm-slim AS deps
WORKDIR /app
RUN npm install -g pnpm@10.34.9
# The lockfile alone decides what is fetched, so this layer is cached until a dependency changes.
COPY pnpm-lock.yaml pnpm-workspace.yaml .npmrc ./
RUN pnpm fetch --prod
# The whole workspace, every package.json with it (a package added later cannot be left out); .dockerignore keeps
# out node_modules, .env, keys and .git.
COPY . .
RUN pnpm install --offline --prod --frozen-lockfile

FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app /app
USER node
CMD ["node", "apps/ingest/src/main.ts"]
