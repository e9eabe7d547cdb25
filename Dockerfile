# Build stage: type-check and compile to dist/.
FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
RUN npm ci --no-audit --no-fund
COPY src ./src
RUN npx tsc -p tsconfig.json

# Runtime stage: production dependencies only, non-root.
FROM node:24-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY policies ./policies
# uid 10001 is the identity that the pod's fence lets out (see deploy/kubernetes).
RUN useradd --system --uid 10001 --home-dir /var/lib/boundary --create-home boundary
USER 10001
EXPOSE 3128 9901 15053/udp 15053/tcp
ENTRYPOINT ["node", "dist/main.js"]
CMD ["run", "--policy", "policies/default.yaml", "--proxy-listen", "0.0.0.0:3128", "--admin-listen", "0.0.0.0:9901", "--state-dir", "/var/lib/boundary"]
