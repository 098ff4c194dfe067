//! The media store's bound, at the unit level: a `Store` with a small quota takes 1,000 files,
//! each `put` followed by `evict`, as an inbound fetch does; and what one `evict` costs as the
//! store holds more files (it lists the directory and looks at every file only when its count
//! says it may be over its quota; below it, an `evict` is a look at the count).

use std::time::Instant;

use hermes_svc::media::download::InMemory;
use hermes_svc::media::store::Store;

use crate::{percentile, scratch};

pub(super) const QUOTA: u64 = 1024 * 1024;
pub(super) const ITEM: usize = 10 * 1024;
pub(super) const PUTS: usize = 1000;

pub(super) struct Bound {
    /// The store's bytes after the last evict, as it answered and as the directory says.
    pub(super) held: u64,
    pub(super) on_disk: u64,
    pub(super) files_left: usize,
    /// The most the store held after any evict.
    pub(super) max_held: u64,
    /// One put and its evict, µs, sorted.
    pub(super) put_evict_us: Vec<f64>,
    /// The evict alone, µs, sorted.
    pub(super) evict_us: Vec<f64>,
}

/// `evict` with nothing to remove, in a store of `files` files: µs, the median of 5.
pub(super) struct Listing {
    pub(super) files: usize,
    pub(super) evict_us: f64,
}

fn bytes(i: usize, len: usize) -> hyper::body::Bytes {
    (0..len)
        .map(|k| ((i * 31 + k * 7) % 251) as u8)
        .collect::<Vec<u8>>()
        .into()
}

fn on_disk(store: &Store) -> (u64, usize) {
    std::fs::read_dir(store.path())
        .unwrap()
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .fold((0, 0), |(b, n), e| (b + e.metadata().unwrap().len(), n + 1))
}

pub(super) async fn bound() -> Bound {
    let dir = scratch("media-store");
    let store = Store::open(&dir.join("media")).unwrap();
    let (mut put_evict_us, mut evict_us) = (vec![], vec![]);
    let (mut held, mut max_held) = (0, 0);
    for i in 0..PUTS {
        let body = InMemory(Some(bytes(i, ITEM)));
        let started = Instant::now();
        store
            .put("document", &format!("item{i:05}"), Some("item.bin"), body)
            .await
            .unwrap();
        let put_done = Instant::now();
        held = store.evict(QUOTA, |_| false).unwrap();
        let done = Instant::now();
        put_evict_us.push((done - started).as_secs_f64() * 1e6);
        evict_us.push((done - put_done).as_secs_f64() * 1e6);
        max_held = max_held.max(held);
    }
    let (on_disk, files_left) = on_disk(&store);
    put_evict_us.sort_by(f64::total_cmp);
    evict_us.sort_by(f64::total_cmp);
    let _ = std::fs::remove_dir_all(&dir);
    Bound {
        held,
        on_disk,
        files_left,
        max_held,
        put_evict_us,
        evict_us,
    }
}

/// One `evict` that removes nothing, in stores of `sizes` files of 1 KiB each.
pub(super) async fn listing(sizes: &[usize]) -> Vec<Listing> {
    let dir = scratch("media-listing");
    let store = Store::open(&dir.join("media")).unwrap();
    let mut out = vec![];
    let mut have = 0;
    for &files in sizes {
        while have < files {
            let body = InMemory(Some(bytes(have, 1024)));
            store
                .put("document", &format!("item{have:06}"), None, body)
                .await
                .unwrap();
            have += 1;
        }
        let mut us: Vec<f64> = (0..5)
            .map(|_| {
                let started = Instant::now();
                store.evict(u64::MAX, |_| false).unwrap();
                started.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        us.sort_by(f64::total_cmp);
        out.push(Listing {
            files,
            evict_us: percentile(&us, 50.0),
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
    out
}
