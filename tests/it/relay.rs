//! The Relay connector of a real gateway process, against the mock platform, dialled by a
//! client that speaks the frames as Hermes 0.19.0 sends them (`gateway/relay/ws_transport.py`):
//! the dial it refuses, the descriptor, delivery from the durable cursor across a dropped
//! connection and a SIGKILLed gateway, and a long reply split into the platform's pieces, in
//! order, as replies. The real Hermes is in `hermes_agent.rs`.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use hermes_svc::agent::relay::auth;
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::harness::free_port;
use crate::harness::wait_for;
use crate::outbox_rig::{sigkill, sigterm, Rig};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A Hermes-like client: frames are JSON lines, possibly several per message.
pub(crate) struct Agent {
    ws: Ws,
    pending: std::collections::VecDeque<Value>,
}

impl Agent {
    async fn dial(port: u16, token: Option<&str>) -> Result<Agent, String> {
        let mut request = format!("ws://127.0.0.1:{port}/relay")
            .into_client_request()
            .unwrap();
        if let Some(t) = token {
            request
                .headers_mut()
                .insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        let (ws, _) = tokio_tungstenite::connect_async(request)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Agent {
            ws,
            pending: Default::default(),
        })
    }

    async fn send(&mut self, frame: Value) {
        self.ws
            .send(WsMessage::text(format!("{frame}\n")))
            .await
            .unwrap();
    }

    /// The next frame, within 20 s.
    async fn next(&mut self) -> Value {
        loop {
            if let Some(f) = self.pending.pop_front() {
                return f;
            }
            let msg = tokio::time::timeout(Duration::from_secs(20), self.ws.next())
                .await
                .expect("a frame within 20 s")
                .expect("the connection is open")
                .unwrap();
            if let WsMessage::Text(t) = msg {
                for line in t.lines().filter(|l| !l.trim().is_empty()) {
                    self.pending.push_back(serde_json::from_str(line).unwrap());
                }
            }
        }
    }

    pub(crate) async fn next_of(&mut self, kind: &str) -> Value {
        loop {
            let f = self.next().await;
            if f["type"] == kind {
                return f;
            }
        }
    }
}

fn token(rig: &Rig) -> String {
    let secret = std::fs::read_to_string(rig.profile_home().join("agent/relay-secret")).unwrap();
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 300;
    auth::mint(
        &format!("hermes-svc-{}", rig.profile),
        secret.trim().as_bytes(),
        exp,
    )
}

/// Wait until this life of the gateway has its QQ session: the mock delivers a dispatch to the
/// sessions it has.
pub(crate) fn wait_qq(rig: &Rig, gw: &std::process::Child) {
    rig.wait_adapter(gw, "qq");
}

pub(crate) fn group_message(rig: &Rig, id: &str, text: &str) {
    rig.mock.emit_dispatch(
        "GROUP_AT_MESSAGE_CREATE",
        id,
        json!({"author": {"member_openid": "M1"}, "content": format!(" {text}"),
               "group_openid": "G1", "id": format!("msg-{id}")}),
    );
}

#[test]
fn the_relay_delivers_from_its_cursor_and_posts_replies_in_pieces() {
    let port = free_port();
    let rig = Rig::new(
        "obrelay",
        &format!(
            "{}[agent]\nkind = \"hermes-relay\"\nport = {port}\nidle-alarm = \"1s\"\n",
            crate::hermes_rig::OPEN
        ),
    );
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    let secret = rig.profile_home().join("agent/relay-secret");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777,
        0o600
    );

    rig.rt.block_on(async {
        // No token, or someone else's: refused at the upgrade.
        let refused = Agent::dial(port, None).await.err().expect("refused");
        assert!(refused.contains("401"), "{refused}");
        let forged = auth::mint(
            &format!("hermes-svc-{}", rig.profile),
            b"guess",
            4_000_000_000,
        );
        assert!(Agent::dial(port, Some(&forged)).await.is_err());
    });

    // A message while no agent is there waits for it.
    wait_qq(&rig, &gw);
    group_message(&rig, "e1", "first");
    wait_for(
        Duration::from_secs(20),
        "the state file to show it waiting",
        || rig.state()?["agent"]["oldest_waiting"].as_str().map(|_| ()),
    );
    // Past idle-alarm, doctor says so, with the fix (no bus needed: it reads the state file).
    let finding = wait_for(Duration::from_secs(20), "doctor's HSV023", || {
        let out = rig
            .hermes()
            .args(["doctor", "-p", &rig.profile, "--json"])
            .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/ob-bus")
            .env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/ob-bus")
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).ok()?;
        report["findings"]
            .as_array()?
            .iter()
            .find(|f| f["id"] == "HSV023")
            .cloned()
    });
    assert!(
        finding["fix"]
            .as_str()
            .unwrap()
            .contains(&format!("GATEWAY_RELAY_URL=http://127.0.0.1:{port}")),
        "{finding}"
    );
    let mut agent = rig.rt.block_on(async {
        let mut agent = Agent::dial(port, Some(&token(&rig))).await.unwrap();
        agent
            .send(json!({"type": "hello", "platform": "relay", "botId": ""}))
            .await;
        let d = agent.next_of("descriptor").await;
        assert_eq!(d["descriptor"]["contract_version"], 1);
        assert_eq!(d["descriptor"]["platform"], "relay");
        assert_eq!(d["descriptor"]["len_unit"], "chars");
        assert!(d["descriptor"]["max_message_length"].as_u64().unwrap() >= 1000);
        let first = agent.next_of("inbound").await;
        let e = &first["event"];
        assert_eq!(e["text"], "first");
        assert_eq!(e["message_id"], "msg-e1");
        assert_eq!(e["source"]["chat_id"], "qq/group:G1");
        assert_eq!(e["source"]["chat_type"], "group");
        assert_eq!(e["source"]["user_id"], "M1");
        // Not acknowledged before the connection drops: sent again on the next.
        drop(agent);
        let mut agent = Agent::dial(port, Some(&token(&rig))).await.unwrap();
        agent
            .send(json!({"type": "hello", "platform": "relay"}))
            .await;
        let again = agent.next_of("inbound").await;
        assert_eq!(again["event"]["message_id"], "msg-e1");
        assert_eq!(again["bufferId"], first["bufferId"]);
        agent
            .send(json!({"type": "inbound_ack", "bufferId": again["bufferId"]}))
            .await;
        agent
    });

    // A reply three times the platform's limit: three posts, in order, each a reply.
    let long: String = (0..5000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    rig.rt.block_on(async {
        agent
            .send(json!({"type": "outbound", "requestId": "r1", "action": {
                "op": "send", "chat_id": "qq/group:G1", "content": long, "reply_to": "msg-e1",
                "metadata": {}}}))
            .await;
        let result = agent.next_of("outbound_result").await;
        assert_eq!(result["requestId"], "r1");
        assert_eq!(result["result"]["success"], true, "{result}");
        assert!(result["result"]["message_id"].is_string(), "{result}");
        // An op the connector does not do is answered, not ignored.
        agent
            .send(json!({"type": "outbound", "requestId": "r2", "action": {"op": "edit", "chat_id": "qq/group:G1"}}))
            .await;
        let r2 = agent.next_of("outbound_result").await;
        assert_eq!(r2["result"]["success"], false);
    });
    let posts = wait_for(Duration::from_secs(30), "the pieces to be posted", || {
        let p: Vec<_> = rig
            .posts()
            .into_iter()
            .filter(|p| p.target_id == "G1")
            .collect();
        (p.len() == 3).then_some(p)
    });
    let joined: String = posts.iter().map(|p| p.content.as_str()).collect();
    assert_eq!(joined, long, "in order, nothing lost");
    assert!(posts
        .iter()
        .all(|p| p.reply_to.as_deref() == Some("msg-e1")));

    // One message per chat at a time: the second to G1 waits for the first's answer, while
    // another chat's goes at once.
    group_message(&rig, "e2", "second");
    group_message(&rig, "e2b", "second again");
    rig.mock.emit_dispatch(
        "GROUP_AT_MESSAGE_CREATE",
        "e4",
        json!({"author": {"member_openid": "M2"}, "content": " elsewhere",
               "group_openid": "G2", "id": "msg-e4"}),
    );
    rig.rt.block_on(async {
        let mut got = vec![];
        for _ in 0..2 {
            let f = agent.next_of("inbound").await;
            got.push(f["event"]["message_id"].as_str().unwrap().to_owned());
        }
        got.sort();
        assert_eq!(got, ["msg-e2", "msg-e4"], "e2b waits for e2's answer");
        // A notice (no reply_to) does not end the turn; the final answer does.
        agent
            .send(json!({"type": "outbound", "requestId": "r3", "action": {
                "op": "send", "chat_id": "qq/group:G1", "content": "thinking", "reply_to": null,
                "metadata": {}}}))
            .await;
        agent
            .send(json!({"type": "outbound", "requestId": "r4", "action": {
                "op": "send", "chat_id": "qq/group:G1", "content": "answer two", "reply_to": "msg-e2",
                "metadata": {"notify": true}}}))
            .await;
        let next = agent.next_of("inbound").await;
        assert_eq!(next["event"]["message_id"], "msg-e2b");
        for (id, chat) in [("msg-e2b", "qq/group:G1"), ("msg-e4", "qq/group:G2")] {
            agent
                .send(json!({"type": "outbound", "requestId": format!("a-{id}"), "action": {
                    "op": "send", "chat_id": chat, "content": "ok", "reply_to": id,
                    "metadata": {"notify": true}}}))
                .await;
        }
        // A result comes after its answer was read: both turns are over.
        let mut answered = 0;
        while answered < 2 {
            let r = agent.next_of("outbound_result").await;
            if r["requestId"].as_str().unwrap().starts_with("a-") {
                answered += 1;
            }
        }
    });
    wait_for(
        Duration::from_secs(20),
        "the link to show the last message taken",
        || {
            let state = rig.state()?;
            let taken = &state["agent"]["last_taken"]["event"];
            (taken == "e2b" || taken == "e4").then_some(())
        },
    );

    // A gateway killed and started again sends only what was not answered.
    sigkill(&mut gw);
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    wait_qq(&rig, &gw);
    group_message(&rig, "e3", "third");
    let mut agent = wait_for(Duration::from_secs(20), "the relay to listen again", || {
        rig.rt.block_on(Agent::dial(port, Some(&token(&rig)))).ok()
    });
    rig.rt.block_on(async {
        agent
            .send(json!({"type": "hello", "platform": "relay"}))
            .await;
        let next = agent.next_of("inbound").await;
        assert_eq!(
            next["event"]["message_id"], "msg-e3",
            "every earlier message was answered"
        );
    });
    wait_for(
        Duration::from_secs(20),
        "the link to show the agent connected",
        || {
            let agent = &rig.state()?["agent"];
            (agent["connected"] == true && agent["kind"] == "hermes-relay").then_some(())
        },
    );
    sigterm(&mut gw);
}

#[test]
fn a_flood_of_refused_dials_is_logged_a_line_per_window_not_a_line_each() {
    let port = free_port();
    let rig = Rig::new(
        "obrefuse",
        &format!("[agent]\nkind = \"hermes-relay\"\nport = {port}\n"),
    );
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    const DIALS: u64 = 1000;
    let started = std::time::Instant::now();
    rig.rt.block_on(async {
        for _ in 0..DIALS {
            assert!(Agent::dial(port, Some("not-a-token")).await.is_err());
        }
    });
    let elapsed = started.elapsed();
    let lines: Vec<String> = rig
        .log()
        .lines()
        .filter(|l| l.contains("refused a dial to the relay"))
        .map(str::to_owned)
        .collect();
    // A line per 10 s window at most, each saying how many it stands for.
    let windows = 1 + elapsed.as_secs() / 10 + 1;
    assert!(
        !lines.is_empty() && lines.len() as u64 <= windows,
        "{} lines in {elapsed:?}",
        lines.len()
    );
    assert!(lines.iter().all(|l| l.contains("more=")), "{lines:?}");
    let said: u64 = lines
        .iter()
        .filter_map(|l| l.split("more=").nth(1))
        .filter_map(|m| m.split_whitespace().next()?.parse::<u64>().ok())
        .sum::<u64>()
        + lines.len() as u64;
    assert!(said <= DIALS, "{said}: {lines:?}");
    // The link says what was refused last, from the next tick on.
    wait_for(
        Duration::from_secs(20),
        "the refusal in the state file",
        || {
            rig.state()?["agent"]["last_error"]
                .as_str()
                .is_some_and(|e| e.starts_with("refused a dial"))
                .then_some(())
        },
    );
    sigterm(&mut gw);
}

#[test]
fn a_thousand_idle_dials_do_not_take_the_gateways_descriptors() {
    let port = free_port();
    let rig = Rig::new(
        "obidle",
        &format!(
            "{}[agent]\nkind = \"hermes-relay\"\nport = {port}\n",
            crate::hermes_rig::OPEN
        ),
    );
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    // The gateway with the soft limit it has outside its unit (1024), and this process with
    // room for the dials it holds.
    let limit = |pid: u32, n: &str| {
        let out = std::process::Command::new("prlimit")
            .args(["--pid", &pid.to_string(), &format!("--nofile={n}")])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    limit(gw.id(), "1024:1024");
    limit(std::process::id(), "4096:");
    // Another local user's 1,100 connections that never upgrade, held open.
    let held: Vec<std::net::TcpStream> = (0..1100)
        .filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    assert!(held.len() > 1000, "{} connected", held.len());
    // The gateway lives on and writes its state, and the agent's own dial still gets in.
    let before = rig.state().unwrap()["updated_at"].clone();
    wait_for(Duration::from_secs(20), "the state file rewritten", || {
        (rig.state()?["updated_at"] != before).then_some(())
    });
    let agent = rig
        .rt
        .block_on(async { Agent::dial(port, Some(&token(&rig))).await });
    assert!(agent.is_ok(), "{:?}\n{}", agent.err(), rig.log());
    assert_eq!(gw.try_wait().unwrap(), None, "{}", rig.log());
    drop(held);
    sigterm(&mut gw);
}

#[test]
fn a_chat_behind_a_hung_turn_never_holds_up_another_chat() {
    let port = free_port();
    let rig = Rig::new(
        "obrfair",
        &format!(
            "{}[agent]\nkind = \"hermes-relay\"\nport = {port}\nturn-timeout = \"30m\"\n",
            crate::hermes_rig::OPEN
        ),
    );
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    wait_qq(&rig, &gw);
    rig.rt.block_on(async {
        let mut agent = Agent::dial(port, Some(&token(&rig))).await.unwrap();
        agent
            .send(json!({"type": "hello", "platform": "relay", "botId": ""}))
            .await;
        agent.next_of("descriptor").await;
        // One chat's first message, taken and never answered, and more behind it than the
        // connector holds in memory (32).
        group_message(&rig, "busy-0", "busy 0");
        let first = agent.next_of("inbound").await;
        assert_eq!(first["event"]["text"], "busy 0");
        agent
            .send(json!({"type": "inbound_ack", "bufferId": first["bufferId"]}))
            .await;
        for i in 1..40 {
            group_message(&rig, &format!("busy-{i}"), &format!("busy {i}"));
        }
        wait_for(
            Duration::from_secs(30),
            "the busy chat to be stored",
            || (rig.stored("qq").len() >= 40).then_some(()),
        );
        // Another chat's message reaches the agent while the first chat's turn still runs.
        rig.mock.emit_dispatch(
            "GROUP_AT_MESSAGE_CREATE",
            "other",
            json!({"author": {"member_openid": "M1"}, "content": " another chat",
                   "group_openid": "G2", "id": "msg-other"}),
        );
        let next = agent.next_of("inbound").await;
        assert_eq!(next["event"]["text"], "another chat", "{next}");
        assert_eq!(next["event"]["source"]["chat_id"], "qq/group:G2");
    });
    sigterm(&mut gw);
}

/// A Relay gateway with the agent's first connection dialled and greeted, for the tests of
/// what one agent may do to the connector.
pub(crate) fn greeted(rig: &Rig, port: u16) -> Agent {
    rig.rt.block_on(greeted_async(rig, port))
}

fn relay_rig(profile: &str, port: u16) -> Rig {
    Rig::new(
        profile,
        &format!(
            "{}[agent]\nkind = \"hermes-relay\"\nport = {port}\n",
            crate::hermes_rig::OPEN
        ),
    )
}

/// The gateway stops on SIGTERM, without waiting on an agent's connection.
fn stops_promptly(rig: &Rig, gw: &mut std::process::Child) {
    sigterm(gw);
    let status = wait_for(Duration::from_secs(10), "the gateway to stop", || {
        gw.try_wait().unwrap()
    });
    assert!(status.success(), "{status:?}\n{}", rig.log());
}

#[test]
fn an_agent_that_stops_reading_is_dropped_and_the_next_dial_takes_over() {
    let port = free_port();
    let rig = relay_rig("obdeaf", port);
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    let mut deaf = greeted(&rig, port);
    rig.rt.block_on(async {
        // 128k hellos, each answered with a descriptor the agent never reads.
        let burst = format!(
            "{}\n",
            json!({"type": "hello", "platform": "relay", "botId": ""})
        )
        .repeat(500);
        let flood = async {
            for _ in 0..256 {
                if deaf.ws.send(WsMessage::text(burst.clone())).await.is_err() {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(30), flood).await;
        // A new dial takes over: its hello is answered, while the first still reads nothing.
        let mut next = Agent::dial(port, Some(&token(&rig))).await.unwrap();
        next.send(json!({"type": "hello", "platform": "relay", "botId": ""}))
            .await;
        let d = next.next_of("descriptor").await;
        assert_eq!(d["descriptor"]["contract_version"], 1);
    });
    let log = rig.log();
    assert!(
        log.contains("the agent has not read the last 1024 frames")
            || log.contains("the agent does not read"),
        "the deaf agent was dropped for not reading: {log}"
    );
    stops_promptly(&rig, &mut gw);
}

#[test]
fn a_message_of_tiny_frames_is_refused_without_freezing_the_gateway() {
    let port = free_port();
    let rig = relay_rig("obtiny", port);
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    let mut hostile = greeted(&rig, port);
    rig.rt.block_on(async {
        // 8 MiB of two-byte frames in one message (splitting it froze the gateway for 88 s),
        // then a message of more frames than one may hold.
        let _ = hostile
            .ws
            .send(WsMessage::text("{}\n".repeat(8 << 20 >> 1)))
            .await;
        let mut again = Agent::dial(port, Some(&token(&rig))).await.unwrap();
        again
            .send(json!({"type": "hello", "platform": "relay", "botId": ""}))
            .await;
        again.next_of("descriptor").await;
        let _ = again
            .ws
            .send(WsMessage::text("{\"type\":\"going_idle\"}\n".repeat(2000)))
            .await;
        // The connection is closed for it, and the next dial is served at once.
        let closed = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                match again.ws.next().await {
                    Some(Ok(WsMessage::Close(_))) | Some(Err(_)) | None => return,
                    Some(Ok(_)) => {}
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "the connection was closed");
        greeted_async(&rig, port).await;
    });
    assert!(
        rig.log().contains("a message of more than 1024 lines"),
        "the reason is logged: {}",
        rig.log()
    );
    stops_promptly(&rig, &mut gw);
}

async fn greeted_async(rig: &Rig, port: u16) -> Agent {
    let mut agent = Agent::dial(port, Some(&token(rig))).await.unwrap();
    agent
        .send(json!({"type": "hello", "platform": "relay", "botId": ""}))
        .await;
    agent.next_of("descriptor").await;
    agent
}
