//! `/v1/agent/connect/ca/roots` and `/v1/connect/ca/roots`: the Connect CA root, which the Go
//! test harness (`sdk/testutil` `WaitForActiveCARoot`) waits for because Connect is on in its
//! default config. The dev server generates a self-signed ECDSA P-256 root per state (a real
//! server's built-in CA does the same at bootstrap, `agent/connect/ca/provider_consul.go`); it
//! signs nothing else.

use serde_json::{json, Value};

use crate::http::Ctx;
use crate::query::Reply;
use crate::state::State;

/// `connect.CalculateCertFingerprint`: SHA-1 of the DER, lowercase hex pairs joined by `:`.
fn fingerprint(der: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, der);
    d.as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A fresh root as `structs.CARoot` (JSON), for a cluster whose ID is `cluster_id`.
fn generate(cluster_id: &str, index: u64) -> Value {
    let trust_domain = format!("{cluster_id}.consul");
    let now = crate::acl_endpoint::rfc3339(std::time::SystemTime::now());
    let year: i32 = now[..4].parse().unwrap_or(2026);
    let built = (|| -> Result<(String, Vec<u8>, Vec<u8>), rcgen::Error> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Consul CA 7");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::DigitalSignature,
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let uri = format!("spiffe://{trust_domain}");
        params.subject_alt_names = vec![rcgen::SanType::URI(uri.as_str().try_into()?)];
        params.not_before = rcgen::date_time_ymd(year - 1, 1, 1);
        params.not_after = rcgen::date_time_ymd(year + 10, 1, 1);
        params.serial_number = Some(rcgen::SerialNumber::from(7u64));
        let key = rcgen::KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        let spki = key.public_key_raw().to_vec();
        Ok((cert.pem(), cert.der().to_vec(), spki))
    })();
    let (pem, der, spki) = built.unwrap_or_default();
    let id = fingerprint(&der);
    let key_id = fingerprint(&spki);
    json!({
        "ID": id,
        "Name": "Consul CA Primary Cert",
        "SerialNumber": 7,
        "SigningKeyID": key_id,
        "ExternalTrustDomain": cluster_id,
        "NotBefore": format!("{}-01-01T00:00:00Z", year - 1),
        "NotAfter": format!("{}-01-01T00:00:00Z", year + 10),
        "RootCert": pem,
        "IntermediateCerts": null,
        "Active": true,
        "PrivateKeyType": "ec",
        "PrivateKeyBits": 256,
        "CreateIndex": index,
        "ModifyIndex": index
    })
}

/// The state's root, generated on first use.
fn root(st: &mut State) -> Value {
    if st.connect_root.is_none() {
        let cluster = crate::state::new_uuid();
        let idx = st.next_index();
        st.connect_root = Some(generate(&cluster, idx));
    }
    st.connect_root.clone().unwrap_or(Value::Null)
}

/// `GET /v1/agent/connect/ca/roots`, `GET /v1/connect/ca/roots` (`structs.IndexedCARoots`).
pub(crate) fn ca_roots(ctx: &Ctx) -> Reply {
    if ctx.foreign_dc() {
        return Reply::text(500, "No path to datacenter");
    }
    let r = ctx.shared.write(root);
    let cluster = r["ExternalTrustDomain"].as_str().unwrap_or_default();
    let index = r["ModifyIndex"].as_u64().unwrap_or(1);
    let body = json!({
        "ActiveRootID": r["ID"],
        "TrustDomain": format!("{cluster}.consul"),
        "Roots": [r],
    });
    Reply::json(200, &body, ctx.pretty()).with_meta(index)
}
