//! The mock Mattermost checked against Mattermost's official clients (installed by
//! `scripts/official-client-mattermost`). The Python one, mattermostdriver 7.3.2, logs in
//! with the token (`users/me`), posts twice with one `pending_post_id` and gets the same post
//! back, opens the WebSocket with its authentication challenge, takes `hello` (`seq` 0,
//! before the challenge's `OK`) as its sign that it is in, and receives a `posted` event for a post made meanwhile. The
//! JavaScript one, `@mattermost/client` 11.9.0 (`Client4`, what the web and desktop apps
//! use), does `getMe`, `createPost` twice with one `pending_post_id`, `getPostsSince`, and
//! fetches a post's file at `getFileUrl` with its own headers; its `WebSocketClient` (the web
//! app's socket) resumes a dropped connection from the mock's hub: same connection id, what
//! was posted while away numbered on, no missed-message sync.
//! If the mock departed from what the official clients expect, this is where it shows.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use hermes_svc::mock_platform::mattermost::{MattermostConfig, MattermostFault, MattermostFile};
use hermes_svc::mock_platform::MockConfig;

use crate::mock_runtime::{mock_runtime, start_mock};

const CLIENT: &str = r#"
import json, sys, asyncio, threading
from mattermostdriver import Driver

port, token, channel = int(sys.argv[1]), sys.argv[2], sys.argv[3]
d = Driver({"url": "127.0.0.1", "port": port, "scheme": "http", "token": token,
            "basepath": "/api/v4", "timeout": 5, "keepalive": False})
me = d.login()
print("me", me["id"], me["username"], flush=True)
body = {"channel_id": channel, "message": "from the driver", "pending_post_id": "driverpending1"}
first = d.posts.create_post(body)
again = d.posts.create_post(body)
print("posted", first["id"], again["id"], flush=True)

async def handler(message):
    event = json.loads(message)
    if event.get("event") == "hello":
        print("hello", event["seq"], flush=True)
    elif event.get("event") == "posted":
        post = json.loads(event["data"]["post"])
        print("event", post["id"], post["message"], flush=True)
        if post["message"] == "to the driver":
            d.disconnect()
            raise SystemExit(0)
    elif event.get("seq_reply") == 1:
        print("challenge", event["status"], flush=True)

d.init_websocket(handler)
"#;

/// `Client4` against the mock at `argv[1]`: each step's outcome as one line of JSON.
const CLIENT4: &str = r#"
const {Client4} = require("@mattermost/client");
const [port, token, channel] = process.argv.slice(1);
(async () => {
  const client = new Client4();
  client.setUrl(`http://127.0.0.1:${port}`);
  client.setToken(token);
  const say = (what) => console.log(JSON.stringify(what));
  const me = await client.getMe();
  say({step: "me", id: me.id, username: me.username});
  const since = Date.now() - 60000;
  const post = {channel_id: channel, message: "from Client4", pending_post_id: "client4pending1"};
  const first = await client.createPost(post);
  const again = await client.createPost({...post});
  say({step: "posted", ids: [first.id, again.id], message: first.message});
  const list = await client.getPostsSince(channel, since);
  say({step: "since", order: list.order, messages: list.order.map((id) => list.posts[id].message)});
  for (const id of list.order) {
    for (const info of list.posts[id].metadata.files || []) {
      const answer = await fetch(client.getFileUrl(info.id), client.getOptions({method: "get"}));
      const bytes = Buffer.from(await answer.arrayBuffer());
      const sha = require("crypto").createHash("sha256").update(bytes).digest("hex");
      say({step: "file", status: answer.status, name: info.name, size: info.size,
           type: answer.headers.get("content-type"), sha256: sha});
    }
  }
})().catch((e) => { console.error(e); process.exit(1); });
"#;

/// `WebSocketClient` against the mock at `argv[1]`: each URL it opens, `hello`, each `posted`
/// event and a missed-message callback as one line of JSON. Node's WebSocket (undici) takes
/// the token as a header, as a browser sends its cookie: the server resumes only a connection
/// whose upgrade carries the session.
const WS_CLIENT: &str = r#"
const {WebSocketClient} = require("@mattermost/client");
const [port, token] = process.argv.slice(1);
const say = (what) => console.log(JSON.stringify(what));
const client = new WebSocketClient({
  minWebSocketRetryTime: 2000, reconnectJitterRange: 1, clientPingInterval: 60000,
  newWebSocketFn: (url) => {
    say({step: "url", url});
    return new WebSocket(url, {headers: {Authorization: `Bearer ${token}`}});
  },
});
client.addMessageListener((m) => {
  if (m.event === "hello") say({step: "hello", seq: m.seq, id: m.data.connection_id});
  if (m.event === "posted") {
    const post = JSON.parse(m.data.post);
    say({step: "posted", seq: m.seq, message: post.message});
    if (post.message === "last") process.exit(0);
  }
});
client.addMissedMessageListener(() => say({step: "missed"}));
client.initialize(`ws://127.0.0.1:${port}/api/v4/websocket`, token);
setTimeout(() => process.exit(2), 60000);
"#;

fn npm_client() -> String {
    let out = Command::new("scripts/official-client-mattermost")
        .arg("npm")
        .stderr(Stdio::inherit())
        .output()
        .expect("scripts/official-client-mattermost runs");
    assert!(out.status.success(), "the official npm client installs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .last()
        .expect("its directory")
        .trim()
        .to_owned()
}

/// The web app's `WebSocketClient` reconnects a dropped socket with `connection_id` and
/// `sequence_number`; the mock resumes it (same id, no `hello`) and the two posts made while
/// it was away arrive numbered on, so the client never calls its missed-message listeners.
#[test]
fn the_web_apps_websocket_client_resumes_a_dropped_connection() {
    let dir = npm_client();
    let rt = mock_runtime();
    let mock = start_mock(&rt, MockConfig::default());
    let config = MattermostConfig::default();
    let channel = config.channels[0].id.clone();
    let mut child = Command::new("node")
        .args(["--experimental-websocket", "-e", WS_CLIENT])
        .arg(mock.addr().port().to_string())
        .arg(&config.token)
        .env("NODE_PATH", format!("{dir}/node_modules"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    let (tx, lines) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = vec![];
    let mut next = |step: &str| loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no {step} from WebSocketClient: {seen:?}"));
        // The client's own console.log lines (not JSON) are not ours.
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        seen.push(v.clone());
        if v["step"] == step {
            return v;
        }
    };
    let hello = next("hello");
    assert_eq!(hello["seq"], 0);
    let id = hello["id"].as_str().unwrap().to_owned();
    mock.mattermost_emit_text(&channel, "before", "");
    assert_eq!(next("posted")["seq"], 1);

    // The client waits 2 s before it reconnects: the posts are made while it is away.
    mock.mattermost_set_fault(MattermostFault::Drop);
    crate::harness::wait_for(Duration::from_secs(30), "the socket gone", || {
        (mock.mattermost_stats().live_connections == 0).then_some(())
    });
    mock.mattermost_emit_text(&channel, "away 1", "");
    mock.mattermost_emit_text(&channel, "away 2", "");
    let url = loop {
        let url = next("url");
        if url["url"].as_str().unwrap().contains(&id) {
            break url;
        }
    };
    assert!(
        url["url"]
            .as_str()
            .unwrap()
            .contains(&format!("?connection_id={id}&sequence_number=2")),
        "{url}"
    );
    let away: Vec<_> = (0..2).map(|_| next("posted")).collect();
    assert_eq!(
        (&away[0]["seq"], &away[0]["message"]),
        (&2.into(), &"away 1".into()),
        "{away:?}"
    );
    assert_eq!(
        (&away[1]["seq"], &away[1]["message"]),
        (&3.into(), &"away 2".into()),
        "{away:?}"
    );
    mock.mattermost_emit_text(&channel, "last", "");
    assert_eq!(next("posted")["seq"], 4);
    assert!(child.wait().unwrap().success());
    assert!(
        !seen
            .iter()
            .any(|v| v["step"] == "missed" || (v["step"] == "hello" && v["id"] != id.as_str())),
        "{seen:?}"
    );
    let conn = mock.mattermost_stats().websockets.last().cloned().unwrap();
    assert!(
        conn.resumed && conn.held == 2 && conn.connection_id == id,
        "{conn:?}"
    );
}

/// `@mattermost/client`'s `Client4` reads the bot (`getMe`), posts once for two `createPost`s
/// with one `pending_post_id`, reads that post and a user's post with a file back with
/// `getPostsSince`, and fetches the file at `getFileUrl` with its own headers.
#[test]
fn client4_gets_me_posts_once_per_pending_id_and_reads_posts_since() {
    let out = Command::new("scripts/official-client-mattermost")
        .arg("npm")
        .stderr(Stdio::inherit())
        .output()
        .expect("scripts/official-client-mattermost runs");
    assert!(out.status.success(), "the official npm client installs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout
        .lines()
        .last()
        .expect("its directory")
        .trim()
        .to_owned();

    let rt = mock_runtime();
    let mock = start_mock(&rt, MockConfig::default());
    let config = MattermostConfig::default();
    let channel = config.channels[0].id.clone();
    let port = mock.addr().port().to_string();
    let chart = crate::media_out::photo();
    let file = MattermostFile::new("chart.png", "image/png", chart.clone());
    let theirs = mock.mattermost_emit_files(&channel, "see attached", vec![file]);
    let out = Command::new("node")
        .args(["-e", CLIENT4, &port, &config.token, &channel])
        .env("NODE_PATH", format!("{dir}/node_modules"))
        .stdin(Stdio::null())
        .output()
        .expect("node runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let steps: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert_eq!(steps.len(), 4, "{steps:?}\n{err}");
    assert_eq!(
        (&steps[0]["id"], &steps[0]["username"]),
        (
            &config.bot_user_id.clone().into(),
            &config.bot_username.clone().into()
        )
    );
    let ids = steps[1]["ids"].as_array().unwrap();
    assert_eq!(ids[0], ids[1], "one pending_post_id, one post: {steps:?}");
    assert_eq!(steps[1]["message"], "from Client4");
    let newest_first = serde_json::json!([ids[0], theirs]);
    assert_eq!(steps[2]["order"], newest_first, "{steps:?}");
    assert_eq!(
        steps[2]["messages"],
        serde_json::json!(["from Client4", "see attached"])
    );
    let file = &steps[3];
    assert_eq!(
        (&file["status"], &file["name"]),
        (&200.into(), &"chart.png".into()),
        "{file}"
    );
    assert_eq!(file["size"], chart.len(), "{file}");
    assert_eq!(file["type"], "image/png", "{file}");
    assert_eq!(file["sha256"], crate::media_out::sha256(&chart), "{file}");
    let posts: Vec<_> = mock
        .posts()
        .into_iter()
        .filter(|p| p.content == "from Client4")
        .collect();
    assert_eq!(posts.len(), 1, "{posts:?}");
    let s = mock.mattermost_stats();
    assert_eq!(
        (s.me_calls, s.creates, s.deduplicated, s.since_calls),
        (1, 2, 1, 1),
        "{s:?}"
    );
    assert_eq!(s.unauthorized, 0, "{s:?}");
}

#[test]
fn mattermostdriver_logs_in_posts_once_per_pending_id_and_receives_a_posted_event() {
    let out = Command::new("scripts/official-client-mattermost")
        .stderr(Stdio::inherit())
        .output()
        .expect("scripts/official-client-mattermost runs");
    assert!(out.status.success(), "the official client installs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let python = stdout.lines().last().expect("its python").trim().to_owned();

    let rt = mock_runtime();
    let mock = start_mock(&rt, MockConfig::default());
    let config = MattermostConfig::default();
    let channel = config.channels[0].id.clone();
    let mut child = Command::new(&python)
        .args(["-c", CLIENT])
        .arg(mock.addr().port().to_string())
        .args([&config.token, &channel])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next = |what: &str| {
        lines
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no {what} from mattermostdriver"))
    };
    assert_eq!(
        next("login"),
        format!("me {} {}", config.bot_user_id, config.bot_username)
    );
    let posted = next("post");
    let ids: Vec<&str> = posted.split(' ').skip(1).collect();
    assert_eq!(ids.len(), 2, "{posted}");
    assert_eq!(ids[0], ids[1], "one pending_post_id, one post");
    let bots: Vec<_> = mock
        .posts()
        .into_iter()
        .filter(|p| p.content == "from the driver")
        .collect();
    assert_eq!(bots.len(), 1, "{bots:?}");
    // The server queues `hello` when the challenge registers the connection, then the
    // challenge's answer (`websocket_router.go`): mattermostdriver takes both, in that order.
    assert_eq!(next("hello"), "hello 0");
    assert_eq!(next("challenge"), "challenge OK");
    let id = mock.mattermost_emit_text(&channel, "to the driver", "");
    assert_eq!(next("event"), format!("event {id} to the driver"));
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    let s = mock.mattermost_stats();
    assert_eq!((s.challenges_ok, s.deduplicated), (1, 1), "{s:?}");
}
