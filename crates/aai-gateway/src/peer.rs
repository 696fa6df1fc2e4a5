//! Who is on the other end of a loopback connection: loopback is not an identity (every
//! user of the machine can reach `127.0.0.1`), so the listener asks the OS which user owns
//! the client's socket and serves only the gateway's own user.
//!
//! * Linux: the socket tables `/proc/net/tcp` and `/proc/net/tcp6` list every TCP socket
//!   of the machine's network namespace with its local and remote address and its owner's
//!   uid; the client's socket is the one whose local address is the connection's peer and
//!   whose remote address is the listener's side.
//! * macOS and Windows: the owner of a peer socket is found only through the process
//!   table with native calls this crate does not make (`unsafe` is forbidden); there the
//!   peer is never proven and the listener requires its token instead
//!   (`docs/ui.md`, "Who may connect").

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// What the OS says of a connection's peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// A process of this user.
    Owner,
    /// A process of another user (its uid).
    Other(u32),
    /// Not known: another OS, another machine, or the tables could not be read.
    Unknown,
}

/// Who owns the client side of the connection from `remote` to our `local` address.
pub fn of(local: SocketAddr, remote: SocketAddr) -> Peer {
    #[cfg(target_os = "linux")]
    {
        let Some(me) = my_uid() else {
            return Peer::Unknown;
        };
        let tables = ["/proc/net/tcp", "/proc/net/tcp6"];
        for table in tables {
            if let Ok(text) = std::fs::read_to_string(table)
                && let Some(uid) = owner_in(&text, remote, local)
            {
                return if uid == me {
                    Peer::Owner
                } else {
                    Peer::Other(uid)
                };
            }
        }
        Peer::Unknown
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (local, remote);
        Peer::Unknown
    }
}

/// Whether this OS can tell who owns a loopback peer.
pub fn provable() -> bool {
    cfg!(target_os = "linux")
}

#[cfg(target_os = "linux")]
fn my_uid() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// The uid of the socket in `table` (the text of `/proc/net/tcp{,6}`) whose local address
/// is `local` and remote address `remote`.
pub fn owner_in(table: &str, local: SocketAddr, remote: SocketAddr) -> Option<u32> {
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid …
        let (l, r, uid) = (fields.get(1)?, fields.get(2)?, fields.get(7)?);
        (same(parse_address(l)?, local) && same(parse_address(r)?, remote))
            .then(|| uid.parse().ok())
            .flatten()
    })
}

/// Equal addresses, an IPv4 address and its IPv4-mapped IPv6 form alike.
fn same(a: SocketAddr, b: SocketAddr) -> bool {
    let canonical = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    a.port() == b.port() && canonical(a.ip()) == canonical(b.ip())
}

/// `0100007F:1F90` (IPv4) or 32 hex digits (IPv6), each 32-bit word in the host's byte
/// order, then the port in hex.
fn parse_address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::swap_bytes);
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(ip)?.to_be_bytes())),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_mut(4).enumerate() {
                chunk.copy_from_slice(&word(&ip[i * 8..i * 8 + 8])?.to_be_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real lines (little-endian x86): a client 127.0.0.1:51234 (uid 65534) connected to
    // 127.0.0.1:8080, and the listener's own socket (uid 1000); and their IPv6 forms.
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 101 1 0000000000000000 100 0 0 10 0
   1: 0100007F:C822 0100007F:1F90 01 00000000:00000000 00:00000000 00000000 65534        0 102 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:1F90 0100007F:C822 01 00000000:00000000 00:00000000 00000000  1000        0 103 1 0000000000000000 20 4 30 10 -1
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:C823 00000000000000000000000001000000:1F90 01 00000000:00000000 00:00000000 00000000   501        0 104 1 0000000000000000 20 4 30 10 -1
   1: 0000000000000000FFFF00000100007F:C824 0000000000000000FFFF00000100007F:1F90 01 00000000:00000000 00:00000000 00000000   502        0 105 1 0000000000000000 20 4 30 10 -1
";

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_client_socket_and_its_owner_are_found() {
        let server = addr("127.0.0.1:8080");
        assert_eq!(owner_in(TCP, addr("127.0.0.1:51234"), server), Some(65534));
        assert_eq!(owner_in(TCP, server, addr("127.0.0.1:51234")), Some(1000));
        assert_eq!(owner_in(TCP, addr("127.0.0.1:51235"), server), None);
        assert_eq!(
            owner_in(TCP6, addr("[::1]:51235"), addr("[::1]:8080")),
            Some(501)
        );
        // An IPv4 client of a dual-stack listener appears in tcp6 in its mapped form.
        assert_eq!(owner_in(TCP6, addr("127.0.0.1:51236"), server), Some(502));
        assert_eq!(owner_in("garbage\n1: x y z", server, server), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_connection_of_this_process_is_the_owners() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        assert_eq!(of(accepted.local_addr().unwrap(), peer), Peer::Owner);
        drop(client);
    }
}
