//! What a successor inherits from the active through etcd: the session to resume and the
//! events stored (`inbound/ADAPTER`), the outbox's messages (`outbox/HASH`), and a long poll's
//! cursor that the client keeps (Weixin's).

use std::time::Duration;

use hermes_svc::mock_platform::MockConfig;
use nix::sys::signal::{kill, Signal};

use crate::cluster_lan::{never_two_at_once, spool_ids, Rig};
use crate::cluster_rig::with_cluster;
use crate::harness::wait_for;

/// What the active stored is in etcd too: its successor resumes the same session (op 6, no
/// second Identify), gets what the platform sent while nobody was connected, and stores none
/// of what the old active stored. Events flow throughout, so one may be in flight at the
/// kill (stored by the old active, not yet in etcd): it is stored on both hosts, never lost.
#[test]
fn a_new_active_resumes_the_old_session_and_loses_no_event() {
    let rig = Rig::new("clresume");
    let (a, b) = rig.active_then_standby("8s");
    let emit = |n| {
        let _g = rig.rt.enter();
        rig.mock.emit(n);
    };
    emit(20);
    wait_for(Duration::from_secs(10), "host-a to store 20 events", || {
        (spool_ids(&a).len() >= 20).then_some(())
    });
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..100 {
                emit(1);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        std::thread::sleep(Duration::from_millis(700));
        kill(a.pid(), Signal::SIGKILL).unwrap();
    });
    rig.identified(2, Duration::from_secs(20));
    emit(20);
    let generated = {
        let _g = rig.rt.enter();
        rig.mock.generated_event_ids()
    };
    let (on_a, on_b) = wait_for(Duration::from_secs(15), "every event stored", || {
        let (on_a, on_b) = (spool_ids(&a), spool_ids(&b));
        let mut all: Vec<&String> = on_a.iter().chain(&on_b).collect();
        all.sort();
        all.dedup();
        (all.len() >= generated.len()).then_some((on_a, on_b))
    });
    let s = rig.stats();
    assert_eq!(
        (s.identifies, s.resume_times.len()),
        (1, 1),
        "host-b resumed host-a's session"
    );
    assert!(
        b.log_text()
            .contains("resuming the session the cluster's previous active left"),
        "{}",
        b.log_text()
    );
    let mut all: Vec<String> = on_a.iter().chain(&on_b).cloned().collect();
    all.sort();
    all.dedup();
    let mut want = generated.clone();
    want.sort();
    assert_eq!(all, want, "every event, on one host or the other");
    let twice: Vec<&String> = on_b.iter().filter(|id| on_a.contains(id)).collect();
    assert!(twice.len() <= 1, "stored on both hosts: {twice:?}");
    assert!(on_b.len() > 20, "host-b stored {} events", on_b.len());
    never_two_at_once(&s);
}

/// The outbox is the cluster's: a standby refuses to queue (503, `not_active`); messages the
/// active accepted and had not sent when it died are posted by its successor, once each; a
/// message whose answer the dead active never read (the platform had posted it) is sent
/// again under its Discord nonce, which the platform dedupes; and a retried submit finds the
/// first message on whichever host it reaches.
#[test]
fn the_outbox_survives_the_active_and_posts_every_message_once() {
    use hermes_svc::mock_platform::{Platform, SendFault};
    let rig = Rig::new("cloutbox");
    let (a, b) = rig.active_then_standby("8s");
    let (status, body) = b.submit("to the standby");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "not_active", "{body}");

    let posted = |text: &str| {
        let _g = rig.rt.enter();
        rig.mock
            .posts()
            .iter()
            .filter(|p| p.content == text)
            .count()
    };
    let arm = |fault| {
        let _g = rig.rt.enter();
        rig.mock.set_send_fault(Platform::Discord, fault);
    };
    // Posted, then never answered: host-a's message stays `sending`.
    arm(SendFault::HangAfterProcessing(1));
    let (status, first) = a.submit("answer lost");
    assert_eq!(status, 202, "{first}");
    wait_for(
        Duration::from_secs(10),
        "the post whose answer hangs",
        || (posted("answer lost") == 1).then_some(()),
    );
    // Behind it in the channel's lane: these wait in host-a's outbox.
    let mut ids = vec![];
    for i in 0..4 {
        let (status, m) = a.submit(&format!("queued {i}"));
        assert_eq!(status, 202, "{m}");
        ids.push(m["id"].as_str().unwrap().to_owned());
    }
    kill(a.pid(), Signal::SIGKILL).unwrap();
    wait_for(Duration::from_secs(20), "host-b active", || {
        (b.role().as_deref() == Some("active")).then_some(())
    });
    // A retried submit, on the other host, finds the first message.
    let (status, again) = b.submit("queued 0");
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["id"], ids[0].as_str(), "{again}");
    for (i, id) in ids.iter().enumerate() {
        let m = wait_for(Duration::from_secs(15), "host-b to send it", || {
            let m = b.message(id);
            (m["state"] == "sent").then_some(m)
        });
        assert_eq!(m["text"], format!("queued {i}"));
    }
    let m = wait_for(Duration::from_secs(15), "the lost answer's message", || {
        let m = b.message(first["id"].as_str().unwrap());
        (m["state"] == "sent").then_some(m)
    });
    assert_eq!(m["text"], "answer lost");
    for text in [
        "answer lost",
        "queued 0",
        "queued 1",
        "queued 2",
        "queued 3",
    ] {
        assert_eq!(posted(text), 1, "{text} posted once");
    }
    never_two_at_once(&rig.stats());
}

/// A Weixin long poll's cursor (`get_updates_buf`) is the client's to keep: the active keeps
/// it in etcd too, and its successor polls from it. The mock answers a cursor it never gave
/// from the start of its log, so a successor polling from its own (none) would store again
/// what the old active stored: more than the 256 inherited dedupe keys could drop.
#[test]
fn a_new_active_polls_weixin_from_the_cursor_the_old_one_left() {
    use hermes_svc::config::Secret;
    use hermes_svc::mock_platform::weixin::WeixinConfig;
    use hermes_svc::platform::weixin::WeixinLogin;
    let rig = Rig::with_mock(
        "clweixin",
        MockConfig {
            weixin: WeixinConfig {
                longpolling_timeout_ms: 1000,
                ..WeixinConfig::default()
            },
            ..MockConfig::default()
        },
    );
    let base = rig.base.clone();
    let start = |node: &str| {
        let weixin = format!(
            "[[adapter]]\nname = \"wx\"\nkind = \"weixin\"\napi-base = \"{base}\"\n\
             poll-timeout = \"1s\"\npoll-grace = \"1s\"\n"
        );
        let home = rig.dir.path().join(node).join("hermes/profiles/cl");
        std::fs::create_dir_all(&home).unwrap();
        WeixinLogin::new(
            Secret::new(WeixinConfig::default().token),
            base.clone(),
            "mockbot@im.bot".into(),
            "mockuser@im.wechat".into(),
        )
        .write(&home.join("weixin/wx.json"))
        .unwrap();
        let toml = with_cluster(&weixin, &rig.etcd, node, "8s");
        rig.start(rig.dir.path(), node, &toml, "")
    };
    let emit = |n| {
        let _g = rig.rt.enter();
        rig.mock.weixin_emit(n)
    };
    let a = start("host-a");
    wait_for(Duration::from_secs(30), "host-a active", || {
        (a.role().as_deref() == Some("active")).then_some(())
    });
    let first = emit(300);
    wait_for(
        Duration::from_secs(30),
        "host-a to store 300 messages",
        || {
            let stored = spool_ids(&a);
            first.iter().all(|id| stored.contains(id)).then_some(())
        },
    );
    let b = start("host-b");
    wait_for(Duration::from_secs(20), "host-b standing by", || {
        (b.role().as_deref() == Some("standby")).then_some(())
    });
    kill(a.pid(), Signal::SIGKILL).unwrap();
    wait_for(Duration::from_secs(20), "host-b active", || {
        (b.role().as_deref() == Some("active")).then_some(())
    });
    let later = emit(5);
    let on_b = wait_for(
        Duration::from_secs(20),
        "host-b to store the new ones",
        || {
            let stored = spool_ids(&b);
            later.iter().all(|id| stored.contains(id)).then_some(stored)
        },
    );
    assert!(
        b.log_text()
            .contains("polling from the cursor the cluster's previous active left"),
        "{}",
        b.log_text()
    );
    let again: Vec<&String> = on_b.iter().filter(|id| first.contains(id)).collect();
    assert!(
        again.is_empty(),
        "stored again on host-b: {} of them",
        again.len()
    );
    assert_eq!(on_b.len(), later.len(), "{on_b:?}");
}
