import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20000,
    hookTimeout: 20000,
    // Two cores here: integration tests start real servers, so keep parallelism modest.
    maxWorkers: 2,
  },
})
