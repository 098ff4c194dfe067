//! The mock Mattermost server's state: its posts (which the REST catch-up reads), its hub of
//! WebSocket connections (`hub.rs`: each socket told what to write through a channel, so the
//! state never holds a socket), the token's standing and the counters.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::config::{MattermostConfig, MattermostFile};
use super::faults::MattermostFault;
use super::hub::{Ask, Hub, Opening};
use super::record::{MattermostPostRecord, MattermostStats};

pub(crate) enum ConnCommand {
    /// Write this event (numbered by the hub).
    Event(Value),
    Fault(MattermostFault),
}

struct Inner {
    hub: Hub,
    posts: Vec<MattermostPostRecord>,
    /// The `posted` events pushed, newest last, for `redeliver`.
    pushed: Vec<Value>,
    serial: u64,
    /// The token no longer works (revoked).
    revoked: bool,
    /// Upgrades are answered with this status instead of a WebSocket.
    refuse_upgrade: Option<u16>,
    stats: MattermostStats,
    /// Attached files by file id: the `FileInfo` and the bytes.
    files: BTreeMap<String, (Value, MattermostFile)>,
    /// The last `create_at` given: posts never share one, as a test reads them in order.
    last_ms: i64,
}

pub(crate) struct MattermostState {
    pub(crate) config: MattermostConfig,
    inner: Mutex<Inner>,
}

impl MattermostState {
    pub(crate) fn new(config: MattermostConfig) -> Self {
        let inner = Inner {
            hub: Hub::new(config.reap_interval),
            posts: Vec::new(),
            pushed: Vec::new(),
            serial: 0,
            revoked: false,
            refuse_upgrade: None,
            stats: MattermostStats::default(),
            files: BTreeMap::new(),
            last_ms: 0,
        };
        MattermostState {
            config,
            inner: Mutex::new(inner),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `token` is the bot's and still valid; a refusal is counted.
    pub(crate) fn authorised(&self, token: Option<&str>) -> bool {
        let mut inner = self.lock();
        let ok = !inner.revoked && token == Some(self.config.token.as_str());
        if !ok {
            inner.stats.unauthorized += 1;
        }
        ok
    }

    pub(crate) fn count(&self, f: impl FnOnce(&mut MattermostStats)) {
        f(&mut self.lock().stats);
    }

    /// A new socket, `tx` its task, asking `ask`: how the hub takes it (`hub.rs`).
    pub(crate) fn open(&self, ask: &Ask, tx: mpsc::UnboundedSender<ConnCommand>) -> Opening {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let hello = |id: &str| self.hello(id);
        let serial = &mut inner.serial;
        let mut mint = || {
            *serial += 1;
            format!("w{:025}", *serial)
        };
        let opening = inner.hub.open(ask, tx, &hello, &mut mint);
        if matches!(opening, Opening::Opened { .. }) {
            inner.stats.connections += 1;
            inner.stats.connection_times.push(Instant::now());
        }
        inner.stats.live_connections = inner.hub.live();
        inner.stats.websockets = inner.hub.records.clone();
        opening
    }

    /// Connection `conn` passed its challenge: its `hello`, numbered, if it was not in yet.
    pub(crate) fn authenticate(&self, conn: u64) -> Option<Value> {
        let hello = |id: &str| self.hello(id);
        self.lock().hub.authenticate(conn, &hello)
    }

    /// Connection `conn`'s socket is gone.
    pub(crate) fn close(&self, conn: u64) {
        let mut inner = self.lock();
        inner.hub.close(conn);
        inner.stats.live_connections = inner.hub.live();
    }

    /// Every connection no socket serves forgotten (a server restart, or its reaper).
    pub(crate) fn forget_inactive(&self) {
        self.lock().hub.forget_inactive();
    }

    /// The `hello` of connection `connection_id` (`createHelloMessage`), not yet numbered.
    fn hello(&self, connection_id: &str) -> Value {
        json!({"event": "hello", "data": {"connection_id": connection_id,
            "server_version": self.config.server_version}, "broadcast": {"omit_users": null,
            "user_id": self.config.bot_user_id, "channel_id": "", "team_id": ""}})
    }

    pub(crate) fn refused_upgrade(&self) -> Option<u16> {
        self.lock().refuse_upgrade
    }

    pub(crate) fn refuse_upgrade(&self, status: Option<u16>) {
        self.lock().refuse_upgrade = status;
    }

    pub(crate) fn revoke(&self, revoked: bool) {
        self.lock().revoked = revoked;
    }

    pub(crate) fn set_fault(&self, fault: MattermostFault) {
        self.lock()
            .hub
            .each_socket(|| ConnCommand::Fault(fault.clone()));
    }

    /// A new post id: 26 lowercase letters and digits, as `model.NewId` makes them.
    pub(crate) fn mint_id(&self, prefix: char) -> String {
        let mut inner = self.lock();
        inner.serial += 1;
        format!("{prefix}{:025}", inner.serial)
    }

    fn channel(&self, id: &str) -> Option<&super::config::MattermostChannel> {
        self.config.channels.iter().find(|c| c.id == id)
    }

    pub(crate) fn is_member(&self, channel: &str) -> bool {
        self.channel(channel).is_some()
    }

    /// A new post (its id minted, its `create_at` now), not yet stored.
    pub(crate) fn new_post(
        &self,
        channel_id: &str,
        user_id: &str,
        message: &str,
        root_id: &str,
        pending_post_id: &str,
    ) -> Value {
        let id = self.mint_id('p');
        let mut inner = self.lock();
        let now = chrono::Utc::now().timestamp_millis().max(inner.last_ms + 1);
        inner.last_ms = now;
        json!({
            "id": id, "create_at": now, "update_at": now, "edit_at": 0, "delete_at": 0,
            "is_pinned": false, "user_id": user_id, "channel_id": channel_id,
            "root_id": root_id, "original_id": "", "message": message, "type": "",
            "props": {}, "hashtags": "", "pending_post_id": pending_post_id,
            "reply_count": 0, "metadata": {},
        })
    }

    /// Attaches `files` to the new `post` (not yet published): each gets a file id and a
    /// `FileInfo` (`model/file_info.go`), listed in the post's `file_ids` and
    /// `metadata.files`, as the server sends a post with files.
    pub(crate) fn attach(&self, post: &mut Value, files: Vec<MattermostFile>) {
        let (mut ids, mut infos) = (Vec::new(), Vec::new());
        for file in files {
            let id = self.mint_id('f');
            let ext = file.name.rsplit_once('.').map_or("", |(_, e)| e).to_owned();
            let info = json!({
                "id": id, "user_id": post["user_id"], "post_id": post["id"],
                "channel_id": post["channel_id"], "create_at": post["create_at"],
                "update_at": post["create_at"], "delete_at": 0, "name": file.name,
                "extension": ext, "size": file.bytes.len(), "mime_type": file.mime,
                "width": 0, "height": 0, "has_preview_image": false, "mini_preview": null,
            });
            ids.push(json!(id));
            infos.push(info.clone());
            self.lock().files.insert(id, (info, file));
        }
        post["file_ids"] = json!(ids);
        post["metadata"] = json!({"files": infos});
    }

    /// File `id`'s `FileInfo` and bytes, if a post carries it.
    pub(crate) fn file(&self, id: &str) -> Option<(Value, MattermostFile)> {
        self.lock().files.get(id).cloned()
    }

    /// The `file_ids` and `metadata` of post `id`, as a `PostList` gives them.
    fn files_of(inner: &Inner, id: &str) -> (Value, Value) {
        let infos: Vec<&Value> = inner
            .files
            .values()
            .map(|(info, _)| info)
            .filter(|info| info["post_id"] == id)
            .collect();
        if infos.is_empty() {
            return (json!([]), json!({}));
        }
        let ids: Vec<&Value> = infos.iter().map(|i| &i["id"]).collect();
        (json!(ids), json!({"files": infos}))
    }

    /// Stores `post` and pushes its `posted` event to every open connection.
    pub(crate) fn publish(&self, post: &Value) {
        let field = |k: &str| post[k].as_str().unwrap_or("").to_owned();
        let (user_id, message) = (field("user_id"), field("message"));
        let event = self.posted_event(post, &user_id, &message);
        let mut inner = self.lock();
        let pushed = inner.hub.broadcast(&event);
        inner.stats.events_sent += pushed;
        inner.pushed.push(event);
        inner.posts.push(MattermostPostRecord {
            id: field("id"),
            channel_id: field("channel_id"),
            user_id,
            message,
            root_id: field("root_id"),
            create_at: post["create_at"].as_i64().unwrap_or(0),
            pushed: pushed as u32,
            emitted_at: Instant::now(),
        });
    }

    /// The `posted` event of `post`, as `app/notification.go` broadcasts it: `post` and
    /// `mentions` are JSON strings; `mentions` is there only when someone is mentioned.
    fn posted_event(&self, post: &Value, user_id: &str, message: &str) -> Value {
        let c = &self.config;
        let channel = self.channel(post["channel_id"].as_str().unwrap_or(""));
        let sender = if user_id == c.bot_user_id {
            &c.bot_username
        } else {
            &c.username
        };
        let mut data = json!({
            "channel_display_name": channel.map_or("", |c| c.name.as_str()),
            "channel_name": channel.map_or("", |c| c.name.as_str()),
            "channel_type": channel.map_or("O", |c| c.kind),
            "post": post.to_string(),
            "sender_name": format!("@{sender}"),
            "set_online": true,
            "team_id": if channel.is_some_and(|c| c.kind == "D") { "" } else { c.team_id.as_str() },
        });
        let mention = format!("@{}", c.bot_username);
        if user_id != c.bot_user_id
            && message
                .split_whitespace()
                .any(|w| w.trim_end_matches([',', '.', '!', '?']) == mention)
        {
            data["mentions"] = json!(json!([c.bot_user_id]).to_string());
        }
        json!({"event": "posted", "data": data,
               "broadcast": {"omit_users": null, "user_id": "", "channel_id": post["channel_id"], "team_id": ""}})
    }

    /// The last `n` `posted` events broadcast again, each with a new `seq` (a server that
    /// sends an event twice, as after a cluster's failover).
    pub(crate) fn redeliver(&self, n: usize) {
        let mut inner = self.lock();
        let start = inner.pushed.len().saturating_sub(n);
        let again: Vec<Value> = inner.pushed[start..].to_vec();
        let mut sent = 0u64;
        for event in &again {
            sent += inner.hub.broadcast(event);
        }
        inner.stats.events_sent += sent;
        inner.stats.redeliveries += sent;
    }

    /// The channel's posts created at or after `since`, as a `PostList`.
    pub(crate) fn posts_since(&self, channel: &str, since: i64) -> Value {
        let inner = self.lock();
        let mut order = Vec::new();
        let mut posts = serde_json::Map::new();
        for p in inner
            .posts
            .iter()
            .rev()
            .filter(|p| p.channel_id == channel && p.create_at >= since)
        {
            order.push(json!(p.id));
            let (file_ids, metadata) = Self::files_of(&inner, &p.id);
            posts.insert(
                p.id.clone(),
                json!({
                    "id": p.id, "create_at": p.create_at, "update_at": p.create_at, "delete_at": 0,
                    "user_id": p.user_id, "channel_id": p.channel_id, "root_id": p.root_id,
                    "message": p.message, "type": "", "props": {}, "file_ids": file_ids,
                    "metadata": metadata,
                }),
            );
        }
        json!({"order": order, "posts": posts, "next_post_id": "", "prev_post_id": ""})
    }

    pub(crate) fn posts(&self) -> Vec<MattermostPostRecord> {
        self.lock().posts.clone()
    }

    pub(crate) fn stats(&self) -> MattermostStats {
        self.lock().stats.clone()
    }
}
