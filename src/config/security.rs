//! The `sasl.*` properties: how two of them are read, and how they agree
//! with each other and with `security.protocol`.

use super::common::{
    ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT, SASL_MECHANISM, SASL_OAUTHBEARER_CONFIG, SASL_PASSWORD,
    SASL_USERNAME,
};
use super::values::{config_error, invalid};
use super::SecurityProtocol;
use crate::error::Error;
use crate::sasl::{Mechanism, OAuthTokenProvider, SaslConfig, Secret};
use std::collections::BTreeMap;
use std::time::Duration;

/// librdkafka's name for `sasl.mechanism`, read as it.
pub(super) const SASL_MECHANISMS: &str = "sasl.mechanisms";

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

fn read_oauthbearer_config(value: &str) -> Result<UnsecuredJwtConfig, Error> {
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

/// `sasl.mechanism` (or librdkafka's `sasl.mechanisms`, named as given).
pub(super) fn parse_mechanism(property: &str, v: &str) -> Result<Option<Mechanism>, Error> {
    v.parse::<Mechanism>().map(Some).map_err(|why| {
        let why = if v.eq_ignore_ascii_case("GSSAPI") {
            "GSSAPI (Kerberos) is not supported; expected PLAIN, SCRAM-SHA-256, \
             SCRAM-SHA-512 or OAUTHBEARER"
                .to_owned()
        } else {
            why
        };
        invalid(property, v, why)
    })
}

/// `sasl.oauthbearer.config`: its syntax is checked when it is set; empty
/// unsets it.
pub(super) fn parse_oauthbearer_config(_: &str, v: &str) -> Result<Option<String>, Error> {
    read_oauthbearer_config(v).map(|_| (!v.is_empty()).then(|| v.to_owned()))
}

/// The `sasl.*` settings of a builder or of a checked configuration.
#[derive(Debug, Clone, Copy)]
pub(super) struct SaslSettings<'a> {
    pub mechanism: Option<Mechanism>,
    pub username: Option<&'a str>,
    pub password: Option<&'a Secret>,
    pub oauthbearer_config: Option<&'a str>,
    pub unsecure_jwt: bool,
    pub token_provider: Option<&'a OAuthTokenProvider>,
}

impl SaslSettings<'_> {
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
            if self.username.is_none_or(str::is_empty) {
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
        match (self.token_provider, self.unsecure_jwt) {
            (Some(_), true) => Err(invalid(
                ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT,
                "true",
                "an OAUTHBEARER token provider is set too; use one or the other",
            )),
            (Some(_), false) => Ok(()),
            (None, true) => {
                let config = read_oauthbearer_config(self.oauthbearer_config.unwrap_or_default())?;
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
                username: self.username.unwrap_or_default().to_owned(),
                password: self.password.cloned().unwrap_or_default(),
                token_provider: None,
            });
        }
        let provider = match self.token_provider {
            Some(p) => p.clone(),
            None => {
                let c =
                    read_oauthbearer_config(self.oauthbearer_config.unwrap_or_default()).ok()?;
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
        let c = read_oauthbearer_config(
            "principal=admin lifeSeconds=60 scope=read,write extension_logicalCluster=lkc-1",
        )
        .unwrap();
        assert_eq!(c.principal.as_deref(), Some("admin"));
        assert_eq!(c.lifetime, Duration::from_secs(60));
        assert_eq!(c.scope.as_deref(), Some("read,write"));
        assert_eq!(c.extensions["logicalCluster"], "lkc-1");
        for bad in ["principal", "lifeSeconds=0", "colour=blue", "extension_=x"] {
            assert!(read_oauthbearer_config(bad).is_err(), "{bad}");
        }
    }
}
