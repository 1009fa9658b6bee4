//! A group polled on a thread of its own, through ureq: the key hub of a client whose
//! requests go through an HTTP proxy (see `Transport::loop_capable`). At most [`super::MAX_GROUPS`] such threads.

use std::sync::{Arc, Weak};

use crossbeam_channel::select;

use super::poll::{Plan, PollState};
use super::Group;
use crate::transport::conn::Conn;

pub(super) fn run(core: Weak<Conn>, group: Arc<Group>) {
    let Some(strong) = core.upgrade() else { return };
    let closing = strong.closing.clone();
    drop(strong);
    let closing_rx = closing.receiver();
    let wake = group.wake_rx.clone();
    let mut state = PollState::new();
    loop {
        if closing.is_cancelled() {
            return;
        }
        let (want, req, round) = match state.plan(&group) {
            Plan::Nothing => {
                select! {
                    recv(wake) -> _ => {}
                    recv(closing_rx) -> _ => return,
                }
                continue;
            }
            Plan::Defer(until) => {
                select! {
                    recv(wake) -> _ => {}
                    recv(closing_rx) -> _ => return,
                    recv(crossbeam_channel::at(until)) -> _ => {}
                }
                state.deferred(&group);
                continue;
            }
            Plan::Restart => continue,
            Plan::Poll(want, req, round) => (want, req, round),
        };
        let Some(core) = core.upgrade() else { return };
        // Widening the target cancels the round, which interrupts the poll.
        let mut req = req;
        req.cancel = Some(round.clone());
        let result = core
            .transport
            .send_on(&req, Some(&core.closing))
            .and_then(|resp| crate::api::kv::read_answer(&req, resp));
        // Consul answering any thread again ends a pause after a failure.
        let back = core.transport.availability.next_answer();
        drop(core);
        if closing.is_cancelled() {
            return;
        }
        if round.is_cancelled() {
            // Interrupted to widen the target: start over at once.
            state.interrupted();
            continue;
        }
        // From here on, a subscriber that joins now gets this answer although it was made
        // before it joined: why subscribers seed with their own view.
        #[cfg(test)]
        super::failpoint::hit(&group.name);
        match result {
            Ok((entries, meta)) => {
                let pause = state.answered(&group, &want, entries, meta);
                if !pause.is_zero() {
                    // A new subscriber (a wake-up) does not wait for the pause.
                    select! {
                        recv(closing_rx) -> _ => return,
                        recv(wake) -> _ => {}
                        default(pause) => {}
                    }
                }
            }
            Err(e) => {
                let pause = state.failed(&group, &e);
                select! {
                    recv(closing_rx) -> _ => return,
                    recv(back.receiver()) -> _ => {}
                    default(pause) => {}
                }
            }
        }
    }
}
