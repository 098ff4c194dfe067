//! TLS as a platform or an etcd across a network speaks it: a private CA (as an in-house
//! platform or an intercepting proxy would use) with a server certificate it signs, made with
//! openssl(1), and a front that terminates TLS for a plaintext server behind it, like a load
//! balancer. Included by benches/gateway with `#[path]`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A CA, and a server certificate (with its key) that it signed.
pub(crate) struct Certs {
    pub(crate) ca: PathBuf,
    pub(crate) chain: PathBuf,
    pub(crate) key: PathBuf,
}

impl Certs {
    /// Issued into `dir` for the subject alternative names `sans` (`DNS:localhost`,
    /// `IP:10.1.1.1,IP:10.1.2.1`), valid for two days.
    pub(crate) fn issue(dir: &Path, sans: &str) -> Certs {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("sh")
            .arg("-ec")
            .arg(format!(
                "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
                   -keyout ca.key -out ca.pem -days 2 -subj /CN=hsv-test-ca \
                   -addext basicConstraints=critical,CA:TRUE \
                   -addext keyUsage=critical,keyCertSign 2>/dev/null
                 openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
                   -keyout srv.key -out srv.csr -subj /CN=hsv-test-server 2>/dev/null
                 printf 'subjectAltName={sans}\\nbasicConstraints=CA:FALSE\\n\
                 extendedKeyUsage=serverAuth\\n' > ext
                 openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
                   -out srv.pem -days 2 -extfile ext 2>/dev/null"
            ))
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "openssl: {out:?}");
        Certs {
            ca: dir.join("ca.pem"),
            chain: dir.join("srv.pem"),
            key: dir.join("srv.key"),
        }
    }
}

/// A listening TLS terminator, not yet forwarding: its address is known before the server
/// behind it starts, so that server can name the front in the URLs it hands out.
pub(crate) struct TlsFront {
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl TlsFront {
    /// Listening at `at` (port 0 for any) with the certificate in `certs`.
    pub(crate) async fn bind(certs: &Certs, at: SocketAddr) -> TlsFront {
        let chain: Vec<CertificateDer> = CertificateDer::pem_file_iter(&certs.chain)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let key = PrivateKeyDer::from_pem_file(&certs.key).unwrap();
        let config = tokio_rustls::rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        TlsFront {
            listener: tokio::net::TcpListener::bind(at).await.unwrap(),
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap()
    }

    /// From now on, passes each connection's plaintext on to `upstream`, on the runtime it is
    /// called in.
    pub(crate) fn forward_to(self, upstream: SocketAddr) {
        let TlsFront { listener, acceptor } = self;
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    if let Ok(mut plain) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                    }
                });
            }
        });
    }
}
