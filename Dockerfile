# Sluice image for docker-compose.yml: built from this repository, Node 20.
# The same image runs a gateway replica (default command) or the stand-in
# backends (`node dist/dev/stand-ins-server.js`).
FROM node:20-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev

FROM node:20-slim
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
USER node
CMD ["node", "dist/main.js", "--config", "/config/replica.yaml"]
