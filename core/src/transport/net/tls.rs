//! TLS settings into the rustls configuration of the engine's connections (CA, client
//! certificate, verification).

use crate::foundations::error::{Error, ErrorKind, Result};

use crate::foundations::config::ClientBuilder;

fn read_file(path: &std::path::Path, what: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("Error loading {what} {}: {e}", path.display()),
        )
        .with_source(e)
    })
}

/// The rustls configuration of every HTTPS connection of the client: the configured CA
/// certificates (else Mozilla's roots), the client certificate, and no verification when
/// `insecure_skip_verify` says so; `None` for a plain-HTTP client (`https` false). The files
/// are read and checked whatever the scheme, so a mistake in them is said when the client is
/// built.
pub(crate) fn rustls_config(
    b: &ClientBuilder,
    https: bool,
) -> Result<Option<std::sync::Arc<rustls::ClientConfig>>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let t = &b.tls;
    let invalid = |msg: String| Error::new(ErrorKind::InvalidArgument, msg);
    let certs = |path: &std::path::Path, what: &str| -> Result<Vec<CertificateDer<'static>>> {
        let data = read_file(path, what)?;
        let certs = CertificateDer::pem_slice_iter(&data)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("could not parse PEM in {}: {e}", path.display())))?;
        if certs.is_empty() {
            return Err(invalid(format!(
                "no PEM certificate found in {}",
                path.display()
            )));
        }
        Ok(certs)
    };
    let mut files = Vec::new();
    if let Some(f) = &t.ca_file {
        files.push(f.clone());
    }
    if let Some(dir) = &t.ca_path {
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| invalid(format!("Error loading CA path {}: {e}", dir.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        files.extend(paths);
    }
    let mut trusted = Vec::new();
    for f in &files {
        trusted.extend(certs(f, "CA file")?);
    }
    let client = match (&t.cert_file, &t.key_file) {
        (None, None) => None,
        (Some(c), Some(k)) => {
            let chain = certs(c, "client cert")?;
            let key = PrivateKeyDer::from_pem_slice(&read_file(k, "client key")?)
                .map_err(|_| invalid(format!("no PEM private key found in {}", k.display())))?;
            Some((chain, key, c))
        }
        _ => {
            return Err(invalid(
                "both client cert and client key must be provided".to_string(),
            ))
        }
    };
    if !https {
        return Ok(None);
    }
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(trusted);
    if files.is_empty() {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .map_err(|e| invalid(format!("TLS: {e}")))?;
    let builder = if t.insecure_skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(std::sync::Arc::new(Unverified(provider)))
    } else {
        builder.with_root_certificates(roots)
    };
    let mut config = match client {
        None => builder.with_no_client_auth(),
        Some((chain, key, c)) => builder.with_client_auth_cert(chain, key).map_err(|e| {
            invalid(format!(
                "could not use the client certificate in {}: {e}",
                c.display()
            ))
        })?,
    };
    config.enable_sni = true;
    Ok(Some(std::sync::Arc::new(config)))
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
