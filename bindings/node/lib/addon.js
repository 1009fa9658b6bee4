'use strict'
// Loads the native addon (native.js, napi-rs's loader): first of all, so that a missing addon
// fails with this message and not with the loader's (spin.js uses the addon too).

// The platforms this package carries a prebuilt addon for (package.json "napi.targets").
const BUILT_FOR = ['linux-x64-gnu']
const native = loadNative()

/** native.js (napi-rs's loader), or an error that says which platform has no addon and what to do. */
function loadNative() {
  try {
    return require('../native.js')
  } catch (err) {
    let libc = ''
    if (process.platform === 'linux') {
      const report = process.report && typeof process.report.getReport === 'function' ? process.report.getReport() : null
      libc = report && report.header && report.header.glibcVersionRuntime ? '-gnu' : '-musl'
    }
    const here = `${process.platform}-${process.arch}${libc}`
    const e = new Error(
      `consul-baton: no native addon for ${here} in this installation (prebuilt for ${BUILT_FOR.join(', ')}). ` +
        'On another platform build it from the baton repository (make node-build in bindings/node, ' +
        `then npm pack there) and install that tarball. Loader error: ${err && err.message}`,
      { cause: err },
    )
    e.code = 'ERR_CONSUL_BATON_UNSUPPORTED_PLATFORM'
    throw e
  }
}

module.exports = native
