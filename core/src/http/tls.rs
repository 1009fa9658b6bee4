//! TLS settings into ureq's TLS configuration (CA, client certificate).

use crate::error::{Error, ErrorKind, Result};
use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig};

use crate::config::ClientBuilder;

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
