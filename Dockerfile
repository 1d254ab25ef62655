# One image for every app; the command picks the app (see docker-compose.yml).
# Node runs TypeScript directly (type stripping), so there is no build step beyond installing dependencies.
FROM node:24-bookworm-slim AS deps
WORKDIR /app
RUN npm install -g pnpm@10.34.9
COPY pnpm-lock.yaml pnpm-workspace.yaml package.json .npmrc ./
COPY packages/core/package.json packages/core/
COPY packages/testkit/package.json packages/testkit/
COPY apps/ingest/package.json apps/ingest/
COPY apps/worker/package.json apps/worker/
COPY apps/console/package.json apps/console/
COPY apps/sandbox/package.json apps/sandbox/
RUN pnpm install --frozen-lockfile --prod

FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app /app
COPY packages packages
COPY apps apps
USER node
CMD ["node", "apps/ingest/src/main.ts"]
