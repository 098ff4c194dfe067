//! A real gateway process with a Weixin adapter (`wx`) against the mock iLink API in this
//! process (the outbox rig's, with the adapter and its login file added): messages stored
//! and the cursor persisted after them, the iLink headers, a hung poll, a kill between
//! receive and spool append, an expired session that recovers with a new login and no
//! restart, `login weixin`, two profiles on one token, 1,000 messages under 20 faults, and a
//! reply across a 5xx and two crashes. Profile names start with `wx`. The mock holds a poll
//! for 1 s, and the adapter's grace is 1 s.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use hermes_svc::config::Secret;
use hermes_svc::gateway::outbox::{Policy, State};
use hermes_svc::gateway::spool;
use hermes_svc::mock_platform::weixin::{QrStep, WeixinConfig, WeixinFault};
use hermes_svc::mock_platform::{MockConfig, Platform, SendFault};
use hermes_svc::platform::weixin::WeixinLogin;

use crate::harness::wait_for;
use crate::outbox_rig::{killed_by_fault, sigterm, Rig};

const PEER: &str = "mockuser@im.wechat";

fn mock_config() -> MockConfig {
    MockConfig {
        weixin: WeixinConfig {
            longpolling_timeout_ms: 1000,
            ..WeixinConfig::default()
        },
        ..MockConfig::default()
    }
}

fn adapter(base: &str) -> String {
    format!(
        "\n[[adapter]]\nname = \"wx\"\nkind = \"weixin\"\napi-base = \"{base}\"\n\
         poll-timeout = \"1s\"\npoll-grace = \"1s\"\nbackoff-min = \"200ms\"\nbackoff-max = \"1s\"\n"
    )
}

fn rig(profile: &str) -> Rig {
    let rig = Rig::with_mock(profile, "", mock_config());
    let toml = rig.profile_home().join("gateway.toml");
    let mut text = fs::read_to_string(&toml).unwrap();
    text.push_str(&adapter(&rig.mock.http_base()));
    fs::write(&toml, text).unwrap();
    store_login(&rig, &WeixinConfig::default().token);
    rig
}

fn login_file(rig: &Rig) -> std::path::PathBuf {
    rig.profile_home().join("weixin/wx.json")
}

/// What `login weixin` stores, written as it would be.
fn store_login(rig: &Rig, token: &str) {
    WeixinLogin::new(
        Secret::new(token.to_owned()),
        rig.mock.http_base(),
        "mockbot@im.bot".into(),
        PEER.into(),
    )
    .write(&login_file(rig))
    .unwrap();
}

fn stored(rig: &Rig) -> Vec<String> {
    spool::read(&rig.profile_home().join("inbox"), None)
        .unwrap_or_default()
        .into_iter()
        .map(|e| e.id)
        .collect()
}

fn wait_stored(rig: &Rig, ids: &[String], timeout: Duration) {
    wait_for(timeout, "the messages in the spool", || {
        let s = stored(rig);
        ids.iter().all(|id| s.contains(id)).then_some(())
    });
}

fn polling(rig: &Rig) {
    let before = rig.mock.weixin_stats().polls;
    wait_for(Duration::from_secs(20), "the adapter to poll", || {
        (rig.mock.weixin_stats().polls > before).then_some(())
    });
}

fn adapter_state(rig: &Rig) -> Option<String> {
    let s = rig.state()?;
    let c = s["components"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == "wx")?
        .clone();
    Some(c["state"].as_str()?.to_owned())
}

#[test]
fn messages_are_stored_once_in_order_and_the_cursor_is_kept_after_them() {
    let rig = rig("wxorder");
    let mut gw = rig.gateway("");
    polling(&rig);
    let ids = rig.mock.weixin_emit(30);
    wait_stored(&rig, &ids, Duration::from_secs(20));
    assert_eq!(stored(&rig), ids, "in order, once each");
    let cursor = rig.profile_home().join("inbox/cursors/wx");
    wait_for(Duration::from_secs(10), "the cursor file", || {
        fs::metadata(&cursor).ok()
    });
    let stats = rig.mock.weixin_stats();
    assert_eq!(stats.header_violations, 0, "{stats:?}");
    assert_eq!(stats.uin_repeats, 0, "{stats:?}");
    sigterm(&mut gw);
    // A restart polls from the kept cursor: nothing comes twice.
    let mut gw = rig.gateway("");
    polling(&rig);
    let more = rig.mock.weixin_emit(2);
    wait_stored(&rig, &more, Duration::from_secs(20));
    assert_eq!(stored(&rig).len(), 32);
    sigterm(&mut gw);
    let token = WeixinConfig::default().token;
    assert!(!rig.log().contains(&token), "the token leaked into the log");
}

#[test]
fn a_hung_poll_is_dropped_and_polling_goes_on() {
    let rig = rig("wxhang");
    let mut gw = rig.gateway("");
    polling(&rig);
    rig.mock.weixin_set_fault_for(WeixinFault::HangPolls, 1);
    wait_for(Duration::from_secs(10), "a poll to hang", || {
        (rig.mock.weixin_stats().hung >= 1).then_some(())
    });
    let ids = rig.mock.weixin_emit(3);
    wait_stored(&rig, &ids, Duration::from_secs(10));
    assert!(rig.log().contains("dead connection"), "{}", rig.log());
    sigterm(&mut gw);
}

#[test]
fn killed_between_receive_and_spool_append_the_message_comes_again_after_restart() {
    let rig = rig("wxkill");
    let mut gw = rig.gateway("kill:poll-received");
    polling(&rig);
    let ids = rig.mock.weixin_emit(1);
    killed_by_fault(&mut gw, Duration::from_secs(20));
    assert!(stored(&rig).is_empty(), "killed before the append");
    let mut gw = rig.gateway("");
    wait_stored(&rig, &ids, Duration::from_secs(20));
    assert_eq!(stored(&rig), ids);
    sigterm(&mut gw);
}

#[test]
fn an_expired_session_shows_needs_login_and_recovers_with_a_new_login_without_restart() {
    let rig = rig("wxexpire");
    let mut gw = rig.gateway("");
    polling(&rig);
    rig.mock.weixin_expire_session();
    wait_for(
        Duration::from_secs(20),
        "needs-login in the state file",
        || (adapter_state(&rig).as_deref() == Some("needs-login")).then_some(()),
    );
    let s = rig.state().unwrap();
    assert!(
        s["summary"].as_str().unwrap().contains("wx: needs-login"),
        "{s}"
    );
    // Waiting for a person is not an outage a restart could end: still running.
    assert!(gw.try_wait().unwrap().is_none());
    let ids = rig.mock.weixin_emit(2);
    let token = rig.mock.weixin_issue_token();
    store_login(&rig, &token);
    wait_stored(&rig, &ids, Duration::from_secs(20));
    wait_for(Duration::from_secs(10), "connected again", || {
        (adapter_state(&rig).as_deref() == Some("connected")).then_some(())
    });
    assert!(
        gw.try_wait().unwrap().is_none(),
        "no restart: {}",
        rig.log()
    );
    sigterm(&mut gw);
    assert!(!rig.log().contains(&token), "the new token leaked");
}

#[test]
fn login_weixin_draws_a_qr_code_and_stores_a_0600_login() {
    let rig = rig("wxlogin");
    fs::remove_file(login_file(&rig)).unwrap();
    rig.mock
        .weixin_set_qr_script(vec![QrStep::Wait, QrStep::Scanned, QrStep::Confirmed]);
    let out = rig
        .hermes()
        .args([
            "login",
            "weixin",
            "--profile",
            "wxlogin",
            "--timeout",
            "30s",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains('█') || stdout.contains('▀'),
        "a QR code: {stdout}"
    );
    assert!(stdout.contains("confirm the login in WeChat"), "{stdout}");
    let path = login_file(&rig);
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let login = WeixinLogin::read(&path).unwrap();
    assert_eq!(login.base_url, rig.mock.http_base());
    // The stored token is one the platform honours, and it was never shown.
    let text = fs::read_to_string(&path).unwrap();
    let token: serde_json::Value = serde_json::from_str(&text).unwrap();
    let token = token["token"].as_str().unwrap();
    assert!(!stdout.contains(token), "{stdout}");
    let mut gw = rig.gateway("");
    let ids = rig.mock.weixin_emit(1);
    wait_stored(&rig, &ids, Duration::from_secs(20));
    sigterm(&mut gw);
}

#[test]
fn a_second_profile_with_the_same_token_exits_78() {
    let rig = rig("wxone");
    let mut first = rig.gateway("");
    polling(&rig);
    let other = rig.home.path().join("profiles/wxtwo");
    fs::create_dir_all(other.join("weixin")).unwrap();
    fs::write(other.join("gateway.toml"), adapter(&rig.mock.http_base())).unwrap();
    fs::copy(login_file(&rig), other.join("weixin/wx.json")).unwrap();
    let out = rig
        .hermes()
        .args(["gateway", "run", "--profile", "wxtwo"])
        .env("HERMES_LOCK_DIR", rig.home.path().join("locks"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("wx") && stderr.contains("already held"),
        "{stderr}"
    );
    assert!(!stderr.contains(&WeixinConfig::default().token), "{stderr}");
    assert!(first.try_wait().unwrap().is_none());
    sigterm(&mut first);
}

#[test]
fn a_thousand_messages_under_twenty_faults_are_stored_once_each_in_order() {
    let rig = rig("wxflood");
    let mut gw = rig.gateway("");
    polling(&rig);
    let faults = [
        WeixinFault::HangPolls,
        WeixinFault::ServerError,
        WeixinFault::RateLimited,
        WeixinFault::Duplicate,
        WeixinFault::CursorReset,
        WeixinFault::Slow(Duration::from_millis(300)),
    ];
    let mut ids = vec![];
    for i in 0..20 {
        rig.mock.weixin_set_fault_for(faults[i % faults.len()], 1);
        ids.extend(rig.mock.weixin_emit(50));
        let polls = rig.mock.weixin_stats().polls;
        wait_for(Duration::from_secs(40), "the next poll", || {
            (rig.mock.weixin_stats().polls > polls + 1).then_some(())
        });
    }
    wait_stored(&rig, &ids, Duration::from_secs(90));
    assert_eq!(stored(&rig), ids, "each message once, in order");
    assert!(gw.try_wait().unwrap().is_none(), "{}", rig.log());
    sigterm(&mut gw);
}

#[test]
fn a_long_reply_reaches_weixin_once_across_a_5xx_and_two_crashes() {
    let rig = rig("wxreply");
    let key = "wx-reply-1";
    // Two pieces, each with a client_id of its own.
    let text = format!("{}\n第二段", "字".repeat(2500));
    let kill = format!("kill:outbox-answered:{key}");
    let target = format!("user:{PEER}");

    // A message from the peer first, so the reply has a context_token to carry.
    let mut gw = rig.gateway("");
    polling(&rig);
    let ids = rig.mock.weixin_emit(1);
    wait_stored(&rig, &ids, Duration::from_secs(20));
    sigterm(&mut gw);

    // First life: the platform answers 500, and the gateway dies before recording it.
    rig.mock
        .set_send_fault(Platform::Weixin, SendFault::ServerError(1));
    let mut gw = rig.gateway(&kill);
    assert!(rig.wait_api(&mut gw));
    let id = rig
        .submit(key, ("wx", &target), &text, None, Policy::AtMostOnce)
        .unwrap()
        .id;
    killed_by_fault(&mut gw, Duration::from_secs(20));
    assert_eq!(rig.posts().len(), 0);

    // Second life: both pieces are posted, and the gateway dies before recording that.
    let mut gw = rig.gateway(&kill);
    killed_by_fault(&mut gw, Duration::from_secs(20));
    assert_eq!(rig.posts().len(), 2);

    // Third life: sent again with the same client_ids, which the platform drops.
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw));
    rig.wait_drained(&gw, Duration::from_secs(30));
    let m = rig.message(&id);
    assert_eq!(m.state, State::Sent, "{m:?}");
    let posts = rig.posts();
    let pieces: Vec<&str> = posts.iter().map(|p| p.content.as_str()).collect();
    assert_eq!(posts.len(), 2, "each piece once: {pieces:?}");
    assert_eq!(pieces.concat(), text);
    assert!(posts.iter().all(|p| p.target_id == PEER));
    sigterm(&mut gw);
}

/// A quiet bot whose server holds each poll 30 s: the adapter reports in at once with
/// `getconfig` (so READY=1 need not wait out the first long poll), then long-polls; and an
/// ended session is found at start, not after the first poll.
#[test]
fn a_quiet_bot_reports_in_at_once_and_an_ended_session_is_found_at_start() {
    let quiet = MockConfig {
        weixin: WeixinConfig {
            longpolling_timeout_ms: 30_000,
            ..WeixinConfig::default()
        },
        ..MockConfig::default()
    };
    let rig = Rig::with_mock("wxquiet", "", quiet);
    let toml = rig.profile_home().join("gateway.toml");
    let mut text = fs::read_to_string(&toml).unwrap();
    text.push_str(&format!(
        "\n[[adapter]]\nname = \"wx\"\nkind = \"weixin\"\napi-base = \"{}\"\npoll-grace = \"1s\"\n",
        rig.mock.http_base()
    ));
    fs::write(&toml, text).unwrap();
    store_login(&rig, &WeixinConfig::default().token);
    let mut gw = rig.gateway("");
    wait_for(Duration::from_secs(10), "wx connected", || {
        (adapter_state(&rig).as_deref() == Some("connected")).then_some(())
    });
    wait_for(Duration::from_secs(10), "a long poll held", || {
        (rig.mock.weixin_stats().polls >= 1).then_some(())
    });
    sigterm(&mut gw);

    rig.mock.weixin_expire_session();
    let mut gw = rig.gateway("");
    wait_for(Duration::from_secs(10), "needs-login at start", || {
        (adapter_state(&rig).as_deref() == Some("needs-login")).then_some(())
    });
    sigterm(&mut gw);
}
