# Build stage: type-check and compile with tsc, then bundle (scripts/bundle.ts: less memory per sandbox,
# docs/benchmarks.md#memory) into bundle/; the runtime's dist/ is that bundle, as test/harness/stage.ts builds
# it for the tests. The Node major is the one test/e2e/pod.test.ts runs the pod's processes on (it reads it
# from the FROM line below).
FROM node:22-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
RUN npm ci --no-audit --no-fund
COPY src ./src
COPY scripts/bundle.ts ./scripts/
RUN npx tsc -p tsconfig.json && node --import tsx scripts/bundle.ts dist bundle

# Runtime stage: production dependencies only, non-root. `init-netns` (the pod's init container, run as
# uid 0 with NET_ADMIN) needs ip and iptables/ip6tables; nothing else in the image uses them.
FROM node:22-slim
ENV NODE_ENV=production
# Memory per sandbox (docs/benchmarks.md#memory): two malloc arenas instead of one per thread that ever allocates,
# and glibc's trim threshold fixed at its default 128 KiB, which freeing a large block at start otherwise raises:
# the free top of the heap goes back to the kernel (docs/benchmarks.md#glibcs-trim-threshold).
# No V8 heap flags: --max-semi-space-size=1 saved nothing at idle once V8's memory reducer had run and cost
# about a third of forward-HTTP throughput (bench/proxy.sh).
ENV MALLOC_ARENA_MAX=2 MALLOC_TRIM_THRESHOLD_=131072
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iproute2 iptables ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/bundle ./dist
COPY policies ./policies
# The network middleware protocol, read at run time by @grpc/proto-loader (src/middleware/proto.ts).
COPY proto ./proto
# uid 10001 is the identity that the pod's fence lets out (see deploy/kubernetes).
RUN useradd --system --uid 10001 --home-dir /var/lib/boundary --create-home boundary
USER 10001
EXPOSE 3128 9901
ENTRYPOINT ["node", "dist/app/main.js"]
# Loopback only: a proxy that holds credentials never listens on 0.0.0.0 unless told to.
CMD ["run", "--policy", "policies/default.yaml", "--state-dir", "/var/lib/boundary"]
