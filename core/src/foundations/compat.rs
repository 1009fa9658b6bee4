//! What a client has learnt about the Consul it talks to, from the answers it
//! got (never from a version string: reading `/v1/agent/self` needs
//! `agent:read`, which many tokens lack).
//!
//! Consul's answers differ between versions in ways that matter here (the
//! README's compatibility table lists them). The ones a client must act on:
//!
//! - **Txn numbers.** Before 1.6.2 the `/v1/txn` body is decoded into
//!   `interface{}` first, so every JSON number passes through a float64 and
//!   loses its low bits above 2^53 (hashicorp/consul#6655, fixed by #6680). A
//!   `Flags` of `0x2ddccbc058a50c18` (Go's lock flag) is stored as
//!   `0x2ddccbc058a50c00`. The answer to a write carries the stored flags, so
//!   the first flagged write tells: see [`Learned::learn_txn_flags`]. Flags
//!   sent in a KV query string (`PUT /v1/kv/k?flags=`) are exact on every
//!   version.
//! - **The `get-or-empty` verb** is unknown before 1.14.0 (GH-14474) and **the
//!   op cap of a txn** was 64 before 1.14.0 (GH-14599): the server's refusal
//!   becomes a clear [`ErrorKind::Unsupported`] naming the version, and the
//!   same call is refused before sending from then on.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use crate::foundations::error::{Error, ErrorKind};

/// The first Consul version whose `/v1/txn` stores numbers exactly.
pub(crate) const TXN_FLOAT64_BEFORE: &str = "1.6.2";
/// The first Consul version that knows the `get-or-empty` txn verb.
pub(crate) const GET_OR_EMPTY_SINCE: &str = "1.14.0";
/// The first Consul version that allows 128 ops per txn (64 before).
pub(crate) const TXN_128_OPS_SINCE: &str = "1.14.0";

/// What a number sent in a txn body is stored as by a Consul before 1.6.2
/// (Go's `uint64(float64(n))`).
pub(crate) const fn through_f64(n: u64) -> u64 {
    n as f64 as u64
}

/// Whether `n` survives a float64 round trip (every value up to 2^53 does).
pub(crate) const fn exact_in_f64(n: u64) -> bool {
    through_f64(n) == n
}

/// The index a probe of txn numbers checks (see `Client::learn_txn_numbers`):
/// odd and above 2^53, so a float64 cannot hold it.
pub(crate) const PROBE_INDEX: u64 = (1 << 53) + 1;

/// What a probe's refusal text says of txn numbers: Consul's check-index
/// error ends with `current modify index <stored> != <sent, as decoded>`.
pub(crate) fn probe_answer(text: &str) -> TxnNumbers {
    let decoded = text
        .rsplit_once("!= ")
        .and_then(|(_, n)| n.trim().parse::<u64>().ok());
    match decoded {
        Some(PROBE_INDEX) => TxnNumbers::Exact,
        Some(n) if n == through_f64(PROBE_INDEX) => TxnNumbers::Lossy,
        _ => TxnNumbers::Unknown,
    }
}

const EXACT: u8 = 1;
const LOSSY: u8 = 2;

/// How the server stores numbers sent in a txn body, as far as known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnNumbers {
    /// No flagged txn write has been answered yet.
    Unknown,
    /// Stored as sent (Consul 1.6.2 and later).
    Exact,
    /// Rounded through float64 (Consul before 1.6.2).
    Lossy,
}

/// Server behaviour learnt from answers. One per client; a client talks to one
/// cluster, and a rolling upgrade only ever moves it from lossy to exact (a
/// lossy write after that is still caught by its answer, see
/// [`Learned::learn_txn_flags`]).
#[derive(Debug, Default)]
pub(crate) struct Learned {
    txn_numbers: AtomicU8,
    /// The op cap a server told us, 0 while unknown.
    max_txn_ops: AtomicUsize,
    get_or_empty_unknown: std::sync::atomic::AtomicBool,
    /// A txn-number probe got an answer that did not tell (a refusal, another
    /// text): not asked again, so no call pays for it twice.
    probe_untold: std::sync::atomic::AtomicBool,
}

impl Learned {
    /// How txn numbers are stored, as far as known.
    pub(crate) fn txn_numbers(&self) -> TxnNumbers {
        match self.txn_numbers.load(Ordering::Relaxed) {
            EXACT => TxnNumbers::Exact,
            LOSSY => TxnNumbers::Lossy,
            _ => TxnNumbers::Unknown, // 0: nothing learnt yet
        }
    }

    /// Learns from a flagged write: `sent` flags came back as `stored`. Only
    /// flags a float64 cannot hold tell anything. Returns `false` when the
    /// server rounded them.
    pub(crate) fn learn_txn_flags(&self, sent: u64, stored: u64) -> bool {
        if exact_in_f64(sent) {
            return true;
        }
        if stored == sent {
            self.txn_numbers.store(EXACT, Ordering::Relaxed);
            true
        } else {
            if stored == through_f64(sent) {
                self.txn_numbers.store(LOSSY, Ordering::Relaxed);
            }
            false
        }
    }

    /// Notes that the server rounds txn numbers (seen some other way, e.g. a
    /// lock key carrying the rounded lock flag).
    pub(crate) fn learn_lossy(&self) {
        self.txn_numbers.store(LOSSY, Ordering::Relaxed);
    }

    /// Whether an answered probe could not tell (see `probe_untold`).
    pub(crate) fn probe_untold(&self) -> bool {
        self.probe_untold.load(Ordering::Relaxed)
    }

    pub(crate) fn learn_probe_untold(&self) {
        self.probe_untold.store(true, Ordering::Relaxed);
    }

    /// Notes what a probe found (nothing when it could not tell).
    pub(crate) fn learn(&self, numbers: TxnNumbers) {
        match numbers {
            TxnNumbers::Exact => self.txn_numbers.store(EXACT, Ordering::Relaxed),
            TxnNumbers::Lossy => self.txn_numbers.store(LOSSY, Ordering::Relaxed),
            TxnNumbers::Unknown => {}
        }
    }

    /// The op cap the server told us of, if it did.
    pub(crate) fn max_txn_ops(&self) -> Option<usize> {
        match self.max_txn_ops.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n),
        }
    }

    pub(crate) fn learn_max_txn_ops(&self, n: usize) {
        self.max_txn_ops.store(n, Ordering::Relaxed);
    }

    /// Whether the server said it does not know `get-or-empty`.
    pub(crate) fn get_or_empty_unknown(&self) -> bool {
        self.get_or_empty_unknown.load(Ordering::Relaxed)
    }

    pub(crate) fn learn_get_or_empty_unknown(&self) {
        self.get_or_empty_unknown.store(true, Ordering::Relaxed);
    }
}

/// The error for a number a lossy server would store wrongly.
pub(crate) fn lossy_number_error(what: &str, n: u64) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!(
            "this Consul (before {TXN_FLOAT64_BEFORE}) stores numbers in a transaction through a \
             float64: {what} {n} would be stored as {}; write flags above 2^53 with Kv::put_with \
             (flags in the query string are exact on every version)",
            through_f64(n)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipes::lock::LOCK_FLAG_VALUE;
    use crate::recipes::semaphore::SEMAPHORE_FLAG_VALUE;

    #[test]
    fn a_probe_answer_tells_exact_from_rounded() {
        let text =
            |n: u64| format!("failed index check for key \"k\", current modify index 12 != {n}");
        assert_eq!(probe_answer(&text(PROBE_INDEX)), TxnNumbers::Exact);
        assert_eq!(probe_answer(&text(1 << 53)), TxnNumbers::Lossy);
        assert_eq!(probe_answer(&text(7)), TxnNumbers::Unknown);
        assert_eq!(probe_answer("Permission denied"), TxnNumbers::Unknown);
    }

    #[test]
    fn go_flags_lose_their_low_bits_through_a_float64() {
        // The value a real Consul 1.0.8 stored for Go's lock flag.
        assert_eq!(through_f64(LOCK_FLAG_VALUE), 3304740253564472320);
        assert!(!exact_in_f64(LOCK_FLAG_VALUE));
        assert!(!exact_in_f64(SEMAPHORE_FLAG_VALUE));
        assert!(exact_in_f64(1 << 53));
        assert!(exact_in_f64(42));
    }

    #[test]
    fn a_flagged_answer_teaches_how_numbers_are_stored() {
        let l = Learned::default();
        assert_eq!(l.txn_numbers(), TxnNumbers::Unknown);
        assert!(l.learn_txn_flags(7, 7));
        assert_eq!(
            l.txn_numbers(),
            TxnNumbers::Unknown,
            "small flags tell nothing"
        );
        assert!(!l.learn_txn_flags(LOCK_FLAG_VALUE, through_f64(LOCK_FLAG_VALUE)));
        assert_eq!(l.txn_numbers(), TxnNumbers::Lossy);
        assert!(l.learn_txn_flags(LOCK_FLAG_VALUE, LOCK_FLAG_VALUE));
        assert_eq!(l.txn_numbers(), TxnNumbers::Exact);
    }
}
