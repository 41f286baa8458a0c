# Build: compile TypeScript with the full dependency set.
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npx tsc -p tsconfig.build.json

# Run: production dependencies only, a numeric non-root user, node as PID 1 (it handles SIGTERM).
FROM node:24-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force
COPY --from=build /src/dist ./dist
COPY crds ./crds
USER 65532:65532
ENTRYPOINT ["node", "dist/main.js"]
