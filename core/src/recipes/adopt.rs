//! Adopting a session this client did not create: [`Client::adopt_session`].

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::api::session_api::is_session_id;
use crate::client::Client;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::runtime::lease::{Session, SessionShared};

/// Makes an adoption's "already tracked?" check and its registration one step, so two
/// threads adopting one ID at once share one managed session instead of registering two.
static ADOPTING: Mutex<()> = Mutex::new(());

impl Client {
    /// Manages a session that already exists at Consul, created by someone
    /// else: another process sharing its session, or a session made with
    /// options baton does not offer. Locks, semaphores and elections can then
    /// use it like one from [`Client::create_session`].
    ///
    /// * `id` must be a session ID as Consul makes them (a UUID, `8-4-4-4-12`
    ///   hex digits), else [`ErrorKind::InvalidArgument`]; a session Consul
    ///   does not know (`GET /v1/session/info/<id>` lists none) is
    ///   [`ErrorKind::NotFound`].
    /// * **Renewal:** a session with a TTL is renewed once right away (that
    ///   renew starts the local lease deadline, since when its owner last
    ///   renewed is unknown) and then in the background like a created one:
    ///   renewing another process's session only extends it, and whoever
    ///   stops renewing last decides when it expires. Call
    ///   [`Session::stop_renewal`] to leave renewal to the owner (the local
    ///   deadline then passes one TTL after this call). A session without a
    ///   TTL is watched for invalidation only.
    /// * **Ownership:** the session is not this client's: [`Client::close`]
    ///   releases the locks this client holds with it but never destroys it.
    ///   [`Session::destroy`] does destroy it at Consul, because you asked.
    /// * Adopting a session this client already manages (created or adopted,
    ///   not lost) returns that session.
    pub fn adopt_session(&self, id: &str) -> Result<Session> {
        self.core().check_usable()?;
        if !is_session_id(id) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "session ID {:?} is not a UUID (8-4-4-4-12 hex digits, as Consul makes them)",
                    crate::foundations::error::printable(id.as_bytes(), 64)
                ),
            ));
        }
        let entry = self.sessions().info(id)?.ok_or_else(|| {
            Error::new(
                ErrorKind::NotFound,
                format!("session {id} does not exist (GET /v1/session/info/{id} lists none)"),
            )
        })?;
        // Consul's own spelling of the ID (it matches IDs without regard to case).
        let id = entry.id;
        if let Some(s) = self.core().tracked_session(&id) {
            return Ok(Session { shared: s });
        }
        let mut ttl = entry_ttl(&entry.ttl);
        let sent = Instant::now();
        if ttl.is_some() {
            let renewed = self.sessions().renew(&id)?;
            ttl = renewed.ttl().or(ttl);
        }
        // No request under this lock: it only makes "tracked already?" and "track it" one step.
        let _one_at_a_time = crate::foundations::sync::lock(&ADOPTING);
        if let Some(s) = self.core().tracked_session(&id) {
            return Ok(Session { shared: s });
        }
        let shared = Arc::new(SessionShared::new(
            self.core().clone(),
            id,
            ttl,
            sent,
            false,
        ));
        self.core().register_session(shared.clone())?;
        Ok(Session { shared })
    }
}

fn entry_ttl(text: &str) -> Option<std::time::Duration> {
    crate::foundations::godur::parse_go_duration(text).filter(|d| !d.is_zero())
}
