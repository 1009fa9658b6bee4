//! The byte pump: accepting the proxied connections and forwarding bytes both ways, with the
//! faults (silence, latency, resets, byte budgets) applied on the way.

use super::*;

/// Counts a connection as open until dropped (also when the runtime drops its task unrun).
pub(super) struct OpenGuard(pub(super) Arc<Shared>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

pub(super) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let (client, _) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                log::warn!("baton-devserver proxy: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // The reset epoch at accept time: a reset from now on covers this connection.
        let epoch = shared.ctl.borrow().reset_epoch;
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        shared.open.fetch_add(1, Ordering::SeqCst);
        let guard = OpenGuard(shared.clone());
        let _ = client.set_nodelay(true);
        tokio::spawn(serve_conn(client, guard, epoch));
    }
}

/// How a connection's forwarding ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// Both sides closed their half in order.
    Eof,
    /// A read or write failed.
    Failed,
    /// The byte budget is spent.
    Spent,
    /// [`FaultProxy::reset`].
    Reset,
}

/// One connection's byte budget under [`FaultProxy::drop_after`].
struct Budget(Mutex<BudgetState>);

struct BudgetState {
    /// The `drop_epoch` the budget was taken from.
    epoch: u64,
    /// Bytes still allowed (`None`: no limit).
    remaining: Option<u64>,
}

impl Budget {
    fn new(ctl: &Ctl) -> Budget {
        Budget(Mutex::new(BudgetState {
            epoch: ctl.drop_epoch,
            remaining: ctl.faults.drop_after,
        }))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, BudgetState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a fresh budget when the setting changed since; true when the setting is a budget
    /// of zero just taken (nothing may pass: close now).
    fn sync(&self, ctl: &Ctl) -> bool {
        let mut st = self.state();
        if st.epoch != ctl.drop_epoch {
            st.epoch = ctl.drop_epoch;
            st.remaining = ctl.faults.drop_after;
        }
        st.remaining == Some(0) && ctl.faults.drop_after == Some(0)
    }

    /// Of a chunk of `n` bytes, how many may pass, and whether the budget is spent after them.
    fn take(&self, ctl: &Ctl, n: usize) -> (usize, bool) {
        self.sync(ctl);
        let mut st = self.state();
        match st.remaining {
            None => (n, false),
            Some(r) => {
                let allowed = r.min(n as u64);
                st.remaining = Some(r - allowed);
                (allowed as usize, r - allowed == 0)
            }
        }
    }
}

async fn serve_conn(mut client: TcpStream, guard: OpenGuard, reset_epoch: u64) {
    let shared = guard.0.clone();
    let rx = shared.ctl.subscribe();
    let budget = Budget::new(&rx.borrow());
    let connect = {
        let mut rx = rx.clone();
        let upstream = shared.upstream;
        async move {
            // A blackhole holds new connections before they reach the server.
            forwarding(&mut rx).await;
            TcpStream::connect(upstream).await
        }
    };
    let upstream = tokio::select! {
        r = connect => r,
        () = reset_requested(rx.clone(), reset_epoch) => {
            abort(&client);
            return;
        }
        () = budget_zeroed(rx.clone(), &budget) => return,
    };
    let mut upstream = match upstream {
        Ok(u) => u,
        Err(e) => {
            log::debug!(
                "baton-devserver proxy: cannot connect to {}: {e}",
                shared.upstream
            );
            abort(&client);
            return;
        }
    };
    let _ = upstream.set_nodelay(true);
    let end = {
        let (mut client_r, mut client_w) = client.split();
        let (mut up_r, mut up_w) = upstream.split();
        let to_server = pump(
            &mut client_r,
            &mut up_w,
            &shared.to_upstream,
            &budget,
            rx.clone(),
        );
        let to_client = pump(
            &mut up_r,
            &mut client_w,
            &shared.to_client,
            &budget,
            rx.clone(),
        );
        tokio::select! {
            e = both(to_server, to_client) => e,
            () = reset_requested(rx.clone(), reset_epoch) => End::Reset,
            () = budget_zeroed(rx.clone(), &budget) => End::Spent,
        }
    };
    match end {
        End::Eof => {}
        End::Spent => {
            let _ = client.shutdown().await;
            let _ = upstream.shutdown().await;
        }
        End::Failed | End::Reset => {
            abort(&client);
            abort(&upstream);
        }
    }
    drop(guard);
}

/// Makes the socket's close send a reset (the socket is closed when dropped).
fn abort(stream: &TcpStream) {
    let _ = stream.set_zero_linger();
}

/// Runs both directions: an orderly close of one half leaves the other running; anything
/// else ends both.
async fn both(a: impl Future<Output = End>, b: impl Future<Output = End>) -> End {
    tokio::pin!(a);
    tokio::pin!(b);
    let (mut a_done, mut b_done) = (false, false);
    while !(a_done && b_done) {
        tokio::select! {
            e = &mut a, if !a_done => {
                if e != End::Eof {
                    return e;
                }
                a_done = true;
            }
            e = &mut b, if !b_done => {
                if e != End::Eof {
                    return e;
                }
                b_done = true;
            }
        }
    }
    End::Eof
}

/// Copies one direction, applying the faults chunk by chunk.
async fn pump<R, W>(
    from: &mut R,
    to: &mut W,
    counter: &AtomicU64,
    budget: &Budget,
    mut rx: watch::Receiver<Ctl>,
) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; CHUNK];
    loop {
        // Under a blackhole nothing is read: the kernel holds what the peer sends.
        forwarding(&mut rx).await;
        let n = match from.read(&mut buf).await {
            Ok(0) => {
                let _ = to.shutdown().await;
                return End::Eof;
            }
            Ok(n) => n,
            Err(_) => return End::Failed,
        };
        let (pause, allowed, spent) = {
            let ctl = rx.borrow();
            let (allowed, spent) = budget.take(&ctl, n);
            (chunk_delay(&ctl.faults), allowed, spent)
        };
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        // A chunk read just before a blackhole is held until it ends.
        forwarding(&mut rx).await;
        if allowed > 0 {
            if to.write_all(&buf[..allowed]).await.is_err() {
                return End::Failed;
            }
            counter.fetch_add(allowed as u64, Ordering::SeqCst);
        }
        if spent {
            return End::Spent;
        }
    }
}

/// The delay for one chunk: `delay ± jitter`, never below zero.
fn chunk_delay(f: &ProxyFaults) -> Duration {
    if f.jitter.is_zero() {
        return f.delay;
    }
    let base = u64::try_from(f.delay.as_nanos()).unwrap_or(u64::MAX);
    let j = u64::try_from(f.jitter.as_nanos()).unwrap_or(u64::MAX / 2);
    let draw = rand::thread_rng().gen_range(0..=j.saturating_mul(2));
    Duration::from_nanos(base.saturating_add(draw).saturating_sub(j))
}

/// Returns once no blackhole is on.
async fn forwarding(rx: &mut watch::Receiver<Ctl>) {
    // The sender lives in `Shared`, which outlives every connection task.
    let _ = rx.wait_for(|c| !c.faults.blackhole).await;
}

/// Returns once a reset newer than `epoch` was asked for.
async fn reset_requested(mut rx: watch::Receiver<Ctl>, epoch: u64) {
    if rx.wait_for(|c| c.reset_epoch != epoch).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Returns once a budget of zero applies to this connection.
async fn budget_zeroed(mut rx: watch::Receiver<Ctl>, budget: &Budget) {
    loop {
        if budget.sync(&rx.borrow_and_update()) {
            return;
        }
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

// ----- the HTTP control API -----

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jittered_delay_stays_within_bounds() {
        let f = ProxyFaults {
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(20),
            ..ProxyFaults::default()
        };
        for _ in 0..1000 {
            assert!(chunk_delay(&f) <= Duration::from_millis(30));
        }
        let f = ProxyFaults {
            delay: Duration::from_millis(50),
            ..ProxyFaults::default()
        };
        assert_eq!(chunk_delay(&f), Duration::from_millis(50));
    }

    #[test]
    fn budget_counts_down_and_renews_on_a_new_setting() {
        let mut ctl = Ctl::default();
        let b = Budget::new(&ctl);
        assert_eq!(b.take(&ctl, 100), (100, false));
        ctl.faults.drop_after = Some(10);
        ctl.drop_epoch += 1;
        assert!(!b.sync(&ctl));
        assert_eq!(b.take(&ctl, 4), (4, false));
        assert_eq!(b.take(&ctl, 100), (6, true));
        assert_eq!(b.take(&ctl, 1), (0, true));
        ctl.faults.drop_after = Some(0);
        ctl.drop_epoch += 1;
        assert!(b.sync(&ctl));
        ctl.faults.drop_after = None;
        ctl.drop_epoch += 1;
        assert_eq!(b.take(&ctl, 7), (7, false));
    }
}
