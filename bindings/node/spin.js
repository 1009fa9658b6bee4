'use strict'
// Keeps the event loop polling for a moment after a baton call starts, so a quick answer is
// taken up at once instead of after a wake-up from epoll.
//
// A native call runs on a baton thread and its outcome comes back through a thread-safe
// function. When the loop is asleep in epoll by then, waking it costs tens of microseconds on
// the 2-core CI machines, where a loopback round trip to Consul costs ~90: measured with
// `make bench-bindings` and a call that does nothing (37-55 µs per call from Node when both
// threads park, 2.6 µs when neither does), it made acquire+release cycles 1.6-1.9x slower
// than in Rust.
// While a call is young, a chain of ref'd immediates keeps libuv polling with a zero timeout:
// the loop goes on running timers and I/O as usual, it only does not sleep.
//
// The spin is bounded and adaptive:
// * it lasts at most WINDOW_MS after the latest call started, and stops as soon as nothing is
//   pending;
// * only a call made in the loop turn that took a baton outcome spins (`inTurn`): the baton
//   thread that delivered it is still awake for the call (src/settle.rs, core/src/foundations/pool.rs). A
//   call after a pause wakes a parked baton thread, and a spinning loop would keep that thread
//   off its CPU: measured, isolated calls were slower with it. A warm call (src/warm.rs: the
//   loop itself reads the answer) does not spin: the loop sleeps on its socket as a blocking
//   Rust call sleeps on it, so there is no hand-over to save, and polling would spend a core
//   on the wait (1.4-1.6x Rust's CPU per lock cycle at 0 ms, `make bench-bindings`);
// * only while most recent calls settled within WINDOW_MS (an exponential moving average over
//   every call): against a remote Consul, where a call takes milliseconds, it switches itself
//   off, since the wake-up is then a small part of each call. Calls slowed by a missing spin
//   still take far less than WINDOW_MS on loopback, so the rule cannot lock itself out;
// * between polls the loop yields its CPU (`yieldCpu`) to any other runnable thread;
// * BATON_NODE_SPIN=0 in the environment switches it off (a machine whose cores are better
//   spent elsewhere; `make bench-bindings` measures both: the `node-nospin` worker).

const { performance } = require('node:perf_hooks')
const { yieldCpu, inTurn } = require('./native.js')

/** Whether the loop may spin at all (BATON_NODE_SPIN=0: never). */
const ENABLED = process.env.BATON_NODE_SPIN !== '0'
/** The longest spin after a call starts (ms). */
const WINDOW_MS = 0.3
/** Weight of the newest call in the moving average of calls settled within WINDOW_MS. */
const WEIGHT = 1 / 8

let pending = 0
let latestStart = 0
let quick = 1
let spinning = false

function tick() {
  if (pending > 0 && performance.now() - latestStart < WINDOW_MS) {
    yieldCpu()
    setImmediate(tick)
  } else {
    spinning = false
  }
}

/** A native call is starting; returns the token to pass to `ended`. */
function started() {
  const now = performance.now()
  pending++
  if (ENABLED && quick >= 0.5 && inTurn()) {
    latestStart = now
    if (!spinning) {
      spinning = true
      setImmediate(tick)
    }
  }
  return now
}

/** The call begun at `start` has settled (resolved or rejected). */
function ended(start) {
  const now = performance.now()
  pending--
  quick += ((now - start < WINDOW_MS ? 1 : 0) - quick) * WEIGHT
}

/** For tests and benchmarks: the current state. */
function state() {
  return { pending, quick, spinning }
}

module.exports = { started, ended, state, WINDOW_MS }
