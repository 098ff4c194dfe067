//! A real gateway process with a Telegram adapter (`tg`) against the mock Bot API in this
//! process (the outbox rig's, with the adapter added): updates stored and confirmed, a hung
//! poll, a kill between receive and spool append, conflicts that clear and ones that do not,
//! a 429's wait, a webhook, and a reply across a 5xx and a crash. Profile names start with
//! `tg`. Polls are short here (1 s, with 1 s of grace) so each case takes seconds.

use std::fs;
use std::process::Child;
use std::time::Duration;

use hermes_svc::gateway::outbox::{Policy, State};
use hermes_svc::gateway::spool;
use hermes_svc::mock_platform::telegram::{TelegramConfig, TelegramFault};
use hermes_svc::mock_platform::{Platform, SendFault};

use crate::harness::wait_for;
use crate::outbox_rig::{killed_by_fault, sigterm, Rig};

const TOKEN_VAR: &str = "TG_BOT_TOKEN";

fn rig(profile: &str, extra: &str) -> Rig {
    let rig = Rig::new(profile, "");
    let toml = rig.profile_home().join("gateway.toml");
    let mut text = fs::read_to_string(&toml).unwrap();
    text.push_str(&format!(
        "\n[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\ntoken-env = \"{TOKEN_VAR}\"\n\
         api-base = \"{}\"\npoll-timeout = \"1s\"\npoll-grace = \"1s\"\n\
         backoff-min = \"200ms\"\nbackoff-max = \"1s\"\n{extra}",
        rig.mock.http_base()
    ));
    fs::write(&toml, text).unwrap();
    rig
}

fn gateway(rig: &Rig, faults: &str) -> Child {
    let token = TelegramConfig::default().token;
    let mut env = vec![(TOKEN_VAR, token.as_str())];
    if !faults.is_empty() {
        env.push(("HERMES_TEST_FAULT", faults));
    }
    rig.gateway_with_env(&env)
}

fn stored(rig: &Rig) -> Vec<String> {
    spool::read(&rig.profile_home().join("inbox"), None)
        .unwrap_or_default()
        .into_iter()
        .map(|e| e.id)
        .collect()
}

fn wait_stored(rig: &Rig, ids: &[i64], timeout: Duration) {
    let want: Vec<String> = ids.iter().map(i64::to_string).collect();
    wait_for(timeout, "the updates in the spool", || {
        let s = stored(rig);
        want.iter().all(|id| s.contains(id)).then_some(())
    });
}

fn polling(rig: &Rig) {
    let before = rig.mock.telegram_stats().polls;
    wait_for(Duration::from_secs(20), "the adapter to poll", || {
        (rig.mock.telegram_stats().polls > before).then_some(())
    });
}

fn exit_code(child: &mut Child, timeout: Duration) -> Option<i32> {
    wait_for(timeout, "the gateway to exit", || child.try_wait().unwrap()).code()
}

#[test]
fn updates_are_stored_in_order_once_and_confirmed_only_after() {
    let rig = rig("tgorder", "");
    let mut gw = gateway(&rig, "");
    polling(&rig);
    let ids = rig.mock.telegram_emit(30);
    wait_stored(&rig, &ids, Duration::from_secs(20));
    // The next poll confirms them all.
    let last = *ids.last().unwrap();
    wait_for(Duration::from_secs(10), "the offset past the last", || {
        (rig.mock.telegram_stats().confirmed_below > last).then_some(())
    });
    let want: Vec<String> = ids.iter().map(i64::to_string).collect();
    assert_eq!(stored(&rig), want, "in order, once each");
    let stats = rig.mock.telegram_stats();
    assert_eq!(
        stats.last_allowed_updates.as_deref(),
        Some(
            &[
                "message",
                "edited_message",
                "channel_post",
                "callback_query"
            ]
            .map(String::from)[..]
        )
    );
    assert_eq!(stats.max_timeout_asked, 1);
    sigterm(&mut gw);
    assert!(
        !rig.log().contains(&TelegramConfig::default().token),
        "the token leaked into the log"
    );
}

#[test]
fn a_hung_poll_is_dropped_and_polling_goes_on() {
    let rig = rig("tghang", "");
    let mut gw = gateway(&rig, "");
    polling(&rig);
    rig.mock.telegram_set_fault_for(TelegramFault::HangPolls, 1);
    wait_for(Duration::from_secs(10), "a poll to hang", || {
        (rig.mock.telegram_stats().hung >= 1).then_some(())
    });
    let ids = rig.mock.telegram_emit(3);
    // Within the hung poll's deadline (2 s) plus a backoff and a poll.
    wait_stored(&rig, &ids, Duration::from_secs(10));
    assert!(rig.log().contains("dead connection"), "{}", rig.log());
    sigterm(&mut gw);
}

#[test]
fn killed_between_receive_and_spool_append_the_update_comes_again_after_restart() {
    let rig = rig("tgkill", "");
    let mut gw = gateway(&rig, "kill:poll-received");
    polling(&rig);
    let id = rig.mock.telegram_emit(1)[0];
    killed_by_fault(&mut gw, Duration::from_secs(20));
    assert!(stored(&rig).is_empty(), "killed before the append");
    assert!(
        rig.mock.telegram_stats().confirmed_below <= id,
        "not confirmed"
    );
    let mut gw = gateway(&rig, "");
    wait_stored(&rig, &[id], Duration::from_secs(20));
    wait_for(Duration::from_secs(10), "the confirmation", || {
        (rig.mock.telegram_stats().confirmed_below > id).then_some(())
    });
    assert_eq!(stored(&rig), vec![id.to_string()]);
    sigterm(&mut gw);
}

#[test]
fn a_second_poller_that_stays_makes_the_gateway_exit_78_after_the_grace() {
    let rig = rig("tgconflict", "");
    let mut gw = gateway(&rig, "");
    polling(&rig);
    rig.mock.telegram_set_fault(TelegramFault::OtherPoller);
    let started = std::time::Instant::now();
    assert_eq!(
        exit_code(&mut gw, Duration::from_secs(30)),
        Some(78),
        "{}",
        rig.log()
    );
    // Not before a poll's whole deadline (1 s + 1 s of grace) has passed.
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let log = rig.log();
    assert!(
        log.contains("terminated by other getUpdates request") && log.contains("another poller"),
        "{log}"
    );
    let state = rig.state().unwrap();
    assert!(
        state.to_string().contains("another poller"),
        "the state file says why: {state}"
    );
}

#[test]
fn a_conflict_that_clears_within_the_grace_does_not_exit() {
    let rig = rig("tgblip", "");
    let mut gw = gateway(&rig, "");
    polling(&rig);
    rig.mock
        .telegram_set_fault_for(TelegramFault::OtherPoller, 2);
    wait_for(Duration::from_secs(10), "the conflicts", || {
        (rig.mock.telegram_stats().conflicts >= 2).then_some(())
    });
    let ids = rig.mock.telegram_emit(2);
    wait_stored(&rig, &ids, Duration::from_secs(10));
    assert!(
        gw.try_wait().unwrap().is_none(),
        "still running: {}",
        rig.log()
    );
    sigterm(&mut gw);
}

#[test]
fn a_429_is_waited_out_for_its_retry_after() {
    let rig = rig("tg429", "");
    let mut gw = gateway(&rig, "");
    polling(&rig);
    rig.mock
        .telegram_set_fault_for(TelegramFault::RateLimited { retry_after: 2 }, 1);
    // The refused poll is the last one when the refusal is counted.
    let refused_at = wait_for(Duration::from_secs(10), "the 429", || {
        let s = rig.mock.telegram_stats();
        (s.refused >= 1).then_some(s.poll_times.len())
    });
    let times = wait_for(Duration::from_secs(10), "the poll after it", || {
        let t = rig.mock.telegram_stats().poll_times;
        (t.len() > refused_at).then_some(t)
    });
    let gap = times[refused_at] - times[refused_at - 1];
    assert!(gap >= Duration::from_secs(2), "asked again after {gap:?}");
    assert!(gap < Duration::from_secs(4), "asked again after {gap:?}");
    let ids = rig.mock.telegram_emit(1);
    wait_stored(&rig, &ids, Duration::from_secs(10));
    sigterm(&mut gw);
}

#[test]
fn a_webhook_is_named_in_the_exit_or_deleted_when_configured() {
    let rig = rig("tghook", "");
    rig.mock.telegram_set_webhook("https://example.com/hook");
    let mut gw = gateway(&rig, "");
    assert_eq!(
        exit_code(&mut gw, Duration::from_secs(20)),
        Some(78),
        "{}",
        rig.log()
    );
    assert!(rig.log().contains("delete-webhook = true"), "{}", rig.log());
    assert_eq!(
        rig.mock.telegram_webhook().as_deref(),
        Some("https://example.com/hook")
    );

    let rig = self::rig("tghookdel", "delete-webhook = true\n");
    rig.mock.telegram_set_webhook("https://example.com/hook");
    let mut gw = gateway(&rig, "");
    let ids = rig.mock.telegram_emit(1);
    wait_stored(&rig, &ids, Duration::from_secs(20));
    assert_eq!(rig.mock.telegram_webhook(), None);
    assert_eq!(rig.mock.telegram_stats().webhook_deletes, 1);
    sigterm(&mut gw);
}

#[test]
fn a_long_reply_reaches_telegram_once_in_order_across_a_crash_and_a_5xx() {
    let rig = rig("tgreply", "");
    let chat = TelegramConfig::default().chats[0];
    rig.mock.telegram_emit(1);
    let key = "tg-reply-1";
    // Two pieces: 4,096 characters, then the rest.
    let text = format!("{}\nend of the answer", "字".repeat(5000));
    let target = format!("chat:{chat}");
    let submit = |rig: &Rig| rig.submit(key, ("tg", &target), &text, Some("1"), Policy::AtMostOnce);

    // First life: queued durably, and the gateway dies before it answers the submit, so
    // nothing has gone out. Telegram drops no repeat, so this is the crash it survives.
    let mut gw = gateway(&rig, &format!("kill:outbox-appended:{key}"));
    assert!(rig.wait_api(&mut gw));
    assert!(submit(&rig).is_err(), "no answer from a killed gateway");
    killed_by_fault(&mut gw, Duration::from_secs(20));
    assert_eq!(rig.posts().len(), 0);

    // Second life: the caller asks again with its key and gets the queued message; its first
    // piece meets a 5xx and is retried.
    rig.mock
        .set_send_fault(Platform::Telegram, SendFault::ServerError(1));
    let mut gw = gateway(&rig, "");
    assert!(rig.wait_api(&mut gw));
    let id = submit(&rig).unwrap().id;
    rig.wait_drained(&gw, Duration::from_secs(30));
    let m = rig.message(&id);
    assert_eq!(m.state, State::Sent, "{m:?}");
    let posts: Vec<_> = rig
        .posts()
        .into_iter()
        .filter(|p| p.platform == Platform::Telegram)
        .collect();
    let pieces: Vec<&str> = posts.iter().map(|p| p.content.as_str()).collect();
    assert_eq!(posts.len(), 2, "each piece once: {pieces:?}");
    assert_eq!(pieces[0].chars().count(), 4096);
    assert_eq!(pieces.concat(), text);
    assert_eq!(posts[0].reply_to.as_deref(), Some("1"));
    assert_eq!(posts[1].reply_to, None);
    assert_eq!(m.platform_id.as_deref(), Some(posts[0].message_id.as_str()));
    sigterm(&mut gw);
}

#[test]
fn a_thousand_updates_under_twenty_faults_are_stored_once_each_in_order() {
    let rig = rig("tgflood", "");
    let mut gw = gateway(&rig, "");
    polling(&rig);
    let faults = [
        TelegramFault::HangPolls,
        TelegramFault::ServerError,
        TelegramFault::RateLimited { retry_after: 1 },
        TelegramFault::Duplicate,
        TelegramFault::OtherPoller,
        TelegramFault::Slow(Duration::from_millis(300)),
    ];
    let mut ids = vec![];
    for i in 0..20 {
        rig.mock.telegram_set_fault_for(faults[i % faults.len()], 1);
        ids.extend(rig.mock.telegram_emit(50));
        // Let the fault strike before the next is armed over it.
        let polls = rig.mock.telegram_stats().polls;
        wait_for(Duration::from_secs(10), "the next poll", || {
            (rig.mock.telegram_stats().polls > polls + 1).then_some(())
        });
    }
    wait_stored(&rig, &ids, Duration::from_secs(60));
    let want: Vec<String> = ids.iter().map(i64::to_string).collect();
    assert_eq!(stored(&rig), want, "each update once, in order");
    let stats = rig.mock.telegram_stats();
    // Each kind struck (hangs, 409s, and 429s with 502s as refusals).
    assert!(
        stats.hung >= 3 && stats.conflicts >= 3 && stats.refused >= 6,
        "{stats:?}"
    );
    assert!(gw.try_wait().unwrap().is_none(), "{}", rig.log());
    sigterm(&mut gw);
}

/// A quiet bot with the default 30 s long poll: its first poll is short, so the adapter
/// reports in (and READY=1 follows) at once rather than after the server's whole wait; then it
/// long-polls as configured.
#[test]
fn a_quiet_bot_reports_in_at_once_and_then_long_polls() {
    let rig = Rig::new("tgquiet", "");
    let toml = rig.profile_home().join("gateway.toml");
    let mut text = fs::read_to_string(&toml).unwrap();
    text.push_str(&format!(
        "\n[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\ntoken-env = \"{TOKEN_VAR}\"\n\
         api-base = \"{}\"\npoll-timeout = \"30s\"\n",
        rig.mock.http_base()
    ));
    fs::write(&toml, text).unwrap();
    let mut gw = gateway(&rig, "");
    wait_for(Duration::from_secs(10), "tg connected", || {
        let s = rig.state()?;
        s["components"]
            .as_array()?
            .iter()
            .any(|c| c["name"] == "tg" && c["state"] == "connected")
            .then_some(())
    });
    wait_for(Duration::from_secs(10), "a 30 s long poll", || {
        (rig.mock.telegram_stats().max_timeout_asked == 30).then_some(())
    });
    sigterm(&mut gw);
}
