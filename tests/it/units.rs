//! `units/` holds reference renders; they must match what the code renders today.
//!
//! Run with `HERMES_UPDATE_UNITS=1` to regenerate after an intended change.

use std::path::{Path, PathBuf};

use hermes_svc::profile::{Profile, ProfileName};
use hermes_svc::service::role::Role;
use hermes_svc::service::settings::Directive;
use hermes_svc::systemd::dropin::DropIn;
use hermes_svc::systemd::scope::Scope;
use hermes_svc::systemd::unit_file::UnitSpec;

fn sample(scope: Scope, run_as: Option<&str>, home: &str) -> String {
    sample_of(Role::Gateway, scope, run_as, home)
}

fn sample_of(role: Role, scope: Scope, run_as: Option<&str>, home: &str) -> String {
    UnitSpec {
        profile: Profile::new(ProfileName::parse("coder").unwrap(), PathBuf::from(home)).unwrap(),
        scope,
        exec: "/usr/local/bin/hermes-svc".into(),
        run_as: run_as.map(str::to_owned),
        role,
    }
    .render()
    .unwrap()
}

fn hermes() -> Role {
    Role::Agent {
        hermes: "/opt/hermes/bin/hermes".into(),
    }
}

fn sample_dropin() -> String {
    let mut d = DropIn::default();
    d.env
        .insert("HTTPS_PROXY".into(), "http://proxy:8080".into());
    d.directives.insert(Directive::WatchdogSec, 60);
    d.render().unwrap()
}

fn check(name: &str, rendered: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("units")
        .join(name);
    if std::env::var_os("HERMES_UPDATE_UNITS").is_some() {
        std::fs::write(&path, rendered).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        on_disk, rendered,
        "units/{name} drifted from the renderer; rerun with HERMES_UPDATE_UNITS=1 and review the diff"
    );
}

#[test]
fn reference_units_match_the_renderer() {
    check(
        "hermes-gateway-coder.service",
        &sample(Scope::User, None, "/home/alice/.hermes"),
    );
    check(
        "system/hermes-gateway-coder.service",
        &sample(Scope::System, Some("hermes"), "/var/lib/hermes/.hermes"),
    );
    check(
        "hermes-gateway-coder.service.d/50-hermes-svc.conf",
        &sample_dropin(),
    );
    check(
        "hermes-agent-coder.service",
        &sample_of(hermes(), Scope::User, None, "/home/alice/.hermes"),
    );
    check(
        "system/hermes-agent-coder.service",
        &sample_of(
            hermes(),
            Scope::System,
            Some("hermes"),
            "/var/lib/hermes/.hermes",
        ),
    );
}

/// Both scopes pass `systemd-analyze verify` with no output at all, the gateway's unit and
/// the agent's beside it.
#[test]
fn rendered_units_pass_systemd_analyze_verify() {
    let dir = crate::harness::scratch_dir("verify");
    let exe = crate::harness::BIN;
    // Any executable will do for the agent's Hermes: verify checks that it exists.
    let agent = Role::Agent {
        hermes: "/bin/true".into(),
    };
    for (scope, run_as) in [(Scope::System, Some("root")), (Scope::User, None)] {
        let paths: Vec<PathBuf> = [Role::Gateway, agent.clone()]
            .into_iter()
            .map(|role| {
                let unit = UnitSpec {
                    profile: Profile::new(
                        ProfileName::parse("verify").unwrap(),
                        dir.path().join("h"),
                    )
                    .unwrap(),
                    scope,
                    exec: exe.into(),
                    run_as: run_as.map(str::to_owned),
                    role,
                };
                let path = dir.path().join(unit.unit_name());
                std::fs::write(&path, unit.render().unwrap()).unwrap();
                path
            })
            .collect();
        let mut cmd = std::process::Command::new("systemd-analyze");
        if scope == Scope::User {
            // Offline verification of a user unit still needs a runtime dir to exist.
            let m = crate::harness::Manager::boot();
            cmd.envs(m.env()).arg("--user");
            let out = cmd.arg("verify").args(&paths).output().unwrap();
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).to_string()
                    + &String::from_utf8_lossy(&out.stderr),
                "",
                "{scope} unit"
            );
            continue;
        }
        let out = cmd.arg("verify").args(&paths).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr),
            "",
            "{scope} unit"
        );
    }
}

/// The overall exposure `systemd-analyze security --offline=true` gives a unit file: 0.0
/// (locked down) to 10.0 (nothing restricted).
fn exposure(scope: Scope, text: &str) -> f64 {
    let dir = crate::harness::scratch_dir("security");
    let path = dir.path().join("hermes-gateway-coder.service");
    std::fs::write(&path, text).unwrap();
    let mut cmd = std::process::Command::new("systemd-analyze");
    // Offline analysis of a user unit still wants a user manager's runtime dir.
    let _manager = (scope == Scope::User).then(|| {
        let m = crate::harness::Manager::boot();
        cmd.envs(m.env()).arg("--user");
        m
    });
    let out = cmd
        .args(["security", "--offline=true"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            l.split_once("Overall exposure level for ")?
                .1
                .split_once(": ")
        })
        .and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no exposure level in:\n{text}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// The figures docs/units.md records: 1.6 for the system unit (the target was 2.5 or lower),
/// and 6.6 for the user unit, as far as a user manager without privileges can enforce. Most
/// weakenings raise a figure and fail here; the reference units above pin every line.
#[test]
fn rendered_units_are_rated_as_documented_by_systemd_analyze_security() {
    let system = exposure(
        Scope::System,
        &sample(Scope::System, Some("hermes"), "/var/lib/hermes/.hermes"),
    );
    assert!(system <= 1.6, "system unit exposure {system}");
    let user = exposure(
        Scope::User,
        &sample(Scope::User, None, "/home/alice/.hermes"),
    );
    assert!(user <= 6.6, "user unit exposure {user}");
}
