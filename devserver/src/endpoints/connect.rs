//! `/v1/agent/connect/ca/roots` and `/v1/connect/ca/roots`: the Connect CA root, which the Go
//! test harness (`sdk/testutil` `WaitForActiveCARoot`) waits for because Connect is on in its
//! default config. The dev server generates a self-signed ECDSA P-256 root per state, its DER
//! written here and signed with `ring` (a real server's built-in CA generates one at bootstrap,
//! `agent/connect/ca/provider_consul.go`); it signs nothing else.

use base64::Engine;
use serde_json::{json, Value};

use crate::endpoints::ctx::Ctx;
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

/// DER: one tag-length-value.
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes: Vec<u8> = n
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}

fn seq(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

/// Object identifiers, DER-encoded (tag and length included).
const OID_ECDSA_SHA256: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
const OID_EC_PUBLIC_KEY: &[u8] = &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_COMMON_NAME: &[u8] = &[0x06, 0x03, 0x55, 0x04, 0x03];
const OID_BASIC_CONSTRAINTS: &[u8] = &[0x06, 0x03, 0x55, 0x1d, 0x13];
const OID_KEY_USAGE: &[u8] = &[0x06, 0x03, 0x55, 0x1d, 0x0f];
const OID_SUBJECT_ALT_NAME: &[u8] = &[0x06, 0x03, 0x55, 0x1d, 0x11];
const OID_SUBJECT_KEY_ID: &[u8] = &[0x06, 0x03, 0x55, 0x1d, 0x0e];

fn extension(oid: &[u8], critical: bool, value: Vec<u8>) -> Vec<u8> {
    let mut parts = vec![oid.to_vec()];
    if critical {
        parts.push(vec![0x01, 0x01, 0xff]);
    }
    parts.push(tlv(0x04, &value));
    seq(&parts)
}

/// A self-signed ECDSA P-256 CA certificate for `spiffe://<trust_domain>`, valid from 1 January
/// of `from_year` to 1 January of `to_year`. Returns the PEM, the DER and the raw public key.
fn self_signed_root(
    trust_domain: &str,
    from_year: i32,
    to_year: i32,
) -> Option<(String, Vec<u8>, Vec<u8>)> {
    use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).ok()?;
    let key =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng).ok()?;
    let public = key.public_key().as_ref().to_vec();
    let name = seq(&[tlv(
        0x31,
        &seq(&[OID_COMMON_NAME.to_vec(), tlv(0x0c, b"Consul CA 7")]),
    )]);
    let utc = |y: i32| {
        tlv(
            0x17,
            format!("{:02}0101000000Z", y.rem_euclid(100)).as_bytes(),
        )
    };
    let spki = seq(&[
        seq(&[OID_EC_PUBLIC_KEY.to_vec(), OID_P256.to_vec()]),
        tlv(0x03, &[&[0u8][..], &public].concat()),
    ]);
    let ski = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &public);
    let uri = format!("spiffe://{trust_domain}");
    let extensions = seq(&[
        extension(OID_BASIC_CONSTRAINTS, true, seq(&[vec![0x01, 0x01, 0xff]])),
        // digitalSignature, keyCertSign, cRLSign.
        extension(OID_KEY_USAGE, true, vec![0x03, 0x02, 0x01, 0x86]),
        extension(
            OID_SUBJECT_ALT_NAME,
            false,
            seq(&[tlv(0x86, uri.as_bytes())]),
        ),
        extension(OID_SUBJECT_KEY_ID, false, tlv(0x04, ski.as_ref())),
    ]);
    let tbs = seq(&[
        tlv(0xa0, &[0x02, 0x01, 0x02]),
        vec![0x02, 0x01, 0x07],
        seq(&[OID_ECDSA_SHA256.to_vec()]),
        name.clone(),
        seq(&[utc(from_year), utc(to_year)]),
        name,
        spki,
        tlv(0xa3, &extensions),
    ]);
    let sig = key.sign(&rng, &tbs).ok()?;
    let der = seq(&[
        tbs,
        seq(&[OID_ECDSA_SHA256.to_vec()]),
        tlv(0x03, &[&[0u8][..], sig.as_ref()].concat()),
    ]);
    let b64 = base64::engine::general_purpose::STANDARD.encode(&der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    Some((pem, der, public))
}

/// A fresh root as `structs.CARoot` (JSON), for a cluster whose ID is `cluster_id`.
fn generate(cluster_id: &str, index: u64) -> Value {
    let trust_domain = format!("{cluster_id}.consul");
    let now = crate::godur::rfc3339(std::time::SystemTime::now());
    let year: i32 = now[..4].parse().unwrap_or(2026);
    let (pem, der, public) =
        self_signed_root(&trust_domain, year - 1, year + 10).unwrap_or_default();
    let id = fingerprint(&der);
    let key_id = fingerprint(&public);
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
    if st.operator.connect_root.is_none() {
        let cluster = crate::state::new_uuid();
        let idx = st.next_index();
        st.operator.connect_root = Some(generate(&cluster, idx));
    }
    st.operator.connect_root.clone().unwrap_or(Value::Null)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Splits one DER TLV off the front: (tag, content, rest).
    fn next(der: &[u8]) -> (u8, &[u8], &[u8]) {
        let (tag, first) = (der[0], der[1] as usize);
        let (len, start) = if first < 0x80 {
            (first, 2)
        } else {
            let n = first & 0x7f;
            let len = der[2..2 + n]
                .iter()
                .fold(0usize, |a, b| a << 8 | *b as usize);
            (len, 2 + n)
        };
        (tag, &der[start..start + len], &der[start + len..])
    }

    #[test]
    fn the_root_is_self_signed_and_its_signature_verifies() {
        let (pem, der, public) = self_signed_root("x.consul", 2025, 2036).unwrap();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----\n"));
        let (tag, cert, rest) = next(&der);
        assert_eq!((tag, rest.len()), (0x30, 0));
        // TBSCertificate, then the algorithm, then the signature BIT STRING.
        let (_, _, after_tbs) = next(cert);
        let tbs = &cert[..cert.len() - after_tbs.len()];
        let (_, _, sig_part) = next(after_tbs);
        let (tag, sig, _) = next(sig_part);
        assert_eq!(tag, 0x03);
        let key = ring::signature::UnparsedPublicKey::new(
            &ring::signature::ECDSA_P256_SHA256_ASN1,
            &public,
        );
        assert!(key.verify(tbs, &sig[1..]).is_ok());
        assert_eq!(fingerprint(&der).len(), 59);
    }
}
