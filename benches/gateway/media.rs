//! Files in and out (issue 47): a 50 MB file streamed out through a real gateway to the mock
//! Telegram and a 50 MB file streamed in from the mock Matrix, each with the gateway's memory
//! before and after; the latency a 1 MB photo adds over a text message, out (submit → the
//! platform) and in (the platform's event → the agent's request); and the media store's quota
//! under 1,000 files, at the unit level.
//!
//! Memory is read from /proc: VmRSS before (after start-up has settled) and after, and VmHWM,
//! the process's peak RSS since it started, start-up included; the growth reported is VmHWM
//! after less VmRSS before, so a start-up peak above the transfer's would only make it larger.
//!
//! A figure measured only against our own mock is not a figure: the 50 MB files and the
//! photo's latency are measured again against the independent homeserver
//! (benches/independent/matrix_server.py, written from the Matrix spec), out and in through
//! one Matrix adapter ([`indep`]), and set side by side with the mock's.
//!
//! `HSV_BENCH_MEDIA_RUNS` (20) is the number of photos and of texts each way, `HSV_BENCH_PARTS`
//! (e.g. `out,store`) which of `out`, `in` and `store` run, `HSV_BENCH_ONLY` (`mock` or
//! `independent`) which server (the store's part is the mock's).

mod inbound;
mod indep;
mod out;
mod rig;
mod store;

use hermes_svc::mock_platform::{MockConfig, MockPlatform};

use crate::binary::{gateway_bin, BIN};
use crate::independent::Independent;
use crate::percentile;
use crate::proc::{machine_ticks, wait_for_quiet_machine};

use inbound::{BigIn, InLatency, InlinePhoto};
use out::{BigOut, OutLatency};
use rig::{Agent, Rig};
use store::{Bound, Listing};

/// RSS growth allowed for a 50 MB file, by the issue.
const MAX_GROWTH_KIB: u64 = 8 * 1024;

/// What the mock's parts measured: the files out, the files in, the store.
#[derive(Default)]
struct MockFigures {
    outs: Option<(BigOut, OutLatency, f64)>,
    ins: Option<(BigIn, InLatency, InlinePhoto, f64)>,
    stores: Option<(Bound, Vec<Listing>)>,
}

/// What the independent server's parts measured: the files out, the files in.
#[derive(Default)]
struct IndependentFigures {
    outs: Option<(BigOut, OutLatency, f64)>,
    ins: Option<(BigIn, InLatency, f64)>,
}

/// The share of the machine busy between two [`machine_ticks`] readings, in percent.
fn busy(a: (u64, u64), b: (u64, u64)) -> f64 {
    (b.0 - a.0) as f64 / (b.1 - a.1).max(1) as f64 * 100.0
}

pub(crate) async fn media_figures() {
    let runs = std::env::var("HSV_BENCH_MEDIA_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let parts = std::env::var("HSV_BENCH_PARTS").unwrap_or_default();
    let part = |p: &str| parts.is_empty() || parts.split(',').any(|x| x.trim() == p);
    let (mock, independent) = match std::env::var("HSV_BENCH_ONLY").unwrap_or_default().as_str() {
        "" => (true, true),
        "mock" => (true, false),
        "independent" => (false, true),
        other => panic!("HSV_BENCH_ONLY={other}: the media section takes mock or independent"),
    };
    let bin = gateway_bin();
    eprintln!("measuring {bin}");
    let m = match mock {
        true => mock_figures(runs, &part).await,
        false => MockFigures::default(),
    };
    let i = match independent {
        true => independent_figures(runs, &part).await,
        false => IndependentFigures::default(),
    };

    if let Some((big, _, busy)) = &m.outs {
        print_big_out(big, *busy, MOCK_OUT);
    }
    if let Some((big, _, inline, busy)) = &m.ins {
        print_big_in(big, *busy, MOCK_IN);
        print_inline_in(inline);
    }
    print_latency(
        m.outs.as_ref().map(|o| &o.1),
        m.ins.as_ref().map(|i| &i.1),
        &MOCK_LEGS,
    );
    if let Some((big, _, busy)) = &i.outs {
        print_big_out(big, *busy, INDEPENDENT_OUT);
    }
    if let Some((big, _, busy)) = &i.ins {
        print_big_in(big, *busy, INDEPENDENT_IN);
    }
    print_latency(
        i.outs.as_ref().map(|o| &o.1),
        i.ins.as_ref().map(|i| &i.1),
        &INDEPENDENT_LEGS,
    );
    if mock && independent {
        print_side_by_side(&m, &i);
    }
    if let Some((bound, listing)) = &m.stores {
        print_store(bound, listing);
    }
    println!(
        "Measured binary: {}\n",
        if bin == BIN {
            "cargo's bench build (dev-dependency features on)"
        } else {
            "a plain release build (`HSV_BENCH_BIN`)"
        }
    );
}

/// The built-in mock: a 50 MB file out to its Telegram and in from its Matrix, the photo's
/// latency on Telegram both ways, the 5 MiB inline photo, and the store.
async fn mock_figures(runs: usize, part: &impl Fn(&str) -> bool) -> MockFigures {
    let mut f = MockFigures::default();
    if part("out") {
        wait_for_quiet_machine().await;
        let t0 = machine_ticks();
        let mock = MockPlatform::start(MockConfig::default()).await.unwrap();
        let rig = Rig::start("out", &mock, None).await;
        let big = out::big_out(&rig, &out::Telegram(&mock)).await;
        eprintln!("50 MB out: growth {} KiB", big.hwm_kib - big.rss_before_kib);
        let lat = out::out_latency(&rig, &out::Telegram(&mock), runs).await;
        f.outs = Some((big, lat, busy(t0, machine_ticks())));
    }
    if part("in") {
        wait_for_quiet_machine().await;
        let t0 = machine_ticks();
        let mock = MockPlatform::start(MockConfig::default()).await.unwrap();
        let agent = Agent::start().await;
        let rig = Rig::start("in", &mock, Some(&agent)).await;
        let big = inbound::big_in(&rig, &mock, &agent).await;
        eprintln!("50 MB in: growth {} KiB", big.hwm_kib - big.rss_before_kib);
        let lat = inbound::in_latency(&mock, &agent, runs).await;
        drop(rig);
        // A fresh gateway and platform: the peak so far is not this photo's.
        let mock = MockPlatform::start(MockConfig::default()).await.unwrap();
        let rig = Rig::start("in-photo", &mock, Some(&agent)).await;
        let inline = inbound::inline_photo_in(&rig, &mock, &agent).await;
        f.ins = Some((big, lat, inline, busy(t0, machine_ticks())));
    }
    if part("store") {
        wait_for_quiet_machine().await;
        f.stores = Some((
            store::bound().await,
            store::listing(&[100, 1_000, 10_000]).await,
        ));
    }
    f
}

/// The independent homeserver: a 50 MB file out and in through one Matrix adapter, and the
/// photo's latency both ways; a fresh server and gateway for each direction.
async fn independent_figures(runs: usize, part: &impl Fn(&str) -> bool) -> IndependentFigures {
    let python = Independent::python();
    let mut f = IndependentFigures::default();
    if part("out") {
        wait_for_quiet_machine().await;
        let t0 = machine_ticks();
        let srv = indep::Server::start(&python, "out");
        let rig = Rig::start_independent("indep-out", &srv.base(), None).await;
        let big = out::big_out(&rig, &srv).await;
        eprintln!(
            "independent, 50 MB out: growth {} KiB",
            big.hwm_kib - big.rss_before_kib
        );
        let lat = out::out_latency(&rig, &srv, runs).await;
        f.outs = Some((big, lat, busy(t0, machine_ticks())));
    }
    if part("in") {
        wait_for_quiet_machine().await;
        let t0 = machine_ticks();
        let srv = indep::Server::start(&python, "in");
        let agent = Agent::start().await;
        let rig = Rig::start_independent("indep-in", &srv.base(), Some(&agent)).await;
        let big = indep::big_in(&rig, &srv, &agent).await;
        eprintln!(
            "independent, 50 MB in: growth {} KiB",
            big.hwm_kib - big.rss_before_kib
        );
        let lat = indep::in_latency(&srv, &agent, runs).await;
        f.ins = Some((big, lat, busy(t0, machine_ticks())));
    }
    f
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// `ms` for `bytes`, with the rate in MB/s (10^6 bytes).
fn timed(ms: f64, bytes: u64) -> String {
    format!(
        "{:.2} s ({:.0} MB/s)",
        ms / 1000.0,
        bytes as f64 / 1e6 / (ms / 1000.0)
    )
}

/// The memory rows both 50 MB tables share.
/// With `target`, the growth is judged against the 8 MiB.
fn memory_rows(rss_before: u64, hwm_before: u64, hwm: u64, rss_after: u64, target: bool) {
    let growth = hwm.saturating_sub(rss_before);
    println!(
        "| gateway VmRSS before (start-up settled) | {} |",
        mib(rss_before)
    );
    println!(
        "| gateway VmHWM before (the peak so far: start-up's) | {} |",
        mib(hwm_before)
    );
    println!(
        "| gateway VmHWM after (the peak since start) | {} |",
        mib(hwm)
    );
    if target {
        println!(
            "| **RSS growth: VmHWM after − VmRSS before** (target < 8 MiB) | **{}, {}** |",
            mib(growth),
            if growth < MAX_GROWTH_KIB {
                "met"
            } else {
                "missed"
            }
        );
    } else {
        println!(
            "| **RSS growth: VmHWM after − VmRSS before** | **{}** |",
            mib(growth)
        );
    }
    println!("| gateway VmRSS after | {} |", mib(rss_after));
}

/// Where the 50 MB file out went, as its heading says it.
const MOCK_OUT: &str = "to the mock Telegram (one adapter)";
const INDEPENDENT_OUT: &str = "to a room of the independent homeserver (one Matrix adapter: `POST /_matrix/media/v3/upload`, then an `m.file` event)";
/// Where the 50 MB file in came from.
const MOCK_IN: &str = "a Matrix `m.image` of 50,000,000 bytes";
const INDEPENDENT_IN: &str = "an `m.image` of 50,000,000 bytes on the independent homeserver (`GET /_matrix/client/v1/media/download/…`)";

/// The latency table's words for one server.
struct Legs {
    /// After "The latency a 1 MB photo adds".
    title: &'static str,
    out: fn(&OutLatency) -> String,
    inb: fn(&InLatency) -> String,
}

const MOCK_LEGS: Legs = Legs {
    title: "",
    out: |o| {
        format!(
            "out: submit → the mock Telegram has the post (`sendMessage` / `{}` of {} bytes)",
            o.photo_method, o.photo_bytes
        )
    },
    inb: |i| {
        format!(
            "in: the mock Telegram's update → the agent has the request (photo of {} bytes: `getFile`, download, data URL; {} bytes of request)",
            i.photo_bytes, i.photo_request_bytes
        )
    },
};

const INDEPENDENT_LEGS: Legs = Legs {
    title: ", against the independent homeserver",
    out: |o| {
        format!(
            "out: submit → the independent homeserver has the event (`m.text` / an upload, then `{}`, of {} bytes)",
            o.photo_method, o.photo_bytes
        )
    },
    inb: |i| {
        format!(
            "in: the independent homeserver's event → the agent has the request (`m.image` of {} bytes: authenticated download, data URL; {} bytes of request)",
            i.photo_bytes, i.photo_request_bytes
        )
    },
};

fn print_big_out(b: &BigOut, busy: f64, to: &str) {
    println!("### A 50 MB file out: `POST /v1/media`, then `POST /v1/messages` naming it, {to}\n");
    println!("| figure | value |");
    println!("|---|---|");
    println!(
        "| at the platform: bytes, method's field, same SHA-256 | {} bytes, `{}`, {} |",
        b.bytes,
        b.method,
        if b.same_bytes { "yes" } else { "**no**" }
    );
    println!(
        "| upload into the store (`Client::upload`, until its 201) | {} |",
        timed(b.upload_ms, b.bytes)
    );
    println!(
        "| submit → its 202 (the outbox's copy made, the message durable) | {:.2} s |",
        b.answer_ms / 1000.0
    );
    println!(
        "| submit → the platform has the whole post | {} |",
        timed(b.post_ms, b.bytes)
    );
    println!(
        "| gateway CPU, upload through post | {:.2} s |",
        b.gateway_cpu_ms / 1000.0
    );
    memory_rows(
        b.rss_before_kib,
        b.hwm_before_kib,
        b.hwm_kib,
        b.rss_after_kib,
        true,
    );
    println!("| whole machine busy over this part | {busy:.0}% |\n");
}

fn print_big_in(b: &BigIn, busy: f64, from: &str) {
    println!(
        "### A 50 MB file in: {from}, fetched into the store when its turn starts (OpenAI bridge, an agent answering \"ok\")\n"
    );
    println!("| figure | value |");
    println!("|---|---|");
    println!(
        "| in the store: bytes, same SHA-256 | {} bytes, {} |",
        b.bytes,
        if b.same_bytes { "yes" } else { "**no**" }
    );
    println!(
        "| the platform's event → the agent has the turn (fetch included) | {} |",
        timed(b.to_agent_ms, b.bytes)
    );
    println!(
        "| gateway CPU, event through the posted answer | {:.2} s |",
        b.gateway_cpu_ms / 1000.0
    );
    memory_rows(
        b.rss_before_kib,
        b.hwm_before_kib,
        b.hwm_kib,
        b.rss_after_kib,
        true,
    );
    println!("| whole machine busy over this part | {busy:.0}% |\n");
}

fn print_inline_in(p: &InlinePhoto) {
    println!(
        "### The largest photo the OpenAI bridge inlines: a Telegram photo of 5 MiB, sent to the agent as a data URL (a fresh gateway, after one text turn)\n"
    );
    println!("| figure | value |");
    println!("|---|---|");
    println!(
        "| photo / the agent's request body | {} / {} bytes |",
        p.bytes, p.request_bytes
    );
    println!(
        "| the platform's event → the agent has the request | {:.0} ms |",
        p.to_agent_ms
    );
    memory_rows(
        p.rss_before_kib,
        p.hwm_before_kib,
        p.hwm_kib,
        p.rss_after_kib,
        false,
    );
    println!();
}

fn p50_p95(v: &[f64]) -> (f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    (percentile(&s, 50.0), percentile(&s, 95.0))
}

fn print_latency(out: Option<&OutLatency>, inb: Option<&InLatency>, legs: &Legs) {
    let Some(n) = out.map(|o| o.text.len()).or(inb.map(|i| i.text.len())) else {
        return;
    };
    println!(
        "### The latency a 1 MB photo adds{} ({n} photos and {n} texts each way, alternating, one at a time, after one of each not counted)\n",
        legs.title
    );
    println!("| leg | text, p50 / p95 | 1 MB photo, p50 / p95 | added by the photo, p50 / p95 |");
    println!("|---|---|---|---|");
    let row = |leg: &str, text: &[f64], photo: &[f64]| {
        let (t50, t95) = p50_p95(text);
        let (p50, p95) = p50_p95(photo);
        println!(
            "| {leg} | {t50:.1} / {t95:.1} ms | {p50:.1} / {p95:.1} ms | {:.1} / {:.1} ms |",
            p50 - t50,
            p95 - t95
        );
    };
    if let Some(o) = out {
        row(&(legs.out)(o), &o.text, &o.photo);
        let (u50, u95) = p50_p95(&o.upload);
        println!(
            "| out, before the submit: the photo's `POST /v1/media` | — | {u50:.1} / {u95:.1} ms | |"
        );
    }
    if let Some(i) = inb {
        row(&(legs.inb)(i), &i.text, &i.photo);
    }
    println!();
}

/// p50 and p90 of the latency a photo adds, run by run: each run's photo less the text sent
/// next to it (a difference of percentiles would let one slow text make a photo look free).
fn added(text: &[f64], photo: &[f64]) -> String {
    let mut d: Vec<f64> = photo.iter().zip(text).map(|(p, t)| p - t).collect();
    d.sort_by(f64::total_cmp);
    format!(
        "{:.1} / {:.1} ms",
        percentile(&d, 50.0),
        percentile(&d, 90.0)
    )
}

/// "text p50 / p90 · photo p50 / p90", in ms.
fn legs(text: &[f64], photo: &[f64]) -> String {
    let p = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        format!("{:.1} / {:.1}", percentile(&s, 50.0), percentile(&s, 90.0))
    };
    format!("{} · {} ms", p(text), p(photo))
}

/// The headline figures of both servers in one table.
fn print_side_by_side(m: &MockFigures, i: &IndependentFigures) {
    println!("### Side by side: the built-in mock and the independent homeserver\n");
    println!("| figure | built-in mock | independent homeserver |");
    println!("|---|---|---|");
    let growth = |hwm: u64, rss: u64| {
        let g = hwm.saturating_sub(rss);
        let verdict = if g < MAX_GROWTH_KIB {
            "met"
        } else {
            "**missed**"
        };
        format!("{}, {verdict}", mib(g))
    };
    let same = |ok: bool| {
        if ok {
            "same SHA-256"
        } else {
            "**different bytes**"
        }
    };
    if let (Some((a, la, _)), Some((b, lb, _))) = (&m.outs, &i.outs) {
        println!(
            "| 50 MB out: RSS growth, VmHWM after − VmRSS before (target < 8 MiB) | {} | {} |",
            growth(a.hwm_kib, a.rss_before_kib),
            growth(b.hwm_kib, b.rss_before_kib)
        );
        println!(
            "| 50 MB out: submit → the platform has it | {} | {} |",
            timed(a.post_ms, a.bytes),
            timed(b.post_ms, b.bytes)
        );
        println!(
            "| 50 MB out: bytes at the platform | {} bytes, `{}`, {} | {} bytes, `{}`, {} |",
            a.bytes,
            a.method,
            same(a.same_bytes),
            b.bytes,
            b.method,
            same(b.same_bytes)
        );
        println!(
            "| out: submit → the platform has it, text · 1 MB photo, p50 / p90 | {} | {} |",
            legs(&la.text, &la.photo),
            legs(&lb.text, &lb.photo)
        );
        println!(
            "| out: latency a 1 MB photo adds over a text (photo − text, run by run), p50 / p90 | {} | {} |",
            added(&la.text, &la.photo),
            added(&lb.text, &lb.photo)
        );
    }
    if let (Some((a, la, _, _)), Some((b, lb, _))) = (&m.ins, &i.ins) {
        println!(
            "| 50 MB in: RSS growth, VmHWM after − VmRSS before (target < 8 MiB) | {} | {} |",
            growth(a.hwm_kib, a.rss_before_kib),
            growth(b.hwm_kib, b.rss_before_kib)
        );
        println!(
            "| 50 MB in: the platform's event → the agent has the turn | {} | {} |",
            timed(a.to_agent_ms, a.bytes),
            timed(b.to_agent_ms, b.bytes)
        );
        println!(
            "| 50 MB in: the stored file | {} bytes, {} | {} bytes, {} |",
            a.bytes,
            same(a.same_bytes),
            b.bytes,
            same(b.same_bytes)
        );
        println!(
            "| in: the platform's event → the agent has the request, text · 1 MB photo, p50 / p90 | {} | {} |",
            legs(&la.text, &la.photo),
            legs(&lb.text, &lb.photo)
        );
        println!(
            "| in: latency a 1 MB photo adds over a text (photo − text, run by run), p50 / p90 | {} (a Telegram photo) | {} (a Matrix `m.image`) |",
            added(&la.text, &la.photo),
            added(&lb.text, &lb.photo)
        );
    }
    println!();
}

fn print_store(b: &Bound, listing: &[Listing]) {
    println!(
        "### The store's quota under {} files: `Store::put` of {} KiB then `evict` to {} MiB, each time (unit level, in the bench process)\n",
        store::PUTS,
        store::ITEM / 1024,
        store::QUOTA / (1024 * 1024)
    );
    println!("| figure | value |");
    println!("|---|---|");
    println!(
        "| held after the last evict: as `evict` answered / in the directory | {} / {} bytes ({}) |",
        b.held,
        b.on_disk,
        if b.held <= store::QUOTA && b.on_disk <= store::QUOTA {
            "within the quota"
        } else {
            "**over the quota**"
        }
    );
    println!("| most held after any evict | {} bytes |", b.max_held);
    println!("| files left | {} |", b.files_left);
    let spread = |v: &[f64]| {
        format!(
            "{:.0} / {:.0} / {:.0} µs",
            percentile(v, 50.0),
            percentile(v, 95.0),
            percentile(v, 100.0)
        )
    };
    println!(
        "| put + evict, p50 / p95 / max | {} |",
        spread(&b.put_evict_us)
    );
    println!(
        "| of which evict, p50 / p95 / max | {} |\n",
        spread(&b.evict_us)
    );
    println!("| files in the store | one `evict` that removes nothing, median of 5 | per file |");
    println!("|---|---|---|");
    for l in listing {
        println!(
            "| {} | {:.0} µs | {:.2} µs |",
            l.files,
            l.evict_us,
            l.evict_us / l.files as f64
        );
    }
    println!();
}
