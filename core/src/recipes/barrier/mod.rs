//! Barriers: [`Barrier`] (one key holds every waiter back until it is removed)
//! and [`DoubleBarrier`] (participants enter together once `count` have
//! arrived, and leave together once all have left), as etcd's recipes and
//! Curator's barriers do, on Consul's KV store.
//!
//! Every wait is a blocking query started from a read of the caller's own
//! (`poll`); the double barrier's protocol decisions, free of I/O, are in
//! `round`. The wire format is written down in the book's "Barriers" page.

mod double;
mod poll;
mod round;
mod single;

pub use double::DoubleBarrier;
pub use single::Barrier;
