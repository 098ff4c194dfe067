//! The liveness rules driven on explicit instants: healthy, half-open, a dead write path, and
//! answers queued behind a flood.

use super::*;

const I: Duration = Duration::from_secs(4);
const A: Duration = Duration::from_secs(1);

/// Drive the tracker to `until`, answering probes with `answer`, returning the first death.
fn drive(
    l: &mut Liveness,
    from: Instant,
    until: Instant,
    mut answer: impl FnMut(&mut Liveness, Action, Instant),
    mut every: impl FnMut(&mut Liveness, Instant),
) -> Option<(Zombie, Instant)> {
    let mut now = from;
    let step = Duration::from_millis(10);
    while now <= until {
        every(l, now);
        while let Some(a) = l.poll(now) {
            if let Action::Dead(z) = a {
                return Some((z, now));
            }
            answer(l, a, now);
        }
        now += step;
    }
    None
}

/// The peer of a healthy connection: every heartbeat acked and every ping answered at once.
fn answer_promptly(l: &mut Liveness, a: Action, now: Instant) {
    match a {
        Action::SendHeartbeat => l.on_ack(now),
        Action::SendPing => l.on_pong(now),
        Action::Dead(_) => {}
    }
}

/// The peer of a connection that goes half-open at `fault`: prompt until then, silent after.
fn answer_until(fault: Instant) -> impl FnMut(&mut Liveness, Action, Instant) {
    move |l, a, now| {
        if now < fault {
            answer_promptly(l, a, now)
        }
    }
}

#[test]
fn a_healthy_connection_lives() {
    let t0 = Instant::now();
    let mut l = Liveness::new(t0, I, A, 0.5, true, true);
    let r = drive(&mut l, t0, t0 + I * 20, answer_promptly, |_, _| {});
    assert_eq!(r, None);
}

#[test]
fn half_open_is_detected_within_an_interval_plus_the_ack_timeout() {
    for jitter in [0.0, 0.3, 0.77] {
        for fault_at in [0.1, 0.45, 0.9] {
            let t0 = Instant::now();
            let mut l = Liveness::new(t0, I, A, jitter, true, true);
            let fault = t0 + I * 3 + I.mul_f64(fault_at);
            let (z, at) = drive(&mut l, t0, t0 + I * 10, answer_until(fault), |_, _| {}).unwrap();
            assert_eq!(z, Zombie::HalfOpen);
            let latency = at - fault;
            assert!(latency <= I + A + Duration::from_millis(20), "{latency:?}");
        }
    }
}

/// The session's timer path: an overdue probe with traffic makes it drain what is
/// readable; a drain that cannot finish within its budget (before `caught_up`) says so.
fn drain_on_timer(l: &mut Liveness, now: Instant, caught_up: Instant) {
    if l.overdue_with_traffic(now) && now < caught_up {
        l.fell_behind(now);
    }
}

#[test]
fn a_backlog_longer_than_two_intervals_is_not_a_dead_write_path() {
    let t0 = Instant::now();
    let mut l = Liveness::new(t0, I, A, 0.0, true, false);
    // From 2 intervals in, a flood: frames keep arriving and the answers are queued behind
    // them, unread, for 5 intervals. Then the reader catches up and reads every ACK.
    let (flood, caught_up) = (t0 + I * 2, t0 + I * 7);
    let r = drive(
        &mut l,
        t0,
        t0 + I * 12,
        |l, a, now| {
            if a == Action::SendHeartbeat && !(flood..caught_up).contains(&now) {
                l.on_ack(now)
            }
        },
        |l, now| {
            if (flood..caught_up).contains(&now) {
                l.on_inbound(now);
            }
            if now == caught_up {
                l.on_ack(now);
            }
            drain_on_timer(l, now, caught_up);
        },
    );
    assert_eq!(r, None);
}

#[test]
fn a_flood_queued_in_the_server_is_not_a_dead_write_path_either() {
    let t0 = Instant::now();
    let mut l = Liveness::new(t0, I, A, 0.0, true, false);
    // The server is behind, not us: every read empties our socket (no drain ever falls
    // behind), but frames come back to back, 100 a second, and the ACKs only after them.
    let (flood, over) = (t0 + I * 2, t0 + I * 7);
    let r = drive(
        &mut l,
        t0,
        t0 + I * 12,
        |l, a, now| {
            if a == Action::SendHeartbeat && !(flood..over).contains(&now) {
                l.on_ack(now)
            }
        },
        |l, now| {
            if (flood..over).contains(&now) {
                l.on_inbound(now);
            }
            if now == over {
                l.on_ack(now);
            }
        },
    );
    assert_eq!(r, None);
}

#[test]
fn after_a_backlog_pauses_a_missing_answer_counts_again() {
    let t0 = Instant::now();
    let mut l = Liveness::new(t0, I, A, 0.0, true, false);
    // A flood the reader falls behind for 3 intervals, after which the write path turns
    // out dead: no ACK comes, and frames arrive only now and then (every 1.5 s, so the
    // stream pauses for longer than an ACK timeout).
    let (flood, caught_up) = (t0 + I * 2, t0 + I * 5);
    let (z, at) = drive(
        &mut l,
        t0,
        t0 + I * 12,
        |l, a, now| {
            if a == Action::SendHeartbeat && now < flood {
                l.on_ack(now)
            }
        },
        |l, now| {
            let ms = (now - t0).as_millis();
            if (now >= flood && now < caught_up) || (now >= caught_up && ms % 1500 == 0) {
                l.on_inbound(now);
            }
            drain_on_timer(l, now, caught_up);
        },
    )
    .unwrap();
    // A probe that nothing followed within its ACK timeout is half-open, one that frames
    // overtook is a second miss: either way the connection is declared dead.
    assert_ne!(z, Zombie::Idle);
    assert!(at > caught_up, "{:?}", at - t0);
    assert!(at <= caught_up + I * 2 + A, "{:?}", at - caught_up);
}

#[test]
fn a_flood_that_never_pauses_excuses_a_dead_write_path_only_up_to_the_limit() {
    let t0 = Instant::now();
    let mut l = Liveness::new(t0, I, A, 0.0, true, false);
    let flood = t0 + I * 2;
    let never = t0 + Duration::from_secs(3600);
    let r = drive(
        &mut l,
        t0,
        t0 + BACKLOG_LIMIT * 2,
        |l, a, now| {
            if a == Action::SendHeartbeat && now < flood {
                l.on_ack(now)
            }
        },
        |l, now| {
            if now >= flood {
                l.on_inbound(now);
            }
            drain_on_timer(l, now, never);
        },
    );
    let (z, at) = r.expect("never detected");
    assert_eq!(z, Zombie::WritePathDead);
    let limit = BACKLOG_LIMIT.max(I * 4);
    assert!(at - t0 >= limit, "{:?}", at - t0);
    assert!(at - t0 <= limit + I * 2 + A, "{:?}", at - t0);
}

#[test]
fn write_path_dead_is_tolerated_once_then_detected() {
    let t0 = Instant::now();
    let mut l = Liveness::new(t0, I, A, 0.0, true, true);
    let fault = t0 + I * 2;
    let (z, at) = drive(
        &mut l,
        t0,
        t0 + I * 10,
        answer_until(fault),
        // Dispatches keep arriving every 100 ms.
        |l, now| {
            if (now - t0).as_millis() % 100 == 0 {
                l.on_inbound(now)
            }
        },
    )
    .unwrap();
    assert_eq!(z, Zombie::WritePathDead);
    assert!(at - fault > I, "the first miss is tolerated");
    assert!(
        at - fault <= I * 3 + Duration::from_millis(20),
        "{:?}",
        at - fault
    );
}

#[test]
fn no_ack_on_a_healthy_socket_is_detected_but_a_slow_ack_is_not() {
    for (delay, dies) in [(None, true), (Some(A.mul_f64(0.8)), false)] {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0, I, A, 0.0, true, true);
        let pending: std::cell::Cell<Option<Instant>> = std::cell::Cell::new(None);
        let r = drive(
            &mut l,
            t0,
            t0 + I * 10,
            |l, a, now| match a {
                Action::SendHeartbeat => pending.set(delay.map(|d| now + d)),
                Action::SendPing => l.on_pong(now),
                Action::Dead(_) => {}
            },
            |l, now| {
                if pending.get().is_some_and(|p| now >= p) {
                    pending.set(None);
                    l.on_ack(now);
                }
            },
        );
        assert_eq!(r.is_some(), dies, "delay {delay:?}: {r:?}");
    }
}

#[test]
fn with_pings_off_an_unanswered_ping_cannot_exist() {
    let t0 = Instant::now();
    let mut l = Liveness::new(t0, I, A, 0.0, true, false);
    let r = drive(
        &mut l,
        t0,
        t0 + I * 20,
        |l, a, now| match a {
            Action::SendHeartbeat => l.on_ack(now),
            Action::SendPing => panic!("a ping went out with pings off"),
            Action::Dead(_) => {}
        },
        |_, _| {},
    );
    assert_eq!(r, None);
}

#[test]
fn strict_stopped_answers_are_caught_within_an_interval_plus_the_ack_timeout_despite_traffic() {
    for fault_at in [0.1, 0.5, 0.95] {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0, I, A, 0.3, true, false).strict();
        let fault = t0 + I * 3 + I.mul_f64(fault_at);
        // Events keep arriving every 100 ms; only the answers to probes stop.
        let mut tick = 0u32;
        let r = drive(&mut l, t0, t0 + I * 10, answer_until(fault), |l, now| {
            tick += 1;
            if tick % 10 == 0 {
                l.on_inbound(now);
            }
        });
        let (z, at) = r.unwrap();
        assert_eq!(z, Zombie::NoAnswer);
        let latency = at - fault;
        assert!(latency <= I + A + Duration::from_millis(20), "{latency:?}");
    }
}

#[test]
fn strict_half_open_is_still_half_open() {
    let t0 = Instant::now();
    let mut l = Liveness::new(t0, I, A, 0.0, true, false).strict();
    let fault = t0 + I * 2 + I / 2;
    let (z, at) = drive(&mut l, t0, t0 + I * 10, answer_until(fault), |_, _| {}).unwrap();
    assert_eq!(z, Zombie::HalfOpen);
    assert!(at - fault <= I + A + Duration::from_millis(20));
}

#[test]
fn a_new_interval_takes_effect_at_once() {
    let t0 = Instant::now();
    let mut l = Liveness::new(t0, I * 10, A, 0.99, true, false);
    // The first heartbeat was placed almost 10 intervals of I away; the platform now asks
    // for I, and the next heartbeat goes out I from now, and every I after that.
    l.set_interval(t0, I, A);
    assert_eq!(l.interval(), I);
    assert_eq!(l.poll(t0 + I - Duration::from_millis(1)), None);
    assert_eq!(l.poll(t0 + I), Some(Action::SendHeartbeat));
    l.on_ack(t0 + I);
    assert_eq!(l.poll(t0 + I * 2), Some(Action::SendHeartbeat));
    assert_eq!(l.liveness_deadline(), I + A * 3);
}
