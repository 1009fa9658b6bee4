import type { ClientOptions, SessionOptions } from './native'
export type { ClientOptions, SessionOptions }

/** Base of every error baton raises; `code` is stable across languages ('BATON_TIMEOUT', ...). */
export declare class BatonError extends Error {
  readonly code: string
}

export interface WaitOptions {
  timeoutMs?: number
  signal?: AbortSignal
}

export declare class Session {
  readonly id: string
  isValid(): boolean
  waitLost(options?: WaitOptions): Promise<string>
  destroy(): Promise<void>
}

export declare class Client {
  constructor(options?: ClientOptions)
  readonly address: string
  kvGet(key: string): Promise<Buffer | null>
  kvPut(key: string, value: Buffer | string): Promise<boolean>
  createSession(options?: SessionOptions): Promise<Session>
  close(timeoutMs?: number): Promise<boolean>
  [Symbol.asyncDispose](): Promise<void>
}
