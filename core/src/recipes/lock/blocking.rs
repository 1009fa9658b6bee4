//! The blocking acquire: the loop that waits for its turn at the key and asks Consul for it
//! until it is granted, refused at the deadline, cancelled or failed. Every way into an
//! acquire ends here when its one request does not settle it (`Lock::acquire`, the direct
//! path's and the event loops' resumed calls, `lock::warm`): it calls only down, into the
//! lock's shared state and the runtime.

use std::sync::Arc;
use std::time::Instant;

use super::LockShared;
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::runtime::claim::unclaim;
use crate::runtime::lease::Session;
use crate::runtime::ride_out::RideOut;

impl LockShared {
    /// [`Lock::acquire_unjudged`] once the lock object's turn is taken, inside the call's
    /// deadline scope. `resumed`: the session, already claimed locally, of a warm attempt
    /// this call goes on from, and whether that attempt may have been granted unseen.
    pub(super) fn acquire_in_turn(
        self: &Arc<Self>,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
        mut resumed: Option<(Session, bool)>,
    ) -> Result<bool> {
        let sh = self;
        let past_deadline = |e: &Error| {
            e.kind() == ErrorKind::Timeout && deadline.is_some_and(|d| d <= Instant::now())
        };
        let mut ride = RideOut::new(sh.client.core(), "lock acquire", deadline, cancel);
        loop {
            let (session, maybe_applied) = match resumed.take() {
                Some(r) => r,
                None => {
                    let session = match &sh.explicit_session {
                        Some(s) => s.clone(),
                        None => match ride.run(|| sh.client.default_session()) {
                            Ok(s) => s,
                            Err(e) if past_deadline(&e) => return Ok(false),
                            Err(e) => return Err(e),
                        },
                    };
                    if !session.is_valid() {
                        if sh.explicit_session.is_some() {
                            return Err(Error::new(
                                ErrorKind::SessionInvalidated,
                                format!("the lock's session {} is lost", session.id()),
                            ));
                        }
                        continue;
                    }
                    if !sh.wait_local(&session, deadline, cancel)? {
                        return Ok(false);
                    }
                    (session, false)
                }
            };
            let result = sh.acquire_remote(&session, deadline, cancel, maybe_applied);
            match result {
                Ok(true) => return Ok(true),
                Err(e)
                    if e.kind() == ErrorKind::SessionInvalidated
                        && sh.explicit_session.is_none()
                        && !session.is_valid() =>
                {
                    // The default session died while we waited: take the new one.
                    unclaim(session.id(), &sh.key, sh.id);
                    continue;
                }
                Err(e) if past_deadline(&e) => {
                    unclaim(session.id(), &sh.key, sh.id);
                    return Ok(false);
                }
                // Refused: the key is held elsewhere. Its next change wakes every waiter, so
                // the claim goes without waking the futures refused for it (a herd of tries
                // that would all be refused again).
                Ok(false) => {
                    crate::runtime::claim::unclaim_refused(session.id(), &sh.key, sh.id);
                    return Ok(false);
                }
                other => {
                    unclaim(session.id(), &sh.key, sh.id);
                    return other;
                }
            }
        }
    }
}
