//! A secret passed as a credential (`install --credential`) under a real systemd user
//! manager: it reaches the gateway, which connects with it, and it is nowhere a reader of
//! the unit can see it (the unit and drop-in files, every `systemctl show` property, status,
//! doctor). The same secret set with `set` lands in `Environment=`, and doctor says so
//! (HSV021). Profile names start with `gs`, like the other systemd gateway tests.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use hermes_svc::mock_platform::MockConfig;

use crate::harness::{scratch_dir, stdout, wait_for};
use crate::mock_runtime::{mock_runtime, start_mock};
use crate::profile_builder::ProfileTest;
use crate::unit_props::{brief, is_running};

const TOKEN: &str = "gs-credential-t0ken-4f9a1c";

#[test]
fn a_credential_reaches_the_gateway_and_no_reader_of_the_unit_sees_it() {
    let rt = mock_runtime();
    let mock = start_mock(&rt, MockConfig::default());
    let secrets = tempfile::Builder::new()
        .prefix("hsv-gscred-secrets-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let token_file = secrets.path().join("dc.token");
    fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    fs::set_permissions(&token_file, fs::Permissions::from_mode(0o600)).unwrap();
    let toml = format!(
        "[[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"GS_CRED_TOKEN\"\n\
         api-base = \"{}\"\nbackoff-min = \"200ms\"\nbackoff-max = \"1s\"\n",
        mock.http_base()
    );
    let credential = format!("GS_CRED_TOKEN={}", token_file.display());
    let credential_line = format!("GS_CRED_TOKEN:{}", token_file.display());
    // No .env value: the credential is the only place the token is.
    let m = &crate::harness::Manager::boot();
    let profile = ProfileTest::new("gscred")
        .config(&toml)
        .env("")
        .install_args(&["--credential", &credential])
        .write(m);
    let locks = scratch_dir("gscred-locks");
    profile.install_ok(m, locks.path());
    let unit = &profile.unit;
    wait_for(
        Duration::from_secs(15),
        "StatusText 1/1 adapters ready",
        || {
            m.prop(unit, "StatusText")
                .contains("1/1 adapters ready")
                .then_some(())
        },
    );
    assert!(
        mock.stats().identifies >= 1,
        "the gateway identified with the credential"
    );

    let props = m.show(unit);
    assert!(is_running(&props), "{}", brief(&props));
    let shown: String = props.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    assert!(!shown.contains(TOKEN), "systemctl show leaks the token");
    let dropin_path = m.unit_dir().join(format!("{unit}.d/50-hermes-svc.conf"));
    let dropin = fs::read_to_string(&dropin_path).unwrap();
    assert!(
        dropin.contains(&format!("\nLoadCredential={credential_line}\n")),
        "{dropin}"
    );
    let unit_file = fs::read_to_string(m.unit_dir().join(unit)).unwrap();
    assert!(!dropin.contains(TOKEN) && !unit_file.contains(TOKEN));
    for args in [
        &["status", "--json", "--profile", "gscred"][..],
        &["doctor", "--json", "--profile", "gscred"][..],
    ] {
        let out = stdout(&m.hermes(args));
        assert!(!out.contains(TOKEN), "{args:?}: {out}");
    }
    let doctor = stdout(&m.hermes(&["doctor", "--json", "--profile", "gscred"]));
    assert!(!doctor.contains("HSV021"), "{doctor}");

    // The same secret through `set`: in the unit's environment, and doctor warns.
    let pair = format!("GS_CRED_TOKEN={TOKEN}");
    m.hermes_ok(&["set", "--profile", "gscred", "--no-restart", &pair]);
    let doctor = stdout(&m.hermes(&["doctor", "--json", "--profile", "gscred"]));
    assert!(doctor.contains("HSV021"), "{doctor}");
    assert!(
        doctor.contains("--credential GS_CRED_TOKEN=/path/to/file"),
        "{doctor}"
    );
    assert!(!doctor.contains(TOKEN), "doctor shows the value: {doctor}");
}
