// ESM entry point of baton: the same classes as the CommonJS index.js (one native addon,
// one set of classes, so `instanceof` agrees between `import` and `require`).
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const baton = require('./index.js')

export const {
  setLogger,
  METRICS,
  registerMetrics,
  startDevServer,
  DevServer,
  Agent,
  Client,
  Session,
  Lock,
  Semaphore,
  Election,
  LeaderObserver,
  RwLock,
  MultiLock,
  LeaderTask,
  Group,
  Member,
  MembersWatch,
  MemberInfo,
  Barrier,
  DoubleBarrier,
  Counter,
  CounterWatch,
  Leader,
  Sequencer,
  KvEntry,
  BatonError,
  AbortError,
  LostError,
} = baton
