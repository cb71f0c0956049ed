use super::*;
use crate::config::{ConsumerConfig, SecurityProtocol};

fn self_signed(names: &[&str]) -> (String, String) {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(names)
        .unwrap()
        .self_signed(&key)
        .unwrap();
    (cert.pem(), key.serialize_pem())
}

fn encrypted(key_pem: &str, password: &str) -> String {
    use pkcs8::der::pem::LineEnding;
    use pkcs8::der::{Decode, EncodePem};
    let (_, der) = pkcs8::der::pem::decode_vec(key_pem.as_bytes()).unwrap();
    let info = pkcs8::PrivateKeyInfo::from_der(&der).unwrap();
    let params =
        pkcs8::pkcs5::pbes2::Parameters::pbkdf2_sha256_aes256cbc(1000, &[1u8; 16], &[2u8; 16])
            .unwrap();
    let doc = info.encrypt_with_params(params, password).unwrap();
    pkcs8::EncryptedPrivateKeyInfo::from_der(doc.as_bytes())
        .unwrap()
        .to_pem(LineEnding::LF)
        .unwrap()
}

fn reason(e: Error) -> (String, String) {
    match e {
        Error::Config { property, reason } => (property, reason),
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn an_encrypted_pkcs8_key_opens_with_its_password_only() {
    let (_, key) = self_signed(&["a"]);
    let plain = private_key("ssl.key.pem", key.as_bytes(), None).unwrap();
    let locked = encrypted(&key, "open sesame");
    let opened = private_key("ssl.key.pem", locked.as_bytes(), Some("open sesame")).unwrap();
    assert_eq!(opened.secret_der(), plain.secret_der());

    let (property, why) =
        reason(private_key("ssl.key.pem", locked.as_bytes(), Some("wrong guess")).unwrap_err());
    assert_eq!(property, "ssl.key.password");
    assert!(!why.contains("wrong guess"), "{why}");
    let (property, why) = reason(private_key("ssl.key.pem", locked.as_bytes(), None).unwrap_err());
    assert_eq!(property, "ssl.key.pem");
    assert!(why.contains("set ssl.key.password"), "{why}");
    // A plain key needs no password, and ignores one.
    assert!(private_key("ssl.key.pem", key.as_bytes(), Some("unused")).is_ok());
}

#[test]
fn a_bad_key_is_an_error_that_does_not_quote_it() {
    let text = "-----BEGIN PRIVATE KEY-----\nTOPSECRET\n-----END PRIVATE KEY-----\n";
    let (property, why) = reason(private_key("ssl.key.pem", text.as_bytes(), None).unwrap_err());
    assert_eq!(property, "ssl.key.pem");
    assert!(!why.contains("TOPSECRET"), "{why}");
    let legacy = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----\n";
    let (_, why) = reason(private_key("ssl.key.pem", legacy.as_bytes(), Some("p")).unwrap_err());
    assert!(why.contains("legacy"), "{why}");
}

#[test]
fn the_server_name_is_the_host_dialled() {
    assert_eq!(
        server_name("kafka-1.example.com:9093").unwrap(),
        ServerName::try_from("kafka-1.example.com").unwrap()
    );
    assert!(matches!(
        server_name("127.0.0.1:9093").unwrap(),
        ServerName::IpAddress(_)
    ));
    assert!(matches!(
        server_name("[::1]:9093").unwrap(),
        ServerName::IpAddress(_)
    ));
}

fn base() -> crate::config::ConsumerConfigBuilder {
    // SASL settings are ignored without a SASL protocol, and needed with one.
    ConsumerConfig::builder()
        .bootstrap_servers("localhost:9093")
        .sasl_mechanism(crate::sasl::Mechanism::Plain)
        .sasl_username("u")
        .sasl_password("p")
}

#[test]
fn no_tls_without_a_tls_protocol() {
    for protocol in [SecurityProtocol::Plaintext, SecurityProtocol::SaslPlaintext] {
        let config = base().security_protocol(protocol).build().unwrap();
        assert!(TlsConnector::from_config(&config).unwrap().is_none());
    }
    let (cert, _) = self_signed(&["localhost"]);
    for protocol in [SecurityProtocol::Ssl, SecurityProtocol::SaslSsl] {
        let config = base()
            .security_protocol(protocol)
            .ssl_ca_pem(cert.clone())
            .build()
            .unwrap();
        assert!(TlsConnector::from_config(&config).unwrap().is_some());
    }
}

#[test]
fn files_and_pem_texts_are_checked_when_the_connector_is_made() {
    let ssl = || base().security_protocol(SecurityProtocol::Ssl);
    let missing = ssl()
        .ssl_ca_location("/nonexistent/ca.pem")
        .build()
        .unwrap();
    let (property, why) = reason(TlsConnector::from_config(&missing).unwrap_err());
    assert_eq!(property, "ssl.ca.location");
    assert!(why.contains("/nonexistent/ca.pem"), "{why}");
    let empty = ssl().ssl_ca_pem("not a certificate").build().unwrap();
    let (property, _) = reason(TlsConnector::from_config(&empty).unwrap_err());
    assert_eq!(property, "ssl.ca.pem");

    let (ca, _) = self_signed(&["ca"]);
    let (cert, key) = self_signed(&["client"]);
    let (_, other_key) = self_signed(&["other"]);
    let lone_cert = ssl()
        .ssl_ca_pem(ca.clone())
        .ssl_certificate_pem(cert.clone())
        .build()
        .unwrap();
    let (property, _) = reason(TlsConnector::from_config(&lone_cert).unwrap_err());
    assert_eq!(property, "ssl.key.location");
    let mismatched = ssl()
        .ssl_ca_pem(ca.clone())
        .ssl_certificate_pem(cert.clone())
        .ssl_key_pem(other_key.clone())
        .build()
        .unwrap();
    let (property, why) = reason(TlsConnector::from_config(&mismatched).unwrap_err());
    assert_eq!(property, "ssl.certificate.location");
    assert!(!why.contains(&other_key[40..80]), "{why}");
    let good = ssl()
        .ssl_ca_pem(ca)
        .ssl_certificate_pem(cert)
        .ssl_key_pem(key.clone())
        .build()
        .unwrap();
    let connector = TlsConnector::from_config(&good).unwrap().unwrap();
    let shown = format!("{connector:?}");
    assert!(shown.contains("client_certificate: true"), "{shown}");
    assert!(!shown.contains(&key[40..80]), "{shown}");
}
