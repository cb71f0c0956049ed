//! Certificates made at test time (rcgen; no private key is committed) and
//! stunnel (OpenSSL) as a TLS front for a plain broker.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A certificate authority of the test's own.
pub struct Pki {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate with its key, both PEM.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Pki {
    pub fn new(name: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Pki { issuer }
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for `names` (DNS names or IP addresses), valid now.
    pub fn leaf(&self, names: &[&str]) -> Leaf {
        self.leaf_with(names, |_| {})
    }

    /// A certificate for `names` that expired yesterday.
    pub fn expired_leaf(&self, names: &[&str]) -> Leaf {
        self.leaf_with(names, |p| {
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2021, 1, 1);
        })
    }

    fn leaf_with(&self, names: &[&str], edit: impl FnOnce(&mut CertificateParams)) -> Leaf {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names.clone()).unwrap();
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().cloned().unwrap_or_default(),
        );
        edit(&mut params);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

/// The private key of `leaf` as encrypted PKCS#8 (PBES2: PBKDF2-SHA256,
/// AES-256-CBC, as `openssl pkcs8 -topk8 -v2 aes-256-cbc` writes it).
pub fn encrypt_key(leaf: &Leaf, password: &str) -> String {
    use pkcs8::der::pem::LineEnding;
    use pkcs8::der::{Decode, EncodePem};
    let (_, der) = pkcs8::der::pem::decode_vec(leaf.key_pem.as_bytes()).unwrap();
    let info = pkcs8::PrivateKeyInfo::from_der(&der).unwrap();
    let params =
        pkcs8::pkcs5::pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, &[7u8; 16], &[9u8; 16])
            .unwrap();
    let encrypted = info.encrypt_with_params(params, password).unwrap();
    let encrypted = pkcs8::EncryptedPrivateKeyInfo::from_der(encrypted.as_bytes()).unwrap();
    encrypted.to_pem(LineEnding::LF).unwrap()
}

/// A directory of the test's own, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(test: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "lazykafka-{test}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// Writes `contents` to `name` in the directory; returns its path.
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A free loopback port (bound and released: another process could take
/// it in between, which a test would notice as a failed start).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The stunnel binary (`stunnel4` on Debian, `stunnel` elsewhere); `None`,
/// with a note on stderr, when neither is installed — unless
/// `LAZYKAFKA_REQUIRE_BROKER=1` (the test command installs it), where a
/// missing stunnel fails the test.
pub fn stunnel_bin(test: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["stunnel4", "stunnel"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    assert!(
        std::env::var("LAZYKAFKA_REQUIRE_BROKER").as_deref() != Ok("1"),
        "{test}: LAZYKAFKA_REQUIRE_BROKER=1 but stunnel is not installed \
         (apt-get install stunnel4)"
    );
    eprintln!("{test}: skipped (stunnel is not installed)");
    None
}

/// stunnel in the foreground, one TLS service per `(listen port, plain
/// target port)`, killed when dropped. With `client_ca`, clients must
/// present a certificate that CA signed.
pub struct Stunnel {
    child: Child,
    log: PathBuf,
}

impl Stunnel {
    pub fn start(
        bin: &Path,
        dir: &TempDir,
        server: &Leaf,
        client_ca: Option<&str>,
        services: &[(u16, u16)],
    ) -> Stunnel {
        let cert = dir.write("stunnel-cert.pem", &server.cert_pem);
        let key = dir.write("stunnel-key.pem", &server.key_pem);
        let log = dir.path().join("stunnel.log");
        let mut conf = format!(
            "foreground = yes\npid =\ndebug = info\noutput = {}\n",
            log.display()
        );
        for (i, (listen, target)) in services.iter().enumerate() {
            conf += &format!(
                "[broker{i}]\naccept = 127.0.0.1:{listen}\nconnect = 127.0.0.1:{target}\n\
                 cert = {}\nkey = {}\n",
                cert.display(),
                key.display()
            );
            if let Some(ca) = client_ca {
                let ca = dir.write("stunnel-client-ca.pem", ca);
                conf += &format!(
                    "CAfile = {}\nrequireCert = yes\nverifyChain = yes\n",
                    ca.display()
                );
            }
        }
        let conf_path = dir.write("stunnel.conf", &conf);
        let child = Command::new(bin)
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start stunnel");
        let mut stunnel = Stunnel { child, log };
        let up = super::wait_for(Duration::from_secs(20), || {
            if let Ok(Some(status)) = stunnel.child.try_wait() {
                panic!("stunnel exited ({status}): {}", stunnel.log_text());
            }
            services
                .iter()
                .all(|(listen, _)| std::net::TcpStream::connect(("127.0.0.1", *listen)).is_ok())
        });
        assert!(up, "stunnel did not listen: {}", stunnel.log_text());
        stunnel
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Stunnel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
