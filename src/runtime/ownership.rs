//! Who owns the profile, and each bot credential it uses, while a run lasts.
//!
//! Two gateways on one profile or one bot token fight (the first field report), so a run
//! starts only once it owns both, and stops as soon as it no longer does. On one machine
//! ownership is the kernel's: flocks ([`LocalOwnership`]), which a dead process never leaves
//! stale and a live one never loses. Across hosts (`[cluster]`) it is also an etcd lease
//! ([`ClusterOwnership`]): the run then campaigns before it connects anything, and says
//! through [`Ownership::lost`], which the run loop waits on like any other event, once the
//! lease could be gone. The [`Fence`] says, at every send, whether the run may still act.

use std::path::Path;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::watch;

use super::GatewayError;
use crate::cluster::{self, Claim, Keys, Peers, Presence, Standing, Term};
use crate::config::ClusterSpec;
use crate::gateway::fence::Fence;
use crate::gateway::flock::{HeldLock, Holder, LockError};
use crate::gateway::outbox::MessageReplica;
use crate::gateway::replica::Replica;
use crate::gateway::state_file::ClusterHealth;
use crate::gateway::token_lock;
use crate::profile::Profile;

/// A cluster's replica, by the two seams the stores take it through: the adapters' positions
/// (the spool's) and the outbox's messages.
pub(crate) struct Replicas {
    pub(crate) positions: Arc<dyn Replica>,
    pub(crate) messages: Arc<dyn MessageReplica>,
}

/// A claim on a profile and its credentials, held until it is dropped.
pub(crate) trait Ownership: Send {
    /// Claim the profile: refused (naming the holder) when another run owns it.
    fn claim_profile(&mut self) -> Result<(), GatewayError>;

    /// Claim every credential in `identities` (adapter name, identity: a credential's keyed
    /// hash is taken by the implementation, never the secret itself): refused, naming the
    /// holder, when another run owns one.
    fn claim_credentials(
        &mut self,
        config_path: &Path,
        identities: &[(String, String)],
    ) -> Result<(), GatewayError>;

    /// Claim the credentials in `identities` this run does not hold yet, keeping the rest:
    /// a reload's added or renewed adapters, claimed before anything is touched. Refused,
    /// naming the holder and keeping nothing new, when another run holds one.
    fn claim_more(
        &mut self,
        config_path: &Path,
        identities: &[(String, String)],
    ) -> Result<(), GatewayError>;

    /// Give up every credential not in `identities`: a reload's removed or renewed
    /// adapters, once they have stopped.
    fn release_except(&mut self, identities: &[(String, String)]);

    /// Resolves once this run may act on the platforms, saying meanwhile in `report` how it
    /// stands (a standby); at once for an owner with no one to wait for.
    fn campaign<'a>(
        &'a mut self,
        report: &'a watch::Sender<Option<Standing>>,
    ) -> BoxFuture<'a, Result<(), GatewayError>>;

    /// Take a reload's new `[cluster]` (the run was in a cluster and stays in one), before
    /// anything else of the reload is touched: what changed, in words, or why it cannot be
    /// taken, the running section staying as it was. A standby takes it for its next
    /// campaign; the active moves its term (`ClusterOwnership::reconfigure` says how).
    fn reconfigure<'a>(
        &'a mut self,
        spec: &'a ClusterSpec,
    ) -> BoxFuture<'a, Result<Vec<String>, String>>;

    /// Whether the run may act now: checked before every send.
    fn fence(&self) -> Fence;

    /// Resolves, with why, once the claim is lost; never, for an owner that cannot lose it.
    fn lost(&mut self) -> BoxFuture<'_, String>;

    /// Give the claim up at once, for another host to take (a clean stop).
    fn release(&mut self) -> BoxFuture<'_, ()>;

    /// The run's place in its cluster, for the state file; none on one machine.
    fn health(&self) -> Option<ClusterHealth>;

    /// Where the active records what its adapters stored and its outbox holds, for a
    /// successor on another host; none on one machine, where the spool and journal are all.
    fn replica(&self) -> Option<Replicas>;

    /// The cluster's other members, kept up to date from campaign on; none on one machine.
    fn peers(&self) -> Option<Peers>;
}

/// Ownership on this machine: the profile's instance lock (`gateway.lock`) and one token lock
/// per credential, all flocks, released by the kernel when the process ends however it ends.
pub(crate) struct LocalOwnership {
    lock_file: std::path::PathBuf,
    profile: String,
    me: Holder,
    instance: Option<HeldLock>,
    /// Each credential's lock, by identity.
    tokens: Vec<(String, HeldLock)>,
}

impl LocalOwnership {
    pub(crate) fn new(profile: &Profile, me: Holder) -> Self {
        Self {
            lock_file: profile.lock_file(),
            profile: profile.name().to_string(),
            me,
            instance: None,
            tokens: vec![],
        }
    }
}

impl Ownership for LocalOwnership {
    fn claim_profile(&mut self) -> Result<(), GatewayError> {
        match HeldLock::try_acquire(&self.lock_file, &self.me) {
            Ok(lock) => {
                self.instance = Some(lock);
                Ok(())
            }
            Err(LockError::Held { holder, .. }) => Err(GatewayError::AlreadyRunning {
                profile: self.profile.clone(),
                holder,
            }),
            Err(e) => Err(GatewayError::Lock(e)),
        }
    }

    fn claim_credentials(
        &mut self,
        config_path: &Path,
        identities: &[(String, String)],
    ) -> Result<(), GatewayError> {
        self.tokens.clear();
        self.claim_more(config_path, identities)
    }

    fn claim_more(
        &mut self,
        config_path: &Path,
        identities: &[(String, String)],
    ) -> Result<(), GatewayError> {
        let tokens = &self.tokens;
        let held = |identity: &str| tokens.iter().any(|(id, _)| id == identity);
        let locks = token_lock::acquire_new(config_path, identities, &held, &self.me)
            .map_err(GatewayError::TokenLock)?;
        self.tokens.extend(locks);
        Ok(())
    }

    fn release_except(&mut self, identities: &[(String, String)]) {
        self.tokens
            .retain(|(held, _)| identities.iter().any(|(_, id)| id == held));
    }

    fn campaign<'a>(
        &'a mut self,
        _report: &'a watch::Sender<Option<Standing>>,
    ) -> BoxFuture<'a, Result<(), GatewayError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// Never asked: a reload that adds `[cluster]` is refused before (`reload/diff.rs`).
    fn reconfigure<'a>(
        &'a mut self,
        _spec: &'a ClusterSpec,
    ) -> BoxFuture<'a, Result<Vec<String>, String>> {
        Box::pin(std::future::ready(Err(
            "this run is on one machine: a restart joins it to a cluster".into(),
        )))
    }

    fn fence(&self) -> Fence {
        Fence::open()
    }

    /// A flock is held until the process ends: it is never lost.
    fn lost(&mut self) -> BoxFuture<'_, String> {
        Box::pin(std::future::pending())
    }

    /// The kernel releases the flocks when the process ends.
    fn release(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    fn health(&self) -> Option<ClusterHealth> {
        None
    }

    fn replica(&self) -> Option<Replicas> {
        None
    }

    fn peers(&self) -> Option<Peers> {
        None
    }
}

/// Ownership across hosts: this machine's flocks first, then a term in the profile's etcd
/// cluster (crate::cluster), which a standby waits for and the active can lose.
pub(crate) struct ClusterOwnership<'a> {
    local: &'a mut LocalOwnership,
    spec: ClusterSpec,
    keys: Option<Keys>,
    fence: Fence,
    term: Option<Term>,
    peers: Peers,
    /// This member's record in etcd, from campaign on.
    presence: Option<Presence>,
}

impl<'a> ClusterOwnership<'a> {
    pub(crate) fn new(local: &'a mut LocalOwnership, spec: ClusterSpec) -> Self {
        Self {
            local,
            spec,
            keys: None,
            fence: Fence::closed(),
            term: None,
            peers: Peers::default(),
            presence: None,
        }
    }
}

impl Ownership for ClusterOwnership<'_> {
    fn claim_profile(&mut self) -> Result<(), GatewayError> {
        self.local.claim_profile()
    }

    fn claim_credentials(
        &mut self,
        config_path: &Path,
        identities: &[(String, String)],
    ) -> Result<(), GatewayError> {
        self.local.claim_credentials(config_path, identities)?;
        self.keys = Some(Keys::new(&self.local.profile, identities));
        Ok(())
    }

    /// A reload in a cluster keeps its set of credentials (the term claimed them in etcd;
    /// a change is refused before this), so only the local locks are asked.
    fn claim_more(
        &mut self,
        config_path: &Path,
        identities: &[(String, String)],
    ) -> Result<(), GatewayError> {
        self.local.claim_more(config_path, identities)
    }

    fn release_except(&mut self, identities: &[(String, String)]) {
        self.local.release_except(identities);
    }

    fn campaign<'a>(
        &'a mut self,
        report: &'a watch::Sender<Option<Standing>>,
    ) -> BoxFuture<'a, Result<(), GatewayError>> {
        Box::pin(async move {
            let keys = self
                .keys
                .clone()
                .unwrap_or_else(|| Keys::new(&self.local.profile, &[]));
            let claim = Claim::now(&self.spec.node, &self.local.profile);
            let client = cluster::connect(&self.spec).await?;
            self.presence = Some(Presence::start(
                client.clone(),
                &keys,
                &claim,
                self.spec.lease_ttl,
                self.peers.clone(),
            ));
            let term =
                cluster::campaign(&client, &self.spec, &keys, &claim, &self.fence, report).await;
            self.term = Some(term);
            Ok(())
        })
    }

    /// A standby (or a run not yet campaigning) keeps the section for its next campaign,
    /// which `stand_by` starts again. The active, which goes on acting throughout:
    /// - new endpoints or TLS: clients are made for them, and taken only if they reach the
    ///   etcd cluster that holds the term's lease; then every holder of the old ones (the
    ///   lease's keeper, the replicas, the presence record) asks the new ones;
    /// - a new `lease-ttl` or `node`: the keys move to a new lease in one transaction
    ///   guarded by the term ([`Term::hand_over`]);
    /// - `takeover-delay` is a standby's: it is kept for the next campaign.
    ///
    /// New endpoints taken before a move that fails are given back.
    fn reconfigure<'a>(
        &'a mut self,
        spec: &'a ClusterSpec,
    ) -> BoxFuture<'a, Result<Vec<String>, String>> {
        Box::pin(async move {
            let old = self.spec.clone();
            let (Some(term), Some(keys)) = (self.term.as_mut(), self.keys.as_ref()) else {
                self.spec = spec.clone();
                self.presence = None;
                return Ok(vec![
                    "[cluster] applied: the campaign starts again with it".into()
                ]);
            };
            let mut said = vec![];
            let mut before = None;
            if spec.endpoints != old.endpoints || spec.tls != old.tls {
                let new = cluster::connect(spec).await.map_err(|e| e.to_string())?;
                term.known_to(&new).await?;
                before = Some(cluster::connect(&old).await.map_err(|e| e.to_string())?);
                term.ask(&new);
                said.push(format!("etcd asked at {}", spec.endpoints.join(", ")));
            }
            if spec.lease_ttl != old.lease_ttl || spec.node != old.node {
                let claim = Claim {
                    node: spec.node.clone(),
                    ..term.claim().clone()
                };
                if let Err(why) = term.hand_over(keys, spec.lease_ttl, claim).await {
                    if let Some(before) = before {
                        term.ask(&before);
                    }
                    return Err(why);
                }
                said.push(format!(
                    "the term moved to a {} lease as node {}",
                    humantime::format_duration(spec.lease_ttl),
                    spec.node
                ));
                self.presence = Some(Presence::start(
                    term.etcd(),
                    keys,
                    term.claim(),
                    spec.lease_ttl,
                    self.peers.clone(),
                ));
            }
            if spec.takeover_delay != old.takeover_delay {
                said.push("takeover-delay kept for a next campaign".into());
            }
            self.spec = spec.clone();
            Ok(said)
        })
    }

    fn fence(&self) -> Fence {
        self.fence.clone()
    }

    fn lost(&mut self) -> BoxFuture<'_, String> {
        match &mut self.term {
            Some(term) => Box::pin(term.lost()),
            None => Box::pin(std::future::pending()),
        }
    }

    fn release(&mut self) -> BoxFuture<'_, ()> {
        self.fence.close();
        let term = self.term.take();
        Box::pin(async move {
            if let Some(term) = term {
                term.release().await;
            }
        })
    }

    fn health(&self) -> Option<ClusterHealth> {
        let term = self.term.as_ref()?;
        Some(ClusterHealth {
            role: "active".into(),
            node: self.spec.node.clone(),
            active: Some(term.claim().describe()),
            lease_age_ms: Some(term.lease_age().as_millis() as u64),
            lease_ttl_ms: self.spec.lease_ttl.as_millis() as u64,
            standing: None,
            name_clash: false,
            peers: self.peers.snapshot(),
        })
    }

    fn replica(&self) -> Option<Replicas> {
        let (term, keys) = (self.term.as_ref()?, self.keys.as_ref()?);
        let replica = Arc::new(term.replica(keys));
        Some(Replicas {
            positions: replica.clone(),
            messages: replica,
        })
    }

    fn peers(&self) -> Option<Peers> {
        Some(self.peers.clone())
    }
}

/// The state file's view of a standby, from what its campaign last reported.
pub(crate) fn standby_health(
    spec: &ClusterSpec,
    standing: &Standing,
    peers: Option<&Peers>,
) -> ClusterHealth {
    ClusterHealth {
        role: "standby".into(),
        node: spec.node.clone(),
        active: match standing {
            Standing::Standby { active, .. } => Some(active.describe()),
            Standing::Unreachable(_) => None,
        },
        lease_age_ms: None,
        lease_ttl_ms: spec.lease_ttl.as_millis() as u64,
        standing: Some(standing.describe()),
        name_clash: matches!(standing, Standing::Standby { clash: true, .. }),
        peers: peers.map(Peers::snapshot).unwrap_or_default(),
    }
}
