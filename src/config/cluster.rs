//! The `[cluster]` section: one profile's gateways on several hosts, one active at a time,
//! coordinated through etcd (docs/cluster.md). Without the section nothing changes: the kernel
//! locks of one machine are the whole of ownership.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::value::Ctx;
use super::ConfigError;

/// How this gateway takes part in its profile's cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterSpec {
    /// etcd's client URLs, each `https://` (or `http://` to loopback).
    pub endpoints: Vec<String>,
    /// Client TLS: the CA that signed etcd's certificate, and this node's certificate and key
    /// when etcd asks for one.
    pub tls: Option<ClusterTls>,
    /// The lease the active holds its keys under. The active stops acting once it has not
    /// renewed it with a third of it left, so this is also the longest a dead active blocks
    /// a takeover.
    pub lease_ttl: Duration,
    /// This host's name in the cluster, shown as the active node; the host name by default.
    pub node: String,
    /// How long a standby waits after the keys are free before it connects: a platform may
    /// still hold the old active's session for a while.
    pub takeover_delay: Duration,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ClusterTls {
    pub ca: PathBuf,
    /// This node's certificate and key, for an etcd that checks its clients.
    pub identity: Option<(PathBuf, PathBuf)>,
}

/// The least lease that outlives an etcd leader election. No renewal is answered while etcd
/// elects a leader (1.1 to 3.4 s with its default timings), and the active fences itself two
/// thirds of a TTL after its last answered renewal, which the leader's death may follow by a
/// renewal interval (1 s): at 8 s, 5.3 s less 1 s, which covers a 3.4 s election with most of
/// a second to spare (docs/cluster.md, "etcd faults").
const MIN_TTL: Duration = Duration::from_secs(8);
const MAX_TTL: Duration = Duration::from_secs(300);
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(10);
pub const DEFAULT_TAKEOVER_DELAY: Duration = Duration::from_secs(1);

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawCluster {
    endpoints: Spanned<Vec<Spanned<String>>>,
    ca: Option<String>,
    cert: Option<Spanned<String>>,
    key: Option<Spanned<String>>,
    lease_ttl: Option<Spanned<String>>,
    node: Option<Spanned<String>>,
    takeover_delay: Option<Spanned<String>>,
}

pub(super) fn cluster(ctx: &Ctx, raw: &Spanned<RawCluster>) -> Result<ClusterSpec, ConfigError> {
    let r = raw.get_ref();
    if r.endpoints.get_ref().is_empty() {
        return ctx.err(
            r.endpoints.span(),
            "[cluster] endpoints is empty; list etcd's client URLs, like \
             [\"https://etcd1:2379\", \"https://etcd2:2379\", \"https://etcd3:2379\"]",
        );
    }
    let mut endpoints = vec![];
    for e in r.endpoints.get_ref() {
        endpoints.push(
            ctx.url("[cluster] endpoints", e, "https://", "http://")?
                .trim_end_matches('/')
                .to_owned(),
        );
    }
    let https = endpoints.iter().any(|e| e.starts_with("https://"));
    let tls = match (&r.ca, &r.cert, &r.key) {
        (None, None, None) if https => {
            return ctx.err(
                r.endpoints.span(),
                "[cluster] an https:// endpoint needs ca, the file of the CA that signed \
                 etcd's certificate (ca = \"/etc/hermes-svc/etcd-ca.pem\")",
            )
        }
        (None, None, None) => None,
        (Some(ca), cert, key) => {
            let identity = match (cert, key) {
                (Some(c), Some(k)) => {
                    Some((PathBuf::from(c.get_ref()), PathBuf::from(k.get_ref())))
                }
                (None, None) => None,
                (Some(c), None) | (None, Some(c)) => {
                    return ctx.err(
                        c.span(),
                        "[cluster] cert and key go together: give both (this node's client \
                         certificate and its key) or neither",
                    )
                }
            };
            Some(ClusterTls {
                ca: PathBuf::from(ca),
                identity,
            })
        }
        (None, Some(c), _) | (None, None, Some(c)) => {
            return ctx.err(
                c.span(),
                "[cluster] a client certificate needs ca too, the CA that signed etcd's \
                 certificate",
            )
        }
    };
    let lease_ttl = ctx.opt_duration("lease-ttl", &r.lease_ttl, DEFAULT_LEASE_TTL)?;
    if !(MIN_TTL..=MAX_TTL).contains(&lease_ttl) {
        let span = r.lease_ttl.as_ref().map_or(raw.span(), Spanned::span);
        return ctx.err(
            span,
            format!(
                "[cluster] lease-ttl = {:?} is out of range; use 8s to 5m (the default, 10s, \
                 suits most clusters)",
                humantime::format_duration(lease_ttl).to_string()
            ),
        );
    }
    let node = match &r.node {
        Some(n) if valid_node(n.get_ref()) => n.get_ref().clone(),
        Some(n) => {
            return ctx.err(
                n.span(),
                format!(
                    "[cluster] node = {:?} is not a node name; use 1 to 63 letters, digits, \
                     '-' or '.', like \"server-1\"",
                    n.get_ref()
                ),
            )
        }
        None => host_name(),
    };
    let takeover_delay = match &r.takeover_delay {
        // Zero is a valid choice here (no platform holding a session), which the shared
        // duration rule refuses.
        Some(d) if d.get_ref().trim() == "0" || d.get_ref().trim() == "0s" => Duration::ZERO,
        _ => ctx.opt_duration("takeover-delay", &r.takeover_delay, DEFAULT_TAKEOVER_DELAY)?,
    };
    Ok(ClusterSpec {
        endpoints,
        tls,
        lease_ttl,
        node,
        takeover_delay,
    })
}

fn valid_node(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
}

/// The host's name, cut to what a node name may hold; `node` when it has none.
fn host_name() -> String {
    let name: String = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
        .take(63)
        .collect();
    if name.is_empty() {
        "node".into()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{parse, ConfigError};
    use crate::platform::Protocol;

    fn read(text: &str) -> Result<super::ClusterSpec, ConfigError> {
        parse::<Protocol>(Path::new("/p/gateway.toml"), text).map(|c| c.cluster.unwrap())
    }

    fn message(text: &str) -> String {
        read(text).unwrap_err().to_string()
    }

    #[test]
    fn defaults_and_a_full_table() {
        let c =
            read("[cluster]\nendpoints = [\"http://127.0.0.1:2379\"]\nnode = \"a-1\"\n").unwrap();
        assert_eq!(c.lease_ttl, super::DEFAULT_LEASE_TTL);
        assert_eq!(c.takeover_delay, super::DEFAULT_TAKEOVER_DELAY);
        assert_eq!(c.tls, None);
        let c = read(
            "[cluster]\nendpoints = [\"https://e1:2379/\", \"https://e2:2379\"]\nca = \"/ca.pem\"\n\
             cert = \"/c.pem\"\nkey = \"/k.pem\"\nlease-ttl = \"8s\"\ntakeover-delay = \"0s\"\n",
        )
        .unwrap();
        assert_eq!(c.endpoints, ["https://e1:2379", "https://e2:2379"]);
        assert_eq!(c.lease_ttl.as_secs(), 8);
        assert!(c.takeover_delay.is_zero());
        assert!(c.tls.unwrap().identity.is_some());
    }

    #[test]
    fn each_mistake_names_the_key_and_the_fix() {
        let m = message("[cluster]\nendpoints = []\n");
        assert!(
            m.contains("/p/gateway.toml") && m.contains("endpoints is empty"),
            "{m}"
        );
        let m = message("[cluster]\nendpoints = [\"http://etcd:2379\"]\n");
        assert!(
            m.contains("gateway.toml:2:") && m.contains("only to loopback"),
            "{m}"
        );
        let m = message("[cluster]\nendpoints = [\"https://etcd:2379\"]\n");
        assert!(m.contains("needs ca"), "{m}");
        let m =
            message("[cluster]\nendpoints = [\"https://e:2379\"]\nca = \"/a\"\ncert = \"/c\"\n");
        assert!(
            m.contains("gateway.toml:4:") && m.contains("cert and key go together"),
            "{m}"
        );
        let m = message("[cluster]\nendpoints = [\"http://[::1]:2379\"]\nlease-ttl = \"1s\"\n");
        assert!(
            m.contains("gateway.toml:3:") && m.contains("8s to 5m"),
            "{m}"
        );
        let m = message("[cluster]\nendpoints = [\"http://[::1]:2379\"]\nnode = \"a b\"\n");
        assert!(m.contains("not a node name"), "{m}");
        let m = message("[cluster]\nendpoints = [\"http://[::1]:2379\"]\nleader = true\n");
        assert!(m.contains("unknown field") && m.contains("leader"), "{m}");
    }
}
