# Build: compile TypeScript with the full dependency set.
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# The controller's own runtime dependencies (pino, prom-client): an npm workspace, so the library's
# package does not bring them to its consumers.
COPY controller/package.json ./controller/
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npx tsc -p tsconfig.build.json

# Run: production dependencies only, a numeric non-root user, node as PID 1 (it handles SIGTERM).
FROM node:24-bookworm-slim
ENV NODE_ENV=production
# glibc gives each thread that mallocs an arena of its own (up to 8 per core) and keeps what
# they freed. One arena (the main heap, shared by V8's and libuv's threads): 6-7 MiB less RSS a
# shard than two at 20,000 Referables, no more CPU (BENCHMARKS.md, "One malloc arena"). The
# bench's controllers run with the same.
ENV MALLOC_ARENA_MAX=1
WORKDIR /app
COPY package.json package-lock.json ./
COPY controller/package.json ./controller/
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force
COPY --from=build /src/dist ./dist
COPY crds ./crds
USER 65532:65532
ENTRYPOINT ["node", "dist/main.js"]
