//! TLS settings into ureq's TLS configuration (CA, client certificate).

use crate::foundations::error::{Error, ErrorKind, Result};
use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig};

use crate::foundations::config::ClientBuilder;

pub(super) fn read_file(path: &std::path::Path, what: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("Error loading {what} {}: {e}", path.display()),
        )
        .with_source(e)
    })
}

pub(super) fn pem_items(data: &[u8], path: &std::path::Path) -> Result<Vec<PemItem<'static>>> {
    ureq::tls::parse_pem(data)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("could not parse PEM in {}: {e}", path.display()),
            )
        })
}

pub(super) fn certs_in(data: &[u8], path: &std::path::Path) -> Result<Vec<Certificate<'static>>> {
    let certs: Vec<_> = pem_items(data, path)?
        .into_iter()
        .filter_map(|i| match i {
            PemItem::Certificate(c) => Some(c),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("no PEM certificate found in {}", path.display()),
        ));
    }
    Ok(certs)
}

pub(super) fn tls_config(b: &ClientBuilder) -> Result<TlsConfig> {
    let t = &b.tls;
    let mut builder = TlsConfig::builder().disable_verification(t.insecure_skip_verify);
    let mut roots = Vec::new();
    if let Some(f) = &t.ca_file {
        roots.extend(certs_in(&read_file(f, "CA file")?, f)?);
    }
    if let Some(dir) = &t.ca_path {
        let entries = std::fs::read_dir(dir).map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("Error loading CA path {}: {e}", dir.display()),
            )
        })?;
        let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths.into_iter().filter(|p| p.is_file()) {
            roots.extend(certs_in(&read_file(&p, "CA file")?, &p)?);
        }
    }
    if !roots.is_empty() {
        builder = builder.root_certs(RootCerts::new_with_certs(&roots));
    }
    match (&t.cert_file, &t.key_file) {
        (None, None) => {}
        (Some(c), Some(k)) => {
            let certs = certs_in(&read_file(c, "client cert")?, c)?;
            let key: Option<PrivateKey<'static>> = pem_items(&read_file(k, "client key")?, k)?
                .into_iter()
                .find_map(|i| match i {
                    PemItem::PrivateKey(k) => Some(k),
                    _ => None,
                });
            let key = key.ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!("no PEM private key found in {}", k.display()),
                )
            })?;
            builder = builder.client_cert(Some(ClientCert::new_with_certs(&certs, key)));
        }
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "both client cert and client key must be provided",
            ))
        }
    }
    Ok(builder.build())
}

/// The rustls configuration of the connections baton drives itself (the loop connection, the
/// key hub's polls), from the same settings as ureq's: the configured CA certificates (else
/// Mozilla's roots, ureq's default), the client certificate, and no verification when
/// `insecure_skip_verify` says so. Called after [`tls_config`] accepted the same files.
pub(super) fn rustls_config(b: &ClientBuilder) -> Result<std::sync::Arc<rustls::ClientConfig>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let t = &b.tls;
    let bad = |what: &str, path: &std::path::Path, e: &dyn std::fmt::Display| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("could not read the {what} in {}: {e}", path.display()),
        )
    };
    let certs = |path: &std::path::Path| -> Result<Vec<CertificateDer<'static>>> {
        let data = read_file(path, "CA file")?;
        CertificateDer::pem_slice_iter(&data)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| bad("certificates", path, &e))
    };
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .map_err(|e| Error::new(ErrorKind::InvalidArgument, format!("TLS: {e}")))?;
    let builder = if t.insecure_skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(std::sync::Arc::new(Unverified(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        let mut files = Vec::new();
        if let Some(f) = &t.ca_file {
            files.push(f.clone());
        }
        if let Some(dir) = &t.ca_path {
            let mut paths: Vec<_> = std::fs::read_dir(dir)
                .map_err(|e| bad("CA path", dir, &e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect();
            paths.sort();
            files.extend(paths);
        }
        for f in &files {
            roots.add_parsable_certificates(certs(f)?);
        }
        if files.is_empty() {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        builder.with_root_certificates(roots)
    };
    let mut config = match (&t.cert_file, &t.key_file) {
        (Some(c), Some(k)) => {
            let chain = certs(c)?;
            let key = PrivateKeyDer::from_pem_slice(&read_file(k, "client key")?)
                .map_err(|e| bad("private key", k, &e))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| bad("client certificate", c, &e))?
        }
        _ => builder.with_no_client_auth(),
    };
    config.enable_sni = true;
    Ok(std::sync::Arc::new(config))
}

/// Accepts any server certificate (`insecure_skip_verify`, Consul's `CONSUL_HTTP_SSL_VERIFY=
/// false`); signatures are still checked, with the provider's algorithms.
#[derive(Debug)]
struct Unverified(std::sync::Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> std::result::Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
