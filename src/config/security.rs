//! `security.protocol` and the `sasl.*` properties.

use super::{config_error, invalid, parse_bool, SecurityProtocol};
use crate::error::Error;
use crate::sasl::{Mechanism, OAuthTokenProvider, SaslConfig, Secret};
use std::collections::BTreeMap;
use std::time::Duration;

pub(super) const SECURITY_PROTOCOL: &str = "security.protocol";
pub(super) const SASL_MECHANISM: &str = "sasl.mechanism";
/// librdkafka's name for `sasl.mechanism`.
const SASL_MECHANISMS: &str = "sasl.mechanisms";
pub(super) const SASL_USERNAME: &str = "sasl.username";
pub(super) const SASL_PASSWORD: &str = "sasl.password";
pub(super) const SASL_OAUTHBEARER_CONFIG: &str = "sasl.oauthbearer.config";
pub(super) const ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT: &str =
    "enable.sasl.oauthbearer.unsecure.jwt";

/// `sasl.oauthbearer.config` as librdkafka reads it for unsecured tokens:
/// space-separated `principal=...`, `lifeSeconds=...` (3600),
/// `scope=...`, `extension_NAME=value`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct UnsecuredJwtConfig {
    principal: Option<String>,
    lifetime: Duration,
    scope: Option<String>,
    extensions: BTreeMap<String, String>,
}

fn parse_oauthbearer_config(value: &str) -> Result<UnsecuredJwtConfig, Error> {
    let bad = |why: String| invalid(SASL_OAUTHBEARER_CONFIG, value, why);
    let mut c = UnsecuredJwtConfig {
        principal: None,
        lifetime: Duration::from_secs(3600),
        scope: None,
        extensions: BTreeMap::new(),
    };
    for pair in value.split_whitespace() {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| bad(format!("{pair:?} is not key=value")))?;
        match k {
            "principal" => c.principal = Some(v.to_owned()),
            "lifeSeconds" => {
                let secs: u64 = v
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| bad("lifeSeconds must be a positive integer".into()))?;
                c.lifetime = Duration::from_secs(secs);
            }
            "scope" => c.scope = Some(v.to_owned()),
            "scopeClaimName" | "subClaimName" => {
                return Err(bad(format!("{k} is not supported")));
            }
            _ => match k.strip_prefix("extension_") {
                Some(name) if !name.is_empty() => {
                    c.extensions.insert(name.to_owned(), v.to_owned());
                }
                _ => {
                    return Err(bad(format!(
                    "unknown key {k:?}; expected principal, lifeSeconds, scope or extension_NAME"
                )))
                }
            },
        }
    }
    Ok(c)
}

/// The `sasl.*` settings, as set (the builder) and as checked (the
/// configuration).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct SaslProperties {
    pub mechanism: Option<Mechanism>,
    pub username: Option<String>,
    pub password: Option<Secret>,
    pub oauthbearer_config: Option<String>,
    pub unsecure_jwt: bool,
    pub token_provider: Option<OAuthTokenProvider>,
}

impl SaslProperties {
    /// Sets `property` if it is one of these; `None` if it is not.
    pub fn set(&mut self, property: &str, v: &str) -> Option<Result<(), Error>> {
        let result = match property {
            SASL_MECHANISM | SASL_MECHANISMS => v
                .parse::<Mechanism>()
                .map(|m| self.mechanism = Some(m))
                .map_err(|why| {
                    let why = if v.eq_ignore_ascii_case("GSSAPI") {
                        "GSSAPI (Kerberos) is not supported; expected PLAIN, SCRAM-SHA-256, \
                         SCRAM-SHA-512 or OAUTHBEARER"
                            .to_owned()
                    } else {
                        why
                    };
                    invalid(property, v, why)
                }),
            SASL_USERNAME => {
                self.username = Some(v.to_owned());
                Ok(())
            }
            SASL_PASSWORD => {
                self.password = Some(Secret::new(v));
                Ok(())
            }
            SASL_OAUTHBEARER_CONFIG => parse_oauthbearer_config(v).map(|_| {
                self.oauthbearer_config = (!v.is_empty()).then(|| v.to_owned());
            }),
            ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT => {
                parse_bool(property, v).map(|b| self.unsecure_jwt = b)
            }
            _ => return None,
        };
        Some(result)
    }

    /// The properties as `to_properties` lists them: unset ones left out,
    /// and the password never.
    pub fn render(&self, out: &mut Vec<(&'static str, String)>) {
        if let Some(m) = self.mechanism {
            out.push((SASL_MECHANISM, m.name().to_owned()));
        }
        if let Some(u) = &self.username {
            out.push((SASL_USERNAME, u.clone()));
        }
        if let Some(c) = &self.oauthbearer_config {
            out.push((SASL_OAUTHBEARER_CONFIG, c.clone()));
        }
        out.push((
            ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT,
            self.unsecure_jwt.to_string(),
        ));
    }

    /// Checks that `protocol` and these settings agree. The `sasl.*`
    /// properties are ignored (as Java and librdkafka do) when the protocol
    /// does not use SASL. `builder` names the builder type in advice.
    pub fn check(&self, protocol: SecurityProtocol, builder: &str) -> Result<(), Error> {
        if !protocol.uses_sasl() {
            return Ok(());
        }
        let Some(mechanism) = self.mechanism else {
            return Err(config_error(
                SASL_MECHANISM,
                format!(
                    "required with security.protocol={protocol}: PLAIN, SCRAM-SHA-256, \
                     SCRAM-SHA-512 or OAUTHBEARER (GSSAPI, the Java default, is not supported)"
                ),
            ));
        };
        if mechanism.uses_password() {
            if self.username.as_deref().is_none_or(str::is_empty) {
                return Err(config_error(
                    SASL_USERNAME,
                    format!("required with sasl.mechanism={mechanism}"),
                ));
            }
            if self.password.is_none() {
                return Err(config_error(
                    SASL_PASSWORD,
                    format!("required with sasl.mechanism={mechanism}"),
                ));
            }
            return Ok(());
        }
        match (&self.token_provider, self.unsecure_jwt) {
            (Some(_), true) => Err(invalid(
                ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT,
                "true",
                "an OAUTHBEARER token provider is set too; use one or the other",
            )),
            (Some(_), false) => Ok(()),
            (None, true) => {
                let config = parse_oauthbearer_config(
                    self.oauthbearer_config.as_deref().unwrap_or_default(),
                )?;
                if config.principal.is_none() {
                    return Err(config_error(
                        SASL_OAUTHBEARER_CONFIG,
                        "unsecured tokens need principal=NAME",
                    ));
                }
                Ok(())
            }
            (None, false) => Err(config_error(
                SASL_MECHANISM,
                format!(
                    "OAUTHBEARER needs a token provider \
                     ({builder}::oauthbearer_token_provider) or, for tests, \
                     enable.sasl.oauthbearer.unsecure.jwt=true with sasl.oauthbearer.config"
                ),
            )),
        }
    }

    /// What the cluster authenticates with, for a checked configuration.
    pub fn cluster_config(&self, protocol: SecurityProtocol) -> Option<SaslConfig> {
        if !protocol.uses_sasl() {
            return None;
        }
        let mechanism = self.mechanism?;
        if mechanism.uses_password() {
            return Some(SaslConfig {
                mechanism,
                username: self.username.clone().unwrap_or_default(),
                password: self.password.clone().unwrap_or_default(),
                token_provider: None,
            });
        }
        let provider = match &self.token_provider {
            Some(p) => p.clone(),
            None => {
                let c = parse_oauthbearer_config(
                    self.oauthbearer_config.as_deref().unwrap_or_default(),
                )
                .ok()?;
                OAuthTokenProvider::unsecured(c.principal?, c.lifetime, c.scope, c.extensions)
            }
        };
        Some(SaslConfig::oauthbearer(provider))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oauthbearer_config_parses_as_librdkafka_does() {
        let c = parse_oauthbearer_config(
            "principal=admin lifeSeconds=60 scope=read,write extension_logicalCluster=lkc-1",
        )
        .unwrap();
        assert_eq!(c.principal.as_deref(), Some("admin"));
        assert_eq!(c.lifetime, Duration::from_secs(60));
        assert_eq!(c.scope.as_deref(), Some("read,write"));
        assert_eq!(c.extensions["logicalCluster"], "lkc-1");
        for bad in ["principal", "lifeSeconds=0", "colour=blue", "extension_=x"] {
            assert!(parse_oauthbearer_config(bad).is_err(), "{bad}");
        }
    }
}
