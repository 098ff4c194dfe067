//! A TCP proxy that can turn its current connections into black holes: the path goes dead in
//! both directions while both sockets stay open. This is the failure that only heartbeat
//! timeouts can detect (no FIN, no RST, no error), which an application-level fault on the
//! mock cannot fully imitate because the server's kernel would still ACK and close normally.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Dropping it closes the listener and every connection it holds.
pub struct BlackholeProxy {
    addr: SocketAddr,
    open: Arc<AtomicUsize>,
    next_id: Arc<AtomicU64>,
    /// Connections with an id below this value are blackholed. Dropping the sender is also
    /// the stop signal for every relay task.
    cutoff: watch::Sender<u64>,
    accept: JoinHandle<()>,
}

impl BlackholeProxy {
    pub async fn start(upstream: SocketAddr) -> std::io::Result<BlackholeProxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let open = Arc::new(AtomicUsize::new(0));
        let next_id = Arc::new(AtomicU64::new(0));
        let (cutoff, cutoff_rx) = watch::channel(0);
        let accept = tokio::spawn(accept_loop(
            listener,
            upstream,
            open.clone(),
            next_id.clone(),
            cutoff_rx,
        ));
        tracing::info!(%addr, %upstream, "blackhole proxy listening");
        Ok(BlackholeProxy {
            addr,
            open,
            next_id,
            cutoff,
            accept,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every connection open now goes dark, and no byte that reaches the proxy after this
    /// returns is forwarded on one: a test that cuts a connection and then sends knows its
    /// frames are lost. Connections opened later pass.
    pub fn blackhole_existing(&self) {
        let cutoff = self.next_id.load(Ordering::SeqCst);
        self.cutoff
            .send_modify(|current| *current = (*current).max(cutoff));
        tracing::info!(
            connections = self.connections(),
            "blackhole proxy went dark"
        );
    }

    /// Every connection, open or yet to come, goes dark: a network partition, where nothing
    /// arrives and nothing says so.
    pub fn partition(&self) {
        self.cutoff.send_replace(u64::MAX);
        tracing::info!("blackhole proxy partitioned");
    }

    /// New connections pass again; those that went dark stay dark, as after a real partition
    /// heals.
    pub fn heal(&self) {
        let next = self.next_id.load(Ordering::SeqCst);
        self.cutoff.send_replace(next);
        tracing::info!("blackhole proxy healed");
    }

    pub(crate) fn connections(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
}

impl Drop for BlackholeProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    open: Arc<AtomicUsize>,
    next_id: Arc<AtomicU64>,
    cutoff: watch::Receiver<u64>,
) {
    loop {
        match listener.accept().await {
            Ok((client, _)) => {
                let id = next_id.fetch_add(1, Ordering::SeqCst);
                let counted = Counted::new(open.clone());
                tokio::spawn(relay(client, counted, upstream, id, cutoff.clone()));
            }
            Err(error) => {
                tracing::warn!(%error, "blackhole proxy accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Keeps `connections()` exact: one per client socket, released when that socket is dropped.
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn new(open: Arc<AtomicUsize>) -> Counted {
        open.fetch_add(1, Ordering::SeqCst);
        Counted(open)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn relay(
    mut client: TcpStream,
    counted: Counted,
    upstream: SocketAddr,
    id: u64,
    mut cutoff: watch::Receiver<u64>,
) {
    let mut server = match TcpStream::connect(upstream).await {
        Ok(server) => server,
        Err(error) => {
            tracing::debug!(%error, "blackhole proxy could not reach upstream");
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    // The cutoff first: bytes that arrive after `blackhole_existing` returned wake this task,
    // which must find the connection dark before it copies them. Unbiased, the copy could win
    // that poll and a test's frames would pass a connection it had just cut.
    let went_dark = tokio::select! {
        biased;
        dark = cutoff.wait_for(|cutoff| *cutoff > id) => dark.is_ok(),
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => return,
    };
    if !went_dark {
        return;
    }
    tracing::debug!(id, "blackhole proxy connection went dark");
    hold(Some((client, counted)), Some(server), cutoff).await;
}

/// Keeps both sockets open and forwards nothing. Input is read and discarded only so that a
/// side that closes is noticed and its socket released; the other side learns nothing.
async fn hold(
    mut client: Option<(TcpStream, Counted)>,
    mut server: Option<TcpStream>,
    mut cutoff: watch::Receiver<u64>,
) {
    let mut client_buf = [0u8; 4096];
    let mut server_buf = [0u8; 4096];
    while client.is_some() || server.is_some() {
        tokio::select! {
            read = read_some(client.as_mut().map(|(s, _)| s), &mut client_buf) => {
                if read == 0 {
                    client = None;
                }
            }
            read = read_some(server.as_mut(), &mut server_buf) => {
                if read == 0 {
                    server = None;
                }
            }
            changed = cutoff.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

/// Bytes read, 0 on EOF or error; never resolves for a side that is already gone.
async fn read_some(socket: Option<&mut TcpStream>, buf: &mut [u8]) -> usize {
    match socket {
        Some(socket) => socket.read(buf).await.unwrap_or(0),
        None => std::future::pending().await,
    }
}
