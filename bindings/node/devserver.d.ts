/** Options of startDevServer(). */
export interface DevServerOptions {
  /** Listen port; 0 (default) picks a free one. */
  port?: number
  /** Consul's session_ttl_min: milliseconds or a Go duration ('100ms'); default '10s'. */
  sessionTtlMin?: number | string
  /** More baton-devserver arguments, e.g. ['--acl-token', 'root'] or ['--consul-version', '1.6.1']. */
  args?: string[]
  /** The baton-devserver executable (default: BATON_DEVSERVER_BIN, else the packaged one). */
  bin?: string
  /** Where the server's log goes (default 'ignore'). */
  stderr?: 'ignore' | 'inherit'
}

/** A running dev server (a child process) and its fault controls (its /_devserver/ HTTP API). */
export declare class DevServer {
  /** host:port, for CONSUL_HTTP_ADDR or new Client({ address }). */
  readonly addr: string
  /** http://host:port */
  readonly url: string
  /** Stop answering /v1/ requests (they hang), like a silent partition. */
  pause(): Promise<void>
  /** Answer again after pause(). */
  resume(): Promise<void>
  /** Restart with every session, key and index lost. */
  restart(): Promise<void>
  /** A fixed delay before every request (ms or '50ms'); 0 turns it off. */
  setLatency(delay: number | string): Promise<void>
  /** false: "No cluster leader" answers (TTL timers stop); true: a leader again. */
  setLeader(present: boolean): Promise<void>
  /** Invalidate a session as a failed TTL or health check would. */
  invalidateSession(id: string): Promise<void>
  /** The node's serfHealth turns critical (sessions bound to it are invalidated). */
  failNode(): Promise<void>
  /** The node's serfHealth passes again. */
  healNode(): Promise<void>
  /** Requests served so far, per route. */
  requestCounts(): Promise<unknown>
  /** The server's state. */
  status(): Promise<unknown>
  /** Stops the server (SIGTERM); resolves once it has exited. */
  stop(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

/**
 * Starts a Consul-compatible dev server on a free port; resolves once it answers. The server
 * ends with this process however it ends (SIGKILL included): its stdin is a pipe this process
 * holds open, and it shuts down when that pipe closes (`--exit-on-stdin-eof`).
 */
export declare function startDevServer(options?: DevServerOptions): Promise<DevServer>
