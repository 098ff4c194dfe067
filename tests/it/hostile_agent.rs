//! An agent behind the OpenAI-compatible bridge that floods or stalls the gateway: an answer
//! that streams forever, an answer of a megabyte, and a chat whose turn never ends while
//! another chat writes. The agent is a raw HTTP/1.1 server in this process, so that it can do
//! what no well-behaved server does; the gateway is a real process against the mock platform.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::harness::wait_for;
use crate::outbox_rig::{sigterm, Rig};
use crate::relay::{group_message, wait_qq};

/// What the hostile agent has seen and done.
#[derive(Default)]
struct Seen {
    /// Bytes of the streaming-forever answer written before the gateway hung up.
    streamed: AtomicU64,
    /// Whether that stream has ended (a write failed).
    stream_ended: AtomicU64,
}

/// Serve `/v1/chat/completions` on `listener`: the last user message decides the answer.
///   `forever`  a 200 whose body never ends (chunked, 64 KiB chunks of one JSON string)
///   `huge`     a 200 whose answer is 1 MiB of words
///   `hang`     no answer at all
///   otherwise  `echo: TEXT`
async fn serve(listener: TcpListener, seen: Arc<Seen>) {
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            return;
        };
        tokio::spawn(answer(socket, seen.clone()));
    }
}

async fn answer(mut socket: TcpStream, seen: Arc<Seen>) {
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    let text = request["messages"][0]["content"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    if text.contains("forever") {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
        if socket.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        let opening = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":""#;
        let mut chunk = format!("{:x}\r\n{opening}\r\n", opening.len()).into_bytes();
        let filler = "a".repeat(64 * 1024);
        loop {
            if socket.write_all(&chunk).await.is_err() {
                seen.stream_ended.store(1, Ordering::SeqCst);
                return;
            }
            seen.streamed
                .fetch_add(chunk.len() as u64, Ordering::SeqCst);
            chunk = format!("{:x}\r\n{filler}\r\n", filler.len()).into_bytes();
        }
    }
    if text.contains("hang") {
        // Hold the connection open and say nothing, until the gateway gives up or stops.
        let mut sink = [0u8; 1024];
        while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
        return;
    }
    let content = if text.contains("huge") {
        "word ".repeat(200 * 1024)
    } else {
        format!("echo: {text}")
    };
    let body = json!({
        "id": "c1", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}]
    })
    .to_string();
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = socket.write_all(head.as_bytes()).await;
    let _ = socket.write_all(body.as_bytes()).await;
}

/// One request's JSON body (the gateway sends `content-length`).
async fn read_request(socket: &mut TcpStream) -> Option<Value> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head_end, length) = loop {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())?;
            break (end + 4, length);
        }
    };
    while buf.len() < head_end + length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    serde_json::from_slice(&buf[head_end..head_end + length]).ok()
}

/// A gateway whose OpenAI bridge asks the hostile agent, and that agent's record.
fn rig(profile: &str, turn_timeout: &str) -> (Rig, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = std_listener.local_addr().unwrap().port();
    std_listener.set_nonblocking(true).unwrap();
    let rig = Rig::new(
        profile,
        &format!(
            "{}[agent]\nkind = \"openai\"\nurl = \"http://127.0.0.1:{port}/v1\"\n\
             turn-timeout = \"{turn_timeout}\"\nfailure-notice = \"sorry, that turn failed\"\n",
            crate::hermes_rig::OPEN
        ),
    );
    let listener = rig
        .rt
        .block_on(async { TcpListener::from_std(std_listener) })
        .unwrap();
    rig.rt.spawn(serve(listener, seen.clone()));
    (rig, seen)
}

fn posts_to(rig: &Rig, group: &str) -> Vec<hermes_svc::mock_platform::Post> {
    rig.posts()
        .into_iter()
        .filter(|p| p.target_id == group)
        .collect()
}

#[test]
fn an_answer_that_floods_fails_its_turn_or_is_cut_and_the_gateway_lives() {
    let (rig, seen) = rig("obflood", "60s");
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    wait_qq(&rig, &gw);

    // An answer that never ends: read up to the bridge's cap, then the turn fails with its
    // notice, and the connection is dropped: the agent's writes fail.
    group_message(&rig, "f1", "stream forever");
    let notice = wait_for(Duration::from_secs(60), "the failure notice", || {
        let posts = posts_to(&rig, "G1");
        (!posts.is_empty()).then_some(posts)
    });
    assert_eq!(notice.len(), 1, "{notice:?}");
    assert_eq!(notice[0].content, "sorry, that turn failed");
    wait_for(Duration::from_secs(30), "the stream to be cut off", || {
        (seen.stream_ended.load(Ordering::SeqCst) == 1).then_some(())
    });
    let streamed = seen.streamed.load(Ordering::SeqCst);
    assert!(
        streamed < 64 * 1024 * 1024,
        "the gateway stopped reading at its cap (8 MiB, plus socket buffers): {streamed} bytes"
    );
    assert!(
        gw.try_wait().unwrap().is_none(),
        "the gateway lives: {}",
        rig.log()
    );
    assert!(
        rig.log().contains("the answer is larger than 8 MiB"),
        "{}",
        rig.log()
    );

    // An answer of a megabyte: posted as at most eight messages, the last saying what was cut.
    rig.mock.emit_dispatch(
        "GROUP_AT_MESSAGE_CREATE",
        "h1",
        json!({"author": {"member_openid": "M1"}, "content": " huge please",
               "group_openid": "G2", "id": "msg-h1"}),
    );
    let cut = wait_for(Duration::from_secs(60), "the cut answer", || {
        let posts = posts_to(&rig, "G2");
        posts
            .iter()
            .any(|p| p.content.contains("were not posted]"))
            .then_some(posts)
    });
    assert_eq!(cut.len(), 8, "eight messages, not 525");
    assert!(cut.iter().all(|p| p.content.chars().count() <= 2000));
    sigterm(&mut gw);
}

fn rig_wait_echo(rig: &Rig, text: &str) {
    wait_for(Duration::from_secs(30), text, || {
        rig.posts().iter().any(|p| p.content == text).then_some(())
    });
}

#[test]
fn a_chat_behind_a_hung_turn_never_holds_up_another_chat() {
    // A turn-timeout far longer than the test: the busy chat stays busy throughout.
    let (rig, _seen) = rig("obfair", "30m");
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    wait_qq(&rig, &gw);
    // More messages in one chat than the bridge holds in memory (64), behind a turn that
    // never ends.
    for i in 0..70 {
        rig.mock.emit_dispatch(
            "GROUP_AT_MESSAGE_CREATE",
            &format!("busy-{i}"),
            json!({"author": {"member_openid": "M1"}, "content": format!(" hang {i}"),
                   "group_openid": "GBUSY", "id": format!("msg-busy-{i}")}),
        );
    }
    wait_for(
        Duration::from_secs(30),
        "the busy chat to be stored",
        || (rig.stored("qq").len() >= 70).then_some(()),
    );
    // Another chat's message is answered while the busy chat still waits.
    group_message(&rig, "other", "hello from another chat");
    rig_wait_echo(&rig, "echo: hello from another chat");
    assert!(posts_to(&rig, "GBUSY").is_empty());
    sigterm(&mut gw);
}
