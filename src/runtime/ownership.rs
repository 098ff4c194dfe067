//! Who owns the profile, and each bot credential it uses, while a run lasts.
//!
//! Two gateways on one profile or one bot token fight (the first field report), so a run
//! starts only once it owns both, and stops as soon as it no longer does. Today ownership is
//! the kernel's: flocks on this machine ([`LocalOwnership`]), which a dead process never
//! leaves stale and a live one never loses. Owners that can lose their claim (a lease in a
//! coordination service, across hosts) say so through [`Ownership::lost`], which the run
//! loop waits on like any other event.

use std::path::Path;

use futures_util::future::BoxFuture;

use super::GatewayError;
use crate::gateway::flock::{HeldLock, Holder, LockError};
use crate::gateway::token_lock;
use crate::profile::Profile;

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

    /// Resolves, with why, once the claim is lost; never, for an owner that cannot lose it.
    fn lost(&mut self) -> BoxFuture<'_, String>;
}

/// Ownership on this machine: the profile's instance lock (`gateway.lock`) and one token lock
/// per credential, all flocks, released by the kernel when the process ends however it ends.
pub(crate) struct LocalOwnership {
    lock_file: std::path::PathBuf,
    profile: String,
    me: Holder,
    instance: Option<HeldLock>,
    tokens: Vec<HeldLock>,
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
        let locks = token_lock::acquire_all(config_path, identities, &self.me)
            .map_err(GatewayError::TokenLock)?;
        self.tokens = locks;
        Ok(())
    }

    /// A flock is held until the process ends: it is never lost.
    fn lost(&mut self) -> BoxFuture<'_, String> {
        Box::pin(std::future::pending())
    }
}
