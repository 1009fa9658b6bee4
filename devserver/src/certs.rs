//! Certificates for tests, made the way `consul tls ca create` and `consul tls cert create` make
//! them (same subjects, names, key usages and file names), so that a test can set up TLS and
//! mutual TLS as an operator following Consul's guide would. `baton-devserver tls ...` is the
//! command-line form, for tests in other languages.
//!
//! What Consul does and this follows (`command/tls/ca/create`, `command/tls/cert/create`,
//! `tlsutil/generate.go`): ECDSA P-256 keys; a CA valid 1825 days named `Consul Agent CA <n>`
//! with `CA:TRUE` and the cert-sign, CRL-sign and digital-signature usages, written to
//! `<domain>-agent-ca.pem` and `<domain>-agent-ca-key.pem`; leaf certificates valid 365 days,
//! `CA:FALSE`, for `server.<dc>.<domain>` (server and client auth), `client.<dc>.<domain>`
//! (server and client auth) or `cli.client.<dc>.<domain>` (client auth), each also for
//! `localhost` and, but for the CLI one, `127.0.0.1`; written to `<dc>-<kind>-<domain>-<n>.pem`
//! and `<dc>-<kind>-<domain>-<n>-key.pem` with the first free `n`.
//!
//! [`self_signed_ca`] makes what a quick `openssl req -x509` makes: one self-signed certificate
//! that is its own CA (`CA:TRUE`). TLS libraries refuse it as a server certificate
//! (`CaUsedAsEndEntity`), which tests of that error need.

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// A failure to make, read or write a certificate.
#[derive(Debug)]
pub struct CertError(String);

impl fmt::Display for CertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CertError {}

fn err(what: &str, e: impl fmt::Display) -> CertError {
    CertError(format!("{what}: {e}"))
}

/// Consul's default domain (`-domain`).
pub const DEFAULT_DOMAIN: &str = "consul";
/// Consul's default datacenter (`-dc`).
pub const DEFAULT_DC: &str = "dc1";
/// Days a CA is valid by default (`consul tls ca create -days`).
pub const CA_DAYS: u32 = 1825;
/// Days a leaf certificate is valid by default (`consul tls cert create -days`).
pub const CERT_DAYS: u32 = 365;

/// A PEM certificate and its PEM private key.
#[derive(Clone)]
pub struct CertPair {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PEM (PKCS#8).
    pub key_pem: String,
}

impl fmt::Debug for CertPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertPair")
            .field("cert_pem", &format_args!("{} bytes", self.cert_pem.len()))
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

/// Where [`CertPair::write`] put the two files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertFiles {
    /// The certificate file.
    pub cert: PathBuf,
    /// The private key file (mode 0600).
    pub key: PathBuf,
}

impl CertPair {
    /// Writes `<dir>/<stem>.pem` and `<dir>/<stem>-key.pem` (the key with mode 0600), refusing
    /// to overwrite either, as Consul's command does.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<CertFiles, CertError> {
        let cert = dir.join(format!("{stem}.pem"));
        let key = dir.join(format!("{stem}-key.pem"));
        for p in [&cert, &key] {
            if p.exists() {
                return Err(CertError(format!(
                    "{} already exists: remove it or write elsewhere",
                    p.display()
                )));
            }
        }
        std::fs::write(&cert, &self.cert_pem).map_err(|e| err(&cert.display().to_string(), e))?;
        write_private(&key, &self.key_pem)?;
        Ok(CertFiles { cert, key })
    }
}

fn write_private(path: &Path, data: &str) -> Result<(), CertError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| err(&path.display().to_string(), e))?;
    f.write_all(data.as_bytes())
        .map_err(|e| err(&path.display().to_string(), e))
}

/// The kind of leaf certificate, as `consul tls cert create -server/-client/-cli`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CertKind {
    /// `-server`: `server.<dc>.<domain>`, server and client auth.
    Server,
    /// `-client`: `client.<dc>.<domain>`, server and client auth.
    Client,
    /// `-cli`: `cli.client.<dc>.<domain>`, client auth only.
    Cli,
}

impl CertKind {
    fn word(self) -> &'static str {
        match self {
            CertKind::Server => "server",
            CertKind::Client => "client",
            CertKind::Cli => "cli",
        }
    }
}

/// What a leaf certificate is for, beyond its kind (Consul's `-dc`, `-domain`,
/// `-additional-dnsname`, `-additional-ipaddress`, `-days`).
#[derive(Clone, Debug)]
pub struct LeafOptions {
    /// `-server`, `-client` or `-cli`.
    pub kind: CertKind,
    /// The datacenter (default `dc1`).
    pub dc: String,
    /// The domain (default `consul`).
    pub domain: String,
    /// DNS names to add.
    pub dns_names: Vec<String>,
    /// IP addresses to add.
    pub ip_addresses: Vec<IpAddr>,
    /// Days valid (default 365).
    pub days: u32,
}

impl LeafOptions {
    /// A leaf of `kind` for `dc1.consul`, valid 365 days.
    pub fn new(kind: CertKind) -> LeafOptions {
        LeafOptions {
            kind,
            dc: DEFAULT_DC.into(),
            domain: DEFAULT_DOMAIN.into(),
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            days: CERT_DAYS,
        }
    }

    /// The certificate's common name, e.g. `server.dc1.consul`.
    pub fn common_name(&self) -> String {
        match self.kind {
            CertKind::Cli => format!("cli.client.{}.{}", self.dc, self.domain),
            k => format!("{}.{}.{}", k.word(), self.dc, self.domain),
        }
    }

    /// Consul's file stem without the index: `<dc>-<kind>-<domain>`.
    pub fn file_prefix(&self) -> String {
        format!("{}-{}-{}", self.dc, self.kind.word(), self.domain)
    }
}

fn validity(params: &mut CertificateParams, days: u32) {
    let now = std::time::SystemTime::now();
    // A minute back, for clocks a little behind.
    params.not_before = (now - std::time::Duration::from_secs(60)).into();
    params.not_after = (now + std::time::Duration::from_secs(u64::from(days) * 86_400)).into();
}

fn serial(params: &mut CertificateParams) -> u64 {
    let n: u64 = rand::random::<u64>() >> 1;
    params.serial_number = Some(n.into());
    n
}

/// Consul's subject fields besides the common name.
fn consul_subject(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CountryName, "US");
    dn.push(DnType::StateOrProvinceName, "CA");
    dn.push(DnType::LocalityName, "San Francisco");
    dn.push(DnType::OrganizationName, "HashiCorp Inc.");
    dn.push(DnType::CommonName, cn);
    dn
}

fn dns(name: &str) -> Result<SanType, CertError> {
    Ok(SanType::DnsName(
        name.to_string()
            .try_into()
            .map_err(|e| err(&format!("DNS name {name:?}"), e))?,
    ))
}

/// A certificate authority that signs leaf certificates (`consul tls ca create`).
pub struct CertAuthority {
    pair: CertPair,
    domain: String,
    issuer: Issuer<'static, KeyPair>,
}

impl fmt::Debug for CertAuthority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertAuthority")
            .field("domain", &self.domain)
            .finish_non_exhaustive()
    }
}

impl CertAuthority {
    /// A new CA for `domain`, valid `days` (Consul: `consul`, 1825).
    pub fn create(domain: &str, days: u32) -> Result<CertAuthority, CertError> {
        let key = KeyPair::generate().map_err(|e| err("generating the CA key", e))?;
        let mut params = CertificateParams::default();
        let n = serial(&mut params);
        params.distinguished_name = consul_subject(&format!("Consul Agent CA {n}"));
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity(&mut params, days);
        let cert = params
            .self_signed(&key)
            .map_err(|e| err("signing the CA", e))?;
        let pair = CertPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        };
        Ok(CertAuthority {
            pair,
            domain: domain.to_string(),
            issuer: Issuer::new(params, key),
        })
    }

    /// A CA read back from its PEM certificate and key (`consul tls cert create -ca -key`).
    pub fn from_pem(
        cert_pem: &str,
        key_pem: &str,
        domain: &str,
    ) -> Result<CertAuthority, CertError> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| err("reading the CA key", e))?;
        let issuer =
            Issuer::from_ca_cert_pem(cert_pem, key).map_err(|e| err("reading the CA cert", e))?;
        Ok(CertAuthority {
            pair: CertPair {
                cert_pem: cert_pem.to_string(),
                key_pem: key_pem.to_string(),
            },
            domain: domain.to_string(),
            issuer,
        })
    }

    /// [`CertAuthority::from_pem`] from files.
    pub fn load(cert: &Path, key: &Path, domain: &str) -> Result<CertAuthority, CertError> {
        let read = |p: &Path| {
            std::fs::read_to_string(p).map_err(|e| err(&format!("reading {}", p.display()), e))
        };
        CertAuthority::from_pem(&read(cert)?, &read(key)?, domain)
    }

    /// The CA certificate and key, PEM.
    pub fn pair(&self) -> &CertPair {
        &self.pair
    }

    /// The CA certificate, PEM (what clients trust: `CONSUL_CACERT`, the agent's `ca_file`).
    pub fn cert_pem(&self) -> &str {
        &self.pair.cert_pem
    }

    /// Writes `<domain>-agent-ca.pem` and `<domain>-agent-ca-key.pem` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<CertFiles, CertError> {
        self.pair.write(dir, &format!("{}-agent-ca", self.domain))
    }

    /// Signs a new leaf certificate (`consul tls cert create`).
    pub fn issue(&self, opts: &LeafOptions) -> Result<CertPair, CertError> {
        let key = KeyPair::generate().map_err(|e| err("generating the key", e))?;
        let cn = opts.common_name();
        let mut params = CertificateParams::default();
        serial(&mut params);
        params.distinguished_name = {
            let mut dn = DistinguishedName::new();
            dn.push(DnType::CommonName, cn.as_str());
            dn
        };
        let mut sans = vec![dns(&cn)?, dns("localhost")?];
        if opts.kind != CertKind::Cli {
            sans.push(SanType::IpAddress(IpAddr::from([127, 0, 0, 1])));
        }
        for d in &opts.dns_names {
            sans.push(dns(d)?);
        }
        sans.extend(opts.ip_addresses.iter().copied().map(SanType::IpAddress));
        params.subject_alt_names = sans;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = match opts.kind {
            CertKind::Cli => vec![ExtendedKeyUsagePurpose::ClientAuth],
            _ => vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        };
        params.use_authority_key_identifier_extension = true;
        validity(&mut params, opts.days);
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| err("signing the certificate", e))?;
        Ok(CertPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// [`CertAuthority::issue`], written into `dir` under Consul's name with the first free
    /// index: `dc1-server-consul-0.pem` and `dc1-server-consul-0-key.pem`, then `-1`, ...
    pub fn issue_into(&self, opts: &LeafOptions, dir: &Path) -> Result<CertFiles, CertError> {
        let pair = self.issue(opts)?;
        let prefix = opts.file_prefix();
        let n = (0..)
            .find(|n| !dir.join(format!("{prefix}-{n}.pem")).exists())
            .unwrap_or(0);
        pair.write(dir, &format!("{prefix}-{n}"))
    }
}

/// A self-signed certificate that is its own CA (`CA:TRUE`), for `localhost` and `127.0.0.1`
/// plus `dns_names`, as `openssl req -x509 -newkey ec ... -subj /CN=localhost` makes one. Used
/// as a server certificate, TLS clients refuse it (`CaUsedAsEndEntity`) even when they trust it.
pub fn self_signed_ca(dns_names: &[String], days: u32) -> Result<CertPair, CertError> {
    let key = KeyPair::generate().map_err(|e| err("generating the key", e))?;
    let mut params = CertificateParams::default();
    serial(&mut params);
    params.distinguished_name = {
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "localhost");
        dn
    };
    let mut sans = vec![
        dns("localhost")?,
        SanType::IpAddress(IpAddr::from([127, 0, 0, 1])),
    ];
    for d in dns_names {
        sans.push(dns(d)?);
    }
    params.subject_alt_names = sans;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    validity(&mut params, days);
    let cert = params
        .self_signed(&key)
        .map_err(|e| err("signing the certificate", e))?;
    Ok(CertPair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}
