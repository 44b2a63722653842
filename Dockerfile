# Multi-stage image for the gateway. Untested here: no Docker engine runs on the build machines (see README).
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json prisma.config.ts tsconfig.json tsconfig.build.json ./
COPY prisma ./prisma
COPY src ./src
# postinstall runs `prisma generate` (through the stub engine in prisma.config.ts), compiles the server to dist/server
# and builds the admin console into dist/admin; nothing downloads binaries. Dev dependencies are pruned afterwards.
RUN npm ci --no-audit --no-fund && npm prune --omit=dev

FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080 SVC_DATA_DIR=/data
WORKDIR /app
RUN useradd --system --uid 10001 --home /app svc && mkdir -p /data && chown svc /data
COPY --from=build --chown=svc /app/node_modules ./node_modules
COPY --from=build --chown=svc /app/dist ./dist
COPY --chown=svc package.json prisma.config.ts ./
COPY --chown=svc prisma ./prisma
USER svc
EXPOSE 8080
VOLUME ["/data"]
HEALTHCHECK --interval=10s --timeout=3s CMD node -e "fetch('http://127.0.0.1:'+process.env.PORT+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# Migrations are applied at start (migrate-deploy semantics, under an advisory lock so replicas do not race).
# The same Node flags and C allocator setting as `npm start` (package.json), the same on Node 22 and 24:
# docs/OPERATIONS.md "Memory". env execs node, so node is PID 1 and gets SIGTERM.
CMD ["env", "MALLOC_ARENA_MAX=2", "node", "--max-old-space-size=192", "--max-semi-space-size=8", "--min-semi-space-size=8", "--liftoff-only", "--no-maglev", "dist/server/main.js"]
