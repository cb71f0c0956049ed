//! TLS client settings: the `ssl.*` properties turned into a rustls
//! client configuration. No runtime here: the handshake itself runs in
//! [`crate::runtime`], over whichever runtime is enabled.
//!
//! What is verified (see `docs/security.md`):
//!
//! - with `enable.ssl.certificate.verification=true` (the default), the
//!   broker's certificate chain up to a trusted root (`ssl.ca.location`,
//!   `ssl.ca.pem`, or the system's roots when neither is set), its validity
//!   dates, and, with `ssl.endpoint.identification.algorithm=https` (the
//!   default), that it names the host the broker was dialled by (a DNS
//!   name, or an IP address SAN for a literal address);
//! - with `ssl.endpoint.identification.algorithm=none`, the chain and dates
//!   but not the name;
//! - with `enable.ssl.certificate.verification=false`, nothing about the
//!   certificate (the handshake's own signatures still are): the
//!   connection is encrypted but not authenticated.
//!

// The client configuration's TLS side is read when a client starts, which
// takes a runtime feature: without one, nothing calls it.
#![cfg_attr(
    not(any(feature = "runtime-async-std", feature = "runtime-tokio")),
    allow(dead_code)
)]
#![doc = include_str!("../docs/security.md")]

use crate::config::{ConsumerConfig, EndpointIdentification, ProducerConfig, SecurityProtocol};

/// The TLS properties of a client's configuration (the consumer's and the
/// producer's share them).
pub(crate) trait TlsProperties {
    fn security_protocol(&self) -> SecurityProtocol;
    fn enable_ssl_certificate_verification(&self) -> bool;
    fn ssl_ca_location(&self) -> Option<&Path>;
    fn ssl_ca_pem(&self) -> Option<&str>;
    fn ssl_certificate_location(&self) -> Option<&Path>;
    fn ssl_certificate_pem(&self) -> Option<&str>;
    fn ssl_endpoint_identification_algorithm(&self) -> EndpointIdentification;
    fn ssl_key_location(&self) -> Option<&Path>;
    fn ssl_key_password(&self) -> Option<&str>;
    fn ssl_key_pem(&self) -> Option<&str>;
}

macro_rules! tls_properties {
    ($config:ty) => {
        impl TlsProperties for $config {
            fn security_protocol(&self) -> SecurityProtocol {
                <$config>::security_protocol(self)
            }
            fn enable_ssl_certificate_verification(&self) -> bool {
                <$config>::enable_ssl_certificate_verification(self)
            }
            fn ssl_ca_location(&self) -> Option<&Path> {
                <$config>::ssl_ca_location(self)
            }
            fn ssl_ca_pem(&self) -> Option<&str> {
                <$config>::ssl_ca_pem(self)
            }
            fn ssl_certificate_location(&self) -> Option<&Path> {
                <$config>::ssl_certificate_location(self)
            }
            fn ssl_certificate_pem(&self) -> Option<&str> {
                <$config>::ssl_certificate_pem(self)
            }
            fn ssl_endpoint_identification_algorithm(&self) -> EndpointIdentification {
                <$config>::ssl_endpoint_identification_algorithm(self)
            }
            fn ssl_key_location(&self) -> Option<&Path> {
                <$config>::ssl_key_location(self)
            }
            fn ssl_key_password(&self) -> Option<&str> {
                <$config>::ssl_key_password(self)
            }
            fn ssl_key_pem(&self) -> Option<&str> {
                <$config>::ssl_key_pem(self)
            }
        }
    };
}

tls_properties!(ConsumerConfig);
tls_properties!(ProducerConfig);
use crate::error::Error;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

const SSL_CA_LOCATION: &str = "ssl.ca.location";
const SSL_CA_PEM: &str = "ssl.ca.pem";
const SSL_CERTIFICATE_LOCATION: &str = "ssl.certificate.location";
const SSL_CERTIFICATE_PEM: &str = "ssl.certificate.pem";
const SSL_KEY_LOCATION: &str = "ssl.key.location";
const SSL_KEY_PEM: &str = "ssl.key.pem";
const SSL_KEY_PASSWORD: &str = "ssl.key.password";

/// The TLS side of every connection of one client: a rustls client
/// configuration built once from the `ssl.*` properties, shared by every
/// socket.
///
/// Built by [`Consumer::new`] and [`Producer::new`], so a missing file or a
/// bad PEM is an [`Error::Config`] from there, before any socket. Hand one to [`ConnectOptions`] to reach a TLS listener with a
/// [`BrokerConnection`].
///
/// Its `Debug` output names no key material.
///
/// [`Consumer::new`]: crate::Consumer::new
/// [`Producer::new`]: crate::Producer::new
/// [`ConnectOptions`]: crate::runtime::ConnectOptions
/// [`BrokerConnection`]: crate::runtime::BrokerConnection
#[derive(Clone)]
pub struct TlsConnector {
    config: Arc<ClientConfig>,
    verification: &'static str,
}

impl fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConnector")
            .field("verification", &self.verification)
            .field(
                "client_certificate",
                &self.config.client_auth_cert_resolver.has_certs(),
            )
            .finish_non_exhaustive()
    }
}

impl TlsConnector {
    /// The connector `config` asks for: `None` when its
    /// `security.protocol` uses no TLS (`PLAINTEXT`, `SASL_PLAINTEXT`).
    ///
    /// Reads the files the `ssl.*.location` properties name, and the
    /// system's root certificates when no CA is given (and verification is
    /// on). Fails with [`Error::Config`] naming the property whose file
    /// cannot be read or whose PEM holds nothing usable; the message never
    /// quotes a key or a password.
    pub(crate) fn from_config(config: &impl TlsProperties) -> Result<Option<TlsConnector>, Error> {
        if !config.security_protocol().uses_tls() {
            return Ok(None);
        }
        // rustls 0.23.48 deprecates its *ring* provider (no post-quantum key
        // exchange); *ring* stays the choice, since aws-lc-rs needs cmake and a
        // C toolchain to build (Cargo.toml). No warning for those who depend on
        // this crate.
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (verifier, verification): (Arc<dyn ServerCertVerifier>, _) = if !config
            .enable_ssl_certificate_verification()
        {
            (
                Arc::new(AcceptAnyCertificate(provider.clone())),
                "none (enable.ssl.certificate.verification=false)",
            )
        } else {
            let roots = Arc::new(roots(config)?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| config_error(SSL_CA_LOCATION, format!("{e}")))?;
            match config.ssl_endpoint_identification_algorithm() {
                EndpointIdentification::Https => (webpki as _, "chain and host name"),
                EndpointIdentification::None => (Arc::new(ChainOnly(webpki)) as _, "chain only"),
            }
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| config_error("security.protocol", format!("{e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let client = match client_identity(config)? {
            Some((chain, key)) => builder.with_client_auth_cert(chain, key).map_err(|e| {
                config_error(
                    SSL_CERTIFICATE_LOCATION,
                    format!("the certificate and key do not go together: {e}"),
                )
            })?,
            None => builder.with_no_client_auth(),
        };
        Ok(Some(TlsConnector {
            config: Arc::new(client),
            verification,
        }))
    }

    /// The rustls configuration every handshake uses.
    // Used by the runtime's handshake only.
    #[cfg_attr(
        not(any(feature = "runtime-async-std", feature = "runtime-tokio")),
        allow(dead_code)
    )]
    pub(crate) fn client_config(&self) -> Arc<ClientConfig> {
        self.config.clone()
    }
}

/// The name the handshake sends (SNI) and checks the certificate against:
/// the host part of the `host:port` the broker was dialled by (an IP
/// address for a literal address, which rustls matches against IP SANs
/// and does not send as SNI).
// Used by the runtime's handshake only.
#[cfg_attr(
    not(any(feature = "runtime-async-std", feature = "runtime-tokio")),
    allow(dead_code)
)]
pub(crate) fn server_name(addr: &str) -> Result<ServerName<'static>, String> {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    ServerName::try_from(host.to_owned())
        .map_err(|e| format!("{host:?} cannot be checked against a certificate: {e}"))
}

/// The message of a failed handshake, in words that name the cause (an
/// unknown issuer, an expired certificate, a name mismatch, an alert from
/// the broker).
// Used by the runtime's handshake only.
#[cfg_attr(
    not(any(feature = "runtime-async-std", feature = "runtime-tokio")),
    allow(dead_code)
)]
pub(crate) fn handshake_error(e: &std::io::Error) -> String {
    if let Some(tls) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        return format!("TLS handshake failed: {tls}");
    }
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof => {
            "TLS handshake failed: the broker closed the connection (is it a TLS listener?)"
                .to_owned()
        }
        _ => format!("TLS handshake failed: {e}"),
    }
}

fn config_error(property: &str, reason: impl Into<String>) -> Error {
    Error::Config {
        property: property.to_owned(),
        reason: reason.into(),
    }
}

fn read_file(property: &str, path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path)
        .map_err(|e| config_error(property, format!("cannot read {}: {e}", path.display())))
}

/// The PEM text of a property pair (`*.location` or `*.pem`, which the
/// configuration does not allow together), with the property it came from.
fn pem_of(
    location: (&'static str, Option<&Path>),
    inline: (&'static str, Option<&str>),
) -> Result<Option<(&'static str, Vec<u8>)>, Error> {
    if let Some(path) = location.1 {
        return Ok(Some((location.0, read_file(location.0, path)?)));
    }
    Ok(inline.1.map(|pem| (inline.0, pem.as_bytes().to_vec())))
}

fn certificates(property: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, Error> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| config_error(property, format!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(config_error(property, "holds no PEM certificate"));
    }
    Ok(certs)
}

/// The trust anchors: the configured CA (a PEM file, a directory of PEM
/// files, or inline PEM), or the system's roots.
fn roots(config: &impl TlsProperties) -> Result<RootCertStore, Error> {
    let mut store = RootCertStore::empty();
    let mut add = |property: &str, certs: Vec<CertificateDer<'static>>| {
        for cert in certs {
            store
                .add(cert)
                .map_err(|e| config_error(property, format!("not a usable CA certificate: {e}")))?;
        }
        Ok::<(), Error>(())
    };
    match (config.ssl_ca_location(), config.ssl_ca_pem()) {
        (Some(path), _) if path.is_dir() => {
            let entries = std::fs::read_dir(path).map_err(|e| {
                config_error(
                    SSL_CA_LOCATION,
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            for entry in entries.flatten() {
                let file = entry.path();
                if !file.is_file() {
                    continue;
                }
                let bytes = read_file(SSL_CA_LOCATION, &file)?;
                // A CA directory (as `openssl rehash` leaves it) may hold
                // other files; those without a certificate are skipped.
                if let Ok(certs) = certificates(SSL_CA_LOCATION, &bytes) {
                    add(SSL_CA_LOCATION, certs)?;
                }
            }
            if store.is_empty() {
                return Err(config_error(
                    SSL_CA_LOCATION,
                    format!("{} holds no PEM certificate", path.display()),
                ));
            }
        }
        (Some(path), _) => add(
            SSL_CA_LOCATION,
            certificates(SSL_CA_LOCATION, &read_file(SSL_CA_LOCATION, path)?)?,
        )?,
        (None, Some(pem)) => add(SSL_CA_PEM, certificates(SSL_CA_PEM, pem.as_bytes())?)?,
        (None, None) => {
            let native = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(native.certs);
            if added == 0 {
                let why = native
                    .errors
                    .first()
                    .map_or_else(String::new, |e| format!(" ({e})"));
                return Err(config_error(
                    SSL_CA_LOCATION,
                    format!(
                        "not set, and no system root certificate was found{why}; set \
                         ssl.ca.location or ssl.ca.pem, or install the system's CA \
                         certificates"
                    ),
                ));
            }
        }
    }
    Ok(store)
}

/// The client certificate and key, when both are configured.
fn client_identity(
    config: &impl TlsProperties,
) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>, Error> {
    let cert = pem_of(
        (SSL_CERTIFICATE_LOCATION, config.ssl_certificate_location()),
        (SSL_CERTIFICATE_PEM, config.ssl_certificate_pem()),
    )?;
    let key = pem_of(
        (SSL_KEY_LOCATION, config.ssl_key_location()),
        (SSL_KEY_PEM, config.ssl_key_pem()),
    )?;
    let ((cert_property, cert), (key_property, key)) = match (cert, key) {
        (None, None) => return Ok(None),
        (Some(cert), Some(key)) => (cert, key),
        (Some(_), None) => {
            return Err(config_error(
                SSL_KEY_LOCATION,
                "a client certificate needs its private key (ssl.key.location or ssl.key.pem)",
            ))
        }
        (None, Some(_)) => {
            return Err(config_error(
                SSL_CERTIFICATE_LOCATION,
                "a private key needs its certificate (ssl.certificate.location or \
                 ssl.certificate.pem)",
            ))
        }
    };
    let chain = certificates(cert_property, &cert)?;
    let key = private_key(key_property, &key, config.ssl_key_password())?;
    Ok(Some((chain, key)))
}

/// The private key in `pem`: plain (PKCS#8, PKCS#1 RSA or SEC1 EC), or
/// encrypted PKCS#8 (`ENCRYPTED PRIVATE KEY`, PBES2) opened with
/// `password`. Error messages name the property, never the key or the
/// password.
pub(crate) fn private_key(
    property: &str,
    pem: &[u8],
    password: Option<&str>,
) -> Result<PrivateKeyDer<'static>, Error> {
    let text = String::from_utf8_lossy(pem);
    if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        let Some(password) = password else {
            return Err(config_error(
                property,
                "the key is encrypted; set ssl.key.password",
            ));
        };
        return decrypt_pkcs8(property, &text, password);
    }
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(config_error(
            property,
            "the key uses OpenSSL's legacy PEM encryption, which is not supported; \
             convert it to encrypted PKCS#8 (openssl pkcs8 -topk8 -v2 aes-256-cbc)",
        ));
    }
    PrivateKeyDer::from_pem_slice(pem).map_err(|_| {
        config_error(
            property,
            "holds no PEM private key (PRIVATE KEY, RSA PRIVATE KEY, EC PRIVATE KEY or \
             ENCRYPTED PRIVATE KEY)",
        )
    })
}

fn decrypt_pkcs8(
    property: &str,
    text: &str,
    password: &str,
) -> Result<PrivateKeyDer<'static>, Error> {
    use pkcs8::der::Decode;
    let begin = text
        .find("-----BEGIN ENCRYPTED PRIVATE KEY-----")
        .expect("checked by the caller");
    let end_marker = "-----END ENCRYPTED PRIVATE KEY-----";
    let end = text[begin..]
        .find(end_marker)
        .map(|i| begin + i + end_marker.len())
        .ok_or_else(|| config_error(property, "an ENCRYPTED PRIVATE KEY block is not closed"))?;
    let (label, der) = pkcs8::der::pem::decode_vec(&text.as_bytes()[begin..end])
        .map_err(|e| config_error(property, format!("not a PEM block: {e}")))?;
    debug_assert_eq!(label, "ENCRYPTED PRIVATE KEY");
    let info = pkcs8::EncryptedPrivateKeyInfo::from_der(&der)
        .map_err(|e| config_error(property, format!("not an encrypted PKCS#8 key: {e}")))?;
    let plain = info.decrypt(password.as_bytes()).map_err(|e| {
        config_error(
            SSL_KEY_PASSWORD,
            format!(
                "cannot decrypt the key with it (a wrong password, or an encryption other \
                 than PBES2 with PBKDF2 or scrypt and AES-CBC): {e}"
            ),
        )
    })?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        plain.as_bytes().to_vec(),
    )))
}

/// `ssl.endpoint.identification.algorithm=none`: the chain is verified as
/// usual; only a certificate that does not name the host is let through.
/// (webpki checks the chain and dates before the name, so a name error
/// means the rest passed.)
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `enable.ssl.certificate.verification=false`: any certificate is
/// accepted; the handshake signatures are still checked against it, so
/// the peer holds the key of the certificate it sent.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
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
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests;
