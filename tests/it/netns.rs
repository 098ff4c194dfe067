//! Hosts on one machine that a partition separates for real: each gateway runs in a network
//! namespace of its own (`ip netns`), with only its loopback inside and two veth links out, one
//! to the platform's network and one to etcd's. Each network is a bridge in the test's own
//! namespace, where the mock platform and the etcd members listen on the bridge's address.
//! Cutting a host's etcd link (its far end set down) loses every packet on it, with no error to
//! either side, while its platform link goes on working: the partition a lease must survive.
//!
//! Needs root (CAP_NET_ADMIN), as CI has. What a killed run leaves (namespaces and bridges named
//! after its process id) is removed by the next run.

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Both networks of one test: the platform's and etcd's, each a bridge with its address.
pub(crate) struct Lan {
    /// `10.N`: the /16 this run took, free of any address on the machine when it was taken.
    net: u8,
    bridges: [String; 2],
    hosts: AtomicU32,
}

/// A host's namespace; removed, with its links, on drop.
pub(crate) struct Netns {
    pub(crate) name: String,
    /// The links' ends on the bridges (platform, etcd): the etcd one down is a partition.
    outer: [String; 2],
}

/// Numbers the lans and hosts of this process, so that names never repeat within it.
static SERIAL: AtomicU32 = AtomicU32::new(0);

/// `ip ARGS`, which must succeed.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("iproute2's ip runs (scripts/ensure-deps installs iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {} (the cluster tests need root to make network namespaces)",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

fn ip_output(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The process id a name made by [`Lan::new`] or [`Lan::host`] carries, after `prefix`.
fn owner(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.split('-').next()?.parse().ok()
}

/// Removes the namespaces and bridges of runs that no longer exist.
fn sweep() {
    let dead = |pid: u32| !std::path::Path::new(&format!("/proc/{pid}")).exists();
    for line in ip_output(&["netns", "list"]).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        if owner(name, "hsv-").is_some_and(dead) {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
    for line in ip_output(&["-o", "link", "show", "type", "bridge"]).lines() {
        let name = line.split(':').nth(1).unwrap_or_default().trim();
        if owner(name, "hsb").is_some_and(dead) {
            let _ = Command::new("ip").args(["link", "del", name]).status();
        }
    }
}

impl Lan {
    pub(crate) fn new() -> Lan {
        sweep();
        let pid = std::process::id();
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let taken = ip_output(&["-o", "-4", "addr", "show"]);
        let start = (pid + serial * 7) % 200;
        let net = (0..200)
            .map(|i| 32 + ((start + i) % 200) as u8)
            .find(|n| !taken.contains(&format!("inet 10.{n}.")))
            .expect("a free 10.N.0.0/16 for the test's networks");
        let bridges = ["p", "e"].map(|side| format!("hsb{pid}-{serial}{side}"));
        for (i, bridge) in bridges.iter().enumerate() {
            ip(&["link", "add", bridge, "type", "bridge"]);
            ip(&[
                "addr",
                "add",
                &format!("10.{net}.{}.1/24", i + 1),
                "dev",
                bridge,
            ]);
            ip(&["link", "set", bridge, "up"]);
        }
        Lan {
            net,
            bridges,
            hosts: AtomicU32::new(0),
        }
    }

    /// Where the platform listens, as its hosts reach it.
    pub(crate) fn platform_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, self.net, 1, 1)
    }

    /// Where the etcd members listen, as their clients reach them.
    pub(crate) fn etcd_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, self.net, 2, 1)
    }

    /// A new host: its namespace, loopback up, and one link into each network.
    pub(crate) fn host(&self) -> Netns {
        let k = self.hosts.fetch_add(1, Ordering::Relaxed);
        assert!(k < 240, "a test's networks hold 240 hosts");
        let pid = std::process::id();
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let name = format!("hsv-{pid}-{serial}");
        ip(&["netns", "add", &name]);
        ip(&["-n", &name, "link", "set", "lo", "up"]);
        // The outer ends' names are what `ip link` shows on the machine: short, and unique.
        let outer = ["p", "e"].map(|side| format!("hv{serial}x{pid}{side}"));
        for (i, bridge) in self.bridges.iter().enumerate() {
            let inner = ["platform", "etcd"][i];
            ip(&[
                "link", "add", &outer[i], "type", "veth", "peer", "name", inner, "netns", &name,
            ]);
            ip(&["link", "set", &outer[i], "master", bridge, "up"]);
            let addr = format!("10.{}.{}.{}/24", self.net, i + 1, k + 10);
            ip(&["-n", &name, "addr", "add", &addr, "dev", inner]);
            ip(&["-n", &name, "link", "set", inner, "up"]);
        }
        Netns { name, outer }
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        for bridge in &self.bridges {
            let _ = Command::new("ip").args(["link", "del", bridge]).status();
        }
    }
}

impl Netns {
    /// `program` to be run inside the namespace (`ip netns exec` execs it: same process).
    pub(crate) fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Every packet between this host and etcd is lost from now on, both ways.
    pub(crate) fn cut_from_etcd(&self) {
        ip(&["link", "set", &self.outer[1], "down"]);
    }

    /// Whether a TCP connection from inside the namespace to `addr` is made within 2 s.
    pub(crate) fn reaches(&self, addr: std::net::SocketAddr) -> bool {
        let (ip, port) = (addr.ip(), addr.port());
        self.command("timeout")
            .args(["2", "bash", "-c", &format!("exec 3<>/dev/tcp/{ip}/{port}")])
            .status()
            .is_ok_and(|s| s.success())
    }

    pub(crate) fn heal(&self) {
        ip(&["link", "set", &self.outer[1], "up"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting one end of a veth pair deletes both.
        for link in &self.outer {
            let _ = Command::new("ip").args(["link", "del", link]).status();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}
