//! The HTTPS listener's TLS settings, as a Consul agent's `tls.https` block (`cert_file`,
//! `key_file`, `ca_file`, `verify_incoming`) and its `ports.https`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_rustls::rustls::{
    self,
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    server::WebPkiClientVerifier,
    RootCertStore, ServerConfig,
};

/// TLS of the HTTPS listener (`--tls-cert`, `--tls-key`, `--tls-ca`, `--verify-incoming`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsConfig {
    /// The server's certificate chain, PEM (Consul's `cert_file`).
    pub cert_file: PathBuf,
    /// Its private key, PEM (Consul's `key_file`).
    pub key_file: PathBuf,
    /// CA certificates, PEM, that client certificates must chain to (Consul's `ca_file`).
    pub ca_file: Option<PathBuf>,
    /// Require a client certificate signed by `ca_file` on every HTTPS connection (Consul's
    /// `verify_incoming`, or `tls.https.verify_incoming`). Without it, no client certificate is
    /// asked for. The plain HTTP listener is unaffected, as in Consul: turn it off to make
    /// mutual TLS the only way in.
    pub verify_incoming: bool,
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let list = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if list.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(list)
}

impl TlsConfig {
    /// Checks the combination as Consul does at start.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.cert_file.as_os_str().is_empty() || self.key_file.as_os_str().is_empty() {
            return Err(
                "HTTPS needs both a certificate and its key (--tls-cert, --tls-key)".into(),
            );
        }
        if self.verify_incoming && self.ca_file.is_none() {
            return Err(
                "verify_incoming needs the CA that client certificates chain to (--tls-ca)".into(),
            );
        }
        Ok(())
    }

    /// The rustls server configuration (reads the files).
    pub(crate) fn server_config(&self) -> Result<Arc<ServerConfig>, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = certs(&self.cert_file)?;
        let key = PrivateKeyDer::from_pem_file(&self.key_file)
            .map_err(|e| format!("{}: {e}", self.key_file.display()))?;
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = if self.verify_incoming {
            let ca = self
                .ca_file
                .as_deref()
                .ok_or("verify_incoming needs --tls-ca")?;
            let mut roots = RootCertStore::empty();
            for c in certs(ca)? {
                roots.add(c).map_err(|e| format!("{}: {e}", ca.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| e.to_string())?;
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let cfg = builder
            .with_single_cert(chain, key)
            .map_err(|e| format!("{}: {e}", self.cert_file.display()))?;
        Ok(Arc::new(cfg))
    }
}
