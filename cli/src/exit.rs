//! The exit codes of `baton` (also listed in `baton --help` and the README).

/// The command ran (and, with `-child-exit-code`, exited 0); or a query succeeded.
pub const OK: i32 = 0;
/// Usage, configuration, connection or Consul error, or a key in a format that
/// does not match (consul lock exits 1 for all of these too).
pub const ERROR: i32 = 1;
/// `-timeout` passed before the lock, slot or leadership was acquired
/// (sysexits' `EX_TEMPFAIL`: try again later).
pub const TIMEOUT: i32 = 75;
/// The holding was lost while the command ran, and the command was stopped.
pub const LOST: i32 = 76;
