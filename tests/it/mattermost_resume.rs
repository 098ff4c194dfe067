//! The Mattermost WebSocket's resume, against the mock's hub (written from the server's
//! `web_conn.go` and `web_hub.go`), with a real gateway process: a socket dropped without a
//! frame, or gone half-open, is resumed under the same connection id and what was posted
//! meanwhile comes by the server's replay (held while away, or written into the dead socket
//! and replayed from the dead queue), each post stored once; a resume the server can no
//! longer honour (the connection forgotten, its send queue overflowed, the event asked for
//! gone from the dead queue) gets a new
//! connection and `hello`, and the REST catch-up finds every post. Profile names start with
//! `mmr`.

use std::time::Duration;

use hermes_svc::mock_platform::mattermost::{MattermostConnRecord, MattermostFault};

use crate::harness::wait_for;
use crate::mattermost::{connected, gateway, rig, stored, wait_stored};
use crate::outbox_rig::{sigterm, Rig};

/// Takes the connection down with `fault` while upgrades are refused, posts `n`, and once
/// the mock no longer serves the socket (for a half-open one: once the adapter noticed and
/// let go), lets the adapter back in. The connection it came back on. Into a half-open
/// socket the posts are written (numbered, kept in the dead queue, never read); otherwise
/// they are posted once the socket is gone, so the server holds them.
fn away(
    rig: &Rig,
    fault: MattermostFault,
    n: usize,
    forget: bool,
) -> (Vec<String>, MattermostConnRecord) {
    let before = rig.mock.mattermost_stats().connections;
    rig.mock.mattermost_refuse_upgrade(Some(503));
    let into_the_socket = fault == MattermostFault::Silence;
    rig.mock.mattermost_set_fault(fault);
    let mut ids = if into_the_socket {
        rig.mock.mattermost_emit(n)
    } else {
        vec![]
    };
    wait_for(
        Duration::from_secs(30),
        "the socket gone and an upgrade refused",
        || {
            let s = rig.mock.mattermost_stats();
            (s.live_connections == 0 && s.upgrades_refused > 0).then_some(())
        },
    );
    if !into_the_socket {
        ids = rig.mock.mattermost_emit(n);
    }
    if forget {
        rig.mock.mattermost_forget_connections();
    }
    rig.mock.mattermost_refuse_upgrade(None);
    connected(rig, before);
    let s = rig.mock.mattermost_stats();
    (ids, s.websockets.last().cloned().expect("a connection"))
}

/// The posts `ids` are stored once each, and came over the socket: a `posted` event carries
/// its `sender_name`, a post read back by REST has none.
fn stored_by_the_socket(rig: &Rig, ids: &[String]) {
    wait_stored(rig, ids, Duration::from_secs(30));
    let all = stored(rig);
    for id in ids {
        assert_eq!(
            all.iter().filter(|s| *s == id).count(),
            1,
            "{id} stored once: {all:?}"
        );
    }
    for e in rig
        .events("mm")
        .iter()
        .filter(|e| ids.iter().any(|id| e["id"] == id.as_str()))
    {
        assert_eq!(
            e["data"]["sender_name"], "@alice",
            "came by the socket: {e}"
        );
    }
}

#[test]
fn a_dropped_socket_is_resumed_and_what_was_posted_meanwhile_comes_by_the_replay() {
    let rig = rig("mmrdrop");
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    let first = rig.mock.mattermost_emit(1);
    wait_stored(&rig, &first, Duration::from_secs(20));
    let (ids, conn) = away(&rig, MattermostFault::Drop, 5, false);
    assert!(conn.asked_resume && conn.resumed, "{conn:?}\n{}", rig.log());
    assert_eq!(
        (conn.replayed, conn.held),
        (0, 5),
        "held while away: {conn:?}"
    );
    let s = rig.mock.mattermost_stats();
    assert_eq!(
        s.websockets[0].connection_id, conn.connection_id,
        "the same connection id"
    );
    stored_by_the_socket(&rig, &ids);
    // Carried on from there: the next post is read live on the resumed connection.
    let next = rig.mock.mattermost_emit(1);
    wait_stored(&rig, &next, Duration::from_secs(20));
    assert_eq!(stored(&rig).len(), 7, "{:?}", stored(&rig));
    sigterm(&mut gw);
}

#[test]
fn a_half_open_socket_is_resumed_and_what_was_written_into_it_is_replayed() {
    let rig = rig("mmrhalf");
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    let (ids, conn) = away(&rig, MattermostFault::Silence, 4, false);
    assert!(conn.resumed, "{conn:?}\n{}", rig.log());
    assert_eq!(
        (conn.replayed, conn.held),
        (4, 0),
        "from the dead queue: {conn:?}"
    );
    stored_by_the_socket(&rig, &ids);
    assert_eq!(stored(&rig).len(), 4);
    sigterm(&mut gw);
}

#[test]
fn a_resume_past_what_the_server_holds_is_a_new_connection_and_the_catch_up_finds_it_all() {
    let rig = rig("mmrpast");
    let mut gw = gateway(&rig, "");
    connected(&rig, 0);
    let mut ids = rig.mock.mattermost_emit(1);
    wait_stored(&rig, &ids, Duration::from_secs(20));
    // Forgotten (a restart, the reaper): a new connection id and its hello.
    let (more, conn) = away(&rig, MattermostFault::Drop, 5, true);
    assert!(conn.asked_resume && !conn.resumed, "{conn:?}");
    assert_ne!(
        conn.connection_id,
        rig.mock.mattermost_stats().websockets[0].connection_id
    );
    ids.extend(more);
    wait_stored(&rig, &ids, Duration::from_secs(30));
    // More posted while away than the connection's send queue holds (256): the server
    // drops the connection, the resume gets a new one.
    let (more, conn) = away(&rig, MattermostFault::Close(1001), 260, false);
    assert!(conn.asked_resume && !conn.resumed, "{conn:?}");
    ids.extend(more);
    wait_stored(&rig, &ids, Duration::from_secs(60));
    // More written into a half-open socket than the dead queue keeps (128): the event asked
    // for is gone from it, so a new connection id and its hello.
    let (more, conn) = away(&rig, MattermostFault::Silence, 140, false);
    assert!(conn.asked_resume && !conn.resumed, "{conn:?}");
    ids.extend(more);
    wait_stored(&rig, &ids, Duration::from_secs(60));
    assert_eq!(stored(&rig).len(), ids.len(), "each once");
    sigterm(&mut gw);
}
