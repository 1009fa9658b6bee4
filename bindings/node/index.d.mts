// Types of the ESM entry point (index.mjs): the same as the CommonJS ones.
export * from './index.js'
