//! What a profile's job is for. Every profile has its gateway; `install --agent hermes` adds the
//! Hermes agent beside it, which dials the gateway's Relay. Both jobs are planned by the same
//! rules (`service::planner`); the role says what each is called and what it runs.

use std::path::PathBuf;

use crate::profile::ProfileName;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// `hermes-svc gateway run`: the platforms' connections, the spool, the outbox.
    Gateway,
    /// `hermes-svc agent run`, which execs Hermes's own gateway, headless, with `hermes` as the
    /// program: it holds no platform, only the Relay to this profile's gateway.
    Agent { hermes: PathBuf },
}

impl Role {
    /// The word in the job's names: `hermes-gateway-P.service`, `hermes-agent-P.service`.
    pub fn word(&self) -> &'static str {
        match self {
            Role::Gateway => "gateway",
            Role::Agent { .. } => "agent",
        }
    }

    /// What follows the hermes-svc program in the job's argv: always an explicit `--profile`,
    /// never `--replace`. `None` when the Hermes program's path is not UTF-8.
    pub fn args(&self, profile: &ProfileName) -> Option<Vec<String>> {
        let mut args = vec![
            self.word().to_owned(),
            "run".to_owned(),
            "--profile".to_owned(),
            profile.to_string(),
        ];
        if let Role::Agent { hermes } = self {
            args.push("--hermes".to_owned());
            args.push(hermes.to_str()?.to_owned());
        }
        Some(args)
    }

    /// The systemd unit of this role for `profile`.
    pub fn unit_name(&self, profile: &ProfileName) -> String {
        format!("hermes-{}-{profile}.service", self.word())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateways_names_are_the_ones_units_always_had() {
        let p = ProfileName::parse("coder").unwrap();
        assert_eq!(
            Role::Gateway.unit_name(&p),
            crate::profile::unit_name(&p),
            "the gateway's unit keeps its name"
        );
        let agent = Role::Agent {
            hermes: "/opt/hermes/bin/hermes".into(),
        };
        assert_eq!(agent.unit_name(&p), "hermes-agent-coder.service");
        assert_eq!(
            agent.args(&p).unwrap(),
            [
                "agent",
                "run",
                "--profile",
                "coder",
                "--hermes",
                "/opt/hermes/bin/hermes"
            ]
        );
    }
}
