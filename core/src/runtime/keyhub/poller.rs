//! Every group of a client polled by one thread, over any of the engine's connections (HTTP
//! or HTTPS, TCP, a unix socket or a proxy's tunnel).
//!
//! Each group's long poll is an [`Exchange`] on a non-blocking connection of its own; the
//! thread waits in one `poll(2)` on all of them, on a wake-up socket (a new subscriber, the
//! client closing, Consul answering again after a failure) and on the earliest of the
//! groups' timers (a deadline, a pause, a deferred watch), then moves each group on. So a
//! client's key watches cost one thread whatever the number of groups, and one connection
//! per group ([`super::MAX_GROUPS`] at most).
//!
//! Connecting is the one blocking step: it happens on this thread, bounded by the client's
//! connect timeout, only when a group has no connection (the first poll, or after a
//! failure: the agent is then unreachable for the other groups too).

use std::io::{ErrorKind as IoKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::poll::{Plan, PollState};
use super::{Group, Target};
use crate::foundations::cancel::{CancelToken, HookGuard};
use crate::foundations::error::{Error, ErrorKind};
use crate::foundations::threads::Worker;
use crate::transport::conn::Conn;
use crate::transport::http::exchange::{Exchange, LoopConn, Progress};
use crate::transport::http::{Interest, Request};

/// Wakes the poller thread from any thread: one byte on a socket its `poll` watches. Never
/// blocks (a full socket already holds a wake-up).
pub(crate) struct Poke(UnixStream);

impl Poke {
    pub(crate) fn poke(&self) {
        let _ = (&self.0).write(&[1]);
    }
}

/// The poller thread of one client, and how to hand it a new group.
pub(super) struct Poller {
    groups: Sender<Arc<Group>>,
    poke: Arc<Poke>,
    pub(super) worker: Worker,
    /// Pokes the thread when the client closes.
    _closing: HookGuard,
}

impl Poller {
    pub(super) fn start(core: &Arc<Conn>) -> std::io::Result<Poller> {
        let (tx, rx) = UnixStream::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        let poke = Arc::new(Poke(tx));
        let (groups, new) = crossbeam_channel::unbounded();
        let weak = Arc::downgrade(core);
        let p = poke.clone();
        let worker = Worker::spawn("baton-keys", move || run(weak, new, rx, p))?;
        let p = poke.clone();
        let closing = core.closing.on_cancel(move || p.poke());
        Ok(Poller {
            groups,
            poke,
            worker,
            _closing: closing,
        })
    }

    /// The poke a group of this poller wakes it with.
    pub(super) fn poke(&self) -> Arc<Poke> {
        self.poke.clone()
    }

    /// Hands the thread a new group to poll.
    pub(super) fn add(&self, group: Arc<Group>) {
        let _ = self.groups.send(group);
        self.poke.poke();
    }
}

/// What a group is doing.
enum Io {
    /// About to plan its next poll.
    Plan,
    /// Waiting: until a time (if any), a wake of the group (if `woken`), or Consul answering
    /// again (`back`, after a failure).
    Wait {
        until: Option<Instant>,
        woken: bool,
        back: Option<(CancelToken, HookGuard)>,
        deferred: bool,
    },
    /// A poll in flight (boxed: the largest state by far).
    Flight(Box<Flight>),
}

struct Flight {
    ex: Exchange,
    req: Request,
    want: Target,
    round: CancelToken,
    deadline: Instant,
    interest: Interest,
}

/// One group as the poller drives it.
struct Slot {
    group: Arc<Group>,
    state: PollState,
    io: Io,
    /// The group's idle connection between polls.
    conn: Option<LoopConn>,
}

fn run(core: Weak<Conn>, new: Receiver<Arc<Group>>, mut wake: UnixStream, poke: Arc<Poke>) {
    let Some(strong) = core.upgrade() else { return };
    let closing = strong.closing.clone();
    drop(strong);
    let mut slots: Vec<Slot> = Vec::new();
    let mut ready: Vec<bool> = Vec::new();
    loop {
        if closing.is_cancelled() {
            return;
        }
        while let Ok(group) = new.try_recv() {
            slots.push(Slot {
                group,
                state: PollState::new(),
                io: Io::Plan,
                conn: None,
            });
        }
        ready.resize(slots.len(), false);
        {
            let Some(core) = core.upgrade() else { return };
            // Groups whose socket is ready first: an answer that has arrived (a holding's key
            // taken: its loss) is delivered before any group connects, the one step here that
            // blocks.
            let mut order: Vec<usize> = (0..slots.len()).collect();
            order.sort_by_key(|&i| !ready[i]);
            for i in order {
                slots[i].turn(&core, &poke, std::mem::take(&mut ready[i]));
                if closing.is_cancelled() {
                    return;
                }
            }
        }
        if !wait(&mut wake, &slots, &mut ready) {
            // `poll` itself failed: waiting again would only spin.
            log::error!("baton key hub: poll failed; key watches stop");
            return;
        }
    }
}

/// Waits for the wake-up socket, a group's socket or the earliest timer; marks the groups
/// whose socket is ready. `false` when `poll` failed.
fn wait(wake: &mut UnixStream, slots: &[Slot], ready: &mut [bool]) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let now = Instant::now();
    let mut earliest: Option<Instant> = None;
    let mut fds = vec![PollFd::new(&*wake, PollFlags::IN)];
    let mut owners = Vec::new();
    for (i, slot) in slots.iter().enumerate() {
        let at = match &slot.io {
            Io::Flight(f) => {
                if let Some(fd) = f.ex.poll_fd(f.interest) {
                    fds.push(fd);
                    owners.push(i);
                }
                Some(f.deadline)
            }
            Io::Wait { until, .. } => *until,
            Io::Plan => Some(now),
        };
        if let Some(at) = at {
            earliest = Some(earliest.map_or(at, |e| e.min(at)));
        }
    }
    let limit = earliest.map(|at| {
        let d = at.saturating_duration_since(now);
        // Rounded up to the millisecond: a timer is never woken for just before it is due.
        let d = Duration::from_millis(d.as_micros().div_ceil(1000) as u64);
        Timespec {
            tv_sec: d.as_secs() as i64,
            tv_nsec: d.subsec_nanos().into(),
        }
    });
    match poll(&mut fds, limit.as_ref()) {
        Ok(_) => {}
        Err(rustix::io::Errno::INTR) => return true,
        Err(_) => return false,
    }
    for (fd, i) in fds[1..].iter().zip(owners) {
        if !fd.revents().is_empty() {
            ready[i] = true;
        }
    }
    if !fds[0].revents().is_empty() {
        let mut buf = [0u8; 64];
        while matches!(wake.read(&mut buf), Ok(n) if n > 0) {}
    }
    true
}

impl Slot {
    /// Moves the group on as far as it can go without waiting.
    fn turn(&mut self, core: &Conn, poke: &Arc<Poke>, ready: bool) {
        let mut ready = ready;
        loop {
            match &mut self.io {
                Io::Wait {
                    until,
                    woken,
                    back,
                    deferred,
                } => {
                    let due = until.is_some_and(|u| Instant::now() >= u);
                    let back = back.as_ref().is_some_and(|(t, _)| t.is_cancelled());
                    let woke = *woken && self.group.wake_rx.try_recv().is_ok();
                    if !(due || back || woke) {
                        return;
                    }
                    if *deferred {
                        self.state.deferred(&self.group);
                    }
                    self.io = Io::Plan;
                }
                Io::Plan => {
                    self.io = match self.state.plan(&self.group) {
                        Plan::Nothing => Io::Wait {
                            until: None,
                            woken: true,
                            back: None,
                            deferred: false,
                        },
                        Plan::Defer(at) => Io::Wait {
                            until: Some(at),
                            woken: true,
                            back: None,
                            deferred: true,
                        },
                        Plan::Restart => {
                            // A new connection for the new target.
                            self.conn = None;
                            Io::Plan
                        }
                        Plan::Poll(want, req, round) => match self.send(core, want, req, round) {
                            Ok(flight) => {
                                ready = true;
                                Io::Flight(Box::new(flight))
                            }
                            Err(e) => self.failed(core, poke, &e),
                        },
                    };
                }
                Io::Flight(f) => {
                    if f.round.is_cancelled() {
                        // Interrupted to widen the target: start over at once.
                        self.state.interrupted();
                        self.io = Io::Plan;
                        continue;
                    }
                    if !ready {
                        if Instant::now() < f.deadline {
                            return;
                        }
                        let limit = core.transport.time_limit(&f.req);
                        core.transport
                            .conclude_io_failure(f.req.endpoint(), IoKind::TimedOut.into());
                        let e =
                            Error::new(ErrorKind::Timeout, format!("no answer within {limit:?}"))
                                .with_endpoint(f.req.endpoint())
                                .transient();
                        self.io = self.failed(core, poke, &e);
                        return;
                    }
                    ready = false;
                    match f.ex.advance() {
                        Progress::Pending(i) => {
                            f.interest = i;
                            return;
                        }
                        Progress::Failed(io, _) => {
                            let endpoint = f.req.endpoint();
                            let e = Error::new(ErrorKind::Connection, io.to_string())
                                .with_endpoint(endpoint.clone())
                                .transient();
                            core.transport.conclude_io_failure(endpoint, io);
                            self.io = self.failed(core, poke, &e);
                            return;
                        }
                        Progress::Answered(resp, conn) => {
                            self.conn = conn;
                            let Io::Flight(f) = std::mem::replace(&mut self.io, Io::Plan) else {
                                unreachable!("matched above")
                            };
                            let result = core
                                .transport
                                .conclude(f.req.endpoint(), Ok(resp), false)
                                .and_then(|r| crate::api::kv::read_answer(&f.req, r));
                            if f.round.is_cancelled() {
                                self.state.interrupted();
                                continue;
                            }
                            #[cfg(test)]
                            super::failpoint::hit(&self.group.name);
                            self.io = match result {
                                Ok((entries, meta)) => {
                                    let pause =
                                        self.state.answered(&self.group, &f.want, entries, meta);
                                    if pause.is_zero() {
                                        Io::Plan
                                    } else {
                                        // A new subscriber (a wake-up) does not wait for the
                                        // pause.
                                        Io::Wait {
                                            until: Some(Instant::now() + pause),
                                            woken: true,
                                            back: None,
                                            deferred: false,
                                        }
                                    }
                                }
                                Err(e) => self.failed(core, poke, &e),
                            };
                        }
                    }
                }
            }
        }
    }

    /// Sends a poll on the group's connection (opened first if it has none).
    fn send(
        &mut self,
        core: &Conn,
        want: Target,
        req: Request,
        round: CancelToken,
    ) -> crate::foundations::error::Result<Flight> {
        let transport = &core.transport;
        let bytes = transport.render(&req)?;
        let conn = match self.conn.take().and_then(|mut c| c.reusable().then_some(c)) {
            Some(c) => c,
            // Noted as a failed request is (reach, availability), with its URL.
            None => match transport.connect_loop_conn() {
                Ok(c) => c,
                Err(e) => {
                    let e = e.with_endpoint(req.endpoint());
                    let noted = transport.conclude(req.endpoint(), Err(e), false);
                    return Err(noted.err().unwrap_or_else(|| {
                        Error::new(ErrorKind::Connection, "no connection to the agent")
                    }));
                }
            },
        };
        Ok(Flight {
            ex: Exchange::new(conn, bytes),
            deadline: Instant::now() + transport.time_limit(&req),
            round,
            req,
            want,
            interest: Interest::Write,
        })
    }

    /// A failed poll: backs off until its pause is over or Consul answers again.
    fn failed(&mut self, core: &Conn, poke: &Arc<Poke>, e: &Error) -> Io {
        self.conn = None;
        let pause = self.state.failed(&self.group, e);
        // Consul answering any request of the client again ends the pause.
        let back = core.transport.availability.next_answer();
        let p = poke.clone();
        let hook = back.on_cancel(move || p.poke());
        Io::Wait {
            until: Some(Instant::now() + pause),
            woken: false,
            back: Some((back, hook)),
            deferred: false,
        }
    }
}
