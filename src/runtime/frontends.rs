//! The run's front ends as they run: each started on the run's stores with a stop of its own,
//! so that a reload that changes what one was started from (the agent's `[agent]`) stops it
//! and starts it again while the adapters run on, and the rest take the new configuration in
//! place through their reload hooks.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::components::Components;
use super::frontend::{Env, Frontend, FrontendError, ReloadHook, StoreParts};
use crate::gateway::state_file::FrontendHealth;
use crate::logging::Component;
use crate::platform::GatewayConfig;

/// How long a front end a reload starts again is given to close its connections.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// A front end's health, read on every tick.
type HealthFn = Box<dyn Fn() -> FrontendHealth + Send>;

/// Each front end's health, as the state file's tick reads it: a reload that starts one again
/// puts the new one's in its place.
#[derive(Clone, Default)]
pub(super) struct Healths(Arc<Mutex<Vec<Option<HealthFn>>>>);

impl Healths {
    pub(super) fn read(&self) -> Vec<FrontendHealth> {
        let all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        all.iter().flatten().map(|health| health()).collect()
    }

    fn set(&self, at: usize, health: Option<HealthFn>) {
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if all.len() <= at {
            all.resize_with(at + 1, || None);
        }
        all[at] = health;
    }
}

/// One front end, and what it is while it runs.
struct Slot {
    frontend: Box<dyn Frontend>,
    running: Option<Component>,
    hook: Option<ReloadHook>,
}

pub(super) struct Frontends {
    slots: Vec<Slot>,
    stores: StoreParts,
    health: Healths,
}

impl Frontends {
    /// Start each front end on `stores` with `config`, served as a component.
    pub(super) fn start(
        frontends: Vec<Box<dyn Frontend>>,
        stores: StoreParts,
        config: &GatewayConfig,
        components: &mut Components,
    ) -> Result<Self, FrontendError> {
        let slots = frontends
            .into_iter()
            .map(|frontend| Slot {
                frontend,
                running: None,
                hook: None,
            })
            .collect();
        let mut started = Self {
            slots,
            stores,
            health: Healths::default(),
        };
        let env = |key: &str| std::env::var(key).ok();
        for at in 0..started.slots.len() {
            started.start_one(at, config, &env, components)?;
        }
        Ok(started)
    }

    fn start_one(
        &mut self,
        at: usize,
        config: &GatewayConfig,
        env: &Env<'_>,
        components: &mut Components,
    ) -> Result<(), FrontendError> {
        let stop = components.new_stop();
        let slot = &mut self.slots[at];
        let started = slot
            .frontend
            .start(self.stores.on(config, env), stop.subscribe())?;
        let (running, hook, health) = match started {
            Some(s) => {
                components.start_frontend(s.name, s.serve, stop);
                (Some(s.name), s.reload, Some(s.health))
            }
            None => (None, None, None),
        };
        slot.running = running;
        slot.hook = hook;
        self.health.set(at, health);
        Ok(())
    }

    /// Each front end's health, for the tick.
    pub(super) fn healths(&self) -> Healths {
        self.health.clone()
    }

    /// What in `new` (read with `env`) a front end that would be started again cannot start
    /// on.
    pub(super) fn check(
        &self,
        old: &GatewayConfig,
        new: &GatewayConfig,
        env: &Env<'_>,
    ) -> Result<(), String> {
        for slot in &self.slots {
            if slot.frontend.restarts_on(old, new) {
                slot.frontend
                    .check(old, self.stores.on(new, env))
                    .map_err(|e| crate::error_chain::one_line(&e))?;
            }
        }
        Ok(())
    }

    /// Hand `new` (checked whole) to each front end: in place through its hook, or by starting
    /// it again where it was started from what changed. What was started again, in words. A
    /// front end that cannot start after all (its port taken since the check) becomes a
    /// component that failed, which restarts the run: a start would meet the same.
    pub(super) async fn reload(
        &mut self,
        old: &GatewayConfig,
        new: &GatewayConfig,
        env: &Env<'_>,
        components: &mut Components,
    ) -> Vec<String> {
        let mut said = vec![];
        for at in 0..self.slots.len() {
            let slot = &self.slots[at];
            if !slot.frontend.restarts_on(old, new) {
                if let Some(hook) = &slot.hook {
                    hook(new);
                }
                continue;
            }
            if let Some(name) = slot.running {
                components.stop_frontend(name).ended(STOP_GRACE).await;
            }
            match self.start_one(at, new, env, components) {
                Ok(()) => {
                    if let Some(name) = self.slots[at].running {
                        said.push(format!("{} started again", name.as_str()));
                    }
                }
                Err(e) => {
                    let why = crate::error_chain::one_line(&e);
                    tracing::error!(reason = %why, "a front end could not start again on the reloaded configuration");
                    if let Some(name) = self.slots[at].running.take() {
                        let failed = Box::pin(async move { Err(why) });
                        let stop = components.new_stop();
                        components.start_frontend(name, failed, stop);
                        said.push(format!("{} could not start again", name.as_str()));
                    }
                }
            }
        }
        said
    }
}
