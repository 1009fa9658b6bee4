//! Sessions bound to health checks: the agent's check and service endpoints
//! (`client.agent`, `lib/agent.js`) and adopting an existing session.

use napi::bindgen_prelude::Object;
use napi::{Env, Result};
use napi_derive::napi;

use crate::{invalid, millis, on_thread, NativeClient, NativeSession};

/// A TTL check to register.
#[napi(object)]
pub struct TtlCheckOptions {
    /// How long a report stays valid, in milliseconds (positive).
    pub ttl_ms: f64,
    /// Human-readable name (default: the check ID).
    pub name: Option<String>,
    /// The service the check belongs to (default: a check of the node).
    pub service_id: Option<String>,
    /// Free-form notes.
    pub notes: Option<String>,
    /// Initial status: `"passing"`, `"warning"` or `"critical"` (Consul's default for TTL
    /// checks).
    pub status: Option<String>,
}

/// A service to register.
#[napi(object)]
pub struct ServiceOptions {
    /// The service name.
    pub name: String,
    /// The instance ID (default: the name).
    pub id: Option<String>,
    /// Tags.
    pub tags: Option<Vec<String>>,
    /// Address (default: the node's).
    pub address: Option<String>,
    /// Port.
    pub port: Option<u32>,
}

fn status(name: &str) -> Result<baton::CheckStatus> {
    baton::CheckStatus::parse(name).ok_or_else(|| {
        invalid(format!(
            "status must be 'passing', 'warning' or 'critical', got {name:?}"
        ))
    })
}

#[napi]
impl NativeClient {
    /// Manages a session created elsewhere: renewed if it has a TTL, never destroyed by close.
    #[napi(ts_return_type = "Promise<NativeSession>")]
    pub fn adopt_session<'e>(&self, env: &'e Env, id: String) -> Result<Object<'e>> {
        let c = self.inner.clone();
        on_thread(env, move || {
            c.adopt_session(&id)
                .map(|inner| NativeSession::new(inner, &c))
        })
    }

    /// `PUT /v1/agent/check/register` with a TTL check.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn check_register<'e>(
        &self,
        env: &'e Env,
        id: String,
        options: TtlCheckOptions,
    ) -> Result<Object<'e>> {
        let ttl = millis("ttlMs", Some(options.ttl_ms))?.unwrap_or_default();
        let mut check = baton::TtlCheck::new(id, ttl);
        if let Some(n) = options.name {
            check = check.name(n);
        }
        if let Some(s) = options.service_id {
            check = check.service_id(s);
        }
        if let Some(n) = options.notes {
            check = check.notes(n);
        }
        if let Some(s) = options.status {
            check = check.status(status(&s)?);
        }
        let c = self.inner.clone();
        on_thread(env, move || c.agent().check_register(&check))
    }

    /// `PUT /v1/agent/check/deregister/<id>`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn check_deregister<'e>(&self, env: &'e Env, id: String) -> Result<Object<'e>> {
        let c = self.inner.clone();
        on_thread(env, move || c.agent().check_deregister(&id))
    }

    /// `PUT /v1/agent/check/<verb>/<id>` with verb `pass`, `warn` or `fail`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn check_report<'e>(
        &self,
        env: &'e Env,
        verb: String,
        id: String,
        note: Option<String>,
    ) -> Result<Object<'e>> {
        let c = self.inner.clone();
        if !matches!(verb.as_str(), "pass" | "warn" | "fail") {
            return Err(invalid(format!("unknown check report {verb:?}")));
        }
        on_thread(env, move || {
            let a = c.agent();
            match verb.as_str() {
                "pass" => a.check_pass(&id, note.as_deref()),
                "warn" => a.check_warn(&id, note.as_deref()),
                _ => a.check_fail(&id, note.as_deref()),
            }
        })
    }

    /// `PUT /v1/agent/check/update/<id>`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn check_update<'e>(
        &self,
        env: &'e Env,
        id: String,
        status_name: String,
        output: Option<String>,
    ) -> Result<Object<'e>> {
        let s = status(&status_name)?;
        let c = self.inner.clone();
        on_thread(env, move || {
            c.agent().check_update(&id, s, output.as_deref())
        })
    }

    /// `PUT /v1/agent/service/register`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn service_register<'e>(
        &self,
        env: &'e Env,
        options: ServiceOptions,
    ) -> Result<Object<'e>> {
        let mut s = baton::ServiceRegistration::new(options.name);
        if let Some(id) = options.id {
            s = s.id(id);
        }
        for t in options.tags.into_iter().flatten() {
            s = s.tag(t);
        }
        if let Some(a) = options.address {
            s = s.address(a);
        }
        if let Some(p) = options.port {
            let p = u16::try_from(p)
                .map_err(|_| invalid(format!("port must be between 0 and 65535, got {p}")))?;
            s = s.port(p);
        }
        let c = self.inner.clone();
        on_thread(env, move || c.agent().service_register(&s))
    }

    /// `PUT /v1/agent/service/deregister/<id>`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn service_deregister<'e>(&self, env: &'e Env, id: String) -> Result<Object<'e>> {
        let c = self.inner.clone();
        on_thread(env, move || c.agent().service_deregister(&id))
    }
}
