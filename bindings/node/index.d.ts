/** Base of every error baton raises; `code` is stable across languages ('BATON_TIMEOUT', ...). */
export declare class BatonError extends Error {
  readonly code: string
}

export interface ClientOptions {
  /** `host:port` or `http(s)://host:port`; default from CONSUL_HTTP_ADDR. */
  address?: string
  token?: string
  datacenter?: string
  requestTimeoutMs?: number
}

export interface SessionOptions {
  name?: string
  /** TTL in milliseconds (omit for no TTL). */
  ttlMs?: number
  /** Lock-delay in milliseconds; 0 really means none. */
  lockDelayMs?: number
  behavior?: 'release' | 'delete'
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
