//! Certificates for the mock's TLS listeners, made at run time: a
//! certificate authority of the test's own and a broker certificate it
//! signed, so that a test of `SSL` or `SASL_SSL` set-ups needs no
//! `openssl` command and commits no private key.

use super::MockError;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// A test certificate authority and a broker certificate it signed, all
/// PEM: the certificate and key go to [`MockClusterBuilder::tls`], the
/// CA to the client (`ssl.ca.pem`).
///
/// ```
/// use lazykafka::mock::{MockCluster, TestCertificates};
///
/// let certs = TestCertificates::localhost()?;
/// let mock = MockCluster::builder()
///     .tls(certs.cert_pem(), certs.key_pem())
///     .build()?;
/// // Clients: security.protocol=SSL, ssl.ca.pem=certs.ca_pem().
/// assert!(certs.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
/// # drop(mock);
/// # Ok::<(), lazykafka::mock::MockError>(())
/// ```
///
/// [`MockClusterBuilder::tls`]: super::MockClusterBuilder::tls
pub struct TestCertificates {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

impl fmt::Debug for TestCertificates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key is a secret even in a test.
        f.debug_struct("TestCertificates").finish_non_exhaustive()
    }
}

impl TestCertificates {
    /// A new CA, and a certificate it signed for the mock's brokers as
    /// clients reach them: `127.0.0.1` (the addresses of
    /// [`MockCluster::bootstrap_servers`](super::MockCluster::bootstrap_servers))
    /// and `localhost`.
    pub fn localhost() -> Result<TestCertificates, MockError> {
        Self::new(&["127.0.0.1", "localhost"])
    }

    /// A new CA, and a certificate it signed for `names` (DNS names or IP
    /// addresses; the first is also its common name). Valid from now for
    /// the years rcgen gives by default; keys are ECDSA P-256.
    pub fn new(names: &[&str]) -> Result<TestCertificates, MockError> {
        let failed = |e: rcgen::Error| MockError::Tls(format!("test certificates: {e}"));
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
        // A name of its own: a client given another test CA finds no
        // issuer (rather than one of the same name whose signature fails).
        static MADE: AtomicU64 = AtomicU64::new(0);
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let name = format!("lazykafka mock test CA {}-{n}", std::process::id());
        ca.distinguished_name.push(DnType::CommonName, name);
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(ca, KeyPair::generate().map_err(failed)?)
            .map_err(failed)?;
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut leaf = CertificateParams::new(names.clone()).map_err(failed)?;
        leaf.distinguished_name.push(
            DnType::CommonName,
            names.first().cloned().unwrap_or_default(),
        );
        let key = KeyPair::generate().map_err(failed)?;
        let cert = leaf.signed_by(&key, &issuer).map_err(failed)?;
        Ok(TestCertificates {
            ca_pem: issuer.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// The CA's certificate, for the client's `ssl.ca.pem`.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The broker certificate, for [`MockClusterBuilder::tls`](super::MockClusterBuilder::tls).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The broker certificate's private key (PKCS#8).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }
}
