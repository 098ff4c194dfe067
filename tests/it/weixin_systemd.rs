//! A Weixin gateway under a real systemd user manager, against the mock iLink API: a session
//! the platform ends shows as `needs-login` where a user looks (`status --json`, `doctor`,
//! the unit's StatusText), nothing restarts, and a new login brings the adapter back in the
//! same process. The profile name starts with `gs`, like the other systemd gateway tests.

use std::time::Duration;

use hermes_svc::config::Secret;
use hermes_svc::mock_platform::weixin::WeixinConfig;
use hermes_svc::mock_platform::MockConfig;
use hermes_svc::platform::weixin::WeixinLogin;

use crate::harness::{stdout, wait_for, Manager};
use crate::mock_runtime::{mock_runtime, start_mock};
use crate::profile_builder::ProfileTest;
use crate::unit_props::{brief, is_running, main_pid, n_restarts};

fn login(base: &str, token: &str) -> WeixinLogin {
    WeixinLogin::new(
        Secret::new(token.to_owned()),
        base.to_owned(),
        "mockbot@im.bot".into(),
        "mockuser@im.wechat".into(),
    )
}

fn status_text(m: &Manager, unit: &str) -> String {
    m.prop(unit, "StatusText")
}

#[test]
fn an_ended_session_shows_needs_login_in_status_and_doctor_and_a_new_login_ends_it_in_place() {
    let rt = mock_runtime();
    let mock = start_mock(
        &rt,
        MockConfig {
            weixin: WeixinConfig {
                longpolling_timeout_ms: 1000,
                ..WeixinConfig::default()
            },
            ..MockConfig::default()
        },
    );
    let base = mock.http_base();
    let toml = format!(
        "[[adapter]]\nname = \"wx\"\nkind = \"weixin\"\napi-base = \"{base}\"\n\
         poll-timeout = \"1s\"\npoll-grace = \"1s\"\nbackoff-min = \"200ms\"\nbackoff-max = \"1s\"\n"
    );
    let m = Manager::boot();
    let profile = ProfileTest::new("gswx").config(&toml).write(&m);
    let login_file = profile.home.join("weixin/wx.json");
    login(&base, &WeixinConfig::default().token)
        .write(&login_file)
        .unwrap();
    let locks = crate::harness::scratch_dir("gswx-locks");
    profile.install_ok(&m, locks.path());
    let unit = &profile.unit;
    let pid = m.wait_active(unit);
    wait_for(
        Duration::from_secs(15),
        "StatusText 1/1 adapters ready",
        || {
            status_text(&m, unit)
                .contains("1/1 adapters ready")
                .then_some(())
        },
    );

    mock.weixin_expire_session();
    wait_for(
        Duration::from_secs(15),
        "StatusText wx: needs-login",
        || {
            status_text(&m, unit)
                .contains("wx: needs-login")
                .then_some(())
        },
    );
    let status = stdout(&m.hermes(&["status", "--json", "--profile", "gswx"]));
    assert!(status.contains("\"needs-login\""), "{status}");
    let doctor = m.hermes(&["doctor", "--json", "--profile", "gswx"]);
    let report = stdout(&doctor);
    assert!(
        report.contains("HSV019")
            && report.contains("hermes-svc login weixin --profile gswx --adapter wx"),
        "{report}"
    );
    assert!(
        !report.contains(&WeixinConfig::default().token),
        "the token leaked: {report}"
    );

    // A person logs in again: the same process picks the new login up.
    let token = mock.weixin_issue_token();
    login(&base, &token).write(&login_file).unwrap();
    wait_for(Duration::from_secs(15), "StatusText 1/1 again", || {
        status_text(&m, unit)
            .contains("1/1 adapters ready")
            .then_some(())
    });
    let p = m.show(unit);
    assert!(is_running(&p), "{}", brief(&p));
    assert_eq!(main_pid(&p), pid, "replaced: {}", brief(&p));
    assert_eq!(n_restarts(&p), 0, "restarted: {}", brief(&p));
}
