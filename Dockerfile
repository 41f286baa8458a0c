# The controller's image: node, dist/, the production dependencies and CA certificates, and
# nothing else. No shell, no npm, no corepack, no package manager: the final stage is `scratch`
# with the files the first stages collect (distroless-style). `npm run test:image` builds this
# file as it is and runs the image as deploy/ runs it.
#
# The base is pinned by digest, so a build is reproducible and a new upstream image is a change
# someone reviews. To update it (a Node 24 patch release, a Debian security fix), read the digest
# of the multi-architecture index and put it below, keeping the tag:
#   docker buildx imagetools inspect node:24-bookworm-slim --format '{{json .Manifest.Digest}}'
#   (or: skopeo inspect --format '{{.Digest}}' docker://docker.io/library/node:24-bookworm-slim)
# The major stays the `node` devDependency's (test/unit/dockerfile.test.ts checks). A mirror, or
# a local stand-in when no registry is reachable (npm run test:image), is given with
# --build-arg NODE_IMAGE=...
ARG NODE_IMAGE=node:24-bookworm-slim@sha256:6f7b03f7c2c8e2e784dcf9295400527b9b1270fd37b7e9a7285cf83b6951452d

# npm's settings come in as build secrets, as for any private registry, never as a layer:
#   --secret id=npmrc,src=$HOME/.npmrc       a user .npmrc (registry, credentials)
#   --secret id=npm-ca,src=<CA bundle>       a CA bundle for npm to trust (a TLS-inspecting proxy)
# Both are optional: without them npm uses the public registry.

# Build: compile TypeScript with the full dependency set.
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# The controller's own runtime dependencies (pino, prom-client): an npm workspace, so the library's
# package does not bring them to its consumers.
COPY controller/package.json ./controller/
RUN --mount=type=secret,id=npmrc,target=/root/.npmrc \
    --mount=type=secret,id=npm-ca,target=/run/secrets/npm-ca \
    if [ -s /run/secrets/npm-ca ]; then export NPM_CONFIG_CAFILE=/run/secrets/npm-ca; fi; \
    npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npx tsc -p tsconfig.build.json

# The final stage's files, laid out under /rootfs: /app (package.json, the production
# dependencies, dist/), node and the shared libraries it loads, CA certificates, and the
# passwd/group entries of the numeric user.
FROM ${NODE_IMAGE} AS rootfs
WORKDIR /rootfs/app
COPY package.json package-lock.json ./
COPY controller/package.json ./controller/
RUN --mount=type=secret,id=npmrc,target=/root/.npmrc \
    --mount=type=secret,id=npm-ca,target=/run/secrets/npm-ca \
    if [ -s /run/secrets/npm-ca ]; then export NPM_CONFIG_CAFILE=/run/secrets/npm-ca; fi; \
    npm ci --omit=dev --no-audit --no-fund --ignore-scripts
COPY --from=build /src/dist ./dist
# ldd names every library node links (libc, libstdc++, libm, libgcc_s, the dynamic loader); cp -L
# copies each file under its path, so the loader finds them where node's ELF header says. The
# CA bundle is the Mozilla store that Node itself ships (tls.rootCertificates), written where
# OpenSSL-based tools and --use-system-ca look for it.
RUN set -eu; \
    mkdir -p /rootfs/usr/local/bin /rootfs/etc/ssl/certs /rootfs/tmp; \
    cp /usr/local/bin/node /rootfs/usr/local/bin/node; \
    for lib in $(ldd /usr/local/bin/node | grep -o '/[^ ]*'); do cp -L --parents "$lib" /rootfs/; done; \
    cp /etc/ld.so.cache /rootfs/etc/ld.so.cache; \
    node -e 'process.stdout.write(require("node:tls").rootCertificates.join("\n") + "\n")' \
      > /rootfs/etc/ssl/certs/ca-certificates.crt; \
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
      > /rootfs/etc/passwd; \
    printf 'root:x:0:\nnonroot:x:65532:\n' > /rootfs/etc/group; \
    chmod 1777 /rootfs/tmp

# Run: numeric non-root user, node as PID 1 (it handles SIGTERM).
FROM scratch
COPY --from=rootfs /rootfs /
ENV PATH=/usr/local/bin
ENV NODE_ENV=production
# glibc gives each thread that mallocs an arena of its own (up to 8 per core) and keeps what
# they freed. One arena (the main heap, shared by V8's and libuv's threads): 6-7 MiB less RSS a
# shard than two at 20,000 Referables, no more CPU (BENCHMARKS.md, "One malloc arena"). The
# bench's controllers run with the same.
ENV MALLOC_ARENA_MAX=1
WORKDIR /app
USER 65532:65532
LABEL org.opencontainers.image.title="referable-controller" \
      org.opencontainers.image.description="The Referable controller: projects any field of any Kubernetes object into status.value of a Referable." \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.url="https://referable.dev" \
      org.opencontainers.image.source="https://referable.dev"
ENTRYPOINT ["node", "dist/main.js"]
