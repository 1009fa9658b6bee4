//! A double barrier's `enter` and `leave` cut into steps ([`StepWait`]), for the
//! async layer: the same looks and writes as the blocking calls, with the wait
//! between them left to the caller (a change of the prefix wakes it).

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{lost, DoubleBarrier, Entered, Look, Shared};
use crate::foundations::cancel::{CancelToken, Linked};
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::runtime::lease::Session;
use crate::runtime::ride_out::RideOut;
use crate::runtime::step_wait::StepWait;

/// Marks a handle as in an async `enter` or `leave` until dropped.
struct Busy(Arc<Shared>);

impl Busy {
    fn start(shared: &Arc<Shared>, what: &str) -> Result<Busy> {
        if shared.busy.swap(true, Ordering::SeqCst) {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("double barrier {what}: another enter or leave of this handle is running"),
            ));
        }
        Ok(Busy(Arc::clone(shared)))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::SeqCst);
    }
}

/// An `enter` between its steps.
pub(crate) struct EnterSteps {
    shared: Arc<Shared>,
    session: Session,
    id: String,
    key: String,
    deadline: Option<Instant>,
    /// What bounds each request of a step: the deadline, unless the call looks once
    /// (a zero timeout), as in the blocking `enter`.
    bound: Option<Instant>,
    /// The participant key exists and is ours to remove if the call fails.
    registered: bool,
    /// Registration is done (the key was written once).
    started: bool,
    pruned: HashSet<String>,
    /// The caller's cancel and the session's loss, as one token.
    stop: Linked,
    _busy: Busy,
}

/// A `leave` between its steps.
pub(crate) struct LeaveSteps {
    shared: Arc<Shared>,
    entered: Entered,
    /// The participant key is deleted (or owed to Consul).
    left: bool,
    deadline: Option<Instant>,
    /// What bounds each request after the leave itself (see [`EnterSteps`]).
    bound: Option<Instant>,
    _busy: Busy,
}

impl DoubleBarrier {
    /// The steps of an `enter` bounded by `timeout`, and the token that ends
    /// it (`cancel`, or the participant session's loss). Errors at once, as
    /// [`DoubleBarrier::enter`] does, when the handle has entered already.
    pub(crate) fn enter_steps(
        &self,
        timeout: Option<Duration>,
        cancel: &CancelToken,
    ) -> Result<(EnterSteps, CancelToken)> {
        let sh = &self.shared;
        sh.client.core().check_usable()?;
        let busy = Busy::start(sh, "enter")?;
        if lock(&sh.entered).is_some() {
            return Err(Error::new(
                ErrorKind::Conflict,
                "double barrier already entered (leave first)",
            ));
        }
        let session = sh.session()?;
        let id = super::participant_id(&session);
        let key = sh.layout.participant(&id);
        let stop = CancelToken::any_of([cancel.clone(), session.cancel_token()]);
        let token = stop.token.clone();
        let deadline = crate::foundations::scope::deadline_after(timeout);
        let steps = EnterSteps {
            shared: Arc::clone(sh),
            session,
            id,
            key,
            deadline,
            bound: deadline.filter(|_| timeout != Some(Duration::ZERO)),
            registered: false,
            started: false,
            pruned: HashSet::new(),
            stop,
            _busy: busy,
        };
        Ok((steps, token))
    }

    /// The steps of a `leave` bounded by `timeout`. Errors at once, as
    /// [`DoubleBarrier::leave`] does, when the handle has not entered.
    pub(crate) fn leave_steps(&self, timeout: Option<Duration>) -> Result<LeaveSteps> {
        let sh = &self.shared;
        sh.client.core().check_usable()?;
        let busy = Busy::start(sh, "leave")?;
        let Some(entered) = lock(&sh.entered).take() else {
            return Err(Error::new(
                ErrorKind::Conflict,
                "double barrier not entered (enter first)",
            ));
        };
        let deadline = crate::foundations::scope::deadline_after(timeout);
        Ok(LeaveSteps {
            shared: Arc::clone(sh),
            entered,
            left: false,
            deadline,
            bound: deadline.filter(|_| timeout != Some(Duration::ZERO)),
            _busy: busy,
        })
    }

    /// The client it talks through.
    pub(crate) fn shared_client(&self) -> &crate::client::Client {
        &self.shared.client
    }

    /// The listing prefix a wait of this barrier watches.
    pub(crate) fn listing(&self) -> String {
        self.shared.layout.listing()
    }
}

impl EnterSteps {
    fn entered(&mut self, round: super::Round) -> bool {
        self.registered = false;
        *lock(&self.shared.entered) = Some(Entered {
            session: self.session.clone(),
            key: self.key.clone(),
            round,
        });
        true
    }
}

impl StepWait for EnterSteps {
    type Out = bool;

    fn step(&mut self, cancel: &CancelToken) -> Result<Option<bool>> {
        let sh = Arc::clone(&self.shared);
        let _turn = lock(&sh.turn);
        // Every request of the step is bounded by the call's deadline (DESIGN §2).
        let _scope = crate::foundations::scope::deadline(self.bound);
        let conn = sh.client.conn();
        let session = self.session.clone();
        let mut ride = RideOut::new(conn, "double barrier enter", self.deadline, Some(cancel))
            .on_session(&session);
        if !self.started {
            self.started = true;
            self.registered = true;
            sh.register(&self.session, &self.key, &mut ride)?;
        }
        loop {
            let entries = ride.run(|| sh.kv().list(&sh.layout.listing()))?;
            let look = sh.enter_look(
                &session,
                &self.id,
                &self.key,
                &entries,
                &mut self.pruned,
                &mut ride,
            );
            match look.map_err(|e| self.named(e))? {
                Look::Entered(round) => return Ok(Some(self.entered(round))),
                Look::Again => continue,
                Look::Wait => return Ok(None),
            }
        }
    }

    fn timed_out(&mut self) -> Result<bool> {
        let sh = Arc::clone(&self.shared);
        let _turn = lock(&sh.turn);
        match sh.withdraw(&self.id, &self.key) {
            Ok(Some(round)) => Ok(self.entered(round)),
            Ok(None) => {
                self.registered = false;
                Ok(false)
            }
            Err(e) => {
                self.registered = false;
                sh.remove_later(&self.session, &self.key);
                Err(e)
            }
        }
    }

    fn abandon(&mut self) {
        if std::mem::take(&mut self.registered) {
            self.shared.remove(&self.session, &self.key);
        }
    }
}

impl EnterSteps {
    /// An error of a step, named for what ended it: the session's loss.
    fn named(&self, e: Error) -> Error {
        if self.stop.token.is_cancelled() && !self.session.is_valid() {
            return lost(&self.session);
        }
        e
    }
}

impl StepWait for LeaveSteps {
    type Out = bool;

    fn step(&mut self, cancel: &CancelToken) -> Result<Option<bool>> {
        let sh = Arc::clone(&self.shared);
        let _turn = lock(&sh.turn);
        let conn = sh.client.conn();
        let mut ride = RideOut::new(conn, "double barrier leave", self.deadline, Some(cancel));
        let e = &self.entered;
        if !self.left {
            // Leave first, whatever the deadline.
            self.left = true;
            if let Err(err) = ride.run(|| sh.kv().delete(&e.key)) {
                sh.remove_later(&e.session, &e.key);
                return Err(err);
            }
        }
        // After the leave itself, requests are bounded by the call's deadline.
        let _scope = crate::foundations::scope::deadline(self.bound);
        let entries = ride.run(|| sh.kv().list(&sh.layout.listing()))?;
        Ok(sh
            .leave_look(&entries, &e.round, &mut ride)?
            .then_some(true))
    }

    fn timed_out(&mut self) -> Result<bool> {
        Ok(false)
    }

    fn abandon(&mut self) {
        if !std::mem::replace(&mut self.left, true) {
            let e = &self.entered;
            self.shared.remove(&e.session, &e.key);
        }
    }
}
