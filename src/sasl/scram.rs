//! SCRAM (RFC 5802), for SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 7677, and
//! Kafka's KIP-84), generic over the hash so RFC 5802's SCRAM-SHA-1 example
//! checks the same code.
//!
//! Pure: the client nonce is an argument, nothing reads a clock or a random
//! source. The client side is [`ScramClient`]; the server side
//! ([`ScramServer`], [`ScramCredential`]) serves the mock cluster and the
//! tests.
//!
//! ```text
//!   client                                   server
//!   client-first  n,,n=user,r=cnonce    -->
//!                                       <--  server-first  r=cnonce+snonce,s=salt,i=4096
//!   client-final  c=biws,r=...,p=proof  -->
//!                                       <--  server-final  v=signature | e=error
//! ```

use base64::prelude::{Engine as _, BASE64_STANDARD};
use hmac::{EagerHash, Hmac, KeyInit, Mac};
use std::fmt;
use std::marker::PhantomData;

/// Kafka refuses fewer iterations (its `ScramMechanism.minIterations`), and
/// so does this client: a server asking for fewer weakens the stored keys.
pub(crate) const MIN_ITERATIONS: u32 = 4096;
/// Kafka's upper bound on iterations; more is refused rather than spent.
const MAX_ITERATIONS: u32 = 16384;

/// `c=biws`: base64 of the GS2 header `n,,` (no channel binding, no
/// authorization identity), RFC 5802 §7.
const GS2_HEADER: &str = "n,,";

/// Why a SCRAM exchange failed on the client's side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ScramError {
    /// The server's message does not follow RFC 5802's grammar.
    Malformed(String),
    /// The server's nonce does not extend ours (RFC 5802 §5.1 `r`).
    NonceMismatch,
    /// Fewer or more iterations than Kafka allows.
    Iterations(u32),
    /// The server sent `e=...` (RFC 5802 §7 server-error).
    Server(String),
    /// The server's signature is wrong: it does not know our password, so
    /// it is not the server we meant to reach (RFC 5802 §3: mutual
    /// authentication).
    ServerSignature,
    /// A message arrived after the exchange ended.
    Unexpected,
}

impl fmt::Display for ScramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScramError::Malformed(m) => write!(f, "malformed SCRAM message from the server: {m}"),
            ScramError::NonceMismatch => f.write_str("the server's SCRAM nonce does not extend ours"),
            ScramError::Iterations(i) => write!(
                f,
                "the server asks for {i} SCRAM iterations (allowed: {MIN_ITERATIONS} to {MAX_ITERATIONS})"
            ),
            ScramError::Server(e) => write!(f, "the server refused the SCRAM proof: {e}"),
            ScramError::ServerSignature => {
                f.write_str("the server's SCRAM signature is wrong (it does not know the password)")
            }
            ScramError::Unexpected => f.write_str("unexpected SCRAM message after the exchange"),
        }
    }
}

/// `saslname` escaping (RFC 5802 §5.1): `=` and `,` become `=3D` and `=2C`.
fn escape_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

#[cfg(any(test, feature = "mock"))]
fn unescape_name(name: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = name;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=3D") => out.push('='),
            Some("=2C") => out.push(','),
            _ => return None,
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

fn hmac<D: EagerHash>(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = <Hmac<D> as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hash<D: EagerHash>(data: &[u8]) -> Vec<u8> {
    D::digest(data).to_vec()
}

/// How many salted passwords [`salted_password_cached`] keeps.
const SALTED_KEPT: usize = 16;

/// The salted passwords computed so far, newest last, each under a digest
/// of what it was computed from (the hash's output size, the password,
/// the salt, the iterations): see [`salted_password_cached`].
static SALTED: std::sync::Mutex<Vec<([u8; 32], Vec<u8>)>> = std::sync::Mutex::new(Vec::new());

/// The key of a salted password in [`SALTED`].
fn salted_key<D: EagerHash>(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    use sha2::Digest;
    let mut key = sha2::Sha256::new();
    let size = <D as hmac::digest::OutputSizeUser>::output_size() as u64;
    key.update(size.to_be_bytes());
    key.update((password.len() as u64).to_be_bytes());
    key.update(password);
    key.update((salt.len() as u64).to_be_bytes());
    key.update(salt);
    key.update(iterations.to_be_bytes());
    key.finalize().into()
}

/// [`salted_password`], computed once per credential: PBKDF2 costs as many
/// HMACs as the server asks iterations (4,096 and up), milliseconds of an
/// executor thread in a release build and far more in a debug one, and
/// every connection of a client (bootstrap, coordinator, each leader) asks
/// with the same salt. The result is kept (the last [`SALTED_KEPT`], in
/// this process) under a digest of its inputs, never the password itself.
fn salted_password_cached<D: EagerHash>(password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
    let key = salted_key::<D>(password, salt, iterations);
    let cache = || {
        SALTED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    if let Some((_, salted)) = cache().iter().find(|(k, _)| *k == key) {
        return salted.clone();
    }
    // Computed outside the lock: two connections at once may both compute
    // it; neither waits for the other.
    let salted = salted_password::<D>(password, salt, iterations);
    let mut kept = cache();
    if !kept.iter().any(|(k, _)| *k == key) {
        if kept.len() == SALTED_KEPT {
            kept.remove(0);
        }
        kept.push((key, salted.clone()));
    }
    salted
}

/// `Hi(password, salt, i)` of RFC 5802 §2.2: PBKDF2 with HMAC-H.
fn salted_password<D: EagerHash>(password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
    let mut out = vec![0u8; <D as hmac::digest::OutputSizeUser>::output_size()];
    pbkdf2::pbkdf2_hmac::<D>(password, salt, iterations, &mut out);
    out
}

/// The `key=value` attributes of a SCRAM message, in order.
fn attributes(message: &str) -> Result<Vec<(char, &str)>, ScramError> {
    message
        .split(',')
        .map(|part| {
            let mut chars = part.chars();
            match (chars.next(), chars.next()) {
                (Some(k), Some('=')) if k.is_ascii_alphabetic() => Ok((k, &part[2..])),
                _ => Err(ScramError::Malformed(format!("attribute {part:?}"))),
            }
        })
        .collect()
}

fn b64(bytes: &[u8]) -> String {
    BASE64_STANDARD.encode(bytes)
}

fn unb64(what: &str, s: &str) -> Result<Vec<u8>, ScramError> {
    BASE64_STANDARD
        .decode(s)
        .map_err(|_| ScramError::Malformed(format!("{what} is not base64")))
}

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

/// Where a client exchange is.
enum ClientState {
    /// client-first sent; waiting for server-first.
    ExpectServerFirst,
    /// client-final sent; waiting for server-final, which must carry this
    /// signature.
    ExpectServerFinal {
        server_signature: Vec<u8>,
    },
    Done,
}

/// The client side of one SCRAM exchange.
pub(crate) struct ScramClient<D> {
    password: Vec<u8>,
    nonce: String,
    client_first_bare: String,
    state: ClientState,
    hash: PhantomData<D>,
}

impl<D> fmt::Debug for ScramClient<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The password stays out of logs.
        f.debug_struct("ScramClient").finish_non_exhaustive()
    }
}

impl<D: EagerHash> ScramClient<D> {
    /// Starts an exchange for `username` with the client nonce `nonce`
    /// (printable ASCII without `,`, RFC 5802 §7; from a random source).
    pub fn new(username: &str, password: &str, nonce: &str) -> Self {
        ScramClient {
            password: password.as_bytes().to_vec(),
            nonce: nonce.to_owned(),
            client_first_bare: format!("n={},r={nonce}", escape_name(username)),
            state: ClientState::ExpectServerFirst,
            hash: PhantomData,
        }
    }

    /// The client-first message.
    pub fn client_first(&self) -> String {
        format!("{GS2_HEADER}{}", self.client_first_bare)
    }

    /// Takes server-first and returns client-final.
    pub fn server_first(&mut self, message: &str) -> Result<String, ScramError> {
        if !matches!(self.state, ClientState::ExpectServerFirst) {
            return Err(ScramError::Unexpected);
        }
        let attrs = attributes(message)?;
        let (nonce, salt, iterations) = match attrs.as_slice() {
            [('r', r), ('s', s), ('i', i), ..] => (*r, *s, *i),
            [('m', _), ..] => {
                return Err(ScramError::Malformed(
                    "mandatory extension (m=) not supported".into(),
                ))
            }
            _ => return Err(ScramError::Malformed("expected r=,s=,i=".into())),
        };
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(ScramError::NonceMismatch);
        }
        let salt = unb64("the salt", salt)?;
        let iterations: u32 = iterations
            .parse()
            .map_err(|_| ScramError::Malformed(format!("iteration count {iterations:?}")))?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(ScramError::Iterations(iterations));
        }
        let without_proof = format!("c={},r={nonce}", b64(GS2_HEADER.as_bytes()));
        let auth_message = format!("{},{message},{without_proof}", self.client_first_bare);
        let salted = salted_password_cached::<D>(&self.password, &salt, iterations);
        let client_key = hmac::<D>(&salted, b"Client Key");
        let stored_key = hash::<D>(&client_key);
        let client_signature = hmac::<D>(&stored_key, auth_message.as_bytes());
        let proof = xor(&client_key, &client_signature);
        let server_key = hmac::<D>(&salted, b"Server Key");
        let server_signature = hmac::<D>(&server_key, auth_message.as_bytes());
        self.state = ClientState::ExpectServerFinal { server_signature };
        Ok(format!("{without_proof},p={}", b64(&proof)))
    }

    /// Takes server-final: `Ok` once the server proved it knows the
    /// password.
    pub fn server_final(&mut self, message: &str) -> Result<(), ScramError> {
        let ClientState::ExpectServerFinal { server_signature } =
            std::mem::replace(&mut self.state, ClientState::Done)
        else {
            return Err(ScramError::Unexpected);
        };
        let attrs = attributes(message)?;
        match attrs.first() {
            Some(('e', e)) => Err(ScramError::Server((*e).to_owned())),
            Some(('v', v)) => {
                if unb64("the server signature", v)? == server_signature {
                    Ok(())
                } else {
                    Err(ScramError::ServerSignature)
                }
            }
            _ => Err(ScramError::Malformed("expected v= or e=".into())),
        }
    }
}

#[cfg(any(test, feature = "mock"))]
/// What a SCRAM server stores for a user (RFC 5802 §2.2 and §3): never the
/// password itself.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ScramCredential {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

#[cfg(any(test, feature = "mock"))]
impl fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

#[cfg(any(test, feature = "mock"))]
impl ScramCredential {
    /// The credential for `password`, salted with `salt`.
    pub fn new<D: EagerHash>(password: &str, salt: &[u8], iterations: u32) -> Self {
        let salted = salted_password::<D>(password.as_bytes(), salt, iterations);
        ScramCredential {
            salt: salt.to_vec(),
            iterations,
            stored_key: hash::<D>(&hmac::<D>(&salted, b"Client Key")),
            server_key: hmac::<D>(&salted, b"Server Key"),
        }
    }
}

#[cfg(any(test, feature = "mock"))]
/// Where a server exchange is.
#[derive(Debug)]
enum ServerState {
    ExpectClientFirst,
    ExpectClientFinal {
        user: String,
        nonce: String,
        client_first_bare: String,
        server_first: String,
    },
    Done,
}

#[cfg(any(test, feature = "mock"))]
/// Why a server exchange failed, as RFC 5802 §7 names the errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ScramServerError {
    /// A message the server cannot parse.
    Malformed(String),
    /// `unknown-user`.
    UnknownUser(String),
    /// `invalid-proof`.
    InvalidProof(String),
}

#[cfg(any(test, feature = "mock"))]
impl fmt::Display for ScramServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScramServerError::Malformed(m) => write!(f, "malformed SCRAM message: {m}"),
            ScramServerError::UnknownUser(u) => write!(f, "unknown user {u:?}"),
            ScramServerError::InvalidProof(u) => write!(f, "invalid credentials for user {u:?}"),
        }
    }
}

#[cfg(any(test, feature = "mock"))]
/// The server side of one SCRAM exchange (the mock cluster's).
#[derive(Debug)]
pub(crate) struct ScramServer<D> {
    state: ServerState,
    hash: PhantomData<D>,
}

#[cfg(any(test, feature = "mock"))]
impl<D: EagerHash> ScramServer<D> {
    /// A new exchange.
    pub fn new() -> Self {
        ScramServer {
            state: ServerState::ExpectClientFirst,
            hash: PhantomData,
        }
    }

    /// Takes client-first; `lookup` finds the user's credential; returns
    /// server-first, whose nonce is the client's followed by `server_nonce`.
    pub fn client_first(
        &mut self,
        message: &str,
        server_nonce: &str,
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<(String, ScramCredential), ScramServerError> {
        let malformed = |m: &str| ScramServerError::Malformed(m.to_owned());
        // GS2 header: "n" or "y" (no channel binding), an optional a=authzid.
        let mut parts = message.splitn(3, ',');
        let cb = parts.next().ok_or_else(|| malformed("empty"))?;
        let _authzid = parts.next().ok_or_else(|| malformed("no GS2 header"))?;
        let bare = parts.next().ok_or_else(|| malformed("no GS2 header"))?;
        if cb != "n" && cb != "y" {
            return Err(malformed("channel binding is not supported"));
        }
        let attrs = attributes(bare).map_err(|e| ScramServerError::Malformed(e.to_string()))?;
        let (user, nonce) = match attrs.as_slice() {
            [('n', n), ('r', r), ..] => (*n, *r),
            _ => return Err(malformed("expected n=,r=")),
        };
        let user = unescape_name(user).ok_or_else(|| malformed("bad saslname escape"))?;
        let credential =
            lookup(&user).ok_or_else(|| ScramServerError::UnknownUser(user.clone()))?;
        let nonce = format!("{nonce}{server_nonce}");
        let server_first = format!(
            "r={nonce},s={},i={}",
            b64(&credential.salt),
            credential.iterations
        );
        self.state = ServerState::ExpectClientFinal {
            user,
            nonce,
            client_first_bare: bare.to_owned(),
            server_first: server_first.clone(),
        };
        Ok((server_first, credential))
    }

    /// Takes client-final and checks its proof against `credential`;
    /// returns server-final and the authenticated user.
    pub fn client_final(
        &mut self,
        message: &str,
        credential: &ScramCredential,
    ) -> Result<(String, String), ScramServerError> {
        let ServerState::ExpectClientFinal {
            user,
            nonce,
            client_first_bare,
            server_first,
        } = std::mem::replace(&mut self.state, ServerState::Done)
        else {
            return Err(ScramServerError::Malformed("unexpected message".into()));
        };
        let attrs = attributes(message).map_err(|e| ScramServerError::Malformed(e.to_string()))?;
        let (proof, _) = message
            .rsplit_once(",p=")
            .map(|(without, proof)| (proof, without))
            .ok_or_else(|| ScramServerError::Malformed("no proof".into()))?;
        let without_proof = &message[..message.len() - proof.len() - 3];
        match attrs.as_slice() {
            [('c', _), ('r', r), ..] if *r == nonce => {}
            _ => {
                return Err(ScramServerError::Malformed(
                    "nonce or channel binding".into(),
                ))
            }
        }
        let proof = BASE64_STANDARD
            .decode(proof)
            .map_err(|_| ScramServerError::Malformed("proof is not base64".into()))?;
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let client_signature = hmac::<D>(&credential.stored_key, auth_message.as_bytes());
        let client_key = xor(&proof, &client_signature);
        if proof.len() != credential.stored_key.len()
            || hash::<D>(&client_key) != credential.stored_key
        {
            return Err(ScramServerError::InvalidProof(user));
        }
        let server_signature = hmac::<D>(&credential.server_key, auth_message.as_bytes());
        Ok((format!("v={}", b64(&server_signature)), user))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A credential's salted password is computed once and then reused
    /// (each connection of a client authenticates with the same salt), kept
    /// apart per hash, password, salt and iteration count.
    #[test]
    fn a_salted_password_is_computed_once_per_credential() {
        let salt = b"a salt of this test alone";
        let key = salted_key::<sha2::Sha256>(b"pencil", salt, 4096);
        let kept = || {
            SALTED
                .lock()
                .unwrap()
                .iter()
                .filter(|(k, _)| *k == key)
                .count()
        };
        assert_eq!(kept(), 0);
        let first = salted_password_cached::<sha2::Sha256>(b"pencil", salt, 4096);
        assert_eq!(
            first,
            salted_password::<sha2::Sha256>(b"pencil", salt, 4096)
        );
        assert_eq!(kept(), 1);
        assert_eq!(
            salted_password_cached::<sha2::Sha256>(b"pencil", salt, 4096),
            first
        );
        assert_eq!(kept(), 1, "reused, not computed again");
        for other in [
            salted_key::<sha2::Sha512>(b"pencil", salt, 4096),
            salted_key::<sha2::Sha256>(b"pencil!", salt, 4096),
            salted_key::<sha2::Sha256>(b"pencil", b"another salt", 4096),
            salted_key::<sha2::Sha256>(b"pencil", salt, 4097),
        ] {
            assert_ne!(other, key);
        }
    }

    /// RFC 7677 §3: the SCRAM-SHA-256 example (user "user", password
    /// "pencil").
    const RFC7677_CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
    const RFC7677_SERVER_FIRST: &str =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const RFC7677_CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const RFC7677_SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    /// RFC 5802 §5: the SCRAM-SHA-1 example (user "user", password
    /// "pencil").
    const RFC5802_CLIENT_FIRST: &str = "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL";
    const RFC5802_SERVER_FIRST: &str =
        "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096";
    const RFC5802_CLIENT_FINAL: &str =
        "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=";
    const RFC5802_SERVER_FINAL: &str = "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=";

    fn client_matches_rfc<D: EagerHash>(nonce: &str, msgs: [&str; 4]) {
        let mut c = ScramClient::<D>::new("user", "pencil", nonce);
        assert_eq!(c.client_first(), msgs[0]);
        assert_eq!(c.server_first(msgs[1]).unwrap(), msgs[2]);
        c.server_final(msgs[3]).unwrap();
        assert_eq!(c.server_final(msgs[3]), Err(ScramError::Unexpected));
    }

    fn server_matches_rfc<D: EagerHash>(server_nonce: &str, salt: &str, msgs: [&str; 4]) {
        let salt = BASE64_STANDARD.decode(salt).unwrap();
        let credential = ScramCredential::new::<D>("pencil", &salt, 4096);
        let mut s = ScramServer::<D>::new();
        let (first, cred) = s
            .client_first(msgs[0], server_nonce, |u| {
                (u == "user").then(|| credential.clone())
            })
            .unwrap();
        assert_eq!(first, msgs[1]);
        let (fin, user) = s.client_final(msgs[2], &cred).unwrap();
        assert_eq!((fin.as_str(), user.as_str()), (msgs[3], "user"));
    }

    #[test]
    fn sha256_client_and_server_match_rfc7677() {
        let msgs = [
            RFC7677_CLIENT_FIRST,
            RFC7677_SERVER_FIRST,
            RFC7677_CLIENT_FINAL,
            RFC7677_SERVER_FINAL,
        ];
        client_matches_rfc::<sha2::Sha256>("rOprNGfwEbeRWgbNEkqO", msgs);
        server_matches_rfc::<sha2::Sha256>(
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
            "W22ZaJ0SNY7soEsUEjb6gQ==",
            msgs,
        );
    }

    #[test]
    fn sha1_client_and_server_match_rfc5802() {
        let msgs = [
            RFC5802_CLIENT_FIRST,
            RFC5802_SERVER_FIRST,
            RFC5802_CLIENT_FINAL,
            RFC5802_SERVER_FINAL,
        ];
        client_matches_rfc::<sha1::Sha1>("fyko+d2lbbFgONRv9qkxdawL", msgs);
        server_matches_rfc::<sha1::Sha1>("3rfcNHYJY1ZVvWVs7j", "QSXCR+Q6sek8bf92", msgs);
    }

    #[test]
    fn sha512_round_trips_and_a_wrong_password_is_refused() {
        let credential = ScramCredential::new::<sha2::Sha512>("right", b"salty", 4096);
        for (password, ok) in [("right", true), ("wrong", false)] {
            let mut c = ScramClient::<sha2::Sha512>::new("a=b,c", password, "cnonce");
            let mut s = ScramServer::<sha2::Sha512>::new();
            let (first, cred) = s
                .client_first(&c.client_first(), "snonce", |u| {
                    assert_eq!(u, "a=b,c", "saslname escapes round-trip");
                    Some(credential.clone())
                })
                .unwrap();
            let fin = c.server_first(&first).unwrap();
            match s.client_final(&fin, &cred) {
                Ok((server_final, _)) => {
                    assert!(ok);
                    c.server_final(&server_final).unwrap();
                }
                Err(e) => {
                    assert!(!ok);
                    assert_eq!(e, ScramServerError::InvalidProof("a=b,c".into()));
                }
            }
        }
    }

    #[test]
    fn the_client_refuses_a_bad_server() {
        let mut c = ScramClient::<sha2::Sha256>::new("user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        // A nonce that does not extend ours.
        assert_eq!(
            c.server_first("r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"),
            Err(ScramError::NonceMismatch)
        );
        let mut c = ScramClient::<sha2::Sha256>::new("user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(
            c.server_first("r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1"),
            Err(ScramError::Iterations(1))
        );
        let mut c = ScramClient::<sha2::Sha256>::new("user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        assert!(matches!(
            c.server_first("garbage"),
            Err(ScramError::Malformed(_))
        ));
        // A server that does not know the password cannot sign.
        let mut c = ScramClient::<sha2::Sha256>::new("user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        c.server_first(RFC7677_SERVER_FIRST).unwrap();
        assert_eq!(
            c.server_final("v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
            Err(ScramError::ServerSignature)
        );
        let mut c = ScramClient::<sha2::Sha256>::new("user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        c.server_first(RFC7677_SERVER_FIRST).unwrap();
        assert_eq!(
            c.server_final("e=invalid-proof"),
            Err(ScramError::Server("invalid-proof".into()))
        );
    }

    #[test]
    fn debug_hides_the_password() {
        let c = ScramClient::<sha2::Sha256>::new("user", "hunter2", "n");
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
